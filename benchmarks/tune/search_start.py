"""TPE's random start: the search's (its first round) against Optuna's default (10 configurations).

The search of ``benchmarks/tune/search.py`` (the same space, ``N`` configurations x ``S`` seeds
x ``epochs``, batch ``B``, in-process), run twice for each sweep seed: as ``sweep.Search`` draws
its random start (:func:`sweep.search._sampler.random_start`: ``max(B, 4)``, at most 10) and with
Optuna's default of 10 random configurations. Each choice is measured with ``--fresh`` new seeds
(its mean validation loss, as ``search.py`` measures it). Prints both means per sweep seed, how
often the search's start chose as well or better, and the mean of each over the sweep seeds.
Sweep seeds other than ``search.py``'s 0-4 keep the comparison apart from that benchmark.

    python -m benchmarks.tune.search_start --sweep-seeds $(seq 5 44)
    python -m benchmarks.tune.search_start --sweep-seeds 5 --configurations 4 --fresh 4   # checks it runs
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from benchmarks.tune.search import fresh_loss, sweep_choice

OPTUNA_DEFAULT = 10  # TPESampler(n_startup_trials=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep-seeds", type=int, nargs="+", default=list(range(5, 15)))
    parser.add_argument("--configurations", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--fresh", type=int, default=32, help="new seeds that measure each choice")
    args = parser.parse_args()
    args.executor = "local"

    import sweep
    from sweep.search import _sampler

    sweep.configure()
    ours = _sampler.random_start
    starts = {"search": ours, "optuna": lambda search: OPTUNA_DEFAULT}
    print(
        f"N={args.configurations} configurations x S={args.seeds} seeds x {args.epochs} epochs, batch {args.batch}; "
        f"each choice measured with {args.fresh} fresh seeds"
    )
    print(f"{'seed':>4}  {'search start':>12}  {'optuna start':>12}")
    rows = []
    try:
        for s in args.sweep_seeds:
            row = []
            for start in starts.values():
                _sampler.random_start = start
                with tempfile.TemporaryDirectory() as tmp:
                    row.append(fresh_loss(args, sweep_choice(args, s, f"{tmp}/sweep")))
            rows.append(row)
            print(f"{s:>4}  {row[0]:>12.4g}  {row[1]:>12.4g}", flush=True)
    finally:
        _sampler.random_start = ours
    losses = np.array(rows)
    print(
        f"the search's start chose as well or better in {int((losses[:, 0] <= losses[:, 1]).sum())} of {len(rows)}; "
        f"mean fresh val_loss {losses[:, 0].mean():.4g} (search's start) against {losses[:, 1].mean():.4g} (Optuna's)"
    )


if __name__ == "__main__":
    main()
