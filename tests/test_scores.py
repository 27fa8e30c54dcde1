"""Ensemble scores: known answers of the formulas (calibrated, overconfident and identical members),
CRPS against scoringrules and a NumPy reference, member chunks that change nothing and blocks of
points that change only the float32 rounding of the members' outputs (a forward compiled for
another batch), the stored table verified like every store file, and clear refusals (no samples, class labels)."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import scoringrules as sr
from _blocks import datasets_of, trained_blocks, write_sweep
from helpers import invoke, tiny_spec
from scipy import stats

import sweep
from sweep import QueryError, StoreError
from sweep.ensemble import _scoring
from sweep.ensemble._scores import block_sums, finish
from sweep.ensemble._stored_scores import store_scores
from sweep.planning import make_plan
from sweep.store import Store, aggregate_blocks

PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=5)
# blocks of 2 seeds: the programs of _blocks.TRAJ (the same problem and structures); a member is the
# same bit for bit in any block, so the stored members are those of blocks of 6
PLAN = make_plan(tiny_spec(problem=PROBLEM, seeds=6, seeds_per_trial=2, grid={"model.depth": [1, 2]}))
FLOATS = ("crps", "crps_ensemble", "mae", "rmse", "spread", "spread_skill", "coverage_50", "coverage_90")


@pytest.fixture(scope="module")
def blocks():
    return trained_blocks(PLAN)


@pytest.fixture(scope="module")
def path(tmp_path_factory, blocks):
    path = tmp_path_factory.mktemp("scores") / "ensembles"
    aggregate_blocks(path, blocks, plan=PLAN, datasets=datasets_of(PLAN), scores=store_scores)
    return path


def scores_of(values: np.ndarray, truth: np.ndarray) -> dict:
    """The scores of ``values`` ``[M, P]`` against ``truth`` ``[P]`` through the compiled block program."""
    sums, histogram = block_sums(values[:, None], truth[None], np.ones(truth.shape[-1], np.float32))
    return {k: v[0] for k, v in finish(sums, histogram, len(values)).items()}


def reference(values: np.ndarray, truth: np.ndarray) -> dict:
    """Every score in NumPy from all members at once (float64; CRPS from all pairs)."""
    m = len(values)
    x, y = values.reshape(m, -1).astype(np.float64), truth.reshape(-1).astype(np.float64)
    mean = x.mean(0)
    pairs = np.abs(x[:, None] - x[None]).sum((0, 1)) / 2
    rmse = np.sqrt(np.mean((mean - y) ** 2))
    spread = np.sqrt((m + 1) / m * x.var(0, ddof=1).mean())
    inside = {
        f"coverage_{int(round(100 * (high - low)))}": np.mean(
            (np.quantile(x, low, axis=0) <= y) & (y <= np.quantile(x, high, axis=0))
        )
        for low, high in ((0.25, 0.75), (0.05, 0.95))
    }
    return {
        "crps": np.mean(np.abs(x - y).mean(0) - pairs / (m * (m - 1))),
        "crps_ensemble": np.mean(np.abs(x - y).mean(0) - pairs / m**2),
        "mae": np.mean(np.abs(mean - y)),
        "rmse": rmse,
        "spread": spread,
        "spread_skill": spread / rmse,
        **inside,
        "rank_histogram": np.bincount((x < y).sum(0), minlength=m + 1).tolist(),
        "points": y.size,
    }


def assert_scores_match(row: dict, want: dict, rtol: float = 1e-9) -> None:
    for c in FLOATS:
        assert row[c] == pytest.approx(want[c], rel=rtol, abs=1e-12), c
    assert row["rank_histogram"] == want["rank_histogram"] and row["points"] == want["points"]


# -- the formulas ------------------------------------------------------------------------------------
def test_members_drawn_from_the_true_distribution_are_calibrated():
    rng = np.random.default_rng(0)
    m, p = 39, 40_000
    centre, scale = rng.normal(size=p), rng.uniform(0.5, 2.0, size=p)
    members = (centre + scale * rng.normal(size=(m, p))).astype(np.float32)
    truth = (centre + scale * rng.normal(size=p)).astype(np.float32)
    s = scores_of(members, truth)
    assert s["spread_skill"] == pytest.approx(1.0, abs=0.02)
    for name, nominal in (("coverage_50", 0.5), ("coverage_90", 0.9)):
        expected = nominal * (m - 1) / (m + 1)  # the truth is one more exchangeable draw among m members
        assert abs(s[name] - expected) < 4 * math.sqrt(expected * (1 - expected) / p), name
        assert abs(s[name] - nominal) < 0.05, name
    assert stats.chisquare(s["rank_histogram"]).pvalue > 1e-3  # flat
    assert s["rank_histogram"].sum() == p


def test_too_narrow_members_are_overconfident():
    rng = np.random.default_rng(1)
    m, p = 20, 20_000
    members = (0.5 * rng.normal(size=(m, p))).astype(np.float32)
    truth = rng.normal(size=p).astype(np.float32)
    s = scores_of(members, truth)
    assert s["spread_skill"] == pytest.approx(0.5, abs=0.03)
    assert s["coverage_90"] < 0.7 and s["coverage_50"] < 0.35
    h = s["rank_histogram"]
    assert h[0] > 3 * h[m // 2] and h[-1] > 3 * h[m // 2]  # U-shaped: the truth falls outside


def test_identical_members_have_no_spread_and_crps_equals_mae():
    rng = np.random.default_rng(2)
    one = rng.normal(size=500).astype(np.float32)
    truth = rng.normal(size=500).astype(np.float32)
    s = scores_of(np.repeat(one[None], 8, axis=0), truth)
    assert s["spread"] == 0 and s["spread_skill"] == 0
    assert s["crps"] == pytest.approx(s["mae"], rel=1e-12) and s["crps_ensemble"] == pytest.approx(s["mae"], rel=1e-12)
    assert s["mae"] == pytest.approx(np.mean(np.abs(one.astype(np.float64) - truth)), rel=1e-12)


def test_crps_equals_scoringrules_and_the_pairwise_numpy_reference():
    rng = np.random.default_rng(3)
    for m in (2, 7, 64):
        members, truth = rng.gamma(2.0, size=(m, 300)).astype(np.float32), rng.gamma(2.0, size=300).astype(np.float32)
        s = scores_of(members, truth)
        y, x = truth.astype(np.float64), members.astype(np.float64)
        assert s["crps"] == pytest.approx(np.mean(sr.crps_ensemble(y, x, m_axis=0, estimator="fair")), rel=1e-10)
        assert s["crps_ensemble"] == pytest.approx(
            np.mean(sr.crps_ensemble(y, x, m_axis=0, estimator="nrg")), rel=1e-10
        )
        assert_scores_match({**s, "rank_histogram": s["rank_histogram"].tolist()}, reference(members, truth))


def test_points_of_weight_zero_change_nothing():
    rng = np.random.default_rng(4)
    members, truth = rng.normal(size=(5, 40)).astype(np.float32), rng.normal(size=40).astype(np.float32)
    weights = (np.arange(40) < 25).astype(np.float32)
    sums, histogram = block_sums(members[:, None], truth[None], weights)
    padded = {k: v[0] for k, v in finish(sums, histogram, 5).items()}
    whole = scores_of(members[:, :25], truth[:25])
    for c in (*FLOATS, "points"):
        assert padded[c] == pytest.approx(whole[c], rel=1e-12), c
    np.testing.assert_array_equal(padded["rank_histogram"], whole["rank_histogram"])


def test_sorting_inside_the_program_equals_sorting_on_the_host():
    import jax

    from sweep.ensemble._scores import _programs

    rng = np.random.default_rng(5)
    members, truth = rng.normal(size=(9, 3, 50)).astype(np.float32), rng.normal(size=(3, 50)).astype(np.float32)
    weights = np.ones(50, np.float32)
    program = _programs(())[0]
    with jax.enable_x64(True):  # the accelerators' path (sort in the program) and the CPU's (NumPy first)
        inside = program(np.moveaxis(members, 0, -1), truth, weights, False)
        host = program(np.sort(np.moveaxis(members, 0, -1), axis=-1), truth, weights, True)
    for name in inside[0]:
        np.testing.assert_array_equal(np.asarray(inside[0][name]), np.asarray(host[0][name]), err_msg=name)
    np.testing.assert_array_equal(np.asarray(inside[1]), np.asarray(host[1]))


# -- an ensemble of a store ----------------------------------------------------------------------------
def test_scores_equal_numpy_over_all_members_at_once(path):
    ens = sweep.load(path).where(depth=2)
    x, y = ens.samples()
    table = ens.scores("test")
    one_step = table.filter(pc.equal(table["kind"], "one_step")).to_pylist()
    assert len(one_step) == 1 and one_step[0]["members"] == 6
    assert_scores_match(one_step[0], reference(ens.predict(x), y), rtol=1e-6)
    members = ens.predict(x).astype(np.float64)
    mse_of_mean = np.mean((members.mean(0) - y) ** 2)
    assert one_step[0]["loss_ensemble"] == pytest.approx(mse_of_mean, rel=1e-5)  # the loss is mse
    assert one_step[0]["loss_members"] == pytest.approx(np.mean((members - y) ** 2), rel=1e-5)
    assert one_step[0]["loss_gain"] == pytest.approx(one_step[0]["loss_members"] / mse_of_mean)
    traj = ens.trajectories()
    rolled = ens.rollout(traj[:, 0], traj.shape[1] - 1)  # [M, T + 1, B, ...]
    steps = table.filter(pc.equal(table["kind"], "rollout")).to_pylist()
    assert [r["step"] for r in steps] == list(range(1, traj.shape[1]))
    for r in steps:
        assert_scores_match(r, reference(rolled[:, r["step"]], traj[:, r["step"]]), rtol=1e-6)
    gmean = table.filter(pc.equal(table["kind"], "rollout_gmean")).to_pylist()[0]
    assert gmean["crps"] == pytest.approx(math.exp(np.mean(np.log([r["crps"] for r in steps]))))


def test_member_chunks_and_blocks_of_points_change_no_score(path, monkeypatch):
    ens = sweep.load(path).where(depth=1)
    tables = {c: ens.scores("test", chunk_size=c) for c in (1, 3, 64)}
    monkeypatch.setattr(_scoring, "BLOCK_BYTES", 1)  # one sample, one trajectory per block (padded)
    tables["blocks of one"] = sweep.load(path).where(depth=1).scores("test", chunk_size=3)
    first = tables[1].to_pylist()
    for name, table in tables.items():
        rows = table.to_pylist()
        assert len(rows) == len(first), name
        for a, b in zip(rows, first, strict=True):
            assert a["rank_histogram"] == b["rank_histogram"] and a["points"] == b["points"], name
            for c in FLOATS:  # blocks of one: the forward compiled for one sample rounds its float32 otherwise
                assert a[c] == pytest.approx(b[c], rel=1e-6 if name == "blocks of one" else 1e-12), (name, c)


def test_ensemble_size_curve_ends_at_every_member(path):
    table = sweep.load(path).where(depth=2).stored_scores("test")
    curve = table.filter(pc.equal(table["kind"], "ensemble_size")).to_pylist()
    assert [r["members"] for r in curve] == [2, 4, 6]
    whole = table.filter(pc.equal(table["kind"], "one_step")).to_pylist()[0]
    assert curve[-1]["crps"] == whole["crps"] and curve[-1]["spread_skill"] == whole["spread_skill"]
    ens = sweep.load(path).where(depth=2)
    x, y = ens.samples()
    members = ens.predict(x)
    pairs = _scoring._subsets(6, 2)  # 8 of the 15 pairs: the 3 disjoint ones, then those of fixed shuffles
    assert (
        len(pairs) == 8
        and len({tuple(p) for p in pairs}) == 8
        and [p.tolist() for p in pairs[:3]] == [[0, 1], [2, 3], [4, 5]]
    )
    scored = [reference(members[p], y) for p in pairs]
    assert curve[0]["crps"] == pytest.approx(np.mean([p["crps"] for p in scored]), rel=1e-6)
    # where a size has at most 8 subsets, every one: the fair CRPS averaged over all pairs of 4 members
    # is theirs, exactly (2 disjoint pairs of 4 would scatter around it)
    four = ens.best(4).scores("test")
    by_kind = {(r["kind"], r["members"]): r for r in four.to_pylist() if r["step"] == 0}
    assert by_kind[("ensemble_size", 2)]["crps"] == pytest.approx(by_kind[("one_step", 4)]["crps"], rel=1e-6)


def test_the_aggregation_stores_scores_of_every_configuration_and_split(path):
    ens = sweep.load(path)
    stored = ens.stored_scores()
    assert sorted(set(stored["split"].to_pylist())) == ["test", "val"]
    keys = {(r["config_id"], r["depth"]) for r in stored.to_pylist()}
    assert keys == {(r["config_id"], r["depth"]) for r in ens.summary().to_pylist()}
    assert set(ens.where(depth=1).stored_scores()["depth"].to_pylist()) == {1}
    fresh = ens.where(depth=1).scores("val")
    again = ens.where(depth=1).stored_scores("val")
    assert fresh.select(again.column_names).to_pylist() == again.to_pylist()  # then query-time columns
    summary = ens.summary(scores=True)
    one = again.filter(pc.equal(again["kind"], "one_step")).to_pylist()[0]
    row = next(r for r in summary.to_pylist() if r["depth"] == 1)
    assert row["val_crps"] == one["crps"] and row["val_loss_gain"] == one["loss_gain"]
    assert "test_spread_skill" in summary.column_names


def test_a_selection_of_some_members_of_a_configuration_has_its_own_scores_not_the_stored_ones(path):
    """The stored scores are of every member of a configuration: a selection holding only some of
    them is not shown those as its own (not beside its summary; `sweep scores` computes its own)."""
    from sweep.ensemble import whole_configurations

    ens = sweep.load(path)
    stored = ens.stored_scores()
    assert whole_configurations(ens, stored).to_pylist() == stored.to_pylist()
    kept = whole_configurations(ens.where(depth=1), stored)
    assert (
        set(kept["depth"].to_pylist()) == {1} and kept.num_rows == stored.filter(pc.equal(stored["depth"], 1)).num_rows
    )
    some = ens.where(depth=1).best(3)
    assert whole_configurations(some, some.stored_scores()).num_rows == 0
    assert {r["val_crps"] for r in some.summary(scores=True).to_pylist()} == {None}  # nulls, the columns kept
    with pytest.raises(QueryError, match=r"whole_configurations\(\): a Blend weights its members"):
        whole_configurations(ens.select_greedy(2), stored)
    said = invoke("scores", path, "--where", "seed=0")
    assert said.exit_code == 0 and "computed now (the store's are of every member of a configuration" in said.output
    rows = json.loads(invoke("scores", path, "--where", "seed=0", "--format", "json").output)
    assert {r["members"] for r in rows} == {1} and len(rows) == len(ens.summary().to_pylist())
    shown = invoke("show", path, "--scores", "--where", "seed=0")
    assert "none are shown for a configuration the selection holds only some members of" in " ".join(
        shown.output.split()
    )


def test_the_scores_table_is_checksummed_and_tampering_is_caught(path, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(path.parent, copy, symlinks=True)
    store = Store.open(copy / "ensembles")
    assert "ensemble_scores.parquet" in store.manifest["files"]
    store.verify()
    target = f"{store.root}/ensemble_scores.parquet"
    data = bytearray(open(target, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(target, "wb").write(bytes(data))
    with pytest.raises(StoreError, match="ensemble_scores.parquet"):
        sweep.load(copy / "ensembles").stored_scores()
    with pytest.raises(StoreError, match="ensemble_scores.parquet"):
        Store.open(copy / "ensembles").verify()


def test_a_store_without_scores_or_samples_says_so(tmp_path, blocks):
    aggregate_blocks(tmp_path / "plain", blocks, plan=PLAN)  # no datasets, no scores: as older stores
    ens = sweep.load(tmp_path / "plain")
    assert ens.summary().num_rows == 2
    with pytest.raises(QueryError, match=r"holds no ensemble scores .*run `sweep aggregate` again"):
        ens.stored_scores()
    with pytest.raises(QueryError, match="holds no ensemble scores"):
        ens.summary(scores=True)
    with pytest.raises(QueryError, match=r"holds no test samples .*nothing is regenerated"):
        ens.where(depth=1).scores("test")
    aggregate_blocks(tmp_path / "hooked", blocks, plan=PLAN, scores=store_scores)
    assert "ensemble_scores.parquet" not in Store.open(tmp_path / "hooked").manifest["files"]  # nothing to score
    with pytest.raises(QueryError, match=r'scores\(split=\'train\'\): choose "val" or "test"'):
        ens.scores("train")


def test_sweep_aggregate_writes_the_scores_of_a_sweep_directory(tmp_path, blocks):
    root = write_sweep(tmp_path / "sweep", PLAN, blocks)
    store = Store.open(sweep.aggregate(root, progress=False))
    record = store.manifest["files"]["ensemble_scores.parquet"]
    assert len(record["sha256"]) == 64
    store.verify()
    again = Store.open(sweep.aggregate(root, progress=False)).manifest["files"]["ensemble_scores.parquet"]
    assert again["sha256"] == record["sha256"]  # the same members score to the same bytes
    assert store.ensemble_scores().num_rows == sweep.load(root).stored_scores().num_rows > 0


def test_a_store_whose_models_a_factory_builds_keeps_no_scores_and_says_how_to_compute_them(tmp_path, blocks):
    """An aggregation not told to trust a factory runs no prediction of a model the store names by
    import path, so it scores no member the factory builds (one told to, as `sweep.run` of one's
    own spec and `sweep aggregate --trust-code` are, does: test_new_user.py):
    one warning, and ``sweep scores`` says how to compute them, not a header over no rows."""
    marker = tmp_path / "the-factory-ran"
    factory = [
        b._replace(
            spec=b.spec.__class__.from_dict(
                b.spec.to_dict()
                | {"model": {"name": "_trap:touch", "marker": str(marker), "depth": b.spec.model.depth}}
            )
        )
        for b in blocks
    ]
    with pytest.warns(UserWarning, match=r"ensemble scores of 2 configs left out: their models are built by factories"):
        aggregate_blocks(tmp_path / "s", factory, datasets=datasets_of(PLAN), scores=store_scores)
    shown = invoke("scores", str(tmp_path / "s"))
    assert shown.exit_code == 1, shown.output
    assert " ".join(shown.stderr.split()) == (
        "error: no stored ensemble scores (one_step, val and test) of these 12 members: their models are built by "
        "_trap:touch, code the store names, whose predictions an aggregation runs only when trusted; where that "
        "code is installed and trusted, store them with `sweep aggregate DIR --trust-code`, or compute them now "
        "with --fields --trust-code (in Python: Ensemble.scores() on sweep.load(path, trust_code=True))"
    )
    assert not marker.exists()


def test_class_labels_are_refused_with_a_clear_error(tmp_path):
    spec = tiny_spec(
        problem=sweep.Problem("classify:three_levels", num_samples=60),
        model=sweep.Model("MLP", width_size=8, depth=1, out_channels=3),
        training=sweep.Training(epochs=1, batch_size=16, report_every=1, loss="cross_entropy"),
        seeds=2,
        seeds_per_trial=2,
        grid={"model.depth": [1, 2]},
    )
    plan = make_plan(spec)
    with pytest.warns(UserWarning, match="ensemble scores of .* left out: .*class labels") as warned:
        aggregate_blocks(
            tmp_path / "s", trained_blocks(plan), plan=plan, datasets=datasets_of(plan), scores=store_scores
        )
    # one warning for the reason the configurations share, not one per configuration and split
    (left_out,) = [w for w in warned if "ensemble scores" in str(w.message)]
    configs = ", ".join(t.config_id for t in plan.trials)
    assert f"of 2 configs ({configs}) on val, test left out: " in str(left_out.message), left_out.message
    assert "scores: each config cannot be scored: it is trained with 'cross_entropy'" in str(left_out.message)
    assert left_out.filename == __file__  # shown at the caller's line, not at one of seed-sweep's
    shown = invoke("scores", str(tmp_path / "s"))  # none stored: said, not a header over no rows
    assert shown.exit_code == 1 and " ".join(shown.stderr.split()).startswith(
        "error: no stored ensemble scores (one_step, val and test) of these 4 members: 2 configs "
        f"({', '.join(sorted(t.config_id for t in plan.trials))}) not scored: class labels, which ensemble scores do "
        "not take"
    ), shown.stderr
    ens = sweep.load(tmp_path / "s")
    assert ens.stored_scores().num_rows == 0
    with pytest.raises(QueryError, match=r"cross_entropy' on class labels.*real-valued"):
        ens.scores()


def test_seeds_needed_follows_the_bootstrap_interval(path):
    ens = sweep.load(path)
    summary = {r["depth"]: r for r in ens.summary().to_pylist()}
    now = {r["depth"]: r for r in ens.seeds_needed(width=0.1).to_pylist()}
    for depth, row in now.items():
        relative = (summary[depth]["mean_ci_high"] - summary[depth]["mean_ci_low"]) / summary[depth]["mean"]
        assert row["relative_width"] == pytest.approx(relative) and row["n"] == 6
        at = ens.seeds_needed(width=relative * (1 + 1e-9)).to_pylist()
        assert next(r for r in at if r["depth"] == depth)["seeds_needed"] == 6  # the seeds trained suffice
        half = ens.seeds_needed(width=relative / 2).to_pylist()
        assert next(r for r in half if r["depth"] == depth)["seeds_needed"] == 24  # half the width: 4x seeds
    for bad in (0, -1, "wide", math.inf):
        with pytest.raises(QueryError, match=r"seeds_needed\(width="):
            ens.seeds_needed(width=bad)
    with pytest.raises(QueryError, match=r"^seeds_needed\(metric='val_los'\): .*did you mean 'val_loss'"):
        ens.seeds_needed("val_los")  # named as the call made, not as summary()


def test_cli_prints_the_stored_scores_and_the_seeds_needed(path):
    stored = sweep.load(path).stored_scores("test")
    one = stored.filter(pc.equal(stored["kind"], "one_step")).to_pylist()
    out = invoke("scores", path, "--split", "test")
    assert out.exit_code == 0, out.output
    assert "ensemble scores (one_step, test)" in out.output and "spread_skill" in out.output
    assert all(f"{r['crps']:.4g}" in out.output for r in one)
    # configurations best first by mean val loss, as sweep show ranks them
    assert "configurations best first by mean val loss" in " ".join(out.output.split())
    ids = [line.split()[0] for line in out.output.splitlines() if line.split()[:1] and len(line.split()[0]) == 12]
    ranked = sweep.load(path).summary().table["config_id"].to_pylist()
    assert list(dict.fromkeys(ids)) == [c for c in ranked if c in ids], (ids, ranked)
    header = next(line.split() for line in out.output.splitlines() if line.split()[:1] == ["config_id"])
    assert "kind" not in header and "step" not in header  # said by the title; a one-step score has no step
    header = next(line.split() for line in invoke("scores", path, "--kind", "rollout").output.splitlines()[1:2])
    assert "kind" not in header and "step" in header
    assert {"kind", "step"} <= set(invoke("scores", path, "--kind", "all").output.splitlines()[1].split())
    rows = json.loads(invoke("scores", path, "--kind", "rollout", "--format", "json", "--limit", "200").output)
    assert {r["kind"] for r in rows} == {"rollout"} and len(rows) == 2 * 2 * 5  # configs x splits x steps
    shown = invoke("show", path, "--scores")
    assert shown.exit_code == 0 and "test_crps" in shown.output and "test_loss_gain" in shown.output
    best = sweep.load(path).seeds_needed().to_pylist()[0]["seeds_needed"]
    assert f"as wide as 10% of it: {best} (6 trained" in shown.output
    bad = invoke("scores", path, "--kind", "rollouts")  # a usage error, as for every option of fixed choices
    said = " ".join(bad.stderr.replace("│", " ").split())
    assert bad.exit_code == 2 and "'--kind': got 'rollouts'; choose one of one_step, rollout," in said
    assert "(did you mean 'rollout'?)" in said
    bad = invoke("scores", path, "--split", "train")  # named as the flag, not as a Python call
    assert bad.exit_code == 2 and "Invalid value for '--split': got 'train'; choose one of val, test" in bad.stderr


def test_score_figures_draw_the_stored_scores_and_say_when_there_are_none(path, tmp_path, blocks):
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    figs = sweep.plot(path, ["calibration", "spread_skill", "ensemble_size"])
    coverage, ranks = figs["calibration"].axes
    stored = sweep.load(path).stored_scores("val")  # configurations are compared on validation
    one = {r["depth"]: r for r in stored.filter(pc.equal(stored["kind"], "one_step")).to_pylist()}
    best = sweep.load(path).best_configuration()["depth"]
    drawn = {line.get_label(): line.get_ydata() for line in coverage.get_lines()}
    for depth, row in one.items():
        np.testing.assert_allclose(drawn[f"depth={depth}"], [row["coverage_50"], row["coverage_90"]])
    heights = [p.get_height() for p in ranks.patches]
    counts = np.asarray(one[best]["rank_histogram"], float)
    np.testing.assert_allclose(heights, counts / counts.mean())  # 7 ranks: one bar each, flat = 1
    centres = [p.get_x() + p.get_width() / 2 for p in ranks.patches if isinstance(p, Rectangle)]
    np.testing.assert_allclose(centres, np.arange(7))  # each bar on its rank, not between two
    assert ranks.get_xlim() == (-0.5, 6.5) and list(ranks.get_xticks()) == list(range(7))
    spread_error, per_step = figs["spread_skill"].axes
    rollout = stored.filter(pc.equal(stored["kind"], "rollout"))
    line = next(ln for ln in spread_error.get_lines() if ln.get_label() == f"depth={best}")
    mine = rollout.filter(pc.equal(rollout["depth"], best))
    np.testing.assert_allclose(line.get_xdata(), mine["rmse"].to_numpy())
    np.testing.assert_allclose(line.get_ydata(), mine["spread"].to_numpy())
    assert per_step.get_xlabel() == "rollout step"
    crps_axis, _ = figs["ensemble_size"].axes
    assert [int(t) for t in crps_axis.get_xticks()] == [2, 4, 6]
    styles = ["CRPS of the ensemble", "fair CRPS (many members)"]  # solid and dashed lines, in black
    legend = crps_axis.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == [
        f"depth={best}",
        f"depth={3 - best}",
        *styles,
    ]
    overview = sweep.plot(path)
    assert isinstance(overview, Figure) and len(overview.axes) > 4 and "calibration" in sweep.plot(path, "all")
    crps_panel = next(ax for ax in overview.axes if ax.get_title().startswith("CRPS vs ensemble size"))
    legend = crps_panel.get_legend()  # the configurations are named in the coverage panel's legend
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == styles
    aggregate_blocks(tmp_path / "plain", blocks, plan=PLAN)  # no scores
    assert "calibration" not in sweep.plot(tmp_path / "plain", "all")
    with pytest.raises(QueryError, match=r"plot\(kind='calibration'\): the store holds no ensemble scores"):
        sweep.plot(tmp_path / "plain", "calibration")


def test_score_figures_of_a_selection_draw_its_own_scores(path):
    """A selection of fewer members than the store scored: the figures compute its scores, not the
    stored ones of every member."""
    ens = sweep.load(path)
    best = ens.best_configuration()["depth"]
    chosen = ens.where(depth=best).best(3)
    fig = sweep.plot(chosen, "calibration")
    coverage, ranks = fig.axes
    mine = chosen.scores("val")
    row = mine.filter(pc.equal(mine["kind"], "one_step")).to_pylist()[0]
    assert row["members"] == 3
    drawn = {line.get_label(): line.get_ydata() for line in coverage.get_lines()}
    np.testing.assert_allclose(drawn[f"depth={best}"], [row["coverage_50"], row["coverage_90"]])
    assert "expected of 3 members" in drawn and len(ranks.patches) == 4  # ranks 0..3


@pytest.mark.parametrize("seeds", [1, 2])
def test_ensemble_size_panels_of_one_size_or_none_say_so(tmp_path, seeds):
    """Two members: one size, each line a single point, the fair CRPS marked so that it shows;
    one member: no ensemble sizes, and the panel says why instead of staying empty."""
    plan = make_plan(tiny_spec(problem=PROBLEM, seeds=seeds, seeds_per_trial=seeds))
    blocks = trained_blocks(plan)
    aggregate_blocks(tmp_path / "ensembles", blocks, plan=plan, datasets=datasets_of(plan), scores=store_scores)
    crps = next(ax for ax in sweep.plot(tmp_path / "ensembles").axes if ax.get_title().startswith("CRPS vs ensemble"))
    if seeds == 2:
        lines = crps.get_lines()
        assert [len(line.get_xdata()) for line in lines] == [1, 1]
        assert [(line.get_linestyle(), line.get_marker()) for line in lines] == [("-", "o"), ("--", "x")]
    else:
        assert crps.texts and crps.texts[0].get_text() == "No ensemble sizes: one member each"


def test_pooled_rank_histogram_bars_centre_on_their_ranks_and_tile_them():
    """Past MAX_BINS ranks, a bar pools neighbouring ranks: it spans them (half a rank either side)
    with whole-number ticks, so the bars tile -0.5..M+0.5 and each centres on its ranks' mean."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from sweep.figures._scores import MAX_BINS, draw_ranks

    counts = np.arange(33.0) + 1  # 32 members: ranks 0..32
    table = pa.table({"split": ["val"], "kind": ["one_step"], "depth": [2], "rank_histogram": [counts.tolist()]})
    ax = Figure().add_subplot()
    draw_ranks(ax, table, [{"depth": 2}])
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    left, right = (np.array([p.get_x() for p in bars]), np.array([p.get_x() + p.get_width() for p in bars]))
    assert len(bars) == MAX_BINS and left[0] == -0.5 and right[-1] == 32.5
    np.testing.assert_allclose(left[1:], right[:-1])  # no gap, no overlap
    edges = np.linspace(0, 33, MAX_BINS + 1).round().astype(int)  # 33 ranks in 20 near-equal bars
    first, last = edges[:-1], edges[1:] - 1  # the ranks each bar pools
    np.testing.assert_allclose((left + right) / 2, (first + last) / 2)
    np.testing.assert_allclose(
        [p.get_height() for p in bars], [counts[a : b + 1].mean() / counts.mean() for a, b in zip(first, last)]
    )
    assert ax.get_xlim() == (-0.5, 32.5)
    ticks = [t for t in ax.get_xticks() if -0.5 <= t <= 32.5]
    assert ticks == [round(t) for t in ticks] and ticks[0] == 0 and ticks[-1] >= 30


# -- multivariate and event scores (query time) --------------------------------------------------------
def field_reference(values: np.ndarray, truth: np.ndarray, thresholds: tuple[float, ...]) -> dict:
    """The field and event columns of ``values`` ``[M, N, ...]`` against ``truth`` ``[N, ...]``:
    scoringrules' energy, variogram and threshold-weighted CRPS (fair estimators where it has
    them), the Brier score and the fair CRPS's terms from all pairs in NumPy."""
    m, n = values.shape[:2]
    x, y = values.astype(np.float64), truth.astype(np.float64)
    obs, fct = y.reshape(n, -1), np.moveaxis(x, 0, 1).reshape(n, m, -1)
    out = {
        "crps_skill": np.abs(x - y).mean(),
        "crps_spread": (np.abs(x[:, None] - x[None]).sum((0, 1)) / (2 * m * (m - 1))).mean(),
        "energy_score": np.mean(sr.es_ensemble(obs, fct, m_axis=-2, v_axis=-1, estimator="fair")),
        "variogram_score": np.mean(sr.vs_ensemble(obs, fct, m_axis=-2, v_axis=-1, p=0.5)),
    }
    for t in thresholds:
        out[f"twcrps_{t!r}"] = np.mean(sr.twcrps_ensemble(y, np.moveaxis(x, 0, -1), a=t, estimator="fair"))
        out[f"brier_{t!r}"] = np.mean(sr.brier_score((y > t).astype(float), (x > t).mean(0)))
    return out


def test_field_and_threshold_scores_equal_scoringrules_per_step_and_in_blocks_of_one(path, monkeypatch):
    ens = sweep.load(path).where(depth=2)
    x, y = ens.samples()
    thresholds = (float(np.quantile(y, 0.5)), float(np.quantile(y, 0.9)))
    table = ens.scores("test", thresholds=thresholds, fields=True)
    rows = table.to_pylist()
    one_step = next(r for r in rows if r["kind"] == "one_step")
    want = field_reference(ens.predict(x), y, thresholds)
    assert set(want) <= set(table.column_names)
    for c, v in want.items():
        assert one_step[c] == pytest.approx(v, rel=1e-6, abs=1e-12), c
    assert one_step["crps_skill"] - one_step["crps_spread"] == pytest.approx(one_step["crps"], rel=1e-9)
    traj = ens.trajectories()
    rolled = ens.rollout(traj[:, 0], traj.shape[1] - 1)
    steps = [r for r in rows if r["kind"] == "rollout"]
    for r in steps:
        for c, v in field_reference(rolled[:, r["step"]], traj[:, r["step"]], thresholds).items():
            assert r[c] == pytest.approx(v, rel=1e-5, abs=1e-9), (r["step"], c)
    gmean = next(r for r in rows if r["kind"] == "rollout_gmean")
    energies = [r["energy_score"] for r in steps]
    assert gmean["energy_score"] == pytest.approx(math.exp(np.mean(np.log(energies))))
    curve = [r for r in rows if r["kind"] == "ensemble_size"]
    assert all(r["energy_score"] is None for r in curve[:-1]) and curve[-1]["energy_score"] == one_step["energy_score"]
    monkeypatch.setattr(_scoring, "BLOCK_BYTES", 1)  # one sample, one trajectory per block (padded)
    again = sweep.load(path).where(depth=2).scores("test", thresholds=thresholds, fields=True).to_pylist()
    for a, b in zip(again, rows, strict=True):
        for c in want:
            assert a[c] == pytest.approx(b[c], rel=1e-6, abs=1e-12) if b[c] is not None else a[c] is None, c


def test_field_scores_can_be_left_out_and_the_stored_table_keeps_its_columns(path):
    ens = sweep.load(path).where(depth=1)
    table = ens.scores("val", fields=False)
    assert {"crps_skill", "crps_spread"} <= set(table.column_names)
    assert not {"energy_score", "variogram_score"} & set(table.column_names)
    assert not any(c.startswith(("twcrps_", "brier_")) for c in table.column_names)
    stored = ens.stored_scores("val")
    assert stored.column_names == table.column_names[: stored.num_columns]  # the stored table: no new columns
    assert "crps_skill" not in stored.column_names


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"thresholds": ["high"]}, "thresholds=['high']"),
        ({"thresholds": [1.0, 1]}, "distinct"),
        ({"thresholds": float("inf")}, "finite"),
        ({"fields": "yes"}, "fields='yes'"),
    ],
)
def test_bad_thresholds_and_fields_are_named(path, kwargs, named):
    with pytest.raises(QueryError, match=re.escape(named)):
        sweep.load(path).where(depth=1).scores("test", **kwargs)


def test_cli_computes_field_and_threshold_scores_on_request(path):
    args = ("scores", path, "--where", "depth=2", "--threshold", 0.5, "--threshold", -0.25)
    rows = json.loads(invoke(*args, "--format", "json").output)
    table = sweep.load(path).where(depth=2).scores("test", thresholds=[0.5, -0.25], fields=True)
    want = table.filter(pc.equal(table["kind"], "one_step")).to_pylist()
    assert len(rows) == len(want) == 1
    for c in ("energy_score", "variogram_score", "crps_skill", "crps_spread", "twcrps_0.5", "brier_-0.25"):
        assert rows[0][c] == pytest.approx(want[0][c], rel=1e-12), c
    out = invoke(*args)
    assert out.exit_code == 0, out.output
    assert "(one_step, test) of 6 members, computed now" in out.output
    assert all(c in out.output for c in ("energy_score", "crps_spread", "twcrps_0.5", "brier_-0.25"))
    fields = invoke("scores", path, "--where", "depth=2", "--fields", "--split", "val", "--kind", "rollout")
    assert fields.exit_code == 0 and "variogram_score" in fields.output and "brier_" not in fields.output
    bad = invoke("scores", path, "--where", "depth=2", "--recalibrate", "--threshold", 1)
    assert bad.exit_code == 1 and "--fields and --threshold go without --recalibrate" in bad.output


def test_the_seeds_line_says_so_when_the_best_configurations_seeds_agree_exactly(path, monkeypatch):
    """Seeds of equal values (classes all right on every seed) give an interval of width 0: no
    count of seeds follows from it ("2 (2 trained give 0%)" read as a contradiction)."""
    import pyarrow as pa

    real = sweep.ensemble.Ensemble.seeds_needed

    def agreeing(self, *args, **kwargs):
        table = real(self, *args, **kwargs)
        return table.set_column(
            table.schema.get_field_index("relative_width"), "relative_width", pa.array([0.0] * len(table))
        )

    monkeypatch.setattr(sweep.ensemble.Ensemble, "seeds_needed", agreeing)
    last = invoke("show", path).output.strip().splitlines()[-1]
    assert (
        last
        == "seeds needed: unknown; the best configuration's 6 seeds reached the same val_loss (an interval of width 0): more seeds tell whether others do"
    )
