"""The private APIs of Ray, JAX and pdequinox that seed-sweep reads (listed in docs/design.md,
"Private APIs we depend on"): one test each, so that an upgrade that removes or reshapes one
fails here, loudly, instead of a feature turning itself off."""

from __future__ import annotations

import inspect


def test_jax_says_whether_a_backend_started():  # sweep/_configure.py: backend_started
    import jax
    from jax._src import xla_bridge

    jax.numpy.zeros(1)  # the suite's process has a backend
    assert xla_bridge.backends_are_initialized() is True


def test_ray_lists_the_nodes_it_drains():  # sweep/tune/_preemption.py: node_draining
    from ray._private.state import GlobalState, state

    assert isinstance(state, GlobalState)
    assert list(inspect.signature(state.get_draining_nodes).parameters) == []


def test_serve_names_its_controller():  # sweep/serving/_service.py: _ingress
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    assert isinstance(SERVE_CONTROLLER_NAME, str) and SERVE_CONTROLLER_NAME
    assert isinstance(SERVE_NAMESPACE, str) and SERVE_NAMESPACE


def test_tune_trial_internals_the_relay_trims_and_the_retry_reason_reads():  # sweep/tune/_relay.py, _retries.py
    from ray.tune.experiment import Trial

    trial = Trial("__fake", config={"trial_key": "k"}, stub=True)
    metadata = trial.run_metadata
    assert isinstance(metadata.last_result, dict)
    assert isinstance(metadata.metric_analysis, dict) and isinstance(metadata.metric_n_steps, dict)
    assert isinstance(metadata.checkpoint_manager._checkpoint_results, list)
    assert callable(metadata.invalidate_cache) and callable(trial.invalidate_json_state)
    assert isinstance(inspect.getattr_static(Trial, "error_file"), property)


def test_tune_result_keys_and_a_schedulers_metric():  # sweep/tune/_relay.py, _options.py
    from ray.tune import result
    from ray.tune.schedulers import ASHAScheduler

    assert "training_iteration" in result.AUTO_RESULT_KEYS and isinstance(result.DEBUG_METRICS, tuple)
    assert (result.DONE, result.SHOULD_CHECKPOINT) == ("done", "should_checkpoint")
    assert ASHAScheduler(metric="val_loss_mean", mode="min")._metric == "val_loss_mean"
    assert ASHAScheduler()._metric is None


def test_pdequinox_sequential_and_padding_conv():  # sweep/models/_fast.py: the fast forward
    import equinox as eqx
    from pdequinox._sequential import Sequential
    from pdequinox.arch import ConvNet
    from pdequinox.conv._conv import MorePaddingConv

    assert {"lifting", "blocks", "projection"} <= set(Sequential.__dataclass_fields__)
    assert issubclass(MorePaddingConv, eqx.Module) and "padding_mode" in MorePaddingConv.__dataclass_fields__
    assert "layers" in ConvNet.__dataclass_fields__


def test_a_function_trainable_runs_its_function_through_trainable_func():  # sweep/tune/_preemption.py: preemptible
    from ray.tune.trainable.function_trainable import FunctionTrainable, wrap_function

    def trial(config):
        return config

    wrapped = wrap_function(trial)
    assert issubclass(wrapped, FunctionTrainable) and "_trainable_func" in vars(wrapped)
    assert list(inspect.signature(wrapped._trainable_func).parameters) == ["self", "config"]


def test_ray_names_the_node_this_process_started_and_its_dead_daemons():  # sweep/_interrupt.py: local_ray_lost
    from ray._private import worker
    from ray._private.node import Node
    from ray._private.ray_constants import PROCESS_TYPE_GCS_SERVER, PROCESS_TYPE_RAYLET

    assert "_global_node" in vars(worker)
    assert list(inspect.signature(Node.dead_processes).parameters) == ["self"]  # [(process type, Popen)]
    assert isinstance(Node.gcs_address, property)  # "host:port", after a SIGTERM: refusing once it closed
    assert "self.all_processes" in inspect.getsource(Node.__init__)  # {process type: [info]}
    assert (PROCESS_TYPE_RAYLET, PROCESS_TYPE_GCS_SERVER) == ("raylet", "gcs_server")  # _interrupt's RAY_DAEMONS
