"""Export (issue 35): a selection's mean/std and rollout as serialised StableHLO run in a fresh
process where neither seed-sweep nor Equinox can be imported, and give the ensemble's numbers;
`sweep verify` checks an export and names a tampered, missing or unlisted file or a link."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from _blocks import datasets_of, trained_blocks
from helpers import invoke, tiny_spec

import sweep
from sweep import QueryError
from sweep.ensemble import Blend
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=3)
PLAN = make_plan(tiny_spec(problem=PROBLEM, seeds=4, seeds_per_trial=4))

# Runs in a fresh interpreter: sweep, equinox (and the user's model code) refuse to import.
LOADER = """
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("sweep", "equinox", "pdequinox"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, Blocked())
import json
from pathlib import Path
import jax, numpy as np
out, x = Path(sys.argv[1]), np.load(sys.argv[2])
manifest = json.loads((out / "manifest.json").read_text())
mean, std = jax.export.deserialize((out / "mean_std.jaxexport").read_bytes()).call(x)
rmean, rstd = jax.export.deserialize((out / "rollout.jaxexport").read_bytes()).call(x)
np.savez(sys.argv[3], mean=mean, std=std, rmean=rmean, rstd=rstd)
try:
    import sweep
except ImportError:
    print("sweep blocked; members", manifest["members"])
"""


def _run_loader(out, x, tmp_path):
    """``mean_std`` and ``rollout`` of the export ``out`` on ``x``, run in a fresh interpreter
    where sweep and equinox cannot be imported."""
    np.save(tmp_path / "x.npy", x)
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(out), str(tmp_path / "x.npy"), str(tmp_path / "got.npz")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sweep blocked" in done.stdout
    return np.load(tmp_path / "got.npz")


def _loads_as(out, ens, x, tmp_path, std_rtol=1e-5):
    """The export ``out``, run with jax alone on ``x``, gives ``ens``'s calibrated mean/std and
    3-step rollout mean/std (float32 rounding)."""
    got = _run_loader(out, x, tmp_path)
    for name, want in zip(
        ("mean", "std", "rmean", "rstd"),
        (*ens.mean_std(x, calibrated=True), *ens.rollout_mean_std(x, 3, calibrated=True)),
        strict=True,
    ):
        np.testing.assert_allclose(got[name], want, rtol=std_rtol if "std" in name else 1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return path


def test_an_export_runs_with_jax_alone_and_gives_the_calibrated_numbers(store, tmp_path):
    sub = sweep.load(store).best(3).recalibrate()
    out = sub.export(tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["members"] == sub.index["member_id"].to_pylist() and manifest["rollout"]["steps"] == 3
    assert manifest["mean_std"]["calibrated"] and manifest["rollout"]["calibrated"]
    assert sub.calibration is not None and manifest["calibration"] == sub.calibration.to_dict()
    _loads_as(out, sub, sub.samples()[0][:5], tmp_path)


def test_the_batch_is_symbolic_and_an_uncalibrated_export_says_so(store, tmp_path):
    import jax

    sub = sweep.load(store).best(2)
    (tmp_path / "plain").mkdir()  # an empty folder is fine
    out = sub.export(tmp_path / "plain", steps=2)
    manifest = json.loads((out / "manifest.json").read_text())
    assert not manifest["mean_std"]["calibrated"] and manifest["calibration"] is None
    program = jax.export.deserialize(bytearray((out / "mean_std.jaxexport").read_bytes()))
    for batch in (1, 7):
        x = np.random.default_rng(batch).normal(size=(batch, *sub.samples()[0].shape[1:])).astype(np.float32)
        mean, std = program.call(x)
        np.testing.assert_allclose(mean, sub.mean_std(x)[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(std, sub.mean_std(x)[1], rtol=1e-5, atol=1e-6)
    rollout = jax.export.deserialize(bytearray((out / "rollout.jaxexport").read_bytes()))
    assert rollout.call(x)[0].shape == (3, 7, *x.shape[1:])
    with pytest.raises(QueryError, match="steps=0"):
        sub.export(tmp_path / "bad", steps=0)


def test_a_history_model_exports_its_rollout_from_h_states(tmp_path):
    """``history=2``: the members take two states stacked as channels; the exported rollout takes
    x0 as ``Ensemble.rollout`` does, ``[batch, 2, *state]``, and gives its mean and std."""
    import jax

    problem = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=4, history=2)
    plan = make_plan(tiny_spec(problem=problem, seeds=3, seeds_per_trial=3))
    aggregate_blocks(tmp_path / "h", trained_blocks(plan), plan=plan, datasets=datasets_of(plan))
    ens = sweep.load(tmp_path / "h")
    out = ens.export(tmp_path / "out", steps=3)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["shape"] == ["batch", 2, 16]  # the members' input: 2 states of 1 channel
    assert manifest["rollout"] | {"calibrated": None} == {
        "steps": 3,
        "returns": ["mean", "std"],
        "shape": ["steps + 1", "batch", 1, 16],
        "input": ["batch", 2, 1, 16],
        "history": 2,
        "calibrated": None,
    }
    x0, _ = ens.rollout_start(ens.one_config("test"), ens.trajectories()[:4])
    rollout = jax.export.deserialize(bytearray((out / "rollout.jaxexport").read_bytes()))
    got, want = rollout.call(x0), ens.rollout_mean_std(x0, 3)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_steps_of_a_model_whose_outputs_do_not_feed_back_are_refused(tmp_path):
    spec = tiny_spec(  # three class scores out of one input
        problem=sweep.Problem("classify:three_levels", num_samples=60),
        model=sweep.Model("MLP", width_size=8, depth=1, out_channels=3),
        training=sweep.Training(epochs=1, batch_size=16, report_every=1, loss="cross_entropy"),
        seeds=2,
        seeds_per_trial=2,
    )
    plan = make_plan(spec)
    aggregate_blocks(tmp_path / "h", trained_blocks(plan), plan=plan)
    ens = sweep.load(tmp_path / "h")
    with pytest.raises(
        QueryError, match=r"export\(steps=3\): the members' outputs \(3, 8\) are not the state \(1, 8\)"
    ):
        ens.export(tmp_path / "out", steps=3)
    assert json.loads((ens.export(tmp_path / "out") / "manifest.json").read_text())["rollout"] is None
    done = invoke("export", str(tmp_path / "h"), "-o", str(tmp_path / "cli"))
    assert done.exit_code == 0 and "mean_std only: the outputs do not feed back, no rollout" in done.output


def test_sweep_export_and_verify_name_a_tampered_or_unlisted_file(store, tmp_path):
    out = tmp_path / "cli"
    done = invoke("export", str(store), "--best", "3", "--recalibrate", "-o", str(out))
    assert done.exit_code == 0, done.output
    assert "exported 3 members" in done.output and "(calibrated)" in done.output
    ok = invoke("verify", str(out))
    assert ok.exit_code == 0 and "ok: export verified" in ok.output
    (out / "notes.txt").write_text("mine")
    (out / "extra.jaxexport").write_bytes((out / "mean_std.jaxexport").read_bytes())
    unlisted = invoke("verify", str(out))
    assert unlisted.exit_code == 1 and "ok:" not in unlisted.output
    for name in ("notes.txt", "extra.jaxexport"):
        assert f"{str(out / name)!r} is not listed in the manifest; the export was altered" in unlisted.stderr
    (out / "notes.txt").unlink()
    (out / "extra.jaxexport").unlink()
    (out / "mean_std.jaxexport").rename(tmp_path / "mean_std.jaxexport")
    (out / "mean_std.jaxexport").symlink_to(tmp_path / "mean_std.jaxexport")  # the same bytes, a link
    assert "mean_std.jaxexport: a symbolic link" in invoke("verify", str(out)).stderr
    (out / "mean_std.jaxexport").unlink()
    (tmp_path / "mean_std.jaxexport").rename(out / "mean_std.jaxexport")
    data = bytearray((out / "rollout.jaxexport").read_bytes())
    data[len(data) // 2] ^= 1
    (out / "rollout.jaxexport").write_bytes(bytes(data))
    bad = invoke("verify", str(out))
    assert bad.exit_code == 1
    assert "rollout.jaxexport: altered" in bad.stderr and "mean_std" not in bad.stderr
    (out / "mean_std.jaxexport").unlink()
    assert "mean_std.jaxexport: listed in the manifest but missing" in invoke("verify", str(out)).stderr


def test_export_refuses_a_folder_that_holds_files_before_any_work(store, tmp_path):
    old = tmp_path / "heat-best8"
    old.mkdir()
    (old / "notes.txt").write_text("mine")
    done = invoke("export", str(store), "--best", "2", "--recalibrate", "-o", str(old))
    assert done.exit_code == 1 and "exported" not in done.output
    assert f"error: --out {str(old)!r}: exists and is not empty (notes.txt);" in done.stderr
    assert "export into a new folder, or remove this one first" in done.stderr
    with pytest.raises(QueryError, match=r"export\(path=.*heat-best8'\): exists and is not empty \(notes.txt\)"):
        sweep.load(store).best(2).export(old)
    assert sorted(p.name for p in old.iterdir()) == ["notes.txt"]


def test_an_export_that_fails_part_way_leaves_nothing_and_can_be_retried(store, tmp_path, monkeypatch):
    import os

    real = os.fsync
    calls = []

    def full_disk(fd):  # the disk fills while the second part is written
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    out = tmp_path / "exp"
    out.mkdir()  # an empty folder the user made: allowed, and kept empty
    with pytest.raises(QueryError, match=r"export\(path=.*exp'\): could not be written \(No space left on device"):
        sweep.load(store).best(2).export(out)
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["exp"]  # nothing half-written
    monkeypatch.setattr(os, "fsync", real)
    sweep.load(store).best(2).export(out)  # the retry is not refused
    assert sweep.ensemble.verify_export(out) == []


def test_verify_names_a_linked_or_malformed_export_manifest(store, tmp_path):
    out = sweep.load(store).best(2).export(tmp_path / "exp")
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").rename(tmp_path / "elsewhere.json")
    (out / "manifest.json").symlink_to(tmp_path / "elsewhere.json")  # the same bytes, a link
    linked = invoke("verify", str(out))
    assert linked.exit_code == 1 and "manifest.json: a symbolic link" in linked.stderr and "ok:" not in linked.output
    (out / "manifest.json").unlink()
    (out / "manifest.json").write_text(json.dumps(manifest | {"parts": list(manifest["parts"])}))
    listed = invoke("verify", str(out))
    assert listed.exit_code == 1 and "Error" not in listed.stderr
    assert "manifest.json: `parts` = [" in listed.stderr and "not an export manifest" in listed.stderr
    (tmp_path / "empty").mkdir()  # neither a store nor an export: both are named
    said = invoke("verify", str(tmp_path / "empty"))
    assert said.exit_code == 1 and "give an export folder (made by `sweep export`)" in " ".join(said.stderr.split())
    broken = tmp_path / "broken"  # a store, corrupt: said so, with no hint of another kind of folder
    shutil.copytree(store.resolve(), broken)
    (broken / "manifest.json").write_text("{not json")
    said = invoke("verify", str(broken))
    assert said.exit_code == 1 and "manifest.json" in said.stderr and "export" not in said.stderr, said.stderr


def test_verify_checks_the_manifests_format_calibration_and_shapes_and_prints_its_sha256(store, tmp_path):
    import hashlib
    import shutil

    out = sweep.load(store).best(3).recalibrate().export(tmp_path / "exp")
    manifest = json.loads((out / "manifest.json").read_text())
    ok = invoke("verify", str(out))
    assert ok.exit_code == 0 and "manifest.json: its format, calibration and shapes" in ok.output
    assert f"manifest sha256: {hashlib.sha256((out / 'manifest.json').read_bytes()).hexdigest()}" in ok.output
    quantiles = [[q * 2 for q in row] for row in manifest["calibration"]["quantiles"]]
    edits = {
        "calibration": (manifest | {"calibration": manifest["calibration"] | {"quantiles": quantiles}}, "altered"),
        "format": (manifest | {"format": 2}, "format 2; this seed-sweep reads 'seed-sweep export' format 1"),
        "input": (
            manifest | {"input": manifest["input"] | {"shape": ["batch", 2, 16]}},
            "the input of mean_std.jaxexport is ['batch', 2, 16], but its program takes ['batch', 1, 16]",
        ),
        "flag": (
            manifest | {"mean_std": manifest["mean_std"] | {"calibrated": False}},
            "`mean_std.calibrated` is False",
        ),
    }
    for name, (edited, said) in edits.items():
        copy = tmp_path / name
        shutil.copytree(out, copy)
        (copy / "manifest.json").write_text(json.dumps(edited))
        bad = invoke("verify", str(copy))
        assert bad.exit_code == 1 and said in bad.stderr and "ok:" not in bad.output, (name, bad.output)
    (tmp_path / "format" / "manifest.json").unlink()  # parts without a manifest: still an export, named as one
    gone = invoke("verify", str(tmp_path / "format"))
    assert gone.exit_code == 1 and "manifest.json: not an export manifest" in gone.stderr and "store" not in gone.stderr
    given = invoke("export", str(out), "-o", str(tmp_path / "again"))  # an export is no store to export from
    assert given.exit_code == 1 and "the manifest of an export (`sweep export`), not of a store" in given.stderr


def test_verify_reports_a_forged_part_and_fields_of_the_wrong_type_one_line_each(store, tmp_path):
    import hashlib
    import shutil

    out = sweep.load(store).best(2).export(tmp_path / "exp")
    manifest = json.loads((out / "manifest.json").read_text())
    junk = b"not a program" * 10
    forged = manifest | {
        "parts": manifest["parts"]
        | {"rollout.jaxexport": {"sha256": hashlib.sha256(junk).hexdigest(), "bytes": len(junk)}}
    }
    edits = {
        "forged": (forged, "rollout.jaxexport: not a program of an export"),
        "input": (manifest | {"input": ["batch", 1, 16]}, "the input of mean_std.jaxexport is None"),
        "flag": (manifest | {"mean_std": "yes"}, "`mean_std.calibrated` is None"),
    }
    for name, (edited, said) in edits.items():
        copy = tmp_path / name
        shutil.copytree(out, copy)
        (copy / "manifest.json").write_text(json.dumps(edited))
        if name == "forged":
            (copy / "rollout.jaxexport").write_bytes(junk)
        bad = invoke("verify", str(copy))
        assert bad.exit_code == 1 and said in bad.stderr, (name, bad.output)
        assert "rerun as `sweep --debug" not in bad.stderr  # a problem named, not an unexpected error


def test_verify_names_a_program_that_is_no_mean_and_std(store, tmp_path):
    import hashlib

    import jax
    import jax.numpy as jnp

    out = sweep.load(store).best(2).export(tmp_path / "exp")
    (batch,) = jax.export.symbolic_shape("batch")
    one = bytes(jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((batch, 1, 16), jnp.float32)).serialize())
    (out / "mean_std.jaxexport").write_bytes(one)  # a program of one output, the manifest made to agree
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["parts"]["mean_std.jaxexport"] = {"sha256": hashlib.sha256(one).hexdigest(), "bytes": len(one)}
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert any(
        "mean_std.jaxexport: not a program of an export (ValueError: 1 inputs and 1 outputs, not x -> (mean, std))"
        in problem
        for problem in sweep.ensemble.verify_export(out)
    )


def test_ctrl_c_while_an_export_moves_into_its_folder_leaves_it_empty(store, tmp_path, monkeypatch):
    import os

    out = tmp_path / "exp"
    out.mkdir()
    real, calls = os.replace, []

    def interrupted(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep.load(store).best(2).export(out)
    assert list(out.iterdir()) == []  # neither the part moved in first nor the hidden folder stays


def test_an_export_into_the_current_empty_folder_is_written_there(store, tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    sweep.load(store).best(2).export(".")
    assert sorted(p.name for p in here.iterdir()) == ["manifest.json", "mean_std.jaxexport", "rollout.jaxexport"]
    assert sweep.ensemble.verify_export(here) == [] and os.getcwd() == str(here)


def test_an_export_may_not_lie_inside_a_store_or_another_export(store, tmp_path):
    sub = sweep.load(store).best(3)
    out = sub.export(tmp_path / "exp")
    for inside in (store / "myexport", out / "nested"):  # a store's files, or an export's, are all listed
        with pytest.raises(QueryError, match=r"lies inside .*, a seed-sweep store or export, whose checks would find"):
            sub.export(inside)
    assert sweep.store.Store.open(store).verify() is None


def test_a_saved_calibration_exports_with_its_members_in_any_order(store, tmp_path):
    fitted = sweep.load(store).best(3).recalibrate()
    path = fitted.calibration.save(tmp_path / "cal.json")
    ids = fitted.index["member_id"].to_pylist()
    done = invoke(
        "export",
        str(store),
        "--where",
        f"member_id={ids[2]}",
        "--where",
        f"member_id={ids[0]}",
        "--where",
        f"member_id={ids[1]}",
        "--calibration",
        str(path),
        "-o",
        str(tmp_path / "exp"),
    )
    assert done.exit_code == 0, done.output
    assert "(calibrated)" in done.output
    steps = invoke("export", str(store), "--best", "3", "--recalibrate", "--steps", "5", "-o", str(tmp_path / "long"))
    assert (
        steps.exit_code == 0 and "its rollout is not: the calibration has 3 rollout steps, the export 5" in steps.output
    )
    other = invoke("export", str(store), "--best", "2", "--calibration", str(path), "-o", str(tmp_path / "two"))
    assert other.exit_code == 1 and "--calibration: it was fitted on members" in other.stderr
    assert "or --recalibrate this selection" in other.stderr


MIXED = make_plan(tiny_spec(problem=PROBLEM, seeds=2, seeds_per_trial=2, grid={"model.depth": [1, 2]}))


def test_a_calibrated_blend_of_two_architectures_exports_with_its_weights(tmp_path):
    path = tmp_path / "ensembles"
    aggregate_blocks(path, trained_blocks(MIXED), plan=MIXED, datasets=datasets_of(MIXED))
    ens = sweep.load(path)
    blend = Blend.of(ens, [2, 1, 1, 0]).recalibrate()  # a repeated member: weights 1/2, 1/4, 1/4
    assert len(blend.parts) == 2  # store order: depth a seeds 0, 1, then depth b seeds 0, 1
    out = blend.export(tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["weights"] == blend.weights.tolist() and manifest["config_id"].count("+") == len(blend.parts) - 1
    assert manifest["grid"] == {"depth": blend.index["depth"].to_pylist()}  # what tells the members apart
    assert len(set(manifest["grid"]["depth"])) == 2
    x = ens.where(config_id=ens.index["config_id"][0].as_py()).samples()[0][:4]
    _loads_as(out, blend, x, tmp_path, std_rtol=1e-4)
