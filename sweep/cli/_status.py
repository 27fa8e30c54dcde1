"""What ``sweep status`` and ``sweep show`` print: sweep progress from files, and text tables.

Status is read from the sweep directory alone (no Ray): ``plan.json`` lists every planned
trial, the newest block checkpoint of each trial says how far it got, Tune's ``error.txt`` in
a trial directory marks a failure, and ``ensembles/manifest.json`` says what is aggregated.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from typing import Any

import pyarrow.fs as pafs

from .._errors import StoreError, SweepError
from .._fs import files_under, filesystem_path, local_path, read_text
from .._import_path import is_import_path
from .._layout import (
    DATA_SCANS,
    DRIVER,
    EXPERIMENT_PREFIX,
    LOCAL_DIR,
    MANIFEST,
    PLAN,
    POINTER,
    STORE_NAME,
    TUNE_ERROR_FILES,
)
from .._words import counted
from ..store import (
    Store,
    SweepDir,
    aggregated_blocks,
    committed_root,
    driver_of,
    generations_dir,
    live_driver,
    made_of,
    read_manifest,
    sweeps_inside,
)

STATES = ("done", "stopped early", "partial", "failed", "pending")  # partial: running now, or interrupted


def _failed_trials(fs: pafs.FileSystem, path: str) -> dict[str, str]:
    """Trial directory name (= trial key) -> its Tune error file, for trials that failed."""
    paths = files_under(fs, path)  # (no link: an error file may not show another file)
    return {
        p.rsplit("/", 2)[-2]: p
        for p in sorted(paths, key=lambda p: p.rsplit("/", 1)[-1] != TUNE_ERROR_FILES[0])
        if p.rsplit("/", 1)[-1] in TUNE_ERROR_FILES and f"/{STORE_NAME}/" not in p and "/." not in p
    }


def _last_line(fs: pafs.FileSystem, path: str, width: int = 80) -> str:
    if not path.endswith(".txt"):
        return ""
    try:
        lines = [x for x in read_text(fs, path).splitlines() if x.strip()]
    except (OSError, UnicodeDecodeError):
        return ""
    return lines[-1].strip()[:width] if lines else ""


def trial_states(sweep_dir: str | SweepDir, filesystem: pafs.FileSystem | None = None) -> dict[str, Any]:
    """Per planned trial: state (one of :data:`STATES`), members, epochs reached / planned; and
    ``local``: whether its trials ran in-process only (``--executor local``); ``where``: the
    :class:`SweepDir`. A :class:`SweepDir` already read (an aggregation's) is asked again, not
    its files."""
    where = sweep_dir if isinstance(sweep_dir, SweepDir) else SweepDir.at(sweep_dir, filesystem)
    sweep_dir = where.shown if isinstance(sweep_dir, SweepDir) else sweep_dir
    fs, path = where.filesystem, where.path
    plan = where.plan()
    if plan is None:
        names = {i.base_name for i in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))}
        if not names and fs.get_file_info(path).type == pafs.FileType.Directory:  # (made by the storage probe)
            raise StoreError(
                f"{sweep_dir!r} is empty (no {PLAN}): not a sweep directory, or one whose run stopped before it "
                f"planned any trial (nothing is trained: run the spec again)"
            )
        if names & {DATA_SCANS, LOCAL_DIR, DRIVER} or any(n.startswith(EXPERIMENT_PREFIX) for n in names):
            raise StoreError(
                f"{sweep_dir!r}: its run stopped before it planned any trial (no {PLAN}); nothing is trained: run "
                f"the spec again"
            )
        raise StoreError(f"{sweep_dir!r}: no {PLAN}; not a sweep directory (made by `sweep run`)")
    blocks = where.blocks()
    failed = _failed_trials(fs, path)
    trials = []
    for t in plan.trials:
        key = t.trial_key
        epochs = t.spec.training.epochs
        ref = blocks.get(key)
        reached = ref.epoch if ref is not None else 0
        if reached >= epochs:
            state = "done"
        elif key in plan.stopped_trials:
            state = "stopped early"
        elif key in failed:
            state = "failed"
        elif ref is not None:  # files cannot tell a trial that runs from one whose sweep was stopped
            state = "partial"
        else:
            state = "pending"
        trials.append(
            {
                "trial_key": key,
                "config_id": t.config_id,
                "state": state,
                "members": t.num_members,
                "epoch": reached,
                "epochs": epochs,
                "error": failed.get(key) if state == "failed" else None,
            }
        )
    factory = any(is_import_path(t.spec.model.name) for t in plan.trials)  # aggregating it runs code it names
    names = {i.base_name for i in fs.get_file_info(pafs.FileSelector(path))}
    in_process = LOCAL_DIR in names and not any(n.startswith(EXPERIMENT_PREFIX) for n in names)
    return {
        "name": plan.spec.name,
        "trials": trials,
        "fs": fs,
        "path": path,
        "factory": factory,
        "local": in_process,
        "where": where,
    }


def _manifest(fs: pafs.FileSystem, path: str) -> dict[str, Any] | None:
    """The committed store's manifest of a sweep directory, or None before the first aggregation
    committed one (none started, or the first one stopped before its commit: the generations
    folder holds no committed generation); a store that is there but cannot be read raises
    :class:`StoreError`."""
    try:
        root = committed_root(fs, path)
    except StoreError:
        store = f"{path}/{STORE_NAME}"
        local = local_path(fs, store)
        linked = local is not None and os.path.islink(local)  # (a link's target may be gone or elsewhere)
        missing = fs.get_file_info(f"{generations_dir(store)}/{POINTER}").type == pafs.FileType.NotFound
        if missing and not linked and fs.get_file_info(store).type == pafs.FileType.NotFound:
            return None  # no generation was ever committed (none written, or the first one stopped)
        raise
    return read_manifest(fs, f"{root}/{MANIFEST}")[0]  # checked as a load checks it


def stored_line(
    sweep_dir: str, filesystem: pafs.FileSystem | None = None, unfinished: bool = False, factory: bool = False
) -> str:
    """``ensembles: N members stored (C configs), M planned members missing``; ``unfinished``: the
    sweep has trials left to train (then the way on is to resume it, not to aggregate);
    ``factory``: its models are built by a factory (aggregating it asks for --trust-code)."""
    fs, path = filesystem_path(sweep_dir, filesystem)
    try:
        manifest = _manifest(fs, path)
    except StoreError as e:
        return f"ensembles: cannot be read ({e})"
    if manifest is None:
        return "ensembles: not aggregated yet" + (
            ""
            if unfinished
            else f" (run `sweep aggregate {shlex.quote(sweep_dir)}{' --trust-code' if factory else ''}`"
            + (", if you trust the model factory it names)" if factory else ")")
        )
    return (
        f"ensembles: {counted(manifest.get('num_members', 0), 'member')} stored "
        f"({counted(manifest.get('num_configs', 0), 'structural config')}), "
        f"{counted(manifest.get('num_missing', 0), 'planned member')} missing"
    )


def sweep_status(sweep_dir: str, filesystem: pafs.FileSystem | None = None) -> str:
    """The text ``sweep status`` prints."""
    where = SweepDir.at(sweep_dir, filesystem)
    driver = driver_of(where)
    driven = driver.running() if driver is not None else False  # None: on another machine, cannot tell
    if driver is not None and driven is not False and where.plan() is None:
        if driven:
            return (
                f"sweep in {sweep_dir}\nrunning now: {driver.described()}; nothing planned yet (it checks the spec "
                f"and the data first): `sweep status {shlex.quote(sweep_dir)}` again in a moment"
            )
        return (
            f"sweep in {sweep_dir}\na run ({driver.described()}) has not said it ended: it runs there (nothing "
            f"planned yet: it checks the spec and the data first), or was killed before it planned any trial (then "
            f"run the spec again)"
        )
    info = trial_states(sweep_dir, filesystem)
    trials = info["trials"]
    counts = Counter(t["state"] for t in trials)
    planned = sum(t["members"] for t in trials)
    trained = sum(t["members"] for t in trials if t["state"] in ("done", "stopped early"))
    lines = [
        f"sweep {info['name']!r} in {sweep_dir}",
        f"trials: {len(trials)} planned: "
        + ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s] or s in ("done", "pending")),
        f"members: {planned} planned, {trained} trained",
    ]
    if driver is not None and driven:
        lines.append(f"running now: {driver.described()}")
    elif driver is not None and driven is None:
        lines.append(f"a run ({driver.described()}) has not said it ended: it runs there, or was killed")
    unfinished = [t for t in trials if t["state"] not in ("done",)]
    running = any(t["state"] != "stopped early" for t in unfinished)
    lines.append(stored_line(sweep_dir, filesystem, unfinished=running or bool(driven), factory=info["factory"]))
    if not running and not driven and _behind(info["where"]):
        trust = " --trust-code" if info["factory"] else ""
        lines.append(
            f"  older than the trials' checkpoints (members stored part way, trained on since): aggregate it "
            f"again: sweep aggregate {shlex.quote(sweep_dir)}{trust}"
        )
    if unfinished:
        lines.append(f"{'trial':<22} {'state':<14} {'members':>7} {'epoch':>11}")
        for t in unfinished[:20]:
            error = _last_line(info["fs"], t["error"]) if t["error"] else ""
            reached = f"{t['epoch']}/{t['epochs']}"
            lines.append(
                f"{t['trial_key']:<22} {t['state']:<14} {t['members']:>7} {reached:>11}"
                + (f"  {error}" if error else "")
            )
        if len(unfinished) > 20:
            lines.append(f"... and {len(unfinished) - 20} more")
    if driven:
        lines.append(f"next: it runs; `sweep status {shlex.quote(sweep_dir)}` again shows how far it is")
    elif running:
        lines.append(
            f"next: resume it with {_resume(sweep_dir, info)}; finished blocks are kept, the rest continue from their checkpoints"
        )
    return "\n".join(lines)


def _behind(where: SweepDir) -> bool:
    """Whether ``where``'s store (one there, readable) holds other members than its complete
    checkpoints: a store of a run that failed, whose trials a later run finished."""
    try:
        store = Store.open(where.path, filesystem=where.filesystem)
    except SweepError:
        return False  # none, or one stored_line says cannot be read
    return not made_of(store, aggregated_blocks(where, only_complete=True))


def _resume(sweep_dir: str, info: dict[str, Any]) -> str:
    """The command its last `sweep run` kept, else one with the spec file to fill in."""
    kept = info["where"].resume_command()
    if kept is not None:
        return f"`{kept[0]}` (its last run, from {kept[1]})"
    storage = sweep_dir.rstrip("/").rpartition("/")[0] or "."
    executor = " --executor local" if info["local"] else ""
    return (
        f"`sweep run SPEC --storage {storage}{executor} --resume` (SPEC: the spec file it was run with, and the same "
        f"--set overrides: a resume whose configurations differ is refused)"
    )


def sweeps_in(storage: str, filesystem: pafs.FileSystem | None = None) -> list[tuple[str, str]]:
    """The sweep directories directly inside ``storage`` (those holding ``plan.json``), each as
    ``(path, what its store holds, and whether a run drives it now)``, by name; empty if there
    are none."""
    fs, path = filesystem_path(storage, filesystem)
    found = []
    for name in sweeps_inside(fs, path):
        shown = f"{storage.rstrip('/')}/{name}"
        driver = live_driver(SweepDir.at(shown, filesystem))
        running = f"; running now ({driver.described()})" if driver is not None else ""
        found.append(
            (shown, stored_line(shown, filesystem, unfinished=bool(running)).removeprefix("ensembles: ") + running)
        )
    return found


def storage_listing(path: str, command: str) -> str | None:
    """What ``sweep <command>`` prints for a storage folder (``--storage``, the parent of sweep
    directories): the sweeps in it and how to ``command`` one; None where it holds none."""
    inside = sweeps_in(path)
    if not inside:
        return None
    lines = [f"{path} is a storage folder holding {len(inside)} sweep(s):", *(f"  {p}  ({s})" for p, s in inside)]
    return "\n".join([*lines, f"one of them: sweep {command} {inside[0][0]}"])
