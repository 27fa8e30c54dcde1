"""How often a trial reports to Tune and checkpoints its block: rates the driver and storage take.

A trial finishes a compiled chunk every ``report_every`` epochs and appends it to its history
(:func:`sweep.fit`); what it sends out is paced:

- **Reports** (``tune.report``): at most one per ``report_interval_s`` per trial, the first and
  the last chunk always. The interval is ``slots / MAX_RESULTS_PER_S``, so the trials running
  at once send Tune's driver at most :data:`MAX_RESULTS_PER_S` results per second in all (Tune
  documents a few hundred per second as what one driver handles). A skipped chunk's losses stay
  in the history, so the next report and checkpoint carry them.
- **Checkpoints** (a ``tune.Checkpoint`` with a report): ``checkpoint_every=k`` writes one
  every ``k`` reports; ``"auto"`` (the default) writes one when at least
  ``block bytes / budget`` seconds have passed since the previous one, where the budget per
  trial is :data:`STORAGE_SHARE` of the storage's write rate shared by the ``slots`` trials
  running at once, i.e. the smallest ``k`` whose checkpoint traffic stays within that share.
  The last report always has a checkpoint. Rates measured with ``benchmarks/store/checkpoint_traffic.py``
  (a 16,384-member block: 764 MiB for the reference ConvNet, 23 MiB for a tiny one): local disk
  1.1-1.9 GB/s (``save_block`` into the page cache, then Tune's copy), a moto S3 server 47-81
  MB/s, so :data:`LOCAL_BYTES_PER_S` 1 GB/s and :data:`REMOTE_BYTES_PER_S` 47 MB/s. With two
  slots that is one checkpoint of the 764 MiB block per 16 s per trial on a local disk and one
  per 5.7 minutes on S3; a block of a few MiB checkpoints at every report either way.

- **Inside an epoch** (a streamed block, ``Training(data_memory=...)`` smaller than its data,
  whose chunk can take hours): with ``"auto"``, the in-process executor also pauses the block at
  the next window boundary once the last checkpoint is :data:`PAUSE_AFTER_S` old (and the byte
  budget allows one), and checkpoints it there, adding no report (:meth:`Pacer.pause`). On
  Tune, a block pauses inside an epoch only for a preemption notice (:mod:`._preemption`).

A restarted trial resumes from its last checkpoint and trains the chunks after it again
(bit-identical), so fewer checkpoints cost at most that much repeated work after a failure.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pyarrow.fs as pafs

from .._errors import SpecError
from .._fs import is_local

PAUSE_AFTER_S = 600.0  # a streamed block ("auto") checkpoints inside an epoch when the last checkpoint is this old
MAX_RESULTS_PER_S = 100.0  # results per second Tune's driver gets from all running trials at most
STORAGE_SHARE = 0.1  # of the storage's write rate that checkpoints may take
LOCAL_BYTES_PER_S = 1.0e9  # local disk (page cache), measured 1.1-1.9 GB/s
REMOTE_BYTES_PER_S = 47.0e6  # object storage (moto S3 on this machine: 47 MB/s for a 764 MiB block)


class Cadence(NamedTuple):
    """What every trial of a sweep paces its reports and checkpoints by."""

    report_interval_s: float  # at least this long between two reports of a trial (first and last always)
    checkpoint_every: int | None  # every k reports; None: by the byte budget
    checkpoint_bytes_per_s: float  # the byte budget of one trial ("auto")


def check_checkpoint_every(value) -> int | None:
    """``checkpoint_every`` as an int >= 1, or None for ``"auto"``."""
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"`checkpoint_every`: got {value!r}; give an integer >= 1 (a checkpoint every that many "
            f'reports) or "auto" (paced by the storage\'s write rate)'
        )
    return value


def cadence(checkpoint_every, slots: int, filesystem: pafs.FileSystem) -> Cadence:
    """The cadence of a sweep whose trials run ``slots`` at a time and store on ``filesystem``."""
    rate = LOCAL_BYTES_PER_S if is_local(filesystem) else REMOTE_BYTES_PER_S
    return Cadence(
        slots / MAX_RESULTS_PER_S, check_checkpoint_every(checkpoint_every), STORAGE_SHARE * rate / max(1, slots)
    )


class Pacer:
    """One trial's decisions: report this chunk? checkpoint with it?"""

    def __init__(self, rules: Cadence, checkpoint_bytes: int, start: float):
        self.rules = rules
        self.min_gap_s = checkpoint_bytes / rules.checkpoint_bytes_per_s
        self.last_report = -math.inf
        self.last_checkpoint = start  # the trial's start counts as one: nothing to lose yet
        self.reports = 0

    def report(self, now: float, last: bool) -> bool:
        """Whether the chunk that ended ``now`` is reported (the first and the ``last`` always are)."""
        due = last or self.reports == 0 or now - self.last_report >= self.rules.report_interval_s
        if due:
            self.last_report, self.reports = now, self.reports + 1
        return due

    def checkpoint(self, now: float, last: bool) -> bool:
        """Whether the report made ``now`` carries a checkpoint (call after :meth:`report` said yes)."""
        every = self.rules.checkpoint_every
        if every is not None:
            due = last or self.reports % every == 0
        else:
            due = last or now - self.last_checkpoint >= self.min_gap_s
        if due:
            self.last_checkpoint = now
        return due

    def pause(self, now: float) -> bool:
        """Whether a streamed block stops at the window boundary it reached ``now``, inside a
        chunk, to be checkpointed there (no report): with ``"auto"``, when the last checkpoint is
        at least :data:`PAUSE_AFTER_S` old and the byte budget allows one; never with
        ``checkpoint_every=k``."""
        due = self.rules.checkpoint_every is None and now - self.last_checkpoint >= max(self.min_gap_s, PAUSE_AFTER_S)
        if due:
            self.last_checkpoint = now
        return due
