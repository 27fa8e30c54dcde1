"""``sweep scores DIR``: the ensemble scores a store holds; and the "how many seeds?" line of ``sweep show``."""

from __future__ import annotations

from typing import Annotated

import typer

from .._words import counted
from ._args import CLIError, Format, choice
from ._options import DirArg, PoolOpt, TrustCodeOpt, WhereOpt, existing, one_setting, selected

KINDS = ("one_step", "rollout", "rollout_gmean", "ensemble_size", "all")
SPLITS = ("val", "test")
# the columns after a configuration's that name a row of scores (led every block of a wide table)
ROW_KEYS = ("split", "kind", "step", "calibrated")
SHOWN = [
    "split",
    "kind",
    "step",
    "members",
    "crps",
    "crps_ensemble",
    "rmse",
    "spread",
    "spread_skill",
    "coverage_50",
    "coverage_90",
]
FIELDS_SHOWN = [
    "split",
    "kind",
    "step",
    "members",
    "crps",
    "crps_skill",
    "crps_spread",
    "energy_score",
    "variogram_score",
]


def scores(
    sweep_dir: DirArg,
    split: Annotated[
        str | None, typer.Option(parser=choice(SPLITS), metavar="<val|test>", help="The split (default: both).")
    ] = None,
    kind: Annotated[
        str,
        typer.Option(
            parser=choice(KINDS),
            metavar="KIND",  # a metavar of them all would break mid-word at 80 columns
            help="one_step, rollout (per step), rollout_gmean, ensemble_size, or all.",
        ),
    ] = "one_step",
    where: WhereOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="Print at most this many rows.")] = 50,
    wide: Annotated[bool, typer.Option("--wide", help="Every column (MAE, points, rank histogram, gains).")] = False,
    format: Annotated[
        Format,
        typer.Option(
            "--format",
            parser=choice(Format),
            help="table (for reading), csv or json (every column, up to --limit; csv leaves out the "
            "rank histogram, a list).",
        ),
    ] = Format.table,
    recalibrate: Annotated[
        bool,
        typer.Option(
            "--recalibrate",
            help="Fit a recalibration on the validation split and print the scores before and after on "
            "--split (default test), computed now (one structural config: narrow it with --where / --best).",
        ),
    ] = False,
    best: Annotated[
        int | None, typer.Option(min=1, metavar="K", help="With --recalibrate or --greedy: the K best members.")
    ] = None,
    greedy: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="K",
            help="Score (computed now, on --split, default test) K steps of greedy selection on the validation "
            "CRPS over the selected members, configurations and architectures mixed; with --recalibrate, its "
            "scores before and after.",
        ),
    ] = None,
    save_calibration: Annotated[
        str | None,
        typer.Option(metavar="FILE", help="With --recalibrate: write the calibration (JSON, checksummed) here."),
    ] = None,
    fields: Annotated[
        bool,
        typer.Option(
            "--fields",
            help="Compute now (on --split, default test) with the multivariate scores: the fair CRPS's skill and "
            "spread terms, the energy and variogram scores of each field.",
        ),
    ] = False,
    threshold: Annotated[
        list[float] | None,
        typer.Option(
            metavar="X",
            help="As --fields, with the threshold-weighted CRPS and Brier score of exceeding X (repeatable).",
        ),
    ] = None,
    trust_code: TrustCodeOpt = False,
    pool: PoolOpt = False,
) -> None:
    """The ensemble scores of every configuration: stored by the aggregation, or computed now.

    Computed now with --fields, --threshold, --greedy and --recalibrate, and for a --where that
    selects only some of a configuration's members (the stored ones score all of them).

    CRPS (fair), RMSE of the ensemble mean, spread and the spread-skill ratio (1: calibrated, below
    1: overconfident), and how often the truth falls in the members' central 50% and 90%
    intervals, on the stored validation and test samples (one_step), at every rollout step of the
    stored trajectories (rollout) and their geometric mean over steps 1..100, and for subsets of
    members (ensemble_size). The loss of the ensemble mean against the mean member's (loss_gain,
    > 1: the ensemble beats a member) is listed beside one_step rows.

    --recalibrate: a spread scale per channel (and rollout step) minimising the validation CRPS and
    split-conformal 50%/90% intervals, fitted on the validation split; scores before and after
    (column calibrated) on the test split.

    --fields, --threshold X: computed now, beside those: crps_skill and crps_spread (the fair CRPS
    is their difference), the energy and variogram scores of each sample's field (or rollout
    state), and per threshold twcrps_X and brier_X of exceeding it (not stored in the store).

    The table leaves out the kind when one is chosen (the title names it) and the step but for
    rollouts; in a terminal, a table wider than it is printed in blocks of columns, as by sweep
    show.
    """
    import pyarrow.compute as pc

    from .._errors import QueryError
    from ..ensemble import load, whole_configurations
    from ._tables import format_table, prose, write_table

    ens = load(existing(sweep_dir), trust_code=trust_code)
    ens = selected(ens, where)
    if recalibrate and (fields or threshold):
        raise CLIError("--fields and --threshold go without --recalibrate (its table is scored before and after)")
    if greedy is not None:
        blend = selected(ens, None, best).select_greedy(greedy)
        if recalibrate:
            _recalibrated(blend, split or "test", save_calibration, Format(format).value, limit)
            return
        table = blend.scores(split or "test", thresholds=threshold, fields=fields or bool(threshold))
        if Format(format).value != "table":
            typer.echo(write_table(table.slice(0, limit), Format(format).value), nl=False)
            return
        typer.echo(prose(f"ensemble scores of {blend!r}, on {split or 'test'}, computed now:"))
        typer.echo(format_table(table, limit, {"config_id", *blend.grid_columns, *ROW_KEYS}))
        return
    if recalibrate:
        chosen = one_setting(selected(ens, None, best), where, pool)
        _recalibrated(chosen, split or "test", save_calibration, Format(format).value, limit)
        return
    if save_calibration is not None:
        raise CLIError("--save-calibration goes with --recalibrate (it writes the calibration that fits)")
    if best is not None:
        raise CLIError("--best goes with --recalibrate or --greedy (the members they start from)")
    computed = fields or bool(threshold)
    table = ens.scores(split or "test", thresholds=threshold, fields=True) if computed else ens.stored_scores(split)
    # the store scored all the members of each configuration: a selection of some has its own
    some = not computed and whole_configurations(ens, table).num_rows < table.num_rows
    if some:
        try:
            table = ens.scores(split or "test")
        except QueryError as e:  # (a damaged store's error is its own)
            raise CLIError(
                f"{e} (the selection holds only some of a configuration's members, whose stored scores are of all "
                f"of them: its own are computed now)"
            ) from None
    kinds = sorted(set(table["kind"].to_pylist()))  # those it holds, of any kind
    unscored = _unscored(ens, set(table["config_id"].to_pylist()))
    if kind != "all":
        table = table.filter(pc.equal(table["kind"], kind))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    keys = ["config_id", *ens.grid_columns]
    table, ranked = _best_first(ens, table, keys)
    fmt = Format(format).value
    if fmt != "table":
        typer.echo(write_table(table.slice(0, limit), fmt), nl=False)
        return
    if not table.num_rows:  # (an empty table would print its header alone)
        raise CLIError(_none_held(ens, kind, split, kinds, computed or some))
    gains = [c for c in table.column_names if c.endswith("_gain")]
    if not wide:
        events = [c for c in table.column_names if c.startswith(("twcrps_", "brier_"))]
        shown = [*FIELDS_SHOWN, *events] if computed else [*SHOWN, *gains[:1]]
        # the title names a kind asked for, and only rollouts have steps
        said = set() if kind == "all" else {"kind", *(["step"] if kind != "rollout" else [])}
        table = table.select([c for c in [*keys, *shown] if c in table.column_names and c not in said])
    if computed or some:
        why = " (the store's are of every member of a configuration, these of the selection)" if some else ""
        typer.echo(
            prose(f"ensemble scores ({kind}, {split or 'test'}) of {len(ens)} members, computed now{why}{ranked}:")
        )
    else:
        on = split or "val and test"
        typer.echo(prose(f"ensemble scores ({kind}, {on}) of {len(ens)} members, from the store{ranked}:"))
    typer.echo(format_table(table, limit, {*keys, *ROW_KEYS}))
    if unscored:
        typer.echo(prose(f"note: {unscored}"))


def _unscored(ens, scored: set[str]) -> str:
    """The configurations of ``ens`` without a row among ``scored`` (config ids), and why, in words."""
    from .._import_path import is_import_path
    from ..metrics import takes_class_indices

    why: dict[str, list[str]] = {}
    for cid in sorted(set(ens.index["config_id"].to_pylist()) - scored):
        spec = ens.store.configs[cid].spec
        if spec.training.correct is not None:
            reason = (
                "trained with training.correct (a network correcting a coarse stepper), whose predictions are made "
                "only inside the trainer: its stored rollout columns score it (sweep show --metric COLUMN)"
            )
        elif takes_class_indices(spec.training.loss, spec.training.metrics):
            reason = "class labels, which ensemble scores do not take (their accuracy columns: sweep show)"
        elif is_import_path(spec.model.name):
            reason = "a model built by a factory, code the store names: --trust-code computes them"
        else:
            reason = "the store keeps no samples of the split (--split)"
        why.setdefault(reason, []).append(cid)
    return "; ".join(f"{counted(len(ids), 'config')} ({', '.join(ids)}) not scored: {r}" for r, ids in why.items())


def _best_first(ens, table, keys: list[str]):
    """``(table, words)``: the rows of each configuration together, configurations best first by
    their mean validation loss (as ``sweep show`` ranks them), and the words saying so; the table
    as it is where the members have no validation loss."""
    from .._errors import QueryError

    if not table.num_rows:
        return table, ""
    try:
        order = ens.summary().table.select(keys).to_pylist()
    except QueryError:  # no validation set: nothing ranks them
        return table, ""
    rank = {tuple(r.values()): i for i, r in enumerate(order)}
    rows = [tuple(table[k][i].as_py() for k in keys) for i in range(table.num_rows)]
    indices = sorted(range(table.num_rows), key=lambda i: (rank.get(rows[i], len(rank)), i))
    return table.take(indices), ", configurations best first by mean val loss"


def _none_held(ens, kind: str, split: str | None, kinds: list[str], computed: bool) -> str:
    """Why the scores table of the members of ``ens`` holds no row of ``kind`` (``kinds``: those it
    holds), and what to do."""
    from .._import_path import is_import_path
    from ..metrics import takes_class_indices

    on = f"({kind}, {split or ('test' if computed else 'val and test')})"
    what = f"no ensemble scores {on} computed now" if computed else f"no stored ensemble scores {on}"
    what += f" of these {len(ens)} members"
    if kinds:
        return f"{what}; there are {', '.join(kinds)} scores: --kind {kinds[0]} (or --kind all)"
    specs = [ens.store.configs[cid].spec for cid in set(ens.index["config_id"].to_pylist())]
    factories = sorted(
        {
            s.model.name
            for s in specs
            if is_import_path(s.model.name) and not takes_class_indices(s.training.loss, s.training.metrics)
        }
    )
    if factories and not computed:
        return (
            f"{what}: their models are built by {', '.join(factories)}, code the store names, whose predictions an "
            f"aggregation runs only when trusted; where that code is installed and trusted, store them with `sweep "
            f"aggregate DIR --trust-code`, or compute them now with --fields --trust-code (in Python: "
            f"Ensemble.scores() on sweep.load(path, trust_code=True))"
        )
    return f"{what}: {_unscored(ens, set())}"


def _recalibrated(ens, split: str, save: str | None, fmt: str, limit: int) -> None:
    """Fit on the validation split, print the scores before and after on ``split``."""
    from ._tables import format_table, prose, write_table

    fitted = ens.recalibrate("val")
    table = fitted.calibration_scores(split)
    if save is not None:
        fitted.calibration.save(save)
    if fmt != "table":
        typer.echo(write_table(table.slice(0, limit), fmt), nl=False)
        return
    cal = fitted.calibration
    scale = ", ".join(f"{s:.3g}" for s in cal.scale)
    typer.echo(
        prose(
            f"recalibrated on val ({cal.points} points per channel) of {_members_of(ens, cal.config_id)}: spread "
            f"scale per channel {scale}; scores on {split} before and after"
            + (
                " (in sample: fitted on these same points; --split test scores it out of sample):"
                if split == "val"
                else ":"
            )
        )
    )
    typer.echo(format_table(table, limit, {"config_id", *ens.grid_columns, *ROW_KEYS}))
    if save is not None:
        typer.echo(f"calibration written to {save}")


def seeds_line(ens, metric: str, mode: str | None, width: float = 0.1) -> str:
    """How many seeds bring the 95% interval of the best configuration's mean ``metric`` to
    ``width`` of its mean (``sweep show``'s last line)."""
    row = ens.seeds_needed(metric, width, mode).to_pylist()[0]
    if row["seeds_needed"] is None:
        return (
            f"seeds needed: unknown for the best configuration ({row['n']} usable seed(s); at least 2 give an interval)"
        )
    if row["relative_width"] == 0:
        return (
            f"seeds needed: unknown; the best configuration's {row['n']} seeds reached the same {metric} (an "
            f"interval of width 0): more seeds tell whether others do"
        )
    given = f"{row['relative_width']:.0%}"
    if given == f"{width:.0%}":  # (10.2% shown as 10% would read as reached)
        given = f"{row['relative_width']:.1%}"
    return (
        f"seeds needed for a 95% interval of the best mean {metric} as wide as {width:.0%} of it: "
        f"{row['seeds_needed']} ({row['n']} trained give {given})"
    )


def _members_of(ens, config_id: str) -> str:
    """``"8 members of config <id>"``, or for a greedy blend its members, counts and configs."""
    from .._words import counted
    from ..ensemble import Blend

    if not isinstance(ens, Blend):
        return f"{counted(len(ens), 'member')} of config {config_id}"
    configs = config_id.split("+")
    return (
        f"a greedy blend of {counted(len(ens), 'member')} (counted {ens.counts.tolist()}) of "
        f"{counted(len(configs), 'structural config')} ({', '.join(configs)})"
    )
