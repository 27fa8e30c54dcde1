"""Check 4: ``seeds_per_trial="auto"`` with ``gpu: 0.25`` through ``sweep.run``.

The block size it picks (from ``plan.json``) next to the cap that filling the cluster alone sets
(seeds / trials the cluster runs at once), and that every trial fits in its share and trains to
the end (each trial's peak device memory against its allocator limit and its share).
"""

from __future__ import annotations

from benchmarks.gpu import _kit, _tune

FULL = {"seeds": 4096, "gpu": 0.25, "epochs": 4, "report_every": 2}
DRY = {"seeds": 8, "gpu": 0.25, "epochs": 2, "report_every": 1}


def main() -> None:
    args = _kit.options(__doc__.splitlines()[0])
    sizes = DRY if args.dry else FULL
    res = _kit.Result(args.out, check="auto", sizes=sizes)

    def body() -> None:
        resources = _tune.start_ray(args.dry)
        res["ray_resources"] = resources
        _kit.setup_jax()
        work = _kit.workload(epochs=sizes["epochs"], report_every=sizes["report_every"], quick=args.dry)
        spec = _kit.heat_spec(work, name="check-auto", seeds=sizes["seeds"], seeds_per_trial="auto", gpus=sizes["gpu"])
        run = _tune.run_sweep(spec, _tune.gpu_total_bytes())
        res["run"] = run
        slots = int(min(resources.get("CPU", 0) // spec.resources["cpu"], resources.get("GPU", 0) // sizes["gpu"]))
        res["fill_cap"] = max(1, sizes["seeds"] // max(1, slots))
        res["picked"] = run["seeds_per_trial"]
        res["picked_below_fill_cap"] = run["seeds_per_trial"] < res.data["fill_cap"]
        peaks = [(t["device_peak_bytes"], t["device_bytes_limit"]) for t in run["trials"]]
        known = [(p, b) for p, b in peaks if p is not None and b]
        res["fits"] = all(p <= b for p, b in known) if known else None
        res["trains"] = run["all_completed"]
        print(
            f"check auto: picked {run['seeds_per_trial']} seeds per trial (fill cap {res.data['fill_cap']}), "
            f"{run['planned_trials']} trials, completed {run['all_completed']}, fits {res.data['fits']}",
            flush=True,
        )

    _kit.report(res, body)


if __name__ == "__main__":
    main()
