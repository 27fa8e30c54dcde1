"""History frames: ``Problem(..., history=h)`` gives the model the ``h`` latest states stacked as
input channels and the next state as its target (The Well's ``n_steps_input``).

An input is then ``(h * channels, *spatial)``: the states ``t - h + 1, ..., t`` of a trajectory,
oldest first, each a block of ``channels`` channels; its target the state ``t + 1``. The pairs
of every split are derived from the split's trajectories (``steps + 1 - h`` per trajectory,
trajectory by trajectory), which stay as they are (``Dataset.history`` says how many states an
input stacks); rollouts start from ``h`` states and keep a moving window
(:func:`sweep.training.window_step`).
``history=1`` (the default) is the problem as it was.

```python
data = sweep.problems.load_problem("heat1d", {"num_points": 16, "num_samples": 10,
                                              "trajectory_steps": 5, "history": 2})
data.train.x.shape[1], data.train_traj.shape[2]    # (2, 1): two states of one channel
```
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import SpecError

OPTION = "history"


def check_history(value: Any) -> None:
    """``problem.history`` must be an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"`problem.history`: got {value!r}; must be an integer >= 1 (1: the latest state only)")


def windows(traj: np.ndarray, history: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(h latest states stacked as channels, next state)`` of ``traj`` ``[n, steps + 1, c,
    *s]``: ``n * (steps + 1 - h)`` pairs, trajectory by trajectory."""
    n, length, channels, *spatial = traj.shape
    count = length - history
    x = np.stack([traj[:, t : t + count] for t in range(history)], axis=2)  # [n, count, h, c, *s]
    return x.reshape(n * count, history * channels, *spatial), traj[:, history:].reshape(n * count, channels, *spatial)


def with_history(data: Any, history: int, source: str) -> Any:
    """``data`` (a :class:`~sweep.problems.Dataset` with trajectories) with the pairs of every split
    derived from its trajectories with ``history`` states per input (module docstring)."""
    if history == 1:
        return data
    if data.train_traj is None or data.test_traj is None:
        raise SpecError(
            f"`problem.history`: got {history}; {source} has no trajectories to take {history} states from "
            f"(history needs a problem with trajectories: hdf5, exponax:<Stepper>, heat1d with trajectory_steps=<n>)"
        )
    shortest = min(t.shape[1] for t in (data.train_traj, data.val_traj, data.test_traj) if t is not None)
    if history >= shortest:
        raise SpecError(
            f"`problem.history`: got {history}; the trajectories of {source} have {shortest} states, and an "
            f"input of {history} states needs a next state to predict (use at most {shortest - 1})"
        )
    split = type(data.train)

    def pairs(traj: np.ndarray | None, empty) -> Any:
        if traj is None:
            x = np.zeros((0, history * empty.x.shape[1], *empty.x.shape[2:]), np.float32)
            return split(x, empty.y[:0])
        return split(*windows(traj, history))

    return data._replace(
        train=pairs(data.train_traj, data.train),
        val=pairs(data.val_traj, data.val),
        test=pairs(data.test_traj, data.test),
        history=history,
    )
