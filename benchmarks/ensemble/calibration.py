"""Measurement: test-split coverage before and after recalibration on the validation split.

For each sweep directory, the members of its best configuration (by mean validation loss) are
recalibrated on the validation samples (and trajectories) the store holds, at the levels 0.1,
0.2, ..., 0.9, and scored on the test split (``Ensemble.calibration_scores("test")``). Prints CRPS,
spread-skill and the 50% / 90% coverages before and after (one-step, and the mean over rollout
steps where the store holds trajectories), and draws coverage against nominal (and, with
trajectories, the 50% / 90% coverage per rollout step) into ``--out``.

    python -m benchmarks.ensemble.calibration runs/heat-depth-lr runs/burgers --out docs/scores-recalibration.png
"""

from __future__ import annotations

import argparse

import numpy as np

import sweep

LEVELS = tuple(round(0.1 * i, 1) for i in range(1, 10))


def _rows(path: str) -> tuple[str, list[dict]]:
    ens = sweep.load(path)
    best = ens.best_configuration()
    members = ens.where(**best)
    table = members.recalibrate("val", levels=LEVELS).calibration_scores("test").to_pylist()
    settings = ", ".join(f"{k}={v}" for k, v in best.items() if k != "config_id")
    name = f"{members.spec.problem.name} ({settings + '; ' if settings else ''}{len(members)} members)"
    return name, table


def _line(name: str, rows: list[dict], kind: str) -> None:
    for calibrated in (False, True):
        picked = [r for r in rows if r["kind"] == kind and r["calibrated"] == calibrated]
        if not picked:
            return
        mean = {
            c: float(np.mean([r[c] for r in picked])) for c in ("crps", "spread_skill", "coverage_50", "coverage_90")
        }
        print(
            f"{name:60s} {kind:8s} {'after' if calibrated else 'before':6s} crps {mean['crps']:.4g}  spread-skill "
            f"{mean['spread_skill']:.3f}  coverage 50% {mean['coverage_50']:.3f}  90% {mean['coverage_90']:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = [_rows(d) for d in args.dirs]
    for name, rows in results:
        _line(name, rows, "one_step")
        _line(name, rows, "rollout")
    if args.out:
        _figure(results, args.out)
        print(f"figure: {args.out}")


def _figure(results: list[tuple[str, list[dict]]], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rollouts = any(r["kind"] == "rollout" for _, rows in results for r in rows)
    fig, axes = plt.subplots(
        1 + rollouts, len(results), figsize=(4.2 * len(results), 3.8 * (1 + rollouts)), squeeze=False
    )
    for j, (name, rows) in enumerate(results):
        ax = axes[0, j]
        ax.plot([0, 1], [0, 1], color="0.6", lw=1)
        for calibrated, style in ((False, "o--"), (True, "s-")):
            (row,) = [r for r in rows if r["kind"] == "one_step" and r["calibrated"] == calibrated]
            label = "recalibrated (conformal)" if calibrated else "members' quantiles"
            ax.plot(LEVELS, [row[f"coverage_{a * 100:g}"] for a in LEVELS], style, label=label)
        ax.set(title=name, xlabel="nominal coverage", ylabel="test coverage (one step)", xlim=(0, 1), ylim=(0, 1))
        ax.title.set_fontsize(8)
        ax.legend(fontsize=8)
        if rollouts:
            ax = axes[1, j]
            if not any(r["kind"] == "rollout" for r in rows):
                ax.set_axis_off()
                continue
            for calibrated, style in ((False, "--"), (True, "-")):
                picked = [r for r in rows if r["kind"] == "rollout" and r["calibrated"] == calibrated]
                tag = "after" if calibrated else "before"
                for level, color in ((50, "C0"), (90, "C1")):
                    steps = [r["step"] for r in picked]
                    ax.plot(
                        steps, [r[f"coverage_{level}"] for r in picked], style, color=color, label=f"{level}% {tag}"
                    )
                    ax.axhline(level / 100, color=color, lw=0.5)
            ax.set(xlabel="rollout step", ylabel="test coverage (rollout)", ylim=(0, 1.02))
            ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
