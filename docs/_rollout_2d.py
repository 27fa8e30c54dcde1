"""Render docs/rollout-2d.png: a 2D emulator ensemble's rollout (truth, ensemble mean, spread).

    python docs/_rollout_2d.py          # a few minutes on a laptop CPU

Eight seeds of a small Fourier neural operator trained in one block on APEBench's 2D advection-diffusion
(``apebench:phy_adv_diff_2d`` at 32 x 32 points, 10 training trajectories of 20 steps; the
FNO trains some 10x faster than a ConvNet of 2D convolutions on XLA:CPU, see
``benchmarks/trainer/layouts_2d.py``), then every member rolled out from the first
test state; the figure shows the reference, the members' mean and their standard deviation.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import numpy as np

import sweep

STEPS = (1, 10, 30)
OUT = Path(__file__).parent / "rollout-2d.png"


def main() -> None:
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
    fig, axes = plt.subplots(3, len(STEPS), figsize=(3 * len(STEPS), 8.4), constrained_layout=True)
    limit = float(np.abs(truth[: max(STEPS) + 1]).max())
    for j, t in enumerate(STEPS):
        for i, (label, field, cmap, vmin) in enumerate(
            [
                ("truth", truth[t], "RdBu_r", -limit),
                ("ensemble mean", mean[t - 1], "RdBu_r", -limit),
                ("spread (std over 8 seeds)", std[t - 1], "magma", 0.0),
            ]
        ):
            ax = axes[i, j]
            image = ax.imshow(field[0], cmap=cmap, vmin=vmin, vmax=limit if vmin < 0 else float(std.max()))
            ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"{label}, step {t}", fontsize=9)
            if j == len(STEPS) - 1:
                fig.colorbar(image, ax=ax, shrink=0.8)
    vrmse = history.test_rollout["vrmse"].mean(axis=0)
    fig.suptitle(
        f"apebench:phy_adv_diff_2d, 8 seeds of ClassicFNO; test VRMSE at steps {', '.join(map(str, STEPS))}: "
        f"{', '.join(f'{vrmse[t - 1]:.3f}' for t in STEPS)}",
        fontsize=9,
    )
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}; test VRMSE per step (mean over seeds): {np.round(vrmse, 4).tolist()}")


if __name__ == "__main__":
    main()
