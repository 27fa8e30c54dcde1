"""The live progress of a sweep while it runs (a Tune ``Callback``; Tune's own output is off).

On a terminal, one rich display is updated in place; otherwise (a pipe, a file, ``CI`` set,
``TERM=dumb``) a plain line is printed every ``every_s`` seconds while something changes, and
once at the end::

    [heat] 0:42 | trials 2/4 done, 2 running, 0 pending | members 8/16 | member-epochs 96/192 | 4.1 member-epochs/s | ETA 0:23 | val loss, mean over seeds, best first: depth=2 learning_rate=0.003 2.1e-03, ...

The counts come from the plan of this call (Tune creates trials lazily under
``max_concurrent_trials``), members trained by earlier calls count as done (and the epochs of a
resumed trial's checkpoint), and the elapsed time, throughput and ETA are those of this process
only (a resumed trial counts the epochs it trains now); after a stop the trials that were
running show as *stopped*, with no ETA; where trials stream their training split, ``waited 1.2 s for data`` sums the
seconds their trainers waited for the reader (their ``reader_wait_s``). A trial that runs but
has not reported yet is *compiling* (building its programs, the first chunk of epochs). A
*configuration* is one combination of grid values, named as the store's columns (``depth=6
learning_rate=0.0003``); configurations are ranked by the mean over seeds of their members'
latest loss (as the summary after the sweep ranks them: best mean first), with the best
member's loss beside; on the validation set when the data has one
(:meth:`ProgressState.rank_on_validation`, else as trials report: ``member_val_loss``, then
``member_test_loss``); members trained by earlier calls with the loss of their block's last
report (:meth:`ProgressState.restore`). Nothing is shown before Tune has created the first trial. Trials
that Tune retried (a lost node, a preemption, an error) are counted (``1 retried``) and, when
the display closes, listed with the reasons.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .._words import counted
from ..planning import MemberId, TrialPlan, config_label, grid_names, hparams_key
from ..spec import SweepSpec
from ..store import FIXED_COLUMNS
from ..training import BlockRef

_STATUS = {"TERMINATED": "done", "ERROR": "failed", "RUNNING": "running"}  # anything else: pending
# "compiling": running, no report yet; "stopped": running when the run was stopped (Ctrl-C, SIGTERM)
STATES = ("done", "compiling", "running", "stopped", "pending", "failed")
LOSS_VECTORS = ("member_val_loss", "member_test_loss")  # the first one a trial reports is shown


def duration(seconds: float) -> str:
    """``75`` -> ``"1:15"``, ``3725`` -> ``"1:02:05"``."""
    seconds = int(round(max(0.0, seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def waited(seconds: float) -> str:
    """``0.0213`` -> ``"21 ms"``, ``1.234`` -> ``"1.2 s"``, ``75`` -> ``"1:15"``."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s" if seconds < 60 else duration(seconds)


class _Trial:
    def __init__(self, plan: TrialPlan, labels: list[str]):
        self.members, self.epochs, self.block = plan.num_members, plan.spec.training.epochs, len(plan.seeds)
        self.labels = labels  # per hyperparameter set
        self.status, self.epoch, self.reported = "pending", 0, False
        self.start_epoch: int | None = None  # set by the trial's first report
        self.waited = 0.0  # seconds its trainer waited for streamed data (``reader_wait_s``), summed


NO_GRID = "(one configuration)"  # the label of a spec without a grid
LABEL_WIDTH = 30  # the widest grid value ("learning_rate=0.003") a narrow display keeps on one line


class Parts:
    """Rich text of ``parts`` joined by ``" | "``, a line break between two parts where the next
    does not fit, never inside one (a part longer than the width wraps at its words):
    ``members 0/16`` is never split over two lines."""

    def __init__(self, parts: Iterable[str]):
        self.parts = list(parts)

    def lines(self, width: int) -> list[str]:
        from rich.cells import cell_len

        lines: list[str] = []
        for part in self.parts:  # a line break separates two parts as " | " does
            if lines and cell_len(joined := f"{lines[-1]} | {part}") <= width:
                lines[-1] = joined
            else:
                lines.append(part)
        return lines

    def __rich_console__(self, console, options):
        from rich.text import Text

        yield Text("\n".join(self.lines(options.max_width)))

    def __rich_measure__(self, console, options):
        from rich.cells import cell_len
        from rich.measure import Measurement

        return Measurement(max(map(cell_len, self.parts), default=0), cell_len(" | ".join(self.parts)))


class ProgressState:
    """What the display shows: every member of ``spec``, those in ``done`` already trained."""

    def __init__(self, spec: SweepSpec, trials: Iterable[TrialPlan], done: Iterable[tuple] = (), clock=time.monotonic):
        self.name, self.clock, self.started = spec.name, clock, clock()
        self.names = grid_names(spec.varied, reserved=FIXED_COLUMNS)
        self.configs: dict[str, list[int]] = {}  # label -> [members done, members]
        self._label: dict[tuple[str, str], str] = {}
        self.done_before = 0  # members trained by earlier calls, of the configurations shown
        self.epochs_before = 0  # their member-epochs
        if spec.search is None or spec.points:  # a search's configurations come as it proposes them
            self.add_configurations(spec, done)
        self.latest: dict[str, dict[tuple[str, int], float]] = {}  # label -> member -> its latest loss
        self.loss_name = "test loss"
        self.vectors = LOSS_VECTORS  # the loss vectors shown, the first one a trial reports
        self.trials: dict[str, _Trial] = {}
        self.retries: dict[str, list[str]] = {}  # trial key -> why Tune retried it, each time
        self.seen = False  # Tune has created one of these trials
        self.first_start: float | None = None
        self.race: dict[str, tuple[str, str]] = {}  # adaptive seeds: label -> (interval, status)
        self.race_line = ""
        self.resumed: dict[str, int] = {}  # trial key -> the epoch of its newest checkpoint (restore)
        self.stopped = False  # the run was stopped: its running trials end where they are
        self.lock = threading.Lock()
        self.add(trials)

    def add_configurations(self, spec: SweepSpec, done: Iterable[tuple] = ()) -> None:
        """Show the configurations of ``spec`` not shown yet (a search's, as it proposes them), with
        the members of ``done`` counted as trained."""
        done_by = {}
        for cid, _, hk in done:
            done_by[(cid, hk)] = done_by.get((cid, hk), 0) + 1
        for config, hsets in spec.expand():
            probe = TrialPlan("", config.config_id, config, (), hsets)
            for h in hsets:
                if (config.config_id, hparams_key(h)) in self._label:
                    continue
                label = config_label(probe.grid_values(spec.varied, h), self.names) or NO_GRID
                self._label[(config.config_id, hparams_key(h))] = label
                entry = self.configs.setdefault(label, [0, 0])
                entry[0] += done_by.get((config.config_id, hparams_key(h)), 0)
                entry[1] += len(spec.seed_list)
                self.done_before += done_by.get((config.config_id, hparams_key(h)), 0)
                self.epochs_before += done_by.get((config.config_id, hparams_key(h)), 0) * config.training.epochs

    def label(self, config_id: str, hparams: str) -> str:
        """The label of a configuration (``hparams``: its :func:`~sweep.planning.hparams_key` text)."""
        return self._label[(config_id, hparams)]

    def show_race(self, rows: Mapping[tuple[str, str], tuple[int, str, str]], line: str) -> None:
        """Adaptive seeds: per configuration ``(config_id, hparams_key)``, the seeds planned so far
        (its member count), its interval and its status in the race; ``line`` sums the race up."""
        with self.lock:
            for key, (seeds, interval, status) in rows.items():
                label = self._label[key]
                self.configs[label][1] = seeds
                self.race[label] = (interval, status)
            self.race_line = line

    def rank_on_validation(self, validated: bool) -> None:
        """Show and rank by the validation loss from the start (``validated``: the data has a
        validation set), else by the test loss."""
        with self.lock:
            self.vectors = LOSS_VECTORS[:1] if validated else LOSS_VECTORS[1:]
            self.loss_name = "val loss" if validated else "test loss"

    def restore(self, blocks: Iterable[BlockRef], done: Iterable[MemberId]) -> None:
        """Show the members of ``done`` (trained by earlier calls) with the loss of their block's
        last report, ranked beside this call's (call it after :meth:`rank_on_validation`: the loss
        shown is the one it chose), and count the epochs of every block's newest checkpoint as
        done: a trial this call resumes starts there. A search's configurations not proposed yet
        are left out."""
        split = self.vectors[0].removeprefix("member_").removesuffix("_loss")
        done = set(done)
        with self.lock:
            for ref in blocks:
                self.resumed[ref.trial_key] = ref.epoch  # a trial of this call starts there
                losses = getattr(ref.history, split).get("loss")
                if losses is None or not losses.size:
                    continue
                for i, loss in enumerate(losses[:, -1].tolist()):
                    hparams = ref.hparams[i // len(ref.seeds)]
                    label = self._label.get((ref.config_id, hparams_key(hparams)))
                    if label is not None and MemberId.of(ref.config_id, ref.seeds[i % len(ref.seeds)], hparams) in done:
                        self._record(label, (ref.trial_key, i), loss)

    def _record(self, label: str, member: tuple[str, int], loss: float | None) -> None:
        """A member's latest loss (NaN or None: diverged, left out as the summary leaves it out)."""
        if loss is None or loss != loss:
            self.latest.get(label, {}).pop(member, None)
            return
        self.latest.setdefault(label, {})[member] = float(loss)

    def add(self, trials: Iterable[TrialPlan]) -> None:
        """Trials of a later phase (a new experiment after a restored one)."""
        with self.lock:
            for t in trials:
                if t.trial_key not in self.trials:
                    self.trials[t.trial_key] = ours = _Trial(
                        t, [self._label[(t.config_id, hparams_key(h))] for h in t.hparams]
                    )
                    ours.epoch = self.resumed.get(t.trial_key, 0)

    # -- updates from Tune ---------------------------------------------------------------------
    def statuses(self, tune_trials: Iterable[Any]) -> None:
        with self.lock:
            for trial in tune_trials:
                ours = self.trials.get((trial.config or {}).get("trial_key", ""))  # "" is no trial's key
                if ours is not None:
                    self.seen = True
                    ours.status = _STATUS.get(trial.status, "pending")
                    if ours.status == "running" and self.first_start is None:
                        self.first_start = self.clock()

    def report(self, trial_key: str, result: Mapping[str, Any]) -> None:
        with self.lock:
            ours = self.trials.get(trial_key)
            if ours is None:
                return
            if ours.start_epoch is None:
                ours.start_epoch = int(result.get("resumed_from_epoch", 0))
            ours.reported = True
            ours.epoch = max(ours.epoch, int(result.get("epoch", 0)))
            ours.waited += float(result.get("reader_wait_s", 0.0))
            name = next((n for n in self.vectors if n in result), None)
            if name is None:
                return
            self.loss_name = name.removeprefix("member_").replace("_", " ")
            losses = result[name]
            for i, loss in enumerate(losses):
                self._record(ours.labels[min(i // max(ours.block, 1), len(ours.labels) - 1)], (trial_key, i), loss)

    def stop(self) -> None:
        """The run was stopped: its running trials show as stopped, and no ETA."""
        with self.lock:
            self.stopped = True

    def retried(self, trial_key: str, reason: str) -> None:
        """Tune retries a trial (from its last checkpoint) for ``reason`` (``"node lost"``, ...)."""
        with self.lock:
            self.retries.setdefault(trial_key, []).append(reason)

    def retry_summary(self) -> str | None:
        """``retried 2 trials: <key> (node lost), <key> (preempted x2)``, or None."""
        with self.lock:
            if not self.retries:
                return None
            told = [
                f"{key} ({', '.join(f'{r} x{n}' if n > 1 else r for r, n in Counter(reasons).items())})"
                for key, reasons in self.retries.items()
            ]
        return f"retried {counted(len(told), 'trial')}: {', '.join(told)}"

    # -- what is shown -------------------------------------------------------------------------
    def unfinished(self) -> list[str]:
        """Trial keys neither done nor failed (after an experiment returned: it was interrupted)."""
        with self.lock:
            return [k for k, t in self.trials.items() if t.status not in ("done", "failed")]

    def counts(self) -> dict[str, Any]:
        with self.lock:
            by: dict[str, int] = dict.fromkeys(STATES, 0)
            members_done = self.done_before
            work = total = self.epochs_before  # the members trained by earlier calls count as done
            trained = 0
            per_config = {label: d for label, (d, _) in self.configs.items()}
            for t in self.trials.values():
                state = "compiling" if t.status == "running" and not t.reported else t.status
                by["stopped" if self.stopped and state in ("running", "compiling") else state] += 1
                reached = t.epochs if t.status == "done" else min(t.epoch, t.epochs)
                if t.status == "done":
                    members_done += t.members
                    for label in t.labels:
                        per_config[label] += t.block
                work += t.members * reached
                total += t.members * t.epochs
                if t.start_epoch is not None:
                    trained += t.members * max(0, min(t.epoch, t.epochs) - t.start_epoch)
            now = self.clock()
            running_for = now - self.first_start if self.first_start is not None else 0.0
            # no rate over less than a second: a trial that reports its first chunk right after it
            # starts (in-process) would show a rate of thousands of member-epochs per second
            rate = trained / running_for if trained and running_for >= 1.0 else None
            eta = (total - work) / rate if rate and not self.stopped else None
            return {
                "trials": by,
                "stopped": self.stopped,
                "num_trials": len(self.trials),
                "retried": len(self.retries),
                "members_done": members_done,
                "members": sum(n for _, n in self.configs.values()),
                "epochs_done": work,
                "epochs": total,
                "rate": rate,
                "eta": eta,
                "elapsed": now - self.started,
                "waited": sum(t.waited for t in self.trials.values()),
                "per_config": per_config,
                "best": {label: min(v.values()) for label, v in self.latest.items() if v},  # as stored at the end
                "mean": {label: sum(v.values()) / len(v) for label, v in self.latest.items() if v},
            }

    def ranked(self, c: Mapping[str, Any]) -> list[tuple[str, float]]:
        """``(label, mean over seeds of the latest loss)``, lowest mean first."""
        return sorted(c["mean"].items(), key=lambda kv: kv[1])

    @property
    def ranking(self) -> str:
        """How the configurations are ranked, in the words of the summary printed after a sweep."""
        return f"{self.loss_name}, mean over seeds, best first"

    def summary(self, c: Mapping[str, Any] | None = None) -> str:
        """``[name] 0:42 | trials ... | ETA 0:23`` (no configurations)."""
        c = c or self.counts()
        return " | ".join([*self._counts_parts(c), *self._speed_parts(c)])

    def _counts_parts(self, c: Mapping[str, Any]) -> list[str]:
        t = c["trials"]
        return [
            f"[{self.name}] {duration(c['elapsed'])}",
            f"trials {t['done']}/{c['num_trials']} done, "
            + (f"{t['compiling']} compiling, " if t["compiling"] else "")
            + (f"{t['stopped']} stopped, " if c.get("stopped") else f"{t['running']} running, ")
            + f"{t['pending']} pending"
            + (f", {t['failed']} failed" if t["failed"] else "")
            + (f", {c['retried']} retried" if c.get("retried") else ""),
            f"members {c['members_done']}/{c['members']}",
        ]

    @staticmethod
    def _speed_parts(c: Mapping[str, Any]) -> list[str]:
        parts = [f"member-epochs {c['epochs_done']}/{c['epochs']}"]
        if c["rate"]:
            parts.append(f"{c['rate']:.3g} member-epochs/s")
        if c["eta"] is not None and c["epochs_done"] < c["epochs"]:
            parts.append(f"ETA {duration(c['eta'])}")
        if c.get("waited"):  # streamed trials: the time their trainers waited for the reader, summed
            parts.append(f"waited {waited(c['waited'])} for data")
        return parts

    def line(self, top: int = 3) -> str:
        """:meth:`summary` plus the ``top`` configurations with the lowest mean loss so far."""
        c = self.counts()
        ranked = self.ranked(c)
        race = f" | {self.race_line}" if self.race_line else ""
        if not ranked:
            return self.summary(c) + race
        shown = ", ".join(f"{label} {loss:.3g}" for label, loss in ranked[:top])
        more = f" (+{len(ranked) - top} more)" if len(ranked) > top else ""
        return f"{self.summary(c)} | {self.ranking}: {shown}{more}{race}"

    def renderable(self, max_rows: int = 20):
        """The rich display: the summary, a bar of member-epochs, one row per configuration."""
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        c = self.counts()
        table = Table(box=None, pad_edge=False, header_style="bold")
        ranked = [label for label, _ in self.ranked(c)]
        order = ranked + [label for label in self.configs if label not in c["mean"]]  # best mean first
        # a narrow terminal: a label wraps between its values, each value whole up to LABEL_WIDTH
        # ("learning_rate=0.003" on one line; with a race's two columns there is no room: it folds),
        # never cut to "learning_rate…" (then every row would read the same)
        values = (len(v) for label in order[:max_rows] for v in label.split())
        whole = 0 if self.race else min(LABEL_WIDTH, max(values, default=0))
        # "(best first)": by the mean column, short enough for a grid's labels at 80 columns
        table.add_column("configuration (best first)", overflow="fold", min_width=whole)
        table.add_column("members", justify="right")
        table.add_column(f"{self.loss_name}: mean over seeds", justify="right")
        table.add_column("best member", justify="right")
        if self.race:  # Text: "[...]" is not markup
            table.add_column(Text("race: mean [p or interval]"), justify="right")
            table.add_column(Text("race"), justify="left", overflow="fold")  # folded, never cut
        for i, label in enumerate(order[:max_rows]):
            mean, best = c["mean"].get(label), c["best"].get(label)
            text = "-" if mean is None else f"{mean:.4g}"
            table.add_row(
                Text(label),
                f"{c['per_config'][label]}/{self.configs[label][1]}",
                f"[bold green]{text}[/]" if mean is not None and i == 0 else text,
                "-" if best is None else f"{best:.4g}",
                *(map(Text, self.race.get(label, ("-", "-"))) if self.race else ()),
            )
        if len(self.configs) > max_rows:
            table.add_row(f"... {len(self.configs) - max_rows} more configurations", *[""] * (len(table.columns) - 1))
        bar = Table.grid(padding=(0, 1))
        compiling, pending = c["trials"]["compiling"], c["trials"]["pending"]
        state = f"{100 * c['epochs_done'] / max(c['epochs'], 1):3.0f}%"
        waiting = not (c["epochs_done"] or c["trials"]["running"] or c["stopped"]) and bool(compiling or pending)
        if waiting and compiling:
            state = f"compiling ({counted(compiling, 'trial')} building programs)"
        elif waiting:
            state = f"starting ({counted(pending, 'trial')} waiting for worker processes)"
        bar.add_row(
            ProgressBar(total=max(c["epochs"], 1), completed=c["epochs_done"], width=40, pulse=waiting),
            Parts([state, *self._speed_parts(c)]),
        )
        return Group(Parts(self._counts_parts(c)), bar, *([Text(self.race_line)] if self.race_line else []), table)
