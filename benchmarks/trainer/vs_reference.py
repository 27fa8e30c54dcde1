"""train_block against the pdequinox reference example's own seed-parallel training.

Workload (the reference's): heat1d 48 points, 1000 samples, ConvNet(hidden 16, depth 6, relu,
dirichlet), adam 3e-4, batch 32, 10 seeds; both sides train on the same 800 samples (no validation
split, ``val_fraction=0``) and test on the same 200. Each side runs as a whole fresh process (compilation cache off, fastest of
``--repeats``, the two sides' processes in turn) at two epoch counts; the difference of the two walls gives the steady-state throughput (start-up and compile
cancel). A third fresh process measures a 2048x2048 float32 matmul (all cores, as configured by
``sweep.configure()``), so the steady state is also given as a share of the matmul rate: the conv
matmul FLOPs of the workload (``_shared/flops.py``, analytic) per second over that rate. ``--full``
adds the reference's 100 epochs, whole-process wall for both sides.

    python -m benchmarks.trainer.vs_reference [--epochs 10 100] [--repeats 2] [--full]
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks._shared.flops import matmul_peak, seed_epoch_flops
from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.repo import run_json
from benchmarks._shared.workload import BATCH, DEPTH, HIDDEN, LEARNING_RATE, POINTS, TRAIN, heat_spec


def _peak_bytes() -> int | None:
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def reference(epochs: int, seeds: int) -> dict:
    """The reference text's approach: filter_vmap over a Python-loop training function."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax
    import pdequinox as pdeqx

    from sweep.problems import heat1d  # same data generator (the reference's BTCS code)

    d = heat1d(val_fraction=0)  # the reference's 800 training and 200 test samples
    (train_x, train_y), (test_x, test_y) = ((jnp.asarray(a) for a in split) for split in (d.train, d.test))

    def perform_training(key):
        init_key, shuffle_key = jax.random.split(key)
        net = pdeqx.arch.ConvNet(
            1,
            1,
            1,
            hidden_channels=HIDDEN,
            depth=DEPTH,
            activation=jax.nn.relu,
            key=init_key,
            boundary_mode="dirichlet",
        )
        optimizer = optax.adam(LEARNING_RATE)
        opt_state = optimizer.init(eqx.filter(net, eqx.is_array))

        def loss_fn(model, x, y):
            return jnp.mean(jnp.square(jax.vmap(model)(x) - y))

        @eqx.filter_jit
        def update_fn(model, state, x, y):
            loss, grad = eqx.filter_value_and_grad(loss_fn)(model, x, y)
            updates, new_state = optimizer.update(grad, state, model)
            return eqx.apply_updates(model, updates), new_state, loss

        for _ in range(epochs):
            shuffle_key, subkey = jax.random.split(shuffle_key)
            for batch in pdeqx.dataloader((train_x, train_y), batch_size=BATCH, key=subkey):
                net, opt_state, _ = update_fn(net, opt_state, *batch)
        return net

    start = time.perf_counter()
    ensemble = eqx.filter_vmap(perform_training)(jax.random.split(jax.random.PRNGKey(0), seeds))
    pred = eqx.filter_vmap(lambda m: jax.vmap(m)(test_x))(ensemble)
    loss = jnp.mean(jnp.square(pred - test_y), axis=(1, 2, 3))
    return {"train_s": time.perf_counter() - start, "test_loss": [float(x) for x in loss], "peak_bytes": _peak_bytes()}


def seed_sweep(epochs: int, seeds: int) -> dict:
    import sweep
    from sweep import training

    sweep.configure(compile_cache=None)  # one JAX CPU device per core; no persistent cache: every run compiles

    spec = heat_spec(epochs=epochs, val_fraction=0)  # the reference's 800 training samples
    data = sweep.load_data(spec)
    start = time.perf_counter()
    _, history = sweep.train_block(spec, range(seeds), data=data)
    return {
        "train_s": time.perf_counter() - start,
        "peak_bytes": _peak_bytes(),
        "test_loss": history.test_loss[:, -1].tolist(),
        "layout": training.default_layout(),
        "devices": len(__import__("jax").devices()),
    }


def matmul(epochs: int, seeds: int) -> dict:
    import sweep

    sweep.configure(compile_cache=None)
    return {"flops_per_s": matmul_peak(), "train_s": 0.0, "test_loss": [], "peak_bytes": None}


def run_side(side: str, epochs: int, seeds: int) -> dict:
    """One fresh process (no persistent compilation cache: every run compiles), its wall time included."""
    start = time.perf_counter()
    result = run_json(__spec__.name, "--side", side, "--epochs", str(epochs), "--seeds", str(seeds))
    result["wall_s"] = time.perf_counter() - start
    return result


def interleaved(sides: list[str], epochs: list[int], seeds: int, repeats: int) -> dict:
    """The fastest of ``repeats`` processes per (side, epochs), run in turn (reference, sweep,
    reference, sweep, ...) so that a change of the machine's load affects both sides alike."""
    runs: dict = {side: {e: [] for e in epochs} for side in sides}
    for _ in range(repeats):
        for e in epochs:
            for side in sides:
                runs[side][e].append(run_side(side, e, seeds))
    return {side: {e: min(rs, key=lambda r: r["wall_s"]) for e, rs in by.items()} for side, by in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--epochs",
        type=int,
        nargs="+",
        default=[10, 100],
        help="two epoch counts; far apart, so that the difference of walls is well above the noise",
    )
    parser.add_argument("--side", choices=["reference", "sweep", "matmul"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2, help="fresh processes per measurement (fastest kept)")
    parser.add_argument("--full", action="store_true", help="also run both sides at 100 epochs")
    args = parser.parse_args()
    seeds = args.seeds
    if args.side:
        print(
            json.dumps(
                {"reference": reference, "sweep": seed_sweep, "matmul": matmul}[args.side](args.epochs[0], seeds)
            )
        )
        return
    e1, e2 = args.epochs
    with OtherLoad() as load:
        res = interleaved(["reference", "sweep"], [e1, e2], seeds, args.repeats)
    rate = {}
    print(f"{seeds} seeds, epochs {e1} and {e2}")
    for side, runs in res.items():
        rate[side] = seeds * (e2 - e1) / (runs[e2]["wall_s"] - runs[e1]["wall_s"])
        for e, r in runs.items():
            loss = sum(r["test_loss"]) / seeds
            peak = (
                f", peak device memory per member {r['peak_bytes'] / seeds / 2**20:.2f} MiB" if r["peak_bytes"] else ""
            )
            print(
                f"{side:>9} {e:>3} epochs: process {r['wall_s']:7.1f} s, training call {r['train_s']:7.1f} s, "
                f"mean test loss {loss:.3e}{peak}"
            )
        print(f"{side:>9} steady state: {rate[side]:7.1f} seed-epochs/s")
    print(
        f"steady-state speed-up (seed-epochs/s, sweep / reference): {rate['sweep'] / rate['reference']:.2f}x"
        f"  [layout {res['sweep'][e2]['layout']}, {res['sweep'][e2]['devices']} host devices]"
    )
    print(f"while the sides ran, {load}")
    peak = run_side("matmul", 1, seeds)["flops_per_s"]
    work = {side: r * seed_epoch_flops(POINTS, TRAIN) for side, r in rate.items()}
    print(
        f"matmul peak (2048x2048 float32, all cores, fresh process) {peak / 1e9:.1f} GFLOP/s; conv matmul FLOPs "
        f"(analytic, fwd + 2x bwd) {seed_epoch_flops(POINTS, TRAIN) / 1e9:.3f} GFLOP per seed-epoch: sweep "
        f"{work['sweep'] / 1e9:.1f} GFLOP/s = {work['sweep'] / peak:.0%} of the peak, reference "
        f"{work['reference'] / 1e9:.1f} GFLOP/s = {work['reference'] / peak:.0%}"
    )
    if args.full:
        full = interleaved(["reference", "sweep"], [100], seeds, 1)
        ref, own = full["reference"][100], full["sweep"][100]
        print(
            f"100 epochs whole process: reference {ref['wall_s']:.1f} s, sweep {own['wall_s']:.1f} s, "
            f"ratio {ref['wall_s'] / own['wall_s']:.2f}x; mean test loss reference "
            f"{sum(ref['test_loss']) / seeds:.3e}, sweep {sum(own['test_loss']) / seeds:.3e}"
        )


if __name__ == "__main__":
    main()
