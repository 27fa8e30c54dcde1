"""A search as a round policy of ``sweep.run`` (the protocol is :class:`sweep.tune.RoundPolicy`)::

    loop: the last round asked and not told?  tell it once its blocks are trained,
          or yield its seeds to train;
          else ask the next batch (min(batch, configurations left)) and record it.

Every ask and tell is written to ``search.json`` (:mod:`._record`) before the loop trains or
asks anything more, and each step is decided from that record and the checkpoints alone: a run
killed between any two steps and resumed takes the same steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .._errors import SpecError, SweepError
from ..planning import NextRound
from ..spec import Search, SweepSpec
from ..store import SweepDir
from ._best import headline, summary
from ._observe import Key, key_of, member_values, observation
from ._record import SearchRecord, read_record, write_record
from ._sampler import check_engine, propose

__all__ = ["SearchRounds"]


class SearchRounds:
    """The round policy of a spec with a :class:`sweep.Search`: one round per batch of points."""

    def __init__(self, search: Search, say: Callable[[str], Any] = lambda line: None):
        check_engine(search)  # before any work: Optuna (and the sampler's package) importable
        self.say = say  # gets the search's headline after each round told (the live display)

    def rounds(self, spec: SweepSpec, sweep_dir: SweepDir) -> Iterator[NextRound]:
        """Each batch of points the sampler proposes, planned on ``spec`` with every point asked so
        far (what the plan and the store describe), with every seed of the spec."""
        search = spec.search
        assert search is not None  # policy_for gives searches this policy
        before = None
        while True:
            record = read_record(sweep_dir)
            pending = record.pending
            if pending is None:
                asked = len(record.points)
                if asked >= search.configurations:
                    return
                n = min(search.batch, search.configurations - asked)
                record = record.ask(propose(search, spec.sweep_seed, record, n))
                _planned(spec, record)  # a point that makes no valid spec is refused before it is recorded
                write_record(sweep_dir, record)
                pending = record.pending
                assert pending is not None  # just asked
            planned = _planned(spec, record)
            values = member_values(planned, sweep_dir, search.metric)
            keys = [key_of(planned, p) for p in pending.asked]
            seen = [observation(values.get(k, {}), spec.seed_list) for k in keys]
            if all(o is not None for o in seen):
                write_record(sweep_dir, record.tell(tuple(o for o in seen if o is not None)))
                self.say(headline(spec, sweep_dir))
                continue
            wanted = {k: spec.seed_list for k in keys}
            if wanted == before:
                raise SweepError(
                    f"sweep {spec.name!r}: the search's round {len(record.rounds)} was trained but is not complete"
                )
            yield NextRound(planned, wanted)
            before = wanted

    def result(self, spec: SweepSpec, sweep_dir: SweepDir, label: Callable[[Key], str]) -> str | None:
        return summary(spec, sweep_dir)


def _planned(spec: SweepSpec, record: SearchRecord) -> SweepSpec:
    """``spec`` with every point ``record`` asked, or a :class:`SpecError` naming the space where a
    proposal of the last round makes no valid spec (a combination the space's check could not
    try: an inner value)."""
    try:
        return spec.with_points(record.points)
    except SpecError:
        for point in record.rounds[-1].asked:
            try:
                spec.with_points([point])
            except SpecError as e:
                raise SpecError(
                    f"`search.space`: the sampler proposed {point!r} in round {len(record.rounds)}, which makes no "
                    f"valid spec ({e}); give a space that cannot propose it (the proposal is not recorded: the search "
                    f"goes on with the new space)"
                ) from None
        raise
