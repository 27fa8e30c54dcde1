"""The documentation site: generated reference pages in step with the code, every public name in
the API reference, the store format page against a real store, runnable guide snippets and
docstring examples, and pages written for users (no outside documents, no machine paths)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import json
import re
import textwrap
from pathlib import Path

import pytest
from _blocks import datasets_of, trained_blocks
from helpers import tiny_spec

import sweep
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "_generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    return re.findall(r":\s+([\w/-]+\.md)\s*$", text, re.M)


@pytest.mark.parametrize("page", sorted(GENERATE.PAGES))
def test_generated_reference_page_matches_the_code(page):
    committed = (DOCS / page).read_text()
    assert committed == GENERATE.PAGES[page](), f"docs/{page} is stale: run `python docs/_generate.py`"


def test_every_public_name_of_sweep_is_in_the_api_reference():
    api = (DOCS / "reference" / "api.md").read_text()
    documented = set(re.findall(r"^::: sweep\.(\w+)$", api, re.M))
    assert set(sweep.__all__) - documented == set()
    assert documented - set(sweep.__all__) == set()  # nothing documented as public that is not


def test_every_spec_field_is_on_the_spec_page():
    page = (DOCS / "reference" / "spec.md").read_text()
    for cls, prefix in ((sweep.SweepSpec, ""), (sweep.Training, "training.")):
        for field in cls.__dataclass_fields__:
            assert f"| `{prefix}{field}` |" in page, field


def test_every_command_is_on_the_cli_page():
    page = (DOCS / "reference" / "cli.md").read_text()
    names = GENERATE.command_names()
    assert {"run", "plan", "status", "aggregate", "verify", "show", "plot", "predict"} <= set(names)
    for name in names:
        assert f"## `sweep {name}`" in page and f"Usage: sweep {name} " in page


def test_the_store_format_page_describes_a_real_store(tmp_path):
    """A store made by the aggregator: every file it holds, every key of its manifest and every
    column of its tables is on the page (grid columns by their placeholder)."""
    plan = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))
    store = tmp_path / "ensembles"
    aggregate_blocks(store, trained_blocks(plan), plan=plan, datasets=datasets_of(plan))
    page = (DOCS / "reference" / "store-format.md").read_text()
    manifest = json.loads((store / "manifest.json").read_text())
    assert set(manifest) == set(GENERATE.MANIFEST_KEYS) - {"race"}  # a race's store only (tests/test_race_run.py)
    for key in manifest:
        assert f"| `{key}` |" in page
    files = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    for name in files:
        pattern = re.sub(r"[0-9a-f]{12}", "<config_id>", re.sub(r"shard-\d{5}", "shard-NNNNN", name))
        assert f"`{pattern}`" in page or f"## `{pattern}`" in page, name
    import pyarrow.parquet as pq

    grid = {c["name"] for c in manifest["columns"]}
    for table in ("members.parquet", "configs.parquet", "samples.parquet"):
        for column in pq.read_schema(store / table).names:
            shown = "<grid column>" if column in grid else column
            assert f"| `{shown}` |" in page, (table, column)


def test_no_page_or_docstring_cites_a_document_outside_the_repository():
    cited = re.compile(r"SPEC §|shared/SPEC|SPEC\.md|/work/")
    texts = [ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "examples").glob("*")]
    texts += [p for folder in ("sweep", "tests", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    this = Path(__file__).resolve()
    offenders = [str(p.relative_to(ROOT)) for p in texts if p != this and p.is_file() and cited.search(p.read_text())]
    assert offenders == []


def test_pages_are_written_for_users():
    """No first person, no issue numbers, no paths of the machine the output was recorded on."""
    personal = re.compile(r"\bI (?:rendered|looked|measured|ran|tried)\b|\bissue \d+|/tmp/evalchk|/tmp/ux/")
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    offenders = [(str(p.relative_to(ROOT)), m.group(0)) for p in pages for m in personal.finditer(p.read_text())]
    assert offenders == []


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = _nav_pages()
    # guides that other parts of the project add at merge time are listed in the nav by then
    assert sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")) == sorted(set(nav))


def test_the_readme_keeps_the_quickstart_commands_that_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e . && python examples/sweep_depth_lr.py --smoke\n" in readme
    assert 'pip install -e ".[test]" && python -m pytest -q\n' in readme
    assert 'pip install -e ".[test]" && python -m pytest -q' in (ROOT / ".ci" / "run").read_text()
    assert len(readme.splitlines()) <= 240  # the front door; the usage text lives in docs/


@pytest.mark.parametrize(
    ("page", "start"),
    [
        ("README.md", "draws this overview:"),
        ("docs/getting-started.md", "**The figure** `sweep.png`"),
        ("docs/guides/figures.md", "| `overview` |"),
    ],
)
def test_the_overview_is_described_with_its_row_of_ensemble_scores(page, start):
    """Where a page says what the overview (`sweep.png`) holds, it names the panels of its row of
    ensemble scores too, by their titles in the figure."""
    text = (ROOT / page).read_text()
    said = " ".join(text[text.index(start) :].split("\n\n")[0].split("\n- ")[0].split("\n|")[0].split())
    for panel in ("coverage", "rank histogram", "spread vs error", "CRPS vs ensemble size"):
        assert panel in said, (page, panel)


def test_images_of_every_page_exist():
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text()):
            assert (page.parent / target).is_file(), (str(page.relative_to(ROOT)), target)


def _snippets(page: Path) -> list[str]:
    return re.findall(r"<!-- test -->\n```python\n(.*?)```", page.read_text(), re.S)


def test_the_guide_snippets_marked_as_tested_run():
    pages = [p for p in DOCS.rglob("*.md") if _snippets(p)]
    assert pages, "no guide has a tested snippet"
    for page in pages:
        namespace: dict = {}
        for code in _snippets(page):  # one namespace per page: its snippets build on each other
            exec(compile(code, str(page), "exec"), namespace)


SELF_CONTAINED = [  # public functions on arrays whose docstring example needs nothing else
    "sweep.training.equal_parts",
    "sweep.training.pieces",
    "sweep.training.padded",
    "sweep.training.in_parts",
    "sweep.ensemble.describe",
    "sweep.ensemble.compare",
    "sweep.ensemble.fit_scale",
    "sweep.ensemble.conformal_quantiles",
    "sweep.problems.channel_statistics",
    "sweep.models.batched_forward",
]


@pytest.mark.parametrize("name", SELF_CONTAINED)
def test_the_docstring_example_of_a_function_on_arrays_runs(name):
    module, _, attr = name.rpartition(".")
    doc = getattr(importlib.import_module(module), attr).__doc__
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert blocks, f"{name} has no example"
    for code in blocks:
        exec(compile(textwrap.dedent(code), name, "exec"), {})


DOCTESTED = [
    "sweep.spec._parts",
    "sweep.spec._sweep",
    "sweep.spec._training",
    "sweep.spec._search",
    "sweep.spec._space",
    "sweep.problems._dataset",
]


@pytest.mark.parametrize("module", DOCTESTED)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_field_or_column_without_a_description_stops_the_generator():
    """A new spec field or store column is documented before the pages can be generated."""
    import dataclasses

    import pyarrow as pa

    @dataclasses.dataclass(frozen=True)
    class Part:
        """A part.

        Attributes:
            epochs: How long.
        """

        epochs: int = 1
        patience: int = 3

    with pytest.raises(GENERATE.Undocumented, match=r"Part: fields without an Attributes: entry.*'patience'"):
        GENERATE.field_table(Part)
    schema = pa.schema([("config_id", pa.string()), ("new_column", pa.int64())])
    with pytest.raises(GENERATE.Undocumented, match=r"configs.parquet: columns without a description.*new_column"):
        GENERATE._schema_table(schema, GENERATE.CONFIG_COLUMNS, "configs.parquet")
