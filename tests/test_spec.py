"""SweepSpec: validation, grid expansion, config ids, dict / TOML round trip."""

import dataclasses

import pytest
from helpers import tiny_spec

import sweep
from sweep import Model, Optimizer, Problem, SpecError, SweepSpec, Training


def test_dict_round_trip_is_exact():
    spec = tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-4]}, seeds=[3, 1, 7])
    again = SweepSpec.from_dict(spec.to_dict())
    assert again == spec
    assert again.to_dict() == spec.to_dict()


def test_toml_round_trip(tmp_path):
    spec = tiny_spec(
        grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-4]},
        resources={"cpu": 1, "gpu": 0.25},
        optimizer=Optimizer("adam", learning_rate=1e-3, schedule={"name": "cosine_decay_schedule", "decay_steps": 10}),
    )
    path = tmp_path / "spec.toml"
    spec.to_toml(path)
    assert SweepSpec.from_toml(path) == spec


def test_parts_are_frozen():
    spec = tiny_spec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seeds = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.model.name = "MLP"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.training.epochs = 3


def test_expand_splits_structural_from_vmapped():
    spec = tiny_spec(
        grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-4], "training.batch_size": [8, 16]}
    )
    assert spec.vmap == ("optimizer.learning_rate",)
    configs = spec.expand()
    assert [(c.model.depth, c.training.batch_size) for c, _ in configs] == [(1, 8), (1, 16), (2, 8), (2, 16)]
    for config, hsets in configs:
        assert config.grid == {}
        assert hsets == ({"learning_rate": 1e-3}, {"learning_rate": 3e-4})  # optimizer arguments
    assert spec.expand() is configs  # computed once per spec
    assert len({c.config_id for c, _ in configs}) == 4


def test_vmap_override_makes_learning_rate_structural():
    spec = tiny_spec(grid={"optimizer.learning_rate": [1e-3, 3e-4]}, vmap=[])
    configs = spec.expand()
    assert [c.optimizer.learning_rate for c, _ in configs] == [1e-3, 3e-4]
    assert all(h == ({},) for _, h in configs)
    assert configs[0][0].config_id != configs[1][0].config_id


def test_config_id_is_stable_and_ignores_seeds_and_vmapped_values():
    a = tiny_spec(seeds=4, grid={"optimizer.learning_rate": [1e-3, 1e-2]})
    b = tiny_spec(seeds=100, grid={"optimizer.learning_rate": [5e-4]}, resources={"cpu": 2})
    assert a.expand()[0][0].config_id == b.expand()[0][0].config_id
    assert tiny_spec(model=Model("ConvNet", hidden_channels=4, depth=3)).config_id != tiny_spec().config_id
    assert tiny_spec().config_id == tiny_spec().config_id
    assert len(tiny_spec().config_id) == 12


def test_seeds_int_and_iterable():
    assert tiny_spec(seeds=3).seed_list == (0, 1, 2)
    assert tiny_spec(seeds=range(5, 8)).seed_list == (5, 6, 7)


@pytest.mark.parametrize(
    "make, fragments",
    [
        (lambda: Model("ConvNett"), ["`model.name`", "'ConvNett'", "ConvNet, ClassicResNet"]),
        (lambda: Model("ConvNet", widht=3), ["`model.widht`", "hidden_channels"]),
        (lambda: Model("ConvNet", activation="relu6x"), ["`model.activation`", "'relu6x'", "gelu"]),
        (lambda: Optimizer("adamm", learning_rate=1e-3), ["`optimizer.name`", "'adamm'", "adam"]),
        (lambda: Optimizer("adam"), ["`optimizer.learning_rate`", "None"]),
        (lambda: Optimizer("adam", learning_rate=-1.0), ["`optimizer.learning_rate`", "-1.0"]),
        (lambda: Optimizer("adam", learning_rate=1e-3, beta=3), ["`optimizer.beta`", "b1"]),
        (lambda: Problem("heat2d"), ["`problem.name`", "'heat2d'", "heat1d"]),
        (lambda: Problem("heat1d", num_point=3), ["`problem.num_point`", "num_points"]),
        (lambda: Problem("heat1d", num_samples=-4), ["`problem.num_samples`", "-4"]),
        (lambda: Problem("arrays"), ["`problem`", "path"]),
        (lambda: Problem("heat1d", {"num_points": 16}), ["`problem`", "Problem('heat1d', ...)", "keywords"]),
        (lambda: Training(epochs=0), ["`training.epochs`", "0", ">= 1"]),
        (lambda: Training(batch_size=-2), ["`training.batch_size`", "-2"]),
        (lambda: tiny_spec(seeds=[1, -2]), ["`seeds`", "-2", "non-negative"]),
        (lambda: tiny_spec(seeds=[1, 2, 1]), ["`seeds`", "duplicate", "[1]"]),
        (lambda: tiny_spec(seeds=0), ["`seeds`", ">= 1"]),
        (lambda: tiny_spec(grid={"model.depth": []}), ["`grid.model.depth`", "empty"]),
        (
            lambda: sweep.plan(tiny_spec(grid={"model.depth": [2, 2]})),  # a stored spec, read, is not held to it
            ["`grid.model.depth`: lists 2 twice; give each value once"],
        ),
        (
            lambda: sweep.plan(tiny_spec(grid={"optimizer.learning_rate": [1, 1.0]})),  # one learning rate
            ["`grid.optimizer.learning_rate`: lists 1.0 twice; give each value once"],
        ),
        (
            lambda: SweepSpec.from_dict(
                tiny_spec(grid={"optimizer.learning_rate": [1e-3, 1e-2]}).to_dict()
                | {"vmap": "optimizer.learning_rate"}
            ),
            ["`vmap`: got 'optimizer.learning_rate'; give a list of grid keys"],  # as TOML gives it, not per letter
        ),
        (lambda: tiny_spec(grid={"modle.depth": [1]}), ["'modle.depth'", "not a spec field"]),
        (
            lambda: tiny_spec(grid={"model": {"depth": [2, 4]}}),  # TOML's [grid.model]
            ["`grid`: key 'model' names a part of the spec, not a field", '"model.<option>" = [...]'],
        ),
        (
            lambda: SweepSpec.from_dict(tiny_spec().to_dict() | {"problem": "heat1d"}),  # TOML's problem = "heat1d"
            ["`problem`: got 'heat1d'; expected a sweep.Problem (in TOML, a table: [problem]"],
        ),
        (lambda: tiny_spec(grid={"model.deepth": [1]}), ["`model.deepth`", "hidden_channels"]),
        (lambda: tiny_spec(grid={"model.name": ["ConvNet", "Transformer"]}), ["`model.name`", "'Transformer'"]),
        (lambda: tiny_spec(seeds_per_trial=0), ["`seeds_per_trial`", "0", ">= 1"]),
        (lambda: tiny_spec(seeds_per_trial="many"), ["`seeds_per_trial`", "'many'", "auto"]),
        (
            lambda: tiny_spec(resources={"gpu": 0}, seeds=2) and tiny_spec(resources={"gpu": -0.5}),
            ["`resources.gpu`", "-0.5"],
        ),
        (lambda: tiny_spec(resources={"gpu": 1.5}), ["`resources.gpu`", "1.5", "whole number"]),
        (lambda: tiny_spec(resources={"tpu": 1}), ["`resources`", "tpu"]),
        (
            lambda: tiny_spec(vmap=["model.depth"], grid={"model.depth": [1, 2]}),
            ["`vmap`", "'model.depth'", "cannot be vmapped"],
        ),
        (lambda: tiny_spec(vmap=["optimizer.b1"]), ["`vmap`", "'optimizer.b1'", "not a grid key"]),
    ],
)
def test_bad_input_names_field_value_and_allowed(make, fragments):
    with pytest.raises(SpecError) as info:
        make()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_spec_stored_before_a_check_was_added_is_still_read():
    """Checks added later (a grid or a choice listing a value twice, a search of more configurations
    than its space holds) hold a spec about to run, not one read from a sweep an older version made."""
    old = tiny_spec(grid={"model.depth": [2, 2]})
    assert SweepSpec.from_dict(old.to_dict()) == old
    search = sweep.Search(space={"model.depth": sweep.choice([1, 1])}, configurations=3)
    stored = tiny_spec(search=search)
    assert SweepSpec.from_dict(stored.to_dict()) == stored


def test_unknown_field_in_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        'name = "x"\nseedz = 3\n[problem]\nname = "heat1d"\n[model]\nname = "ConvNet"\n[optimizer]\nname = "adam"\nlearning_rate = 0.001\n'
    )
    with pytest.raises(SpecError, match="seedz"):
        SweepSpec.from_toml(path)


def test_missing_toml_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        SweepSpec.from_toml(tmp_path / "nope.toml")


def test_fractional_and_whole_gpus_accepted():
    assert tiny_spec(resources={"cpu": 1, "gpu": 0.25}).resources == {"cpu": 1, "gpu": 0.25}
    assert tiny_spec(resources={"cpu": 2, "gpu": 2}).resources == {"cpu": 2, "gpu": 2}


def test_import_paths_accepted_for_models_and_problems():
    spec = tiny_spec(model=Model("mypkg.models:make", width=3), problem=Problem("mypkg.data:load"))
    assert spec.model.width == 3
