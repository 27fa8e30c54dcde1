"""The sweep directory: the one reader and writer of its plan, checkpoints, samples and experiments.

Layout (``<storage>/<spec.name>/``)::

    plan.json                    every trial ever planned (union over runs) + scheduler-stopped ones
    samples.parquet              the first test samples of each problem (what figures draw from)
    data_scans.json              the driver's pass over each hdf5 problem's files (statistics, checks)
    resume.json                  how to resume the last ``sweep run``, and its folder (a Python call removes it)
    driver.json                  the run training it now (:mod:`._driver`; removed when that run ends)
    tune-0001/                   one Ray Tune experiment per ``sweep.run`` call (per wave of a large plan)
        <trial_key>/checkpoint_000001/{block.json,state.eqx}
        experiment_state-*.json, tuner.pkl, ...   (Tune's own files)
    tune-0002/ ...               a later run (more seeds: only the new members)
    ensembles/                   the store (``sweep.aggregate``)

A :class:`SweepDir` reads each file once: ``plan.json`` until it writes a new one (which it
keeps), each checkpoint's ``block.json`` once (a checkpoint directory is never rewritten; Tune
writes the next one beside it). :meth:`SweepDir.refresh` lists the tree again after others
(the trials) wrote to it, and reads only the ``block.json`` files it has not read yet. On
object storage every read is a request, so this is what keeps a resumed sweep cheap.

```python
sweep_dir = SweepDir.at("runs/heat")
sweep_dir.plan().trials[0].trial_key     # plan.json, read once
done, blocks = sweep_dir.done(spec)      # members to leave out, newest checkpoint per trial
```
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from .._errors import SpecError, StoreError
from .._fs import exists, filesystem_path, is_local, read_text, write_text_atomic
from .._layout import DATA_SCANS, EXPERIMENT_PREFIX, RESUME, experiment_name
from ..planning import MemberId, Plan, TrialPlan, read_plan, write_plan
from ..problems import Dataset, Scan
from ..spec import SweepSpec
from ..training import BlockRef, find_blocks
from ._samples import read_samples, write_samples

_EXPERIMENT = re.compile(rf"^{EXPERIMENT_PREFIX}(\d+)$")
_UNREAD = object()
RESUME_BYTES = 64 * 2**10  # the most read of resume.json: a command line is far shorter
_log = logging.getLogger("sweep.store")


class SweepDir:
    """A sweep directory on any pyarrow filesystem: ``filesystem``, ``path`` inside it, and
    ``shown``, the form users see (their ``s3://`` spelling, or the absolute local path)."""

    def __init__(self, filesystem: pafs.FileSystem, path: str, shown: str):
        self.filesystem, self.path, self.shown = filesystem, path.rstrip("/"), shown
        self._plan: Plan | None | object = _UNREAD
        self._metas: dict[str, BlockRef] = {}  # block.json path -> what it says (read once)
        self._blocks: dict[bool, dict[str, BlockRef]] | None = None  # by `reported`
        self.passed_over: dict[str, str] = {}  # checkpoints whose state is not whole, by path: why
        self._samples: dict[str, pa.Table] | None = None

    @classmethod
    def at(cls, location: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> SweepDir:
        """The sweep directory ``location`` (local, ``s3://...``, or a path inside ``filesystem``)."""
        fs, path = filesystem_path(location, filesystem)
        return cls(fs, path, path if is_local(fs) else str(location).rstrip("/"))

    @classmethod
    def of(cls, spec: SweepSpec, storage: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> SweepDir:
        """The directory of sweep ``spec`` under ``storage`` (``<storage>/<spec.name>``)."""
        if not isinstance(storage, (str, os.PathLike)) or not str(storage):
            raise SpecError(
                f"`storage`: got {storage!r}; give the folder to keep sweeps in, a path or s3://bucket/prefix "
                f'(storage="./runs": the sweep\'s directory is ./runs/{spec.name})'
            )
        return cls.at(f"{str(storage).rstrip('/')}/{spec.name}", filesystem)

    def __repr__(self) -> str:
        return f"SweepDir({self.shown!r})"

    # plan.json
    def plan(self) -> Plan | None:
        """The stored plan (None before the first run), read once."""
        if self._plan is _UNREAD:
            self._plan = read_plan(self.filesystem, self.path)
        return self._plan  # type: ignore[return-value]

    def write_plan(self, plan: Plan) -> None:
        """Write ``plan.json`` atomically and keep ``plan`` as what it holds."""
        write_plan(self.filesystem, self.path, plan)
        self._plan = plan

    def record_stopped(self, trial_keys: frozenset[str]) -> None:
        """Add ``trial_keys`` to the trials a scheduler stopped early, in ``plan.json`` (written
        only when one is new to it)."""
        plan = self.plan()
        if plan is not None and not trial_keys <= plan.stopped_trials:
            self.write_plan(plan.with_stopped(trial_keys))

    # block checkpoints
    def blocks(self, reported: bool = False) -> dict[str, BlockRef]:
        """The newest checkpoint of every trial, by trial key (as of the last listing); ``reported``:
        the newest at a report (not of a streamed block paused inside an epoch: what is aggregated)."""
        if self._blocks is None:
            self._blocks = {}
        if reported not in self._blocks:
            self.passed_over = {}
            self._blocks[reported] = find_blocks(
                self.path, self.filesystem, self._metas, reported=reported, passed_over=self.passed_over
            )
        return self._blocks[reported]

    def refresh(self) -> None:
        """Forget the listing, so that the next query sees checkpoints written since (by the
        trials); ``block.json`` files read before are not read again."""
        self._blocks = None

    def done(self, spec: SweepSpec) -> tuple[set[MemberId], dict[str, BlockRef]]:
        """Members not to train again, and every trial's newest checkpoint.

        A member is done when a complete checkpoint (its config's planned epochs) covers it, or
        when its trial was stopped early by a scheduler (``stopped_trials`` in ``plan.json``).
        """
        planned_epochs = {config.config_id: config.training.epochs for config, _ in spec.expand()}
        blocks, stored = self.blocks(), self.plan()
        done: set[MemberId] = set()
        for ref in blocks.values():
            epochs = planned_epochs.get(ref.config_id)
            if epochs is not None and ref.epoch >= epochs:
                done.update(MemberId.of(ref.config_id, s, h) for h in ref.hparams for s in ref.seeds)
        stopped = stored.stopped_trials if stored else frozenset()
        for t in stored.trials if stored else ():
            if t.trial_key in stopped:
                done.update(t.member_ids())
        return done, blocks

    def unfinished(self, spec: SweepSpec) -> list[TrialPlan]:
        """The planned trials trained part way: a checkpoint short of their epochs (under
        ``spec``), and not stopped by a scheduler."""
        done, blocks = self.done(spec)
        plan = self.plan()
        trials = plan.trials if plan else ()
        return [t for t in trials if t.trial_key in blocks and not done.issuperset(t.member_ids())]

    # Tune experiments
    def experiments(self) -> list[str]:
        """Names of the Tune experiments of this sweep, oldest first."""
        infos = self.filesystem.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        found = [
            (int(m.group(1)), i.base_name)
            for i in infos
            if i.type == pafs.FileType.Directory and (m := _EXPERIMENT.match(i.base_name))
        ]
        return [name for _, name in sorted(found)]

    def next_experiment(self) -> str:
        """The name of the experiment a new run starts (``tune-NNNN``, one more than the last)."""
        names = self.experiments()
        match = _EXPERIMENT.match(names[-1]) if names else None
        return experiment_name(int(match.group(1)) + 1 if match else 1)

    # samples.parquet, trajectories.parquet
    def samples(self) -> dict[str, pa.Table]:
        """The sample files (test data the store keeps for figures), by file name, read once."""
        if self._samples is None:
            self._samples = read_samples(self.filesystem, self.path)
        return self._samples

    def write_samples(self, datasets: Mapping[str, Dataset]) -> None:
        """Add the test data of ``datasets`` to the sample files; the next :meth:`samples` reads them."""
        write_samples(self.filesystem, self.path, datasets)
        self._samples = None

    # data_scans.json
    def data_scans(self) -> dict[str, Scan]:
        """The driver's passes over the files of the sweep's file-reading problems, by problem id
        (:class:`sweep.problems.Scan`): what a later run takes instead of reading the files again.
        A file or an entry that does not read is left out (that problem's files are read again)."""
        path = f"{self.path}/{DATA_SCANS}"
        if not exists(self.filesystem, path):
            return {}
        try:
            entries = json.loads(read_text(self.filesystem, path))
            if not isinstance(entries, dict):
                raise ValueError(f"a JSON {type(entries).__name__}, not an object")
        except (ValueError, OSError, RecursionError) as e:
            _log.warning("%s/%s does not read (%s); the problems' files are read again", self.shown, DATA_SCANS, e)
            return {}
        scans = {}
        for problem_id, entry in entries.items():
            try:
                scans[problem_id] = Scan.from_dict(entry)
            except (KeyError, TypeError, ValueError):
                pass  # read again, and written anew
        return scans

    def write_data_scans(self, scans: Mapping[str, Scan]) -> None:
        """Add ``scans`` (by problem id) to ``data_scans.json``, atomically; nothing is written
        when it holds them already."""
        kept = {key: scan.to_dict() for key, scan in self.data_scans().items()}
        new = {key: scan.to_dict() for key, scan in scans.items()}
        if all(kept.get(key) == entry for key, entry in new.items()):
            return
        write_text_atomic(self.filesystem, f"{self.path}/{DATA_SCANS}", json.dumps({**kept, **new}, indent=1))

    # resume.json
    def resume_command(self) -> tuple[str, str] | None:
        """``(command, folder)``: the command that resumes this sweep as its last ``sweep run`` ran
        (``sweep run ... --resume``) and the folder it ran in (relative data paths are read from
        there), or None: its last run was a Python call, or the file does not hold such a command
        of this directory. Only a command a shell reads as its own words counts (the
        :func:`shlex.join` of them, printable, naming this directory as ``--storage`` and the
        sweep's name): nothing else a shell would run, or a terminal would show, is returned."""
        path = f"{self.path}/{RESUME}"
        try:
            if not 0 < (self.filesystem.get_file_info(path).size or 0) <= RESUME_BYTES:
                return None
            kept = json.loads(read_text(self.filesystem, path))
            command, folder = kept["command"], kept["folder"]
            if not (isinstance(command, str) and isinstance(folder, str)):
                return None
            words = shlex.split(command)
            storage = words[words.index("--storage") + 1]
        except (ValueError, OSError, StoreError, KeyError, TypeError, IndexError, RecursionError):
            return None  # (not a regular file, not JSON of these keys, not words, no --storage)
        plan = self.plan()
        if not (
            command.isprintable()
            and folder.isprintable()
            and os.path.isabs(folder)
            and words[:2] == ["sweep", "run"]
            and words[-1] == "--resume"
            and shlex.join(words) == command
            and plan is not None
            and self._is(f"{storage.rstrip('/')}/{plan.spec.name}")
        ):
            return None
        return command, folder

    def _is(self, location: str) -> bool:
        """Whether ``location`` (a path or URI) names this directory."""
        if is_local(self.filesystem):
            return "://" not in location and os.path.realpath(location) == os.path.realpath(self.path)
        return location.rstrip("/") == self.shown

    def write_resume_command(self, command: str | None) -> None:
        """Keep ``command`` (:attr:`sweep.RunOptions.resume_command`) and the current folder for
        :meth:`resume_command`; None (a Python call) removes the one kept. A storage that refuses
        either is logged, not raised: the file only helps ``sweep status`` say how to go on."""
        path = f"{self.path}/{RESUME}"
        try:
            if command is not None:
                write_text_atomic(self.filesystem, path, json.dumps({"command": command, "folder": os.getcwd()}))
            elif exists(self.filesystem, path):
                self.filesystem.delete_file(path)
        except OSError as e:
            _log.warning("%s/%s: not %s (%s)", self.shown, RESUME, "written" if command else "removed", e)
