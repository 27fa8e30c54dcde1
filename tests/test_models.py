"""Model registry: every pdequinox architecture by name, activations, user factories."""

import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pdequinox as pdeqx
import pytest
from _blocks import trained_blocks
from helpers import tiny_spec

import sweep
from sweep.models import ARCHITECTURES, build_model
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

SMALL = {
    "ConvNet": {"hidden_channels": 4, "depth": 2, "activation": "gelu"},
    "ClassicResNet": {"hidden_channels": 4, "num_blocks": 1},
    "ModernResNet": {"hidden_channels": 4, "num_blocks": 1},
    "DilatedResNet": {"hidden_channels": 4, "num_blocks": 1, "dilation_rates": [1, 2, 1]},
    "ClassicUNet": {"hidden_channels": 4, "num_levels": 2},
    "ModernUNet": {"hidden_channels": 4, "num_levels": 2, "num_blocks": 1},
    "ClassicFNO": {"hidden_channels": 4, "num_modes": 4, "num_blocks": 1},
    "MLP": {"width_size": 8, "depth": 1, "activation": "tanh"},
}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_every_architecture_builds_runs_and_counts_like_pdequinox(name, getkey):
    key = getkey()
    model = build_model(name, SMALL[name], (2, 16), 3, key=key)
    y = model(jnp.ones((2, 16)))
    assert y.shape == (3, 16)
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in SMALL[name].items()}
    kwargs = {k: (getattr(jax.nn, v) if k == "activation" else v) for k, v in kwargs.items()}
    if name == "MLP":
        kwargs["num_points"] = 16
    direct = getattr(pdeqx.arch, name)(1, 2, 3, **kwargs, key=key)
    assert pdeqx.count_parameters(model) == pdeqx.count_parameters(direct)


def test_spatial_dims_and_channels_inferred_from_data(getkey):
    model = build_model("ConvNet", {"hidden_channels": 2, "depth": 1}, (3, 8, 8), 2, key=getkey())
    assert model(jnp.ones((3, 8, 8))).shape == (2, 8, 8)


def test_activation_by_name_is_used(getkey):
    relu = build_model("ConvNet", {"hidden_channels": 2, "depth": 1, "activation": "relu"}, (1, 8), 1, key=getkey())
    assert relu.activation is jax.nn.relu


def make_linear(*, width, key):
    """A user factory found by import path below."""
    return eqx.nn.Conv1d(1, 1, width, padding="SAME", key=key)


def test_user_factory_by_import_path_trains():
    spec = tiny_spec(
        model=sweep.Model("test_models:make_linear", width=3),
        training=sweep.Training(epochs=2, batch_size=16, report_every=1),
    )
    model, history = sweep.train_block(spec, [0, 1])
    assert model.weight.shape == (2, 1, 1, 3)
    assert history.test_loss[:, -1].max() < history.test_loss[:, 0].max() * 1.5


def test_a_factory_changed_since_its_members_were_trained_is_named_as_a_cause(tmp_path, monkeypatch):
    """The store is as written; the factory's code now builds other parameters (a wider kernel):
    the message says so beside the store's own damage."""
    plan = make_plan(tiny_spec(model=sweep.Model("test_models:make_linear", width=3), seeds=2))
    aggregate_blocks(tmp_path / "s", trained_blocks(plan), plan=plan)
    ens = sweep.load(tmp_path / "s", trust_code=True)
    original = make_linear
    monkeypatch.setattr(sys.modules[__name__], "make_linear", lambda *, width, key: original(width=5, key=key))
    with pytest.raises(sweep.StoreError, match=r"or test_models:make_linear builds other parameters than when these"):
        ens.predict(np.zeros((1, 1, 16), np.float32))


def test_inferred_arguments_may_not_be_given():
    with pytest.raises(sweep.SpecError, match="`model.in_channels`: inferred"):
        sweep.Model("ConvNet", in_channels=2)
