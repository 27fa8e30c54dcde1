"""Check 3: fractional GPUs through real Ray Tune (``sweep.run``).

Four trials at ``gpu: 0.25`` on the one GPU at once, then one trial at ``gpu: 1`` with the same
total members (4096 seeds: 4 x 1024, then 1 x 4096). Per trial: its peak device memory and
allocator limit (JAX's statistics, reported by the trial) against its share of the device, and the
largest memory ``nvidia-smi`` showed for it; whether the four ran at the same time; and the wall
time of the four against the one (the ``sweep.run`` call, and first start to last finish).

First, in a fresh process with the default environment, what the driver's own JAX takes when it
loads the dataset as ``sweep.run`` does before any trial starts (``driver_default``). The sweeps
themselves run with preallocation off in the driver (see ``_tune.start_ray``), so that the trials'
numbers do not depend on it.
"""

from __future__ import annotations

import json
import os

from benchmarks.gpu import _kit, _tune

FULL = {"seeds": 4096, "trials": 4, "epochs": 10, "report_every": 5}
DRY = {"seeds": 8, "trials": 4, "epochs": 2, "report_every": 1}


def _spec(sizes: dict, dry: bool, name: str, seeds_per_trial: int, gpus: float):
    work = _kit.workload(epochs=sizes["epochs"], report_every=sizes["report_every"], quick=dry)
    return _kit.heat_spec(work, name=f"check-{name}", seeds=sizes["seeds"], seeds_per_trial=seeds_per_trial, gpus=gpus)


def driver_default(sizes: dict, dry: bool) -> dict:
    """Device memory of a process that loaded the sweep's dataset with JAX's default settings."""
    import sweep

    _kit.setup_jax()
    sweep.load_data(_spec(sizes, dry, "driver", sizes["seeds"], 1.0))
    smi = _tune.process_gpu_mib().get(os.getpid())
    return {**_kit.device_memory(), "nvidia_smi_bytes": smi * 2**20 if smi is not None else None}


def worker_options(parser) -> None:
    parser.add_argument("--worker", action="store_true", help="(internal) measure the driver's default memory")


def main() -> None:
    args = _kit.options(__doc__.splitlines()[0], worker_options)
    sizes = DRY if args.dry else FULL
    if args.worker:
        print(json.dumps(_kit.plain(driver_default(sizes, args.dry))))
        return
    deadline = _kit.deadline_from_env()
    res = _kit.Result(args.out, check="fractional", sizes=sizes)

    def body() -> None:
        res["driver_default"] = _kit.run_worker(
            __spec__.name, ["--worker"] + (["--dry"] if args.dry else []), _kit.remaining(deadline)
        )
        res["ray_resources"] = _tune.start_ray(args.dry)
        _kit.setup_jax()
        total = _tune.gpu_total_bytes()
        res["device_total_bytes"] = total
        n = sizes["trials"]
        for name, block, gpu in (("fractional", sizes["seeds"] // n, 1 / n), ("whole", sizes["seeds"], 1.0)):
            res[name] = _tune.run_sweep(_spec(sizes, args.dry, name, block, gpu), total)
            r = res.data[name]
            print(
                f"check fractional: {name}: {len(r['trials'])} trial(s) x gpu {gpu:g}, sweep.run {r['run_s']:.1f} s, "
                f"concurrent {r['concurrent']}, peaks {[t['device_peak_bytes'] for t in r['trials']]}",
                flush=True,
            )
        frac, whole = res.data["fractional"], res.data["whole"]
        res["run_s_fractional_over_whole"] = frac["run_s"] / whole["run_s"]
        if frac["trials_span_s"] and whole["trials_span_s"]:
            res["span_fractional_over_whole"] = frac["trials_span_s"] / whole["trials_span_s"]

    _kit.report(res, body)


if __name__ == "__main__":
    main()
