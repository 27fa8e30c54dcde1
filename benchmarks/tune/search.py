"""A search with seeds against Ray Tune's ``Repeater(OptunaSearch(...), repeat=S)``.

The same space (learning rate log-uniform, depth, width of a ConvNet on heat1d), the same sampler
(Optuna's TPE) and the same member-epochs (``N`` configurations x ``S`` seeds x ``epochs``):

* **sweep**: ``sweep.Search(configurations=N, batch=B)`` with ``seeds=S`` through ``sweep.run``
  (``--executor local``, the default: in-process; ``tune``: the rounds in one Tune experiment):
  each configuration's ``S`` seeds are one trial (a batch's learning rates in one program), the
  sampler is told their mean;
* **tune**: ``Tuner(search_alg=Repeater(OptunaSearch(seed=s), repeat=S), num_samples=N*S)``, each
  trial one seed of one configuration trained by ``sweep.train``, the searcher told the mean of
  ``S`` trials; its choice is the configuration with the best mean over its trials.

Each chosen configuration is then measured with ``--fresh`` new seeds (another ``sweep_seed``,
in-process, the same for both): the mean validation loss of its fresh members. Per sweep seed:
both choices' fresh means and both walls; "as good" when the sweep's fresh mean is at most the
tune's. Walls are printed with the load the other processes put on the machine.

    python -m benchmarks.tune.search                       # 3 sweep seeds, N=16, S=4
    python -m benchmarks.tune.search --sweep-seeds 0 --configurations 4 --seeds 2 --fresh 4   # checks it runs
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.ray_local import local_ray

FIELDS = {"lr": "optimizer.learning_rate", "depth": "model.depth", "width": "model.hidden_channels"}


def base_spec(args, sweep_seed: int, **changes):
    import sweep

    return sweep.SweepSpec(
        name=f"search-{sweep_seed}",
        problem=sweep.Problem("heat1d", num_points=16, num_samples=120, data_seed=0),
        model=sweep.Model("ConvNet", hidden_channels=8, depth=2, activation="relu", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(epochs=args.epochs, batch_size=16, report_every=args.epochs),
        seeds=args.seeds,
        seeds_per_trial=args.seeds,
        sweep_seed=sweep_seed,
        **changes,
    )


def space(module):
    """The space in ``module``'s terms (``sweep`` or ``ray.tune``)."""
    return {
        "lr": module.loguniform(1e-4, 3e-2),
        "depth": module.randint(1, 4),
        "width": module.choice([4, 8, 16]),
    }


def with_point(args, sweep_seed: int, point: dict):
    """The plain spec of one configuration (``point`` by short name; nothing vmapped, so that
    its learning rate is the spec's own)."""
    return base_spec(args, sweep_seed, points=({FIELDS[k]: v for k, v in point.items()},), vmap=()).expand()[0][0]


def sweep_choice(args, sweep_seed: int, storage: str) -> dict:
    import sweep
    from sweep.search import ranked, standings
    from sweep.store import SweepDir

    search = sweep.Search(
        space={FIELDS[k]: d for k, d in space(sweep).items()}, configurations=args.configurations, batch=args.batch
    )
    spec = base_spec(args, sweep_seed, search=search)
    address = start_ray() if args.executor == "tune" else None
    options = sweep.RunOptions(progress="off", executor=args.executor, address=address)
    path = sweep.run(spec, storage=storage, options=options)
    best = ranked(spec, standings(spec, SweepDir.at(path)))[0].point
    return {k: best[f] for k, f in FIELDS.items()}


def tune_trainable(config):
    from ray import tune

    import sweep

    args = argparse.Namespace(**config["args"])
    point = {k: config[k] for k in FIELDS}
    _, history = sweep.train(with_point(args, config["sweep_seed"], point), seed=int(config["__trial_index__"]))
    tune.report({"val_loss": float(history.val["loss"][0, -1])})


def start_ray() -> str:
    """This benchmark's local Ray (started on first use: the local executor needs none), its address."""
    import ray

    if not ray.is_initialized():
        local_ray(cpus=2)
    return ray.get_runtime_context().gcs_address


def tune_choice(args, sweep_seed: int, storage: str) -> dict:
    from ray import tune

    start_ray()
    from ray.tune.search import Repeater
    from ray.tune.search.optuna import OptunaSearch

    searcher = Repeater(OptunaSearch(metric="val_loss", mode="min", seed=sweep_seed), repeat=args.seeds)
    tuner = tune.Tuner(
        tune_trainable,
        param_space={**space(tune), "sweep_seed": sweep_seed, "args": vars(args)},
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=args.configurations * args.seeds),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    )
    results = tuner.fit()
    means: dict[tuple, list[float]] = {}
    for r in results:
        config, metrics = r.config or {}, r.metrics or {}
        means.setdefault(tuple(config[k] for k in FIELDS), []).append(metrics.get("val_loss", np.inf))
    best = min(means, key=lambda k: float(np.mean(means[k])))
    return dict(zip(FIELDS, best))


def fresh_loss(args, point: dict) -> float:
    """The mean validation loss of ``--fresh`` new members of a configuration (diverged: inf)."""
    import sweep

    spec = with_point(args, 10_000, point)
    _, history = sweep.train_block(spec, list(range(args.fresh)))
    final = np.where(history.diverged, np.inf, history.val["loss"][:, -1])
    return float(np.mean(final))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--configurations", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--fresh", type=int, default=16, help="new seeds that measure each choice")
    parser.add_argument("--executor", default="local", choices=["local", "tune"], help="sweep.run's executor")
    args = parser.parse_args()
    print(
        f"N={args.configurations} configurations x S={args.seeds} seeds x {args.epochs} epochs each side; "
        f"sweep batch {args.batch}, executor {args.executor!r}; each choice measured with {args.fresh} fresh seeds"
    )
    print(
        f"{'seed':>4}  {'sweep fresh':>11}  {'tune fresh':>10}  {'sweep s':>7}  {'tune s':>6}  ratio  sweep choice | tune choice"
    )
    good, ratios = 0, []
    for s in args.sweep_seeds:
        with tempfile.TemporaryDirectory() as tmp, OtherLoad() as load:
            t0 = time.perf_counter()
            ours = sweep_choice(args, s, f"{tmp}/sweep")
            t1 = time.perf_counter()
            theirs = tune_choice(args, s, f"{tmp}/tune")
            t2 = time.perf_counter()
        a, b = fresh_loss(args, ours), fresh_loss(args, theirs)
        good += a <= b
        ratios.append((t1 - t0) / (t2 - t1))
        print(
            f"{s:>4}  {a:>11.4g}  {b:>10.4g}  {t1 - t0:>7.1f}  {t2 - t1:>6.1f}  {ratios[-1]:.2f}  {ours} | {theirs}  ({load})"
        )
    print(
        f"sweep's choice as good or better in {good} of {len(args.sweep_seeds)}; wall ratio sweep/tune {np.round(ratios, 2).tolist()}"
    )


if __name__ == "__main__":
    main()
