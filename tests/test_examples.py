"""Every example runs with --smoke as a user would (a subprocess), and does what it says.

The quickstart (``examples/sweep_depth_lr.py``, the README's first command) runs in the slow run,
as the README runs it (its own local Ray, ~30 s): what it does is in the default run piece by
piece (a grid sweep on Tune and its store: tests/test_tune.py; plan, summary, best, plot:
tests/test_cli.py; the quickstart's output is checked here whole)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, cwd: Path = ROOT, timeout: int = 300) -> str:
    env = {**os.environ, "RAY_ADDRESS": "local"}  # a fresh local Ray, never one found on this machine
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--smoke", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, f"{name} failed:\n{out.stdout[-3000:]}\n{out.stderr[-4000:]}"
    return out.stdout + out.stderr  # what the user sees


def _is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _table(stdout: str, header: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == header.split()[:2])
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip() or not line.split()[0].replace(".", "").isdigit():
            break
        rows.append(line)
    return rows


def test_heat_seed_parallel(tmp_path):
    stdout = run_example("heat_seed_parallel.py", "--out", str(tmp_path))
    assert "stacked ensemble: first weight (10, " in stdout
    assert "seed 4 from the block == seed 4 trained alone: True" in stdout  # bit-identical on CPU
    assert "ensemble of seeds 4 and 6: first weight (2, " in stdout
    for name in ("loss_curves.png", "ensemble_predictions.png", "seed_4_and_6.png"):
        assert _is_png(tmp_path / name), name


def _assert_quickstart_output(stdout: str, storage: Path) -> None:
    sweep_dir = storage / "heat-depth-lr-smoke"
    assert f"sweep directory: {sweep_dir}" in stdout
    assert "2 trials, 16 members, 2 structural configs" in stdout  # the plan, printed first
    rows = _table(stdout, "depth lr seeds val mean")
    assert len(rows) == 4
    means = [float(r.split()[3]) for r in rows]
    assert means == sorted(means)  # best validation mean first
    assert "best configuration (on validation): depth=" in stdout and "P(depth " in stdout
    assert _is_png(sweep_dir / "sweep.png")
    for tune_says in ("Trial name", "Logical resource usage", "Current best trial", "View detailed results"):
        assert tune_says not in stdout, stdout[-3000:]  # Tune's own output stays off the screen

    from sweep import load

    ens = load(sweep_dir)
    assert len(ens) == 16 and set(ens.table.column("status").to_pylist()) == {"ok"}


@pytest.mark.slow
def test_sweep_depth_lr_quickstart(tmp_path):
    storage = tmp_path / "runs"
    _assert_quickstart_output(run_example("sweep_depth_lr.py", "--storage", str(storage)), storage)


def test_the_quickstart_refuses_a_figure_name_before_training(monkeypatch, capsys):
    import importlib.util

    import sweep

    spec = importlib.util.spec_from_file_location("quickstart", EXAMPLES / "sweep_depth_lr.py")
    assert spec is not None and spec.loader is not None
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    monkeypatch.setattr(sweep, "run", lambda *a, **k: pytest.fail("trained before refusing --out"))
    with pytest.raises(SystemExit) as e:
        quickstart.main(["--smoke", "--out", "figures"])
    assert e.value.code == 2
    assert "--out: got 'figures'; give a file name ending in .png, .pdf or .svg" in capsys.readouterr().err


@pytest.mark.slow
def test_custom_model_and_data_in_process_and_on_ray_workers(tmp_path):
    """The user's factory resolves from any working directory in-process, Ray workers import it
    (the driver's import path, passed on by the local Ray), and both train exactly the same members (bit-identical on CPU)."""
    header = "hidden lr val loss"
    in_process = run_example("custom_model_and_data.py", "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert "model my_models:shift_net" in in_process
    assert len(_table(in_process, header)) == 4
    assert _is_png(tmp_path / "a" / "predictions.png")
    with np.load(tmp_path / "a" / "shift.npz") as data:
        np.testing.assert_array_equal(np.roll(data["test_x"], 3, axis=-1), data["test_y"])

    on_ray = run_example("custom_model_and_data.py", "--ray", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert _table(on_ray, header) == _table(in_process, header)
    assert _is_png(tmp_path / "b" / "sweep.png") and _is_png(tmp_path / "b" / "predictions.png")


GALLERY = ROOT / "docs" / "guides" / "examples.md"


def _scripts() -> list[Path]:
    """The runnable examples: every script with a ``__main__`` block (``my_models.py`` is a module)."""
    return sorted(p for p in EXAMPLES.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_every_example_says_what_it_shows_has_a_smoke_run_and_a_gallery_entry():
    import ast

    scripts = _scripts()
    assert {p.name for p in scripts} == {"heat_seed_parallel.py", "sweep_depth_lr.py", "custom_model_and_data.py"}
    gallery = GALLERY.read_text()
    tested = Path(__file__).read_text()
    for script in scripts:
        doc = ast.get_docstring(ast.parse(script.read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, f"{script.name}: no summary line at the top"
        assert '"--smoke"' in script.read_text(), f"{script.name}: no --smoke option"
        assert f'run_example("{script.name}"' in tested, f"{script.name}: not run by a test"
        assert f"## `{script.name}`" in gallery, f"{script.name}: not on the Examples page"
    for figure in re.findall(r"!\[[^\]]*\]\(\.\./([^)]+\.png)\)", gallery):
        assert _is_png(ROOT / "docs" / figure), figure
