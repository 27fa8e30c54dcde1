"""``seeds_per_trial="auto"``: the block size from memory, speed and cluster size.

The rule (:func:`choose_seeds_per_trial`, a pure function of what :func:`measure` finds):

1. *Memory.* Bytes per member and fixed bytes of a block. On an accelerator (vectorised
   layout) the block program is compiled (not run) for 4 and 8 members and
   ``memory_analysis()`` (arguments + outputs + temporaries - aliases) gives both parts. On CPU
   (members one at a time per device) a member costs its training state twice (in and out of
   the compiled call: parameters, optimizer state) and the fixed part is, on every CPU device,
   what the memory analysis of a block of 2 gives beyond its members: the device's copy of the
   dataset (a training split streamed in windows counts as two windows, not as the whole split)
   and the temporaries of one member's step (6.0 GiB a device for APEBench's 2D network at
   160 x 160, ``benchmarks/trainer/largest_block_2d.py``). A block
   may use 80% of the trial's memory share: the device's allocator limit on a GPU (already
   confined to the trial's fraction, see :mod:`._env`), or the host's memory (or its control group's limit) times the trial's
   share of the node's CPUs on CPU. ``members <= (0.8 * share - fixed) / per_member``.
2. *Speed* (CPU only; on a GPU a bigger block only gets faster). One epoch of a block with
   one member per device is timed after compiling it, on :data:`PROBE_MINIBATCHES` minibatches
   of the training split and the same share of the validation and test data (every split cut to
   its first items, :func:`probe_data`), and scaled up by that share: the epoch of the whole
   split (2500 pairs of 64 x 64 for a 10-layer ConvNet: 14 minutes for ``sweep plan``, which runs
   it twice, to compile and to time) is not needed to know its speed. A trial should train for at least
   ``target_trial_s`` (60 s) so that its fixed costs (worker start, compilation, checkpoint
   uploads, a few seconds) stay under ~10%: ``members >= target / (member_epoch_s * epochs)``;
   bigger blocks than that buy nothing on CPU, so this is also the CPU block size.
3. *Fill the cluster.* At least as many trials as the cluster runs at once (``slots``):
   ``seeds <= num_seeds * num_configs / slots``.

Seeds = members / hyperparameter sets, the minimum of the three, at least 1 and at most the
number of seeds. The probe runs where trials run (a Ray task with the trial's resources) and
the chosen size is stored in ``plan.json`` so that later runs of the same sweep reuse it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import NamedTuple

import jax
import numpy as np

from .._configure import available_cpus
from .._host_memory import host_memory
from ..problems import Dataset
from ..spec import SweepSpec
from ..training import compiled_bytes, data_shapes, device_data_bytes, init_block, run_chunk, state_bytes

MEMORY_HEADROOM = 0.8
TARGET_TRIAL_S = 60.0
PROBE_MINIBATCHES = 16  # minibatches per member of the CPU speed probe's epoch (a split with more is cut)


class Probe(NamedTuple):
    """What the block-size rule needs to know about one trial's program and device."""

    per_member_bytes: int
    fixed_bytes: int
    memory_bytes: int
    member_epoch_s: float | None  # wall seconds per member-epoch; None on accelerators
    backend: str


def choose_seeds_per_trial(
    probe: Probe,
    *,
    num_seeds: int,
    num_configs: int,
    num_hparam_sets: int,
    epochs: int,
    slots: int,
    target_trial_s: float = TARGET_TRIAL_S,
) -> int:
    """Seeds per trial by the rule in this module's docstring (deterministic given ``probe``)."""
    h = max(1, num_hparam_sets)
    caps = [num_seeds]
    room = MEMORY_HEADROOM * probe.memory_bytes - probe.fixed_bytes
    caps.append(max(1, int(room // max(1, probe.per_member_bytes)) // h))
    if probe.member_epoch_s is not None:
        members = math.ceil(target_trial_s / max(probe.member_epoch_s * epochs, 1e-9))
        caps.append(max(1, math.ceil(members / h)))
    caps.append(max(1, (num_seeds * num_configs) // max(1, slots)))
    return max(1, min(caps))


def _memory_share(resources: Mapping[str, float]) -> int:
    device = jax.local_devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"])
    total = host_memory()
    return int(total * min(1.0, float(resources.get("cpu", 1)) / available_cpus()))


def measure(
    spec: SweepSpec,
    hparams: tuple[dict[str, float], ...],
    data: Dataset,
    resources: Mapping[str, float],
) -> Probe:
    """Measure one structural config (``spec`` without a grid) in this process."""
    backend = jax.default_backend()
    held, _ = device_data_bytes(spec, data)  # a streamed split: two windows, not the whole split
    streamed_out = device_data_bytes(spec, data, budget=2**62)[0] - held  # compiled_bytes: the whole split
    if backend != "cpu":
        four = compiled_bytes(spec, data, hparams, 4)  # small blocks are special-cased by XLA
        per_member = max(1, (compiled_bytes(spec, data, hparams, 8) - four) // 4)
        return Probe(per_member, max(0, four - 4 * per_member - streamed_out), _memory_share(resources), None, backend)
    devices = len(jax.devices("cpu"))
    per_member = 2 * state_bytes(spec, data_shapes(data), hparams)
    # a device's program beyond its members' states: its copy of the data and one member's step
    step = compiled_bytes(spec, data, hparams, 2, layout="map") - 2 * per_member - streamed_out
    timed, share = probe_data(spec, data)
    block, state = init_block(spec, list(range(devices)), [hparams[0]] if hparams else None, timed)
    state, evaluation = run_chunk(block, state, 1)  # compile
    jax.block_until_ready(evaluation)
    start = time.perf_counter()
    jax.block_until_ready(run_chunk(block, state, 1)[1])
    member_epoch_s = (time.perf_counter() - start) / devices / share
    return Probe(per_member, devices * max(held, step), _memory_share(resources), member_epoch_s, backend)


def probe_data(spec: SweepSpec, data: Dataset) -> tuple[Dataset, float]:
    """``(data, share)``: ``data`` cut to the first items that make :data:`PROBE_MINIBATCHES`
    minibatches of ``spec``'s training (pairs, or with ``unroll > 1`` whole trajectories), every
    other split and trajectory array cut to the same share of its items (at least one); ``data``
    itself and 1.0 where that is not less than half of it."""
    t = spec.training
    if t.unroll > 1:
        assert data.train_traj is not None  # check_data: unrolled training has training trajectories
        items, per_item = len(data.train_traj), data.train_traj.shape[1] - t.unroll
    else:
        items, per_item = data.num_train, 1
    kept = math.ceil(PROBE_MINIBATCHES * t.batch_size / per_item)
    if 2 * kept > items:
        return data, 1.0
    share = kept / items

    def cut(a: np.ndarray) -> np.ndarray:
        return a[: max(1, math.ceil(len(a) * share))]

    def cut_any(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else cut(a)

    split = type(data.train)
    if t.unroll > 1:
        assert data.train_traj is not None  # as above
        train, train_traj = split(*map(cut, data.train)), data.train_traj[:kept]
    else:
        train, train_traj = split(data.train.x[:kept], data.train.y[:kept]), cut_any(data.train_traj)
    return data._replace(
        train=train,
        val=split(*map(cut, data.val)),
        test=split(*map(cut, data.test)),
        train_traj=train_traj,
        val_traj=cut_any(data.val_traj),
        test_traj=cut_any(data.test_traj),
    ), share


def largest_config(spec: SweepSpec, datasets: Mapping[str, Dataset]) -> tuple[SweepSpec, tuple[dict, ...]]:
    """The structural config with the most parameter + optimizer-state bytes (no compilation)."""
    best, best_bytes = None, -1
    for config, hsets in spec.expand():
        hparams = tuple(h for h in hsets if h)
        size = state_bytes(config, data_shapes(datasets[config.problem_id]), hparams)
        if size > best_bytes:
            best, best_bytes = (config, hparams), size
    assert best is not None  # a spec expands to at least one config
    return best
