"""APEBench side of ``vs_apebench.py``: run in the APEBench venv (from the repository root, as a
module of this package), never imports ``sweep``.

Trains ``--num-seeds`` seeds of one APEBench scenario the way ``BaseScenario.run_raw`` does
(``eqx.filter_vmap`` over seeds; per seed ``key = PRNGKey(seed)``, ``init_key, shuffle_key =
split(key)``; the scenario's own trainer from ``get_trainer``), minus run_raw's sample
rollouts and tests, which are not training. Writes into ``--out``:

- ``data.npz``: ``train_traj`` / ``test_traj`` ``[samples, steps + 1, channels, points]``,
  exactly the arrays APEBench trained and tests on (``get_train_data`` / ``get_test_data``);
- ``nets.eqx``: the trained networks' leaves (``eqx.tree_serialise_leaves``, leading seed axis);
- ``side.json``: the scenario's full config, versions, timings, training losses and
  APEBench's own rollout metric (``perform_tests``) for cross-checking the driver's.

Timing: the vmapped training runs once, timed until its result is ready, with the part JAX
spent compiling measured alongside (``_compile_clock``, the same clock as the seed-sweep side).

    <apebench-venv>/bin/python -m benchmarks.trainer._apebench_side --scenario phy_burgers \
        --out /tmp/ape --num-seeds 8 --optim-config "adam;2000;warmup_cosine;0.0;1e-3;400"
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
from pathlib import Path

import apebench
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._shared.compile_clock import clock


def _config(scenario) -> dict:
    """Every field of the (frozen dataclass) scenario, as JSON-able values."""
    out = {}
    for f in dataclasses.fields(scenario):
        value = getattr(scenario, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def _train_fn(scenario, network: str, train: str):
    """``run_raw``'s per-seed training, vmapped over seeds; returns (nets, loss history)."""
    trainer = scenario.get_trainer(train_config=train)

    def one_seed(seed):
        init_key, shuffle_key = jax.random.split(jax.random.PRNGKey(seed), 2)
        net = scenario.get_neural_stepper(task_config="predict", network_config=network, key=init_key)
        trained, loss_history, _ = trainer(net, shuffle_key, record_loss_every=scenario.record_loss_every)
        return trained, loss_history

    return eqx.filter_vmap(one_seed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="phy_burgers", help="key of apebench.scenarios.scenario_dict")
    p.add_argument("--scenario-kwargs", default="{}", help="JSON dict of scenario attribute overrides")
    p.add_argument("--optim-config", default=None, help="overrides the scenario's optim_config")
    p.add_argument("--network", default="Conv;34;10;relu")
    p.add_argument("--train", default="one", help="APEBench train_config: one, sup;K, ...")
    p.add_argument("--num-seeds", type=int, default=8)
    p.add_argument("--start-seed", type=int, default=0)
    p.add_argument(
        "--apebench-metrics",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compute APEBench's own perform_tests metric (a cross-check)",
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    kwargs = json.loads(args.scenario_kwargs)
    if args.optim_config:
        kwargs["optim_config"] = args.optim_config
    scenario = apebench.scenarios.scenario_dict[args.scenario](**kwargs)
    train_traj, test_traj = scenario.get_train_data(), scenario.get_test_data()
    np.savez(
        args.out / "data.npz",
        train_traj=np.asarray(train_traj, np.float32),
        test_traj=np.asarray(test_traj, np.float32),
    )

    seeds = args.start_seed + jnp.arange(args.num_seeds)
    train = _train_fn(scenario, args.network, args.train)
    with clock() as timing:
        nets, losses = jax.block_until_ready(train(seeds))
    eqx.tree_serialise_leaves(args.out / "nets.eqx", nets)

    metrics, metric_timing = {}, {"seconds": 0.0}
    if args.apebench_metrics:
        with clock() as metric_timing:
            metrics = {k: np.asarray(v).tolist() for k, v in scenario.perform_tests(nets).items()}
    versions = {
        n: importlib.metadata.version(n)
        for n in ("apebench", "exponax", "trainax", "pdequinox", "equinox", "jax", "optax")
    }
    (args.out / "side.json").write_text(
        json.dumps(
            {
                "scenario": args.scenario,
                "scenario_class": type(scenario).__name__,
                "config": _config(scenario),
                "network": args.network,
                "train": args.train,
                "seeds": np.asarray(seeds).tolist(),
                "num_training_steps": scenario.num_training_steps,
                "batch_size": scenario.batch_size,
                "train_seconds": timing["seconds"],
                "compile_seconds": timing["compile_seconds"],
                "train_cpu_seconds": timing["cpu_seconds"],
                "loss_history": np.asarray(losses).tolist(),
                "record_loss_every": scenario.record_loss_every,
                "apebench_metrics": metrics,
                "apebench_metrics_seconds": metric_timing["seconds"],
                "versions": versions,
                "jax_devices": len(jax.devices()),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
