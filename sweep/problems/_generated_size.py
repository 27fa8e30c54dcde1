"""Whether the trajectories of a generated problem (``Problem("exponax:...")``) fit this machine,
checked before anything is solved: they are generated in memory, where the sweep is planned and
in each trial, and the one-step pairs derived from them are copies (about three times the
trajectories in all)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _host_memory
from .._errors import SpecError

HELD = 3  # the trajectories, and the inputs and targets of their one-step pairs


def check_generated_size(stepper: str, o: Mapping[str, Any], channels: int) -> None:
    """A :class:`SpecError` if the float32 trajectories of the resolved options ``o`` and their
    pairs take more than half of this machine's memory: APEBench's 3D Kuramoto-Sivashinsky at
    this project's 96 points per axis is 33.6 GiB of trajectories."""
    states = o["num_train"] * (o["train_steps"] + 1) + (o["num_val"] + o["num_test"]) * (o["test_steps"] + 1)
    dims, points = o["num_spatial_dims"], o["num_points"]
    size = 4 * channels * points**dims * states
    memory = _host_memory.host_memory()
    if HELD * size > memory / 2:
        raise SpecError(
            f"`problem`: exponax:{stepper} in {dims}D, {states} states of {channels} channel(s) on "
            f"{'x'.join([str(points)] * dims)} points ({o['num_train']} training trajectories of "
            f"{o['train_steps'] + 1} states, {o['num_val'] + o['num_test']} validation and test trajectories of "
            f"{o['test_steps'] + 1}), are {size / 2**30:.1f} GiB of float32 trajectories and "
            f"{HELD * size / 2**30:.1f} GiB with the one-step pairs derived from them, more than half of the "
            f"memory available here ({memory / 2**30:.1f} GiB: the machine's, or its control group's limit where "
            f"lower); give fewer or shorter trajectories (num_train, num_test, "
            f"num_val or val_fraction, train_steps, test_steps) or fewer points (num_points), or write the "
            f'trajectories to an HDF5 file and stream them (the problem "hdf5")'
        )
