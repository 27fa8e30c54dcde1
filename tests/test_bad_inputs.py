"""Every bad input is named before work: a table of bad specs, data and models, each
raising a SpecError that names the field and the value, from ``sweep.plan`` (Ray never started)
and from ``sweep.run`` (Ray not started, no trial: no Tune experiment, no plan written)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import tiny_spec

import sweep
from sweep import Model, Optimizer, Problem, SpecError, Training

NAN, INF = math.nan, math.inf


# -- user code named by the specs below (imported by path: "test_bad_inputs:...") ------------------
def one_array():
    return np.zeros((4, 1, 16))


def raising():
    raise ValueError("the data server is down")


def with_nan():
    x = np.ones((8, 1, 16))
    x[3, 0, 5] = np.nan
    return x, x, x[:4], x[:4]


def not_a_module(*, key):
    return {"weights": 1.0}


def _one_channel(*, key):
    return eqx.nn.Conv1d(1, 1, 3, padding="SAME", key=key)


def two_channels(*, key):
    return eqx.nn.Conv1d(1, 2, 3, padding="SAME", key=key)


def raising_factory(*, key, width):
    raise ValueError(f"width {width} is not supported")


class _Shifted(eqx.Module):
    conv: eqx.nn.Conv1d
    shift: jax.Array  # int32: no gradient of it exists


def with_int_array(*, key):
    return _Shifted(eqx.nn.Conv1d(1, 1, 3, padding="SAME", key=key), jnp.arange(16, dtype=jnp.int32))


class _Keyed(eqx.Module):
    conv: eqx.nn.Conv1d
    noise: jax.Array  # a PRNG key: no gradient of it exists

    def __call__(self, x):
        return self.conv(x)


def with_a_key(*, key):
    return _Keyed(eqx.nn.Conv1d(1, 1, 3, padding="SAME", key=key), key)


def _made_once(kernel: int):
    class Wrapped(eqx.Module):  # made once, at import: one class, whatever the calls
        conv: eqx.nn.Conv1d

        def __call__(self, x):
            return self.conv(x)

    return Wrapped


_WRAPPED = _made_once(3)


def made_once(*, key):
    return _WRAPPED(eqx.nn.Conv1d(1, 1, 3, padding="SAME", key=key))


def local_class(*, key):
    class Local(eqx.Module):  # another class at every call
        conv: eqx.nn.Conv1d

        def __call__(self, x):
            return self.conv(x)

    return Local(eqx.nn.Conv1d(1, 1, 3, padding="SAME", key=key))


def an_array(*, key):
    return jnp.zeros((1, 16))


# -- the table --------------------------------------------------------------------------------------
class Case(NamedTuple):
    build: object  # (files directory) -> SweepSpec; may raise at construction
    fragments: list[str]  # the field and the value, as the message must name them
    stage: str  # "spec": refused when the spec is built; "data": when plan/run load data and build models


def _problem(**options) -> dict:
    return {"problem": Problem("heat1d", **{"num_points": 16, "num_samples": 60, "data_seed": 0} | options)}


def _arrays(path) -> dict:
    return {"problem": Problem("arrays", path=str(path))}


def _model(name="ConvNet", **options) -> dict:
    return {"model": Model(name, **options)}


CASES = {
    "name ..": Case(lambda d: tiny_spec(name=".."), ["`name`", "'..'"], "spec"),
    "name .": Case(lambda d: tiny_spec(name="."), ["`name`", "'.'"], "spec"),
    "name with /": Case(lambda d: tiny_spec(name="runs/heat"), ["`name`", "'runs/heat'", "separator"], "spec"),
    "name with \\": Case(lambda d: tiny_spec(name="a\\b"), ["`name`", "separator"], "spec"),
    "name with NUL": Case(lambda d: tiny_spec(name="heat\x00"), ["`name`", "control character"], "spec"),
    "name empty": Case(lambda d: tiny_spec(name=""), ["`name`", "''"], "spec"),
    "optimizer b1 str": Case(
        lambda d: tiny_spec(optimizer=Optimizer("adam", learning_rate=1e-3, b1="0.9")),
        ["`optimizer.b1`", "'0.9'", "a number"],
        "spec",
    ),
    "optimizer b1 nan": Case(
        lambda d: tiny_spec(optimizer=Optimizer("adam", learning_rate=1e-3, b1=NAN)),
        ["`optimizer.b1`", "nan", "finite"],
        "spec",
    ),
    "optimizer eps inf": Case(
        lambda d: tiny_spec(optimizer=Optimizer("adam", learning_rate=1e-3, eps=INF)),
        ["`optimizer.eps`", "inf"],
        "spec",
    ),
    "optimizer nesterov str": Case(
        lambda d: tiny_spec(optimizer=Optimizer("sgd", learning_rate=1e-3, nesterov="yes")),
        ["`optimizer.nesterov`", "'yes'", "true or false"],
        "spec",
    ),
    "schedule steps str": Case(
        lambda d: tiny_spec(
            optimizer=Optimizer(
                "adam", learning_rate=1e-3, schedule={"name": "cosine_decay_schedule", "decay_steps": "10"}
            )
        ),
        ["`optimizer.schedule.decay_steps`", "'10'"],
        "spec",
    ),
    "grid lr nan": Case(
        lambda d: tiny_spec(grid={"optimizer.learning_rate": [1e-3, NAN]}),
        ["`grid.optimizer.learning_rate`", "nan"],
        "spec",
    ),
    "seed 2**32": Case(lambda d: tiny_spec(seeds=[0, 2**32]), ["`seeds`", "4294967296", "2**32"], "spec"),
    "seeds 2**40": Case(lambda d: tiny_spec(seeds=2**40), ["`seeds`", "1099511627776"], "spec"),
    "seeds range 2**40": Case(lambda d: tiny_spec(seeds=range(2**40)), ["`seeds`", "1099511627776"], "spec"),
    "sweep_seed 2**32": Case(lambda d: tiny_spec(sweep_seed=2**32), ["`sweep_seed`", "4294967296"], "spec"),
    "width negative": Case(
        lambda d: tiny_spec(**_model(hidden_channels=-3)), ["`model.hidden_channels`", "-3"], "spec"
    ),
    "depth 2.5": Case(lambda d: tiny_spec(**_model(depth=2.5)), ["`model.depth`", "2.5"], "spec"),
    "boundary wrap": Case(
        lambda d: tiny_spec(**_model(boundary_mode="wrap")), ["`model.boundary_mode`", "'wrap'"], "spec"
    ),
    "use_bias str": Case(lambda d: tiny_spec(**_model(use_bias="yes")), ["`model.use_bias`", "'yes'"], "spec"),
    "kernel 0": Case(lambda d: tiny_spec(**_model(kernel_size=0)), ["`model.kernel_size`", "0"], "spec"),
    "multipliers": Case(
        lambda d: tiny_spec(**_model("ModernUNet", channel_multipliers=[1, 2])),
        ["`model.channel_multipliers`", "[1, 2]"],
        "spec",
    ),
    "dilations empty": Case(
        lambda d: tiny_spec(**_model("DilatedResNet", dilation_rates=[])), ["`model.dilation_rates`", "[]"], "spec"
    ),
    "gpu nan": Case(lambda d: tiny_spec(resources={"cpu": 1, "gpu": NAN}), ["`resources.gpu`", "nan"], "spec"),
    "cpu inf": Case(lambda d: tiny_spec(resources={"cpu": INF, "gpu": 0}), ["`resources.cpu`", "inf"], "spec"),
    "epochs 2**40": Case(
        lambda d: tiny_spec(training=Training(epochs=2**40)), ["`training.epochs`", "1099511627776"], "spec"
    ),
    "dt nan": Case(lambda d: tiny_spec(**_problem(dt=NAN)), ["`problem.dt`", "nan"], "spec"),
    "data_seed 2**70": Case(
        lambda d: tiny_spec(**_problem(data_seed=2**70)), ["`problem.data_seed`", str(2**70)], "spec"
    ),
    "unet levels": Case(
        lambda d: tiny_spec(**_model("ClassicUNet", hidden_channels=2, num_levels=5)),
        ["`model.num_levels`", "5", "divisible"],
        "data",
    ),
    "fno modes": Case(
        lambda d: tiny_spec(**_model("ClassicFNO", hidden_channels=2, num_modes=20)),
        ["`model.num_modes`", "20"],
        "data",
    ),
    "factory module missing": Case(
        lambda d: tiny_spec(**_model("no_such_module:net")), ["`model.name`", "'no_such_module'"], "data"
    ),
    "factory attribute missing": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:nope")), ["`model.name`", "'nope'"], "data"
    ),
    "factory non-module": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:not_a_module")),
        ["`model.name`", "'test_bad_inputs:not_a_module'", "not an equinox.Module"],
        "data",
    ),
    "factory channels": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:two_channels")),
        ["`model`", "test_bad_inputs:two_channels", "(2, 16)", "(1, 16)"],
        "data",
    ),
    "factory int array": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:with_int_array")),
        ["`model.name`", "model.shift is int32", "eqx.field(static=True)"],
        "data",
    ),
    "factory key array": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:with_a_key")),
        ["`model.name`", "model.noise is a PRNG key", "gradients of keys", "jax.random.key_data"],
        "data",
    ),
    "factory local class": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:local_class")),
        ["`model.name`", "local_class.<locals>.Local", "define it once, at module level"],
        "data",
    ),
    "factory array": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:an_array")), ["`model.name`", "returned an array"], "data"
    ),
    "factory option typo": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:raising_factory", widht=7)),
        ["`model.widht`", "not an argument of test_bad_inputs:raising_factory", "did you mean 'width'?"],
        "data",
    ),
    "factory raises": Case(
        lambda d: tiny_spec(**_model("test_bad_inputs:raising_factory", width=7)),
        ["`model`", "width=7", "ValueError"],
        "data",
    ),
    "npz without a spatial axis": Case(
        lambda d: tiny_spec(**_arrays(d / "flat.npz")),
        ["`model.name`", "ConvNet", "shape (16,)", "no spatial axis", "x[:, None]"],
        "data",
    ),
    "npz with a shape": Case(
        lambda d: tiny_spec(problem=Problem("arrays", path=str(d / "nan.npz"), shape=[1, 16])),
        ["`problem.shape`", "nan.npz", "leave it out"],
        "data",
    ),
    "npz nan": Case(lambda d: tiny_spec(**_arrays(d / "nan.npz")), ["`problem.path`", "`train_x`", "NaN"], "data"),
    "npz inf": Case(lambda d: tiny_spec(**_arrays(d / "inf.npz")), ["`problem.path`", "`test_y`", "inf"], "data"),
    "npz float32 overflow": Case(
        lambda d: tiny_spec(**_arrays(d / "huge.npz")), ["`problem.path`", "`train_y`", "as float32"], "data"
    ),
    "npz not a zip": Case(
        lambda d: tiny_spec(**_arrays(d / "text.npz")),
        ["`problem.path`", "text.npz", "not a NumPy .npz archive"],
        "data",
    ),
    "npz objects": Case(
        lambda d: tiny_spec(**_arrays(d / "objects.npz")),
        ["`problem.path`", "'train_x'", "Python objects", "never unpickles"],
        "data",
    ),
    "npz complex": Case(
        lambda d: tiny_spec(**_arrays(d / "complex.npz")), ["`problem.path`", "`train_x`", "complex"], "data"
    ),
    "npz strings": Case(
        lambda d: tiny_spec(**_arrays(d / "strings.npz")), ["`problem.path`", "`test_x`", "<U"], "data"
    ),
    "npz missing": Case(
        lambda d: tiny_spec(**_arrays(d / "nowhere.npz")), ["`problem.path`", "does not exist"], "data"
    ),
    "parquet not parquet": Case(
        lambda d: tiny_spec(problem=Problem("arrays", path=str(d / "text.parquet"), shape=[1, 16])),
        ["`problem.path`", "text.parquet", "not a readable Parquet file"],
        "data",
    ),
    "parquet targets not lists": Case(
        lambda d: tiny_spec(problem=Problem("arrays", path=str(d / "flat.parquet"), shape=[1, 16], target_shape=[])),
        ["`problem.path`", "column y", "holds double values, not lists", "[v]"],
        "data",
    ),
    "parquet ragged": Case(
        lambda d: tiny_spec(problem=Problem("arrays", path=str(d / "ragged.parquet"), shape=[1, 16])),
        ["`problem.path`", "ragged.parquet", "lists of numbers"],
        "data",
    ),
    "function one array": Case(
        lambda d: tiny_spec(problem=Problem("test_bad_inputs:one_array")),
        ["`problem.name`", "four arrays", "an array of shape (4, 1, 16)"],
        "data",
    ),
    "function raises": Case(
        lambda d: tiny_spec(problem=Problem("test_bad_inputs:raising")),
        ["`problem.name`", "raised ValueError", "the data server is down"],
        "data",
    ),
    "function nan": Case(
        lambda d: tiny_spec(
            problem=Problem("test_bad_inputs:with_nan"), training=Training(epochs=1, batch_size=4, report_every=1)
        ),
        ["`problem.name`", "`train_x`", "NaN", "(3, 0, 5)"],
        "data",
    ),
    "batch too large": Case(
        lambda d: tiny_spec(training=Training(epochs=2, batch_size=64, report_every=1)),
        ["`training.batch_size`", "64"],
        "data",
    ),
}
DATA_CASES = {k: c for k, c in CASES.items() if c.stage == "data"}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    rng = np.random.default_rng(0)
    good = {
        k: rng.normal(size=(n, 1, 16)).astype(np.float32)
        for k, n in (("train_x", 40), ("train_y", 40), ("test_x", 8), ("test_y", 8))
    }
    np.savez(d / "flat.npz", **{k: v[:, 0] for k, v in good.items()})  # (samples, 16): no channel axis given
    np.savez(d / "nan.npz", **good | {"train_x": np.where(good["train_x"] > 2, np.nan, good["train_x"])})
    np.savez(d / "inf.npz", **good | {"test_y": np.full((8, 1, 16), np.inf)})
    np.savez(d / "huge.npz", **good | {"train_y": np.full((40, 1, 16), 1e300)})
    np.savez(d / "complex.npz", **good | {"train_x": good["train_x"] + 1j})
    np.savez(d / "strings.npz", **good | {"test_x": np.full((8, 1, 16), "x")})
    np.savez(d / "objects.npz", **good | {"train_x": np.array([{"a": 1}] * 40, dtype=object)}, allow_pickle=True)
    (d / "text.npz").write_text("not a zip archive")
    (d / "text.parquet").write_text("not parquet")
    pq.write_table(
        pa.table({"x": [[1.0] * 16, [1.0] * 3], "y": [[1.0] * 16, [1.0] * 16], "split": ["train", "test"]}),
        d / "ragged.parquet",
    )
    pq.write_table(pa.table({"x": [[1.0] * 16] * 2, "y": [1.0, 2.0], "split": ["train", "test"]}), d / "flat.parquet")
    return d


@pytest.fixture
def no_ray(monkeypatch):
    import ray

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started before the bad input was found")

    monkeypatch.setattr(ray, "init", refuse)


def _names(message: str, fragments: list[str]) -> None:
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_plan_names_the_bad_input_before_any_work(case, files, no_ray):
    if case.stage == "data":
        spec = case.build(files)  # a valid spec: the data or the model is what is wrong
        with pytest.raises(SpecError) as info:
            sweep.plan(spec)
    else:
        with pytest.raises(SpecError) as info:
            sweep.plan(case.build(files))
    _names(str(info.value), case.fragments)


@pytest.mark.parametrize("case", DATA_CASES.values(), ids=DATA_CASES.keys())
def test_run_names_the_bad_input_before_any_trial(case, files, tmp_path, no_ray):
    spec = case.build(files)
    with pytest.raises(SpecError) as info:
        sweep.run(spec, storage=str(tmp_path / "runs"))
    _names(str(info.value), case.fragments)
    assert not list((tmp_path / "runs").glob("*/tune-*")) and not list((tmp_path / "runs").glob("*/plan.json"))


def test_a_factory_in_the_running_script_trains_in_this_process_only(tmp_path, monkeypatch, no_ray):
    """Ray's workers have another __main__: refused before Ray starts; trained in this process, with
    a warning that only this script can load the store."""
    import sys

    monkeypatch.setattr(sys.modules["__main__"], "net", _one_channel, raising=False)
    spec = tiny_spec(**_model("__main__:net"), seeds=1)
    with pytest.raises(SpecError, match=r"`model.name`: '__main__:net' names the script being run, and trials run"):
        sweep.run(spec, storage=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()
    local = sweep.RunOptions(executor="local", progress="off")
    with pytest.warns(UserWarning, match=r"'__main__:net' names the script being run: .*only this script can load"):
        path = sweep.run(spec, storage=str(tmp_path / "runs"), options=local)
    assert len(sweep.load(path, trust_code=True)) == 1


def test_a_class_a_helper_makes_once_at_import_trains():
    """Its qualified name says ``<locals>``, but every call builds the one class: not refused."""
    model, _ = sweep.train_block(tiny_spec(**_model("test_bad_inputs:made_once"), seeds=2), [0, 1])
    assert type(model) is _WRAPPED


def test_train_block_names_a_model_that_does_not_fit_the_data():
    with pytest.raises(SpecError, match=r"`model.num_levels`: got 5"):
        sweep.train_block(tiny_spec(**_model("ClassicUNet", hidden_channels=2, num_levels=5)), [0])
