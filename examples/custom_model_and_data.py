"""Your own Equinox model and your own arrays in a seed sweep.

- Data: any four arrays ``(train_x, train_y, test_x, test_y)``, each ``[samples, channels,
  *spatial]``, saved as ``.npz`` and named by ``sweep.Problem("arrays", path=...)``. Here: random
  periodic signals and the same signals shifted by 3 grid cells (learn a periodic advection). A
  validation set is carved from the training rows (``val_fraction=0.1`` of all samples; or save
  ``val_x``, ``val_y`` too), and the best configuration is chosen on it.
- Model: a factory by import path, ``sweep.Model("my_models:shift_net", hidden=8)``; seed-sweep
  calls ``shift_net(hidden=8, key=...)`` for every member. ``my_models.py`` lies next to this
  script, so it is importable when the script runs (Python puts the script's directory on
  ``sys.path``), from any working directory.

By default the sweep trains in this process, one ``sweep.train_block`` per structural config
(``model.hidden``), with the learning rates vmapped inside each block. ``--ray`` runs the same
spec through Ray Tune (``sweep.run``): the local Ray it starts gives its workers this process's
import path, so they import ``my_models`` as the script does (on a cluster: install your package
on the nodes, or ship it with ``ray.init(runtime_env={"working_dir": ...})`` before
``sweep.run``). Both give the same members, bit for bit on CPU.

    python examples/custom_model_and_data.py            # ~20 s on 2 CPUs
    python examples/custom_model_and_data.py --smoke    # seconds
    python examples/custom_model_and_data.py --ray      # through Ray Tune, then query the store
"""

from __future__ import annotations

import argparse
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
from matplotlib.figure import Figure

import sweep

SHIFT = 3


def write_data(path: Path, num_samples: int, num_points: int = 32, seed: int = 0) -> Path:
    """Random sums of sines on a periodic grid, and the same signals shifted by ``SHIFT`` cells."""
    rng = np.random.default_rng(seed)
    t = np.arange(num_points) / num_points
    k = np.arange(1, 4)[:, None]
    amp = rng.normal(size=(num_samples, 3, 1)) / k
    phase = rng.uniform(0, 2 * np.pi, size=(num_samples, 3, 1))
    x = (amp * np.sin(2 * np.pi * k * t + phase)).sum(axis=1)[:, None, :].astype(np.float32)
    y = np.roll(x, SHIFT, axis=-1)
    n_train = int(0.8 * num_samples)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, train_x=x[:n_train], train_y=y[:n_train], test_x=x[n_train:], test_y=y[n_train:])
    return path


def make_spec(data_path: Path, smoke: bool) -> sweep.SweepSpec:
    return sweep.SweepSpec(
        name="custom-shift-smoke" if smoke else "custom-shift",
        problem=sweep.Problem("arrays", path=str(data_path)),
        model=sweep.Model("my_models:shift_net", hidden=8, kernel_size=5),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-3),
        training=sweep.Training(epochs=2, batch_size=16, report_every=1)
        if smoke
        else sweep.Training(epochs=60, batch_size=32, report_every=10),
        seeds=3 if smoke else 8,
        seeds_per_trial=3 if smoke else 8,
        grid={"model.hidden": [4, 8], "optimizer.learning_rate": [1e-3, 3e-3]},
    )


def train_in_process(spec: sweep.SweepSpec):
    """One block per structural config; returns ``[(hidden, learning rate, members, val losses, test losses)]``."""
    seeds = spec.seed_list
    results = []
    for config, hsets in spec.expand():
        model, history = sweep.train_block(config, seeds, [{k.split(".")[-1]: v for k, v in h.items()} for h in hsets])
        params, static = eqx.partition(model, eqx.is_array)
        for j, h in enumerate(history.hparams):  # members are hparam-major, then seed
            rows = slice(j * len(seeds), (j + 1) * len(seeds))
            members = eqx.combine(jax.tree_util.tree_map(lambda a, rows=rows: a[rows], params), static)
            results.append(
                (
                    config.model.hidden,
                    h["learning_rate"],
                    members,
                    history.val_loss[rows, -1],
                    history.test_loss[rows, -1],
                )
            )
    return results


def print_table(rows: list[tuple[int, float, float, float, float]]) -> None:
    """``(hidden, learning rate, val mean, val std, test mean)`` of the final losses over seeds, per
    configuration, best validation mean first (the test column is reported, not used to choose)."""
    print(f"{'hidden':>6} {'lr':>8} {'val loss mean':>14} {'std over seeds':>15} {'test loss mean':>15}")
    for hidden, lr, mean, std, test in sorted(rows, key=lambda r: r[2]):
        print(f"{hidden:>6} {lr:>8g} {mean:>14.6g} {std:>15.6g} {test:>15.6g}")


def plot_predictions(path: Path, data, mean: np.ndarray, std: np.ndarray, title: str) -> None:
    fig = Figure(figsize=(10, 3.5), layout="constrained")
    for i in range(2):
        ax = fig.add_subplot(1, 2, i + 1)
        grid = np.arange(data.test_x.shape[-1])
        ax.plot(grid, data.test_x[i, 0], color="0.6", ls="--", label="input")
        ax.plot(grid, data.test_y[i, 0], color="black", lw=2, label=f"target (shifted by {SHIFT})")
        ax.plot(grid, mean[i, 0], color="C3", label="ensemble mean")
        ax.fill_between(grid, mean[i, 0] - std[i, 0], mean[i, 0] + std[i, 0], color="C3", alpha=0.3, label="±std")
        ax.set(xlabel="grid point", ylabel="value", title=f"{title}: test sample {i}")
        ax.legend(fontsize="x-small")
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def run_with_ray(spec: sweep.SweepSpec, storage: Path, out: Path, data) -> None:
    # a local Ray: its workers import my_models too; trust_code: the store names my_models:..., my own code
    ens = sweep.load(sweep.run(spec, storage=str(storage)), trust_code=True)
    print_table(
        [(r["hidden"], r["learning_rate"], r["mean"], r["std"], r["test_loss_mean"]) for r in ens.summary().to_pylist()]
    )  # val_loss, best first
    best = ens.best_configuration()  # chosen on the validation loss
    mean, std = ens.where(**best).mean_std(data.test_x[:2])
    label = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in best.items())
    plot_predictions(out / "predictions.png", data, np.asarray(mean), np.asarray(std), label)
    sweep.plot(ens, out=out / "sweep.png")  # loaded with trust_code=True: my model's predictions too
    print("wrote", out / "sweep.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny data, 2 epochs, 3 seeds: runs in seconds")
    parser.add_argument("--ray", action="store_true", help="train through Ray Tune (sweep.run) and query the store")
    parser.add_argument("--out", type=Path, default=Path("runs/custom_model_and_data"), help="data, store and figures")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    sweep.configure()  # one JAX CPU device per core, the compilation cache (before JAX starts)
    data_path = write_data(out / "shift.npz", num_samples=64 if args.smoke else 800)
    spec = make_spec(data_path, args.smoke)
    data = sweep.load_data(spec)
    print(
        f"data {data_path.name}: train {data.train_x.shape}, validation {data.val_x.shape} (carved from the "
        f"training rows), test {data.test_x.shape}; model {spec.model.name}"
    )

    if args.ray:
        run_with_ray(spec, out / "store", out, data)
        return

    results = train_in_process(spec)
    val = [np.asarray(r[3], np.float64) for r in results]  # statistics as ens.summary() computes them
    print_table([(h, lr, v.mean(), v.std(ddof=1), np.mean(t)) for (h, lr, _, _, t), v in zip(results, val)])
    hidden, lr, members, _, _ = min(results, key=lambda r: np.nanmean(r[3]))  # chosen on validation
    label = f"hidden={hidden}, lr={lr:g}"
    preds = np.asarray(eqx.filter_vmap(lambda m: jax.vmap(m)(data.test_x))(members))  # [seed, sample, c, n]
    print(
        f"best (lowest mean val loss): {label}; ensemble of {preds.shape[0]} seeds, test MSE of the mean "
        f"{np.mean((preds.mean(0) - data.test_y) ** 2):.4g}"
    )
    plot_predictions(out / "predictions.png", data, preds.mean(0), preds.std(0), label)


if __name__ == "__main__":
    main()
