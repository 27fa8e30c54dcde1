"""Check 1: ``train_block`` against the pdequinox reference's own ``filter_vmap`` code.

Workload of the reference example: heat1d (48 points, 1000 samples), ConvNet (hidden 16, depth 6,
relu, dirichlet), adam 3e-4, batch 32; at 10, 128 and 1024 seeds. Each side at each seed count
runs in a fresh process, so that its peak device memory / seeds is the memory per member.

- ``train_block``'s program (``init_block`` + ``run_chunk``, what ``train_block`` runs): one cold
  chunk of E epochs (it compiles), then the same chunk again (warm). Steady seed-epochs/s =
  seeds * E / warm; compile = cold - warm.
- The reference: ``reference()`` of ``benchmarks/trainer/vs_reference.py`` (its code: a
  ``filter_vmap`` over a Python loop that jits a fresh update function at every call) for E epochs
  (cold), E epochs again and 3E epochs, with JAX's persistent compilation cache in a fresh folder so
  that the later calls load the compiled step instead of compiling it again. Steady seed-epochs/s
  = seeds * 2E / (t(3E) - t(E)); compile = cold - warm.

seeds/s = seeds / the whole cold E-epoch training (initialisation and compilation included): what
a user waits for. Goal: ``train_block`` >= 10x the reference's seeds/s at the same seed count,
and 1024 seeds in one block.
"""

from __future__ import annotations

import json
import tempfile

from benchmarks.gpu import _kit

FULL = {"seeds": [10, 128, 1024], "epochs": 10}
DRY = {"seeds": [2, 4], "epochs": 1}
GOAL = 10.0


def sweep_side(seeds: int, epochs: int) -> dict:
    import numpy as np

    import sweep

    spec = _kit.heat_spec(
        _kit.workload(epochs=epochs, report_every=epochs, quick=False), name="check-trainer", seeds=seeds
    )
    data = sweep.load_data(spec)
    init_s, (block, state) = _kit.timed(lambda: sweep.init_block(spec, range(seeds), data=data))
    cold_s, (state, _) = _kit.timed(lambda: sweep.run_chunk(block, state, epochs))
    warm_s, (_, evaluation) = _kit.timed(lambda: sweep.run_chunk(block, state, epochs))
    test = evaluation["test"]["loss"]
    return {
        "init_s": init_s,
        "cold_s": cold_s,
        "warm_s": warm_s,
        "layout": block.layout,
        "test_loss_mean": float(np.mean(test)),
        "test_loss_after_epochs": 2 * epochs,
        **_kit.device_memory(),
    }


def reference_side(seeds: int, epochs: int) -> dict:
    from benchmarks.trainer.vs_reference import reference

    cold, warm, long = (reference(e, seeds) for e in (epochs, epochs, 3 * epochs))
    return {
        "cold_s": cold["train_s"],
        "warm_s": warm["train_s"],
        "long_s": long["train_s"],
        "test_loss_mean": sum(long["test_loss"]) / seeds,
        "test_loss_after_epochs": 3 * epochs,
        **_kit.device_memory(),
    }


def summarise(seeds: int, epochs: int, own: dict, ref: dict) -> dict:
    """Rates, compile times, memory per member and the ratios of one seed count."""
    steady_ref = ref["long_s"] - ref["warm_s"]
    rates = {
        "sweep": seeds * epochs / own["warm_s"],
        "reference": seeds * 2 * epochs / steady_ref if steady_ref > 0 else None,
    }
    per_s = {"sweep": seeds / (own["init_s"] + own["cold_s"]), "reference": seeds / ref["cold_s"]}
    out = {
        side: {
            "seed_epochs_per_s": rates[side],
            "seeds_per_s": per_s[side],
            "compile_s": run["cold_s"] - run["warm_s"],
            "peak_bytes_per_member": _kit.per(run["peak_bytes"], seeds),
        }
        for side, run in (("sweep", own), ("reference", ref))
    }
    out["ratio_seeds_per_s"] = per_s["sweep"] / per_s["reference"]
    out["ratio_seed_epochs_per_s"] = rates["sweep"] / rates["reference"] if rates["reference"] else None
    out["meets_goal"] = out["ratio_seeds_per_s"] >= GOAL
    return out


def worker_options(parser) -> None:
    parser.add_argument("--worker", choices=["sweep", "reference"], help="(internal) measure one side")
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--epochs", type=int)


def main() -> None:
    args = _kit.options(__doc__.splitlines()[0], worker_options)
    if args.worker:
        _kit.setup_jax(compile_cache=tempfile.mkdtemp(prefix="kit-jax-cache-"))
        side = sweep_side if args.worker == "sweep" else reference_side
        print(json.dumps(side(args.seeds, args.epochs)))
        return
    sizes = DRY if args.dry else FULL
    deadline = _kit.deadline_from_env()
    res = _kit.Result(args.out, check="trainer", sizes=sizes, goal=f"sweep seeds/s >= {GOAL:g}x reference", runs={})

    def body() -> None:
        for seeds in sizes["seeds"]:
            run = {
                side: _kit.run_worker(
                    __spec__.name,
                    ["--worker", side, "--seeds", str(seeds), "--epochs", str(sizes["epochs"])],
                    _kit.remaining(deadline),
                )
                for side in ("sweep", "reference")
            }
            run["summary"] = summarise(seeds, sizes["epochs"], run["sweep"], run["reference"])
            res.data["runs"][str(seeds)] = run
            res.flush()
            s = run["summary"]
            print(
                f"check trainer: {seeds} seeds: seeds/s {s['sweep']['seeds_per_s']:.2f} vs {s['reference']['seeds_per_s']:.2f} "
                f"({s['ratio_seeds_per_s']:.2f}x), seed-epochs/s ratio {s['ratio_seed_epochs_per_s']}",
                flush=True,
            )
        res["one_block_of"] = max(sizes["seeds"])

    _kit.report(res, body)


if __name__ == "__main__":
    main()
