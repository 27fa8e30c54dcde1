"""A sweep directory forged by its sender (a colleague's runs, a download): its plan, its block
checkpoints and its folders are checked before they are used, so that reading it never runs code
it names, never hangs, never sets aside memory its files do not hold, and a bad file is a
`StoreError` naming the file and the field (test_loop.py: a resume builds nothing a forged
checkpoint names)."""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path

import jax
import numpy as np
import pyarrow.fs as pafs
import pytest
from _blocks import STORE_PLAN, trained_blocks, write_sweep
from helpers import invoke

from sweep import StoreError, aggregate, load
from sweep.training import find_blocks, read_block

PLAN = STORE_PLAN


@pytest.fixture
def sweep_dir(tmp_path) -> Path:
    return write_sweep(tmp_path / "sweep", PLAN, trained_blocks(PLAN))


def _block_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("run/*/checkpoint_*/block.json"))


def _edit_block(directory: Path, **changes) -> None:
    meta = json.loads((directory / "block.json").read_text())
    (directory / "block.json").write_text(json.dumps(meta | changes))


def _within(seconds: float, read) -> BaseException | None:
    """What ``read`` raised (None: nothing) within ``seconds`` (a reader blocked fails the test)."""
    outcome: list[BaseException | None] = []

    def run():
        try:
            read()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001  (the test inspects it)
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the reader blocked"
    return outcome[0]


def _history(meta: dict, **changes) -> dict:
    return {"history": meta["history"] | changes}


@pytest.mark.parametrize(
    ("forge", "field"),
    [
        (lambda m: {"seeds": ["a", None]}, "seeds"),
        (lambda m: {"seeds": [0, 2**40]}, "seeds"),
        (lambda m: {"hparams": [{"learning_rate": "x"}]}, "hparams"),
        (lambda m: {"hparams": [{"learning_rate": 10**400}]}, "hparams"),
        (lambda m: {"format": "3"}, "format"),
        (lambda m: {"shapes": "junk"}, "shapes"),
        (lambda m: {"position": "x"}, "position"),
        (lambda m: _history(m, epoch=[str(e) for e in m["history"]["epoch"]]), "history"),
        (lambda m: _history(m, epoch=[*m["history"]["epoch"], 99]), "history"),
        (lambda m: _history(m, train_loss=[[0.5]]), "history"),
        (lambda m: {"history": {k: v for k, v in m["history"].items() if k != "val"}}, "history"),
    ],
)
def test_a_block_json_of_other_kinds_is_named_and_left_out_of_the_listing(sweep_dir, forge, field):
    forged = _block_dirs(sweep_dir)[0]
    _edit_block(forged, **forge(json.loads((forged / "block.json").read_text())))
    with pytest.raises(StoreError, match=rf"block.json'?: `{field}` is .*; expected .*; not a block checkpoint"):
        read_block(forged)
    listed = find_blocks(str(sweep_dir), pafs.LocalFileSystem())
    assert str(forged) not in {ref.path for ref in listed.values()} and len(listed) == len(PLAN.trials) - 1


def test_a_plan_of_other_kinds_is_named(sweep_dir):
    plan = json.loads((sweep_dir / "plan.json").read_text())
    plan["trials"][0]["seeds"] = ["a"]
    (sweep_dir / "plan.json").write_text(json.dumps(plan))
    result = invoke("status", sweep_dir)
    assert result.exit_code == 1 and "plan.json': not a readable sweep plan (`seeds`: got 'a'" in result.output
    plan["trials"][0]["seeds"], plan["trials"][0]["config_id"] = [0], "000000000000"
    (sweep_dir / "plan.json").write_text(json.dumps(plan))
    assert (
        "`config_id` '000000000000' is not the id this seed-sweep gives its spec" in invoke("status", sweep_dir).output
    )


def test_links_in_a_sweep_directory_lead_nowhere(sweep_dir):
    """Two folders linked to the sweep directory itself (a circle) and one to / : listing the
    checkpoints follows no link, so status and aggregation end, with every real checkpoint."""
    (sweep_dir / "run" / "l1").symlink_to(sweep_dir)
    (sweep_dir / "run" / "l2").symlink_to(sweep_dir)
    (sweep_dir / "run" / "root").symlink_to("/")
    assert _within(60, lambda: invoke("status", sweep_dir)) is None
    assert len(find_blocks(str(sweep_dir), pafs.LocalFileSystem())) == len(PLAN.trials)
    assert _within(120, lambda: aggregate(sweep_dir, progress=False)) is None


def test_a_fifo_in_place_of_a_blocks_state_is_refused(sweep_dir):
    """Opening it to read would wait for a writer forever: the listing passes it over (saying so
    where it aggregates), and a read of that block refuses it."""
    block = _block_dirs(sweep_dir)[0]
    (block / "state.eqx").unlink()
    os.mkfifo(block / "state.eqx")
    error = _within(60, lambda: read_block(block).load())
    assert isinstance(error, StoreError) and "state.eqx' is not a regular file" in str(error)
    with pytest.warns(
        UserWarning, match=r"checkpoint_\d+' passed over: its state.eqx is missing or not a regular file"
    ):
        assert _within(60, lambda: aggregate(sweep_dir, progress=False)) is None
    stored = set(load(sweep_dir).table["trial_id"].to_pylist())  # the others' members: that trial's are missing
    assert read_block(block).trial_key not in stored and len(stored) == len(PLAN.trials) - 1


def test_a_state_whose_headers_claim_more_than_it_holds_sets_nothing_aside(sweep_dir):
    """A block.json whose model is a hundred thousand channels wide, with a state.eqx of headers
    to match and no data: refused by the file's size, before any leaf is set aside."""
    forged = _block_dirs(sweep_dir)[0]
    meta = json.loads((forged / "block.json").read_text())
    meta["spec"]["model"]["hidden_channels"] = 100_000
    (forged / "block.json").write_text(json.dumps(meta))
    headers = io.BytesIO()
    for leaf in jax.tree_util.tree_leaves(read_block(forged).skeleton()):
        descr = np.lib.format.dtype_to_descr(np.dtype(leaf.dtype))
        np.lib.format.write_array_header_1_0(headers, {"descr": descr, "fortran_order": False, "shape": leaf.shape})
    (forged / "state.eqx").write_bytes(headers.getvalue())
    _edit_block(forged, state_bytes=len(headers.getvalue()))  # a forgery that agrees with itself
    error = _within(60, lambda: aggregate(sweep_dir, progress=False))
    assert isinstance(error, StoreError), error
    assert "state.eqx': leaf 0 is float32" in str(error) and "more than the file's" in str(error)
