"""Preemption: the work a trial loses when its worker process gets SIGTERM, and how fast it saves.

One trial (2 seeds of the heat ConvNet workload, 1 CPU) through ``sweep.run`` on a local Ray. A
trial hook sends the trial's own process SIGTERM a fraction (``--fraction``) of a chunk after
the first report from epoch ``--at`` on (a chunk is ``--report-every`` epochs; the chunk's length is the
time between the hook's last two calls), once. Checkpoints are paced by ``--checkpoint-every``
reports, so that the signal falls between two checkpoints. Two modes, side by side in this
process:

- ``sweep``: the trial's SIGTERM handler (``sweep.tune._preemption``): the chunk in progress
  finishes and is checkpointed, the trial stops, and Tune retries it from that checkpoint;
- ``ray``: Ray's own handler (the trainable without sweep's): the process exits at once, and Tune
  retries the trial from its last checkpoint of the cadence.

Printed per mode: the last epoch reported before the signal, the epoch the retry resumed from,
the epochs trained again (lost) and the training seconds lost (those epochs, plus the part of a
chunk the process ended in), the seconds from the signal to the checkpoint (``sweep``) and from
the signal to the retry's first result (a new process: JAX starts, the programs compile).

    python -m benchmarks.tune.preemption [--at 12 --fraction 0.5 --checkpoint-every 5] [--quick]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.workload import add_options, spec_from_options


class TermAfterReport:
    """``after_report``: ``fraction`` of a chunk after the report of epoch ``at``, SIGTERM this
    process (once per ``marker``, which gets the signal's time)."""

    def __init__(self, marker: str, at: int, fraction: float):
        self.marker, self.at, self.fraction = marker, at, fraction
        self.previous: float | None = None

    def __call__(self, trial_key: str, epoch: int) -> None:
        now, previous, self.previous = time.time(), self.previous, time.time()
        if epoch < self.at or previous is None or os.path.exists(self.marker):
            return

        def term() -> None:
            Path(self.marker).write_text(json.dumps({"signal_time": time.time(), "pid": os.getpid()}))
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Timer(self.fraction * (now - previous), term).start()


def results(sweep_dir: str) -> list[dict]:
    """Every result of the one trial, in order (Tune's result.json)."""
    out = []
    for path in sorted(glob.glob(f"{sweep_dir}/tune-*/*/result.json")):
        out += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return sorted(out, key=lambda r: r["report_time"])


def measure(mode: str, args: argparse.Namespace, root: Path) -> dict:
    import sweep
    from sweep.tune import TrialHooks, _preemption

    spec = spec_from_options(args, name=f"preempt-{mode}", seeds=2, seeds_per_trial=2, cpus=1)
    marker = str(root / f"{mode}.signal")
    hooks = TrialHooks(after_report=TermAfterReport(marker, args.at, args.fraction))
    preemptible = _preemption.preemptible
    if mode == "ray":
        _preemption.preemptible = lambda trainable: trainable  # Ray's own SIGTERM handling
    try:
        path = sweep.run(
            spec, storage=str(root / mode), trial_hooks=hooks, checkpoint_every=args.checkpoint_every, progress="off"
        )
    finally:
        _preemption.preemptible = preemptible
    sent = json.loads(Path(marker).read_text())
    rs = results(path)
    before = [r for r in rs if r["pid"] == sent["pid"] and r["report_time"] <= sent["signal_time"]]
    first_retry = next(r for r in rs if r["pid"] != sent["pid"])
    stop = [r for r in rs if r.get("preempted_by") == "SIGTERM"]
    lost = max(r["epoch"] for r in rs if r["pid"] == sent["pid"]) - first_retry["resumed_from_epoch"]
    epoch_s = (before[-1]["report_time"] - before[-2]["report_time"]) / (before[-1]["epoch"] - before[-2]["epoch"])
    # training time thrown away: the epochs trained again, and the part of a chunk a process ended in
    lost_s = lost * epoch_s + (0.0 if stop else sent["signal_time"] - before[-1]["report_time"])
    return {
        "mode": mode,
        "reported_before_signal": before[-1]["epoch"],
        "resumed_from": first_retry["resumed_from_epoch"],
        "lost_epochs": lost,
        "chunk_s": args.report_every * epoch_s,
        "lost_s": lost_s,
        "signal_to_checkpoint_s": stop[0]["report_time"] - sent["signal_time"] if stop else None,
        "signal_to_retry_result_s": first_retry["report_time"] - sent["signal_time"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser, epochs=40, report_every=4)
    parser.add_argument("--at", type=int, default=12, help="SIGTERM during the chunk after this epoch's report")
    parser.add_argument("--fraction", type=float, default=0.5, help="how far into that chunk")
    parser.add_argument("--checkpoint-every", type=int, default=5, help="a checkpoint every that many reports")
    parser.add_argument("--modes", nargs="+", default=["sweep", "ray"], choices=["sweep", "ray"])
    args = parser.parse_args()
    if args.quick:  # fewer epochs of the same workload: a chunk must last long enough to be hit
        args.epochs, args.at, args.checkpoint_every = 16, 4, 3
    import sweep

    sweep.configure()
    with tempfile.TemporaryDirectory(prefix="preemption-") as tmp, OtherLoad() as load:
        rows = [measure(mode, args, Path(tmp)) for mode in args.modes]
    print(
        f"SIGTERM {args.fraction:g} of a chunk ({args.report_every} epochs) after the report of epoch {args.at}, "
        f"a checkpoint every {args.checkpoint_every} reports, {args.epochs} epochs; {load}"
    )
    for r in rows:
        to_ckpt = "-" if r["signal_to_checkpoint_s"] is None else f"{r['signal_to_checkpoint_s']:.2f} s"
        print(
            f"{r['mode']:>5}: reported epoch {r['reported_before_signal']} before the signal, retry resumed from "
            f"epoch {r['resumed_from']}: {r['lost_epochs']} epochs trained again, {r['lost_s']:.2f} s of training "
            f"lost; chunk {r['chunk_s']:.2f} s; signal -> checkpoint {to_ckpt}, -> retry's first result "
            f"{r['signal_to_retry_result_s']:.2f} s"
        )
    print(json.dumps(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
