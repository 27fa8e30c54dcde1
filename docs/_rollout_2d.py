"""Render docs/rollout-2d.png: a 2D emulator ensemble's rollout (truth, ensemble mean, its error,
spread).

    python docs/_rollout_2d.py                  # under a minute on a laptop CPU (36 s here)
    python docs/_rollout_2d.py --out my.png     # elsewhere

Eight seeds of a small Fourier neural operator trained in one block on APEBench's 2D advection-diffusion
(``apebench:phy_adv_diff_2d`` at 32 x 32 points, 10 training trajectories of 20 steps; the
FNO trains some 10x faster than a ConvNet of 2D convolutions on XLA:CPU, see
``benchmarks/trainer/layouts_2d.py``), then every member rolled out from the first
test state; the figure shows the reference and the members' mean on one colour scale per step
(the field decays: each step's own scale shows its structure), then the mean's error and the
members' standard deviation on one scale per step (where the spread is as large as the error,
it is a fair estimate of it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

import sweep

STEPS = (1, 10, 30)
OUT = Path(__file__).parent / "rollout-2d.png"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the figure (default {OUT})")
    out = parser.parse_args(argv).out
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep.configure()  # before the spec: checking the problem runs JAX

    spec = sweep.SweepSpec(
        name="rollout-2d",
        problem=sweep.Problem("apebench:phy_adv_diff_2d", num_points=32, num_train=10, train_steps=20, num_test=2),
        model=sweep.Model("ClassicFNO", hidden_channels=16, num_modes=8, num_blocks=2),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(
            epochs=30, batch_size=20, report_every=30, rollout_steps=30, rollout_metrics=("vrmse",)
        ),
        seeds=8,
    )
    data = sweep.load_data(spec)
    stacked, history = sweep.train_block(spec, list(range(8)), data=data)
    truth = np.asarray(data.test_traj[0])  # [T + 1, 1, 32, 32]
    params, static = eqx.partition(stacked, eqx.is_array)

    @jax.jit
    def rollout(p, x0):  # one member, max(STEPS) steps
        model = eqx.combine(p, static)

        def step(state, _):
            state = model(state)
            return state, state

        return jax.lax.scan(step, x0, None, length=max(STEPS))[1]

    states = np.stack(
        [np.asarray(rollout(jax.tree_util.tree_map(lambda a, i=i: a[i], params), truth[0])) for i in range(8)]
    )
    mean, std = states.mean(axis=0), states.std(axis=0)  # [T, 1, 32, 32]
    rows = ("truth", "ensemble mean", "error of the mean", "spread (std over 8 seeds)")
    fig, axes = plt.subplots(len(rows), len(STEPS), figsize=(3 * len(STEPS), 11.6), constrained_layout=True)
    for j, t in enumerate(STEPS):
        error = mean[t - 1] - truth[t]
        field_limit = float(np.abs(truth[t]).max())  # truth and mean: one scale per step
        error_limit = float(max(np.abs(error).max(), std[t - 1].max()))  # error and spread: one scale per step
        panels = [
            (truth[t], "RdBu_r", -field_limit, field_limit),
            (mean[t - 1], "RdBu_r", -field_limit, field_limit),
            (error, "PuOr_r", -error_limit, error_limit),
            (std[t - 1], "magma", 0.0, error_limit),
        ]
        for i, (label, (field, cmap, low, high)) in enumerate(zip(rows, panels, strict=True)):
            ax = axes[i, j]
            image = ax.imshow(field[0], cmap=cmap, vmin=low, vmax=high)
            ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"{label}, step {t}", fontsize=9)
            if i in (1, 2, 3):  # the mean's bar serves truth and mean
                fig.colorbar(image, ax=list(axes[i - 1 : i + 1, j]) if i == 1 else ax, shrink=0.8, format="%.2g")
    vrmse = history.test_rollout["vrmse"].mean(axis=0)
    fig.suptitle(
        f"apebench:phy_adv_diff_2d, 8 seeds of ClassicFNO, one test trajectory; test VRMSE after "
        f"{', '.join(map(str, STEPS))} steps: {', '.join(f'{vrmse[t - 1]:.3f}' for t in STEPS)}\n"
        f"(each member's over the 2 test trajectories, averaged over the seeds)",
        fontsize=9,
    )
    fig.savefig(out, dpi=110)
    print(f"wrote {out}; test VRMSE per step (mean over seeds): {np.round(vrmse, 4).tolist()}")


if __name__ == "__main__":
    main()
