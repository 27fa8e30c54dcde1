"""Training splits larger than the data budget (``Training(data_memory=...)``): streamed in
windows, bit-identical whatever the block, resumed exactly, data that fit trained as always,
budgets too small refused before work."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from helpers import (
    assert_failed_once_then_resumed_equals_uninterrupted,
    assert_killed_inside_an_epoch_then_resumed_equals_uninterrupted,
    assert_same_member,
    machine_of,
    tiny_spec,
    tree_allclose,
)
from pyarrow.fs import LocalFileSystem

import sweep
from sweep import training
from sweep.tune import MemberLogger

# 42 training pairs of 128 bytes (5.25 KiB) beside 2.25 KiB of validation and test pairs: 6000
# bytes hold two windows of 14 pairs, so an epoch is three windows
STREAMED = sweep.Training(epochs=2, batch_size=8, report_every=1, data_memory=6000)
LOCAL = sweep.RunOptions(executor="local", progress="off")


@pytest.fixture(scope="module")
def spec():
    return tiny_spec(training=STREAMED)


@pytest.fixture(scope="module")
def data(spec):
    return training.load_data(spec)


@pytest.fixture(scope="module")
def alone(spec, data):
    return sweep.train(spec, 5, data=data)


def test_a_split_larger_than_the_budget_streams_in_windows_that_cover_it_every_epoch(spec, data):
    block, _ = training.init_block(spec, [5], data=data)
    assert block.stream is not None
    plan = block.stream.plan
    assert (plan.num_shards, plan.num_windows, plan.window_bytes) == (42, 3, 14 * 128)
    assert 2 * plan.window_bytes + plan.eval_bytes <= 6000  # two windows at a time beside val and test
    assert block.data.train.size == 0  # the training split is not on the device
    orders = [np.concatenate(plan.order(0, epoch)) for epoch in (0, 1)]
    for order in orders:
        assert sorted(order) == list(range(42))  # every shard once per epoch
    assert not np.array_equal(orders[0], orders[1])  # a new order every epoch


@pytest.mark.parametrize("seeds", [[5, 6], [0, 5, 7]])
def test_streamed_members_are_bit_identical_whatever_the_block(spec, data, alone, seeds):
    model, history = sweep.train_block(spec, seeds, data=data)
    assert_same_member(model, history, seeds.index(5), *alone)


# 4000 bytes hold two windows of 6 pairs beside validation and test: 7 windows an epoch, each a
# single minibatch of 4 (its other 2 pairs left over)
ONE_BATCH = dataclasses.replace(STREAMED, epochs=3, batch_size=4, data_memory=4000)


@pytest.fixture(scope="module")
def one_batch(data):
    spec = tiny_spec(training=ONE_BATCH)
    return spec, sweep.train(spec, 5, data=data)


@pytest.mark.parametrize("seeds", [[5, 6], [0, 5, 7]])
def test_windows_of_a_single_minibatch_are_bit_identical_whatever_the_block(data, one_batch, seeds):
    # one member per device (alone, [5, 6]) against two ([0, 5, 7]): XLA inlines a loop of one
    # trip, and a lone minibatch's optimizer update was compiled apart from its loop
    spec, alone = one_batch
    block, _ = training.init_block(spec, seeds, data=data)
    assert block.stream is not None and block.stream.plan.num_windows == 7
    assert block.stream.plan.window_bytes == 6 * 128
    model, history = sweep.train_block(spec, seeds, data=data)
    assert_same_member(model, history, seeds.index(5), *alone)


def test_a_budget_larger_than_the_data_trains_exactly_as_in_memory(data):
    in_memory = tiny_spec(training=dataclasses.replace(STREAMED, data_memory=None))
    roomy = tiny_spec(training=dataclasses.replace(STREAMED, data_memory="1MiB"))
    block, _ = training.init_block(roomy, [5], data=data)
    assert block.stream is None
    model, history = sweep.train(roomy, 5, data=data)
    assert_same_member(*_stacked(sweep.train(in_memory, 5, data=data)), 0, model, history)


def test_streaming_trains_and_differs_from_the_in_memory_shuffle(spec, data, alone):
    model, history = alone
    assert history.train_loss[0, -1] < history.train_loss[0, 0]
    memory_model, _ = sweep.train(tiny_spec(training=dataclasses.replace(STREAMED, data_memory=None)), 5, data=data)
    assert not tree_allclose(model, memory_model, exact=True)


def test_resume_from_a_checkpoint_equals_uninterrupted(tmp_path, spec, data):
    from sweep.training import load_block, save_block

    block, state = training.init_block(spec, [1, 5], data=data)
    state, history = next(sweep.fit(block, state))  # one epoch, then "crash"
    save_block(tmp_path / "b", spec=spec, state=state, history=history, shapes=training.data_shapes(data))
    saved = load_block(tmp_path / "b")
    resumed, resumed_history = list(sweep.fit(block, saved.state, saved.history))[-1]
    model, uninterrupted = sweep.train_block(spec, [1, 5], data=data)
    assert tree_allclose(training.model_of(block, resumed), model, exact=True)
    for field in ("epoch", "train_loss", "test_loss", "val_loss"):
        np.testing.assert_array_equal(getattr(resumed_history, field), getattr(uninterrupted, field))


def test_a_run_failed_after_its_first_epoch_and_resumed_equals_an_uninterrupted_run(spec, tmp_path):
    assert_failed_once_then_resumed_equals_uninterrupted(spec, tmp_path)


class PauseAt:
    """A ``pause`` for :func:`sweep.fit` that says yes at its ``n``-th question (and its ``then``-th)."""

    def __init__(self, n: int, then: int = 0):
        self.asked, self.at = 0, (n, then)

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked in self.at


def _paused(block, state, pause):
    """The first ``(state, history)`` that :func:`sweep.fit` yields paused inside an epoch."""
    return next((s, h) for s, h in sweep.fit(block, state, pause=pause) if h.paused)


def _assert_same_block(state, history, other_state, other_history):
    assert tree_allclose(state.params, other_state.params, exact=True)
    assert tree_allclose(state.opt_state, other_state.opt_state, exact=True)
    np.testing.assert_array_equal(state.epoch, other_state.epoch)
    for field in ("epoch", "train_loss", "diverged"):
        np.testing.assert_array_equal(getattr(history, field), getattr(other_history, field))
    for split in ("val", "test"):
        assert getattr(history, split).keys() == getattr(other_history, split).keys()
        for name, curve in getattr(history, split).items():
            np.testing.assert_array_equal(curve, getattr(other_history, split)[name])
    assert history.position is None and other_history.position is None


def test_a_block_streamed_on_the_machines_default_budget_never_pauses_inside_an_epoch(spec, data, monkeypatch):
    # a machine of 6 pages of 4 KiB: a quarter of it (the default budget) streams the split; another
    # machine could cut the epoch into other windows, so such a block checkpoints at epoch ends only
    machine_of(monkeypatch, 6 * 4096)
    default = dataclasses.replace(spec, training=dataclasses.replace(spec.training, data_memory=None))
    block, state = training.init_block(default, [5], data=data)
    assert block.stream is not None and block.stream.plan.budget == 6144 and block.stream.plan.num_windows > 1
    yielded = list(sweep.fit(block, state, pause=lambda: True))
    assert [h.paused for _, h in yielded] == [False] * default.training.epochs  # asked never: one yield per report


GiB = 2**30


@pytest.mark.parametrize(
    ("cgroup", "memory"),
    [
        # no control groups (another OS, or none mounted): the machine's memory
        ({}, 64 * GiB),
        # cgroup v2 inside a container's namespace: its limit at the mount's root
        ({"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 * GiB),
        # no limit set ("max")
        ({"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max\n"}, 64 * GiB),
        # a Slurm job's step under systemd (v2): the job's limit, above the step's own group
        (
            {
                "/proc/self/cgroup": "0::/system.slice/slurmstepd.scope/job_7/step_0\n",
                "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/memory.max": str(3 * GiB),
                "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.max": "max",
            },
            3 * GiB,
        ),
        # cgroup v1 in Docker: the group's path is the host's, its limit at the memory hierarchy's root
        (
            {
                "/proc/self/cgroup": "5:cpu,cpuacct:/docker/ab12\n4:memory:/docker/ab12\n0::/\n",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes": str(5 * GiB),
            },
            5 * GiB,
        ),
        # v1 without a limit: the largest page-aligned number
        (
            {"/proc/self/cgroup": "4:memory:/\n", "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"},
            64 * GiB,
        ),
        # a line that is no "id:controllers:path" is passed over
        ({"/proc/self/cgroup": "\nodd\n0::/\n", "/sys/fs/cgroup/memory.max": str(GiB)}, GiB),
    ],
    ids=["none", "v2-container", "v2-max", "v2-slurm", "v1-docker", "v1-unlimited", "odd-line"],
)
def test_the_default_budget_is_a_quarter_of_the_machines_memory_or_of_its_control_groups_limit(
    monkeypatch, cgroup, memory
):
    machine_of(monkeypatch, 64 * GiB, cgroup)
    assert training.data_budget(sweep.Training()) == memory // 4
    assert training.data_budget(sweep.Training(data_memory="1GiB")) == GiB  # a budget given is the budget


@pytest.mark.parametrize("seeds", [[5], [0, 5, 7]])
def test_a_block_saved_inside_an_epoch_and_resumed_equals_uninterrupted(tmp_path, spec, data, alone, seeds):
    from sweep.training import find_blocks, load_block, save_block

    block, state = training.init_block(spec, seeds, data=data)
    # asked after windows 0 and 1 of epoch 0 (each its own chunk), then after window 0 of epoch 1
    paused, history = _paused(block, state, PauseAt(3))
    at = history.position
    assert at is not None and (at.epoch, at.window, at.steps) == (1, 1, 1)
    assert list(history.epoch) == [1] and int(paused.epoch[0]) == 1  # no report added; epoch 1 in progress
    assert at.loss_sums.dtype == np.float64 and at.loss_sums.shape == (len(seeds),)
    shapes = training.data_shapes(data)
    for name, position in (("report", None), ("paused", at)):  # of one trial: at the report of epoch 1, and after
        save_block(
            tmp_path / name,
            spec=spec,
            state=paused,
            history=history._replace(position=position),
            shapes=shapes,
            trial_id="t",
        )
    saved = load_block(tmp_path / "paused")
    loaded = saved.history.position
    assert loaded is not None and loaded._replace(loss_sums=None) == at._replace(loss_sums=None)
    np.testing.assert_array_equal(loaded.loss_sums, at.loss_sums)  # exact
    refs = find_blocks(str(tmp_path), LocalFileSystem())
    assert refs["t"].progress == (1, 1) and refs["t"].path.endswith("paused")  # the newest of the trial
    reported = find_blocks(str(tmp_path), LocalFileSystem(), reported=True)  # what a store aggregates
    assert reported["t"].progress == (1, 0) and reported["t"].path.endswith("report")

    block, _ = training.init_block(spec, seeds, data=data)  # a new process: nothing kept
    resumed, resumed_history = list(sweep.fit(block, saved.state, saved.history))[-1]
    uninterrupted, uninterrupted_history = list(sweep.fit(block, state))[-1]
    _assert_same_block(resumed, resumed_history, uninterrupted, uninterrupted_history)
    assert_same_member(training.model_of(block, resumed), resumed_history, seeds.index(5), *alone)  # whatever the block


def test_a_chunk_of_two_epochs_paused_inside_and_between_them_goes_on_as_uninterrupted(data):
    spec = tiny_spec(training=dataclasses.replace(STREAMED, report_every=2))  # one chunk: 6 windows, asked 5 times
    block, state = training.init_block(spec, [1, 5], data=data)
    trained = list(sweep.fit(block, state, pause=PauseAt(2, 3)))  # after window 1, then after window 2 (epoch 0's end)
    assert [h.position and h.position[:2] for _, h in trained] == [(0, 2), (1, 0), None]
    assert [list(h.epoch) for _, h in trained] == [[], [], [2]]
    _assert_same_block(*trained[-1], *list(sweep.fit(block, state))[-1])
    between = trained[1]  # epoch 1 reached, no report yet (the chunk is of 2): resumed, it goes on
    _assert_same_block(*trained[-1], *list(sweep.fit(block, *between))[-1])


def test_a_checkpoint_at_a_report_is_written_as_before_and_resumes_to_a_pause_and_on(tmp_path, spec, data):
    import json

    from sweep.training import load_block, save_block

    block, state = training.init_block(spec, [1, 5], data=data)
    reported, history = next(sweep.fit(block, state))
    save_block(tmp_path / "b", spec=spec, state=reported, history=history, shapes=training.data_shapes(data))
    meta = json.loads((tmp_path / "b" / "block.json").read_text())
    assert meta["format"] == 2 and "position" not in meta  # what seed-sweep always wrote: old checkpoints read as it
    saved = load_block(tmp_path / "b")
    assert saved.history.position is None
    trained = list(sweep.fit(block, saved.state, saved.history, pause=PauseAt(2)))  # after window 1 of epoch 1
    assert [h.paused for _, h in trained] == [True, False]
    _assert_same_block(*trained[-1], *list(sweep.fit(block, state))[-1])


def test_a_block_saved_inside_an_epoch_is_refused_under_another_window_plan(tmp_path, spec, data):
    from sweep.training import load_block, save_block

    block, state = training.init_block(spec, [5], data=data)
    paused, history = _paused(block, state, PauseAt(1))
    save_block(tmp_path / "b", spec=spec, state=paused, history=history, shapes=training.data_shapes(data))
    saved = load_block(tmp_path / "b")
    for budget in (5000, None):  # 5 windows an epoch; data that fit
        other = tiny_spec(training=dataclasses.replace(STREAMED, data_memory=budget))
        block, _ = training.init_block(other, [5], data=data)
        with pytest.raises(sweep.SpecError, match=r"stopped at window 1 of 3 \(42 shards\) of epoch 0"):
            next(sweep.fit(block, saved.state, saved.history))


def test_a_run_killed_inside_an_epoch_and_resumed_equals_an_uninterrupted_run(spec, tmp_path, monkeypatch):
    assert_killed_inside_an_epoch_then_resumed_equals_uninterrupted(spec, tmp_path, monkeypatch)


def test_a_streamed_block_counts_the_seconds_its_trainer_waited_for_a_slow_reader(spec, data):
    block, state = training.init_block(spec, [5], data=data)
    assert block.stream is not None
    source = block.stream.source

    def slow(start: int, stop: int):  # 5 ms a shard: 70 ms a window of 14 shards
        time.sleep(0.005)
        return source.read(start, stop)

    block = block._replace(stream=block.stream._replace(source=source._replace(read=slow)))
    assert training.reader_wait(block) == 0.0
    totals = [training.reader_wait(block) or 0.0 for _ in sweep.fit(block, state)]  # after each epoch's chunk
    assert totals[0] >= 0.07 and totals[1] - totals[0] >= 0.07  # every chunk waits for its first window at least


def test_a_block_whose_data_fit_has_no_reader_to_wait_for(data):
    roomy = tiny_spec(training=dataclasses.replace(STREAMED, data_memory="1MiB"))
    block, _ = training.init_block(roomy, [5], data=data)
    assert training.reader_wait(block) is None


class Results(MemberLogger):
    """A tracker that keeps every result the trials report, and logs nothing."""

    package, extra = "numpy", "test"

    def __init__(self):
        super().__init__()
        self.results = []

    def on_trial_result(self, trial, result, **info):
        self.results.append(dict(result))


def test_the_local_executor_reports_and_shows_what_streamed_trials_waited_for_data(spec, tmp_path, capsys):
    results, two = Results(), dataclasses.replace(spec, seeds=[3, 5], seeds_per_trial=1)  # two trials of one seed
    sweep.run(two, storage=str(tmp_path), options=dataclasses.replace(LOCAL, loggers=(results,), progress="plain"))
    waits = [r["reader_wait_s"] for r in results.results]
    assert len(waits) == 4 and all(w >= 0 for w in waits)  # a report per epoch
    (last,) = [line for line in capsys.readouterr().out.splitlines() if "trials 2/2 done" in line]
    total = sum(waits)  # over the trials, shown in ms under a second, else in s
    assert f"| waited {f'{1000 * total:.0f} ms' if total < 1 else f'{total:.1f} s'} for data |" in last, last


def test_a_window_smaller_than_a_batch_is_refused_with_the_budget_that_fits(data):
    # validation and test evaluated in parts, windows of 15 shards take the budget: 3 of 14 pairs
    spec = tiny_spec(training=dataclasses.replace(STREAMED, batch_size=16, data_memory=4000))
    with pytest.raises(
        sweep.SpecError,
        match=r"`training.batch_size`: got 16; .* as small as 14 samples; raise data_memory to at least 5376 bytes",
    ):
        training.check_data(spec, data)


@pytest.mark.parametrize("budget", [100, 1000])
def test_the_budget_a_refusal_suggests_is_enough(data, budget):
    """The least data_memory a refusal names (too small for two shards, or for windows of a batch)
    is one that plans: no second refusal follows, and a byte less is refused."""
    import re

    def check(data_memory: int) -> None:
        training.check_data(
            tiny_spec(training=dataclasses.replace(STREAMED, batch_size=16, data_memory=data_memory)), data
        )

    with pytest.raises(sweep.SpecError, match=r"at least \d+ bytes") as e:
        check(budget)
    least = int(re.findall(r"at least (\d+) bytes", str(e.value))[-1])
    check(least)
    with pytest.raises(sweep.SpecError):
        check(least - 1)


@pytest.mark.parametrize(
    ("value", "expected"), [("4GiB", 4 * 2**30), ("1.5KiB", 1536), ("2 MB", 2_000_000), (4096, 4096)]
)
def test_data_memory_takes_bytes_or_sizes_with_units(value, expected):
    assert sweep.Training(data_memory=value).data_memory == expected


@pytest.mark.parametrize("value", ["4 parsecs", 0, -1, "GiB", True, 1.5])
def test_a_bad_data_memory_is_named(value):
    with pytest.raises(sweep.SpecError, match=r"`training.data_memory`: got .*; give a size in bytes"):
        sweep.Training(data_memory=value)


def test_the_default_budget_keeps_old_config_ids():
    assert "data_memory" not in sweep.Training().identity()
    assert sweep.Training(data_memory="1GiB").identity()["data_memory"] == 2**30


def _stacked(trained):
    """A member trained alone as a block of one: ``(model with a member axis, history)``."""
    import jax

    model, history = trained
    return jax.tree_util.tree_map(lambda a: a[None] if hasattr(a, "shape") else a, model), history


def test_the_plan_says_which_problem_streams_with_its_size_budget_and_windows(spec):
    shown = str(sweep.plan(spec))
    assert (
        "data of 'heat1d': 7.5 KiB, budget 5.86 KiB: streamed: 3 windows of <= 1.75 KiB per epoch "
        "(42 shards of 1 items, 128 B)"
    ) in shown
    assert "data of" not in str(sweep.plan(tiny_spec()))  # data that fit: the plan as it always was


def test_an_auto_block_size_counts_two_windows_not_the_whole_split(spec, data):
    from sweep.training import device_data_bytes

    streamed, plan = device_data_bytes(spec, data)
    whole, none = device_data_bytes(spec, data, budget=10**9)
    assert plan is not None and none is None
    assert streamed == plan.eval_bytes + 2 * plan.window_bytes == 2304 + 2 * 1792 < whole == 7680


@pytest.mark.slow  # three compilations of unrolled windows and rollouts (~1-2 min on a shared CPU)
def test_streamed_trajectories_with_unroll_noise_and_rollouts_are_bit_identical_whatever_the_block():
    # 42 training trajectories of 7 states (448 bytes each) streamed in 5 windows of 8-9
    unrolled = tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0, trajectory_steps=6),
        training=dataclasses.replace(STREAMED, unroll=2, rollout_steps=3, noise=0.01, data_memory=15072),
    )
    data = training.load_data(unrolled)
    block, _ = training.init_block(unrolled, [5], data=data)
    assert block.stream is not None and (block.stream.plan.num_windows, block.stream.plan.item_bytes) == (5, 448)
    alone = sweep.train(unrolled, 5, data=data)
    model, history = sweep.train_block(unrolled, [0, 5, 7], data=data)
    assert set(history.test_rollout) == {"nrmse"}
    assert_same_member(model, history, 1, *alone)


# 42 training pairs of 128 bytes; 6 validation and 12 test pairs, and their trajectories of 4 states
# (256 bytes) for 3 rollout steps: 6912 bytes of them. 9216 bytes hold them beside two windows of
# 9 pairs; 2304 bytes do not, and stream the same windows with validation and test evaluated in
# parts of <= 1152 bytes (1 and 2 parts of pairs, 2 and 3 of trajectories, the last ones padded)
ROLLOUTS = sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0, trajectory_steps=6)
HELD = sweep.Training(epochs=2, batch_size=8, report_every=1, rollout_steps=3, data_memory=9216)


@pytest.fixture(scope="module")
def in_parts():
    spec = tiny_spec(problem=ROLLOUTS, training=dataclasses.replace(HELD, data_memory=2304))
    data = training.load_data(spec)
    return spec, data, sweep.train(spec, 5, data=data)


def test_validation_and_test_too_large_for_the_budget_are_evaluated_in_parts_as_in_memory(in_parts):
    spec, data, (model, history) = in_parts
    held_spec = dataclasses.replace(spec, training=HELD)
    block, _ = training.init_block(spec, [5], data=data)
    held, _ = training.init_block(held_spec, [5], data=data)
    plan = block.stream.plan  # pyright: ignore[reportOptionalMemberAccess]
    assert plan == held.stream.plan._replace(budget=2304, eval_part_bytes=1152)  # pyright: ignore[reportOptionalMemberAccess]
    assert plan.device_bytes == 2 * plan.window_bytes == 2304 < plan.eval_bytes == 6912
    assert block.data.val.size == block.data.test.size == 0 and block.data.val_traj is None  # none on the devices
    assert "validation and test (6.75 KiB) evaluated in parts of <= 1.12 KiB" in str(sweep.plan(spec))
    whole_model, whole = sweep.train(held_spec, 5, data=data)
    assert tree_allclose(model, whole_model, exact=True)  # the same training
    np.testing.assert_array_equal(history.train_loss, whole.train_loss)
    for split in ("val", "test", "val_rollout", "test_rollout"):
        curves, expected = getattr(history, split), getattr(whole, split)
        assert curves.keys() == expected.keys() and curves
        for name in curves:  # float32 sums of parts added in float64, against one float32 mean
            np.testing.assert_allclose(curves[name], expected[name], rtol=1e-6, atol=0)
    assert history.val_rollout["nrmse"].shape == (1, 3)  # the last report's curve of 3 rollout steps


def test_members_evaluated_in_parts_are_bit_identical_whatever_the_block(in_parts):
    spec, data, alone = in_parts
    model, history = sweep.train_block(spec, [0, 5, 7], data=data)
    assert_same_member(model, history, 1, *alone)


@pytest.mark.parametrize(
    ("problem", "changes", "item"),
    [
        # validation and test pairs of 128 bytes: 250 bytes are too small to hold them beside
        # two shards, and half of it too small for one pair
        (
            None,
            {"data_memory": 250},
            "the validation and test data \\(2304 bytes\\) .* \\(125 bytes\\), but one of their "
            "items takes 128 bytes; give at least 2304 bytes",
        ),
        # trajectories of 6 states (384 bytes) for 5 rollout steps: 600 bytes hold two training
        # windows of 2 pairs, but not one trajectory in half of it
        (
            ROLLOUTS,
            {"data_memory": 600, "batch_size": 2, "rollout_steps": 5},
            "\\(300 bytes\\), but one of their items takes 384 bytes; give at least 768 bytes",
        ),
    ],
)
def test_a_budget_smaller_than_one_evaluation_part_is_refused_before_work(tmp_path, problem, changes, item):
    spec = tiny_spec(
        problem=problem or tiny_spec().problem, training=dataclasses.replace(HELD, **{"rollout_steps": 0, **changes})
    )
    with pytest.raises(
        sweep.SpecError,
        match=r"`training.data_memory`: got \d+ bytes .*" + item,
    ):
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    assert not (tmp_path / spec.name).exists()


@pytest.mark.slow  # a Tune run of two trials on the session's Ray (~100 s on a shared 2-core CPU)
def test_a_sigterm_stops_a_streamed_tune_trial_inside_its_epoch_and_the_retry_goes_on_from_there(
    spec, ray_session, tmp_path
):
    from _faults import TermAfterReport
    from helpers import store_files, trial_results
    from ray import tune

    from sweep.tune import TrialHooks

    local = sweep.run(spec, storage=str(tmp_path / "local"), options=LOCAL)
    marker = tmp_path / "terminated"
    tuned = sweep.run(
        spec,
        storage=str(tmp_path / "tune"),
        options=sweep.RunOptions(
            progress="off",
            failure_config=tune.FailureConfig(max_failures=0),  # a preemption is not counted as a failure
            trial_hooks=TrialHooks(after_report=TermAfterReport(marker)),  # SIGTERM after epoch 1's report
        ),
    )
    key, pid = marker.read_text().split()
    results = trial_results(tuned)[key]
    assert all(r["epoch"] <= 1 for r in results if r["pid"] == int(pid))  # it stopped inside epoch 1
    retry = [r for r in results if r["pid"] != int(pid)]
    assert retry and {(r["resumed_from_epoch"], r.get("resumed_from_window")) for r in retry} == {(1, 1)}
    for stop in (r for r in results if "paused_at" in r):  # when Tune recorded the stopping report
        assert stop["paused_at"] == [1, 1] and stop["epoch"] == 1 and stop["preempted_by"] == "SIGTERM"
    assert store_files(tuned) == store_files(local)  # the stored members, bit for bit


def test_data_put_on_several_cpu_devices_is_held_once_in_host_memory():
    """XLA:CPU's devices keep separate buffers: a block's data (held, a window, an evaluation part) put
    on the "map" layout's devices as JAX puts it would be held once per device; `on_devices` puts one
    aligned host copy, which every device reads in place, with the same values."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    assert len(jax.devices("cpu")) >= 2  # sweep.configure in conftest: one device per core
    place = NamedSharding(training.members_mesh(2), P())
    x = np.arange(1001, dtype=np.float32)[1:]  # 4 bytes past NumPy's alignment: never aligned to 64
    plain = jax.device_put(x, place)
    shared = training.on_devices({"x": x}, place)["x"]
    pointers = lambda a: {s.data.unsafe_buffer_pointer() for s in a.addressable_shards}  # noqa: E731
    assert len(pointers(plain)) == 2 and len(pointers(shared)) == 1
    assert all(np.array_equal(np.asarray(s.data), x) for s in shared.addressable_shards)
