"""Summaries of rollout curves (``[..., T]``, entry ``t - 1``: the metric after ``t`` steps), in
NumPy, and the names they are stored under (``test_<name>``): re-exported by :mod:`sweep.metrics`,
which says which summaries a metric has.

```python
rollout_gmean(np.array([0.1, 0.4, 1.6]))          # 0.4: APEBench's aggregate of an error
valid_steps(np.array([0.99, 0.9, 0.79, 0.85]))    # 2: a correlation's valid rollout time
window_mean(np.arange(1.0, 31.0), 6, 12)          # 9.0: The Well's window of steps 6-12
```
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float

ROLLOUT_GMEAN_STEPS = 100  # the geometric mean of a rollout curve is over steps 1..min(T, 100) (APEBench's)
ROLLOUT_GMEAN = "rollout_gmean_"  # + metric: the name that geometric mean is evaluated under (test_rollout_gmean_nrmse)
# + a higher-is-better metric: the steps its curve stays at or above VALID_AT (test_rollout_valid_steps_correlation)
ROLLOUT_VALID_STEPS = "rollout_valid_steps_"
VALID_AT = 0.8  # the usual "valid rollout time" threshold of a correlation
ROLLOUT_WINDOW = (
    "rollout_window_"  # + "<first>_<last>_" + metric: the mean over those steps (test_rollout_window_6_12_vrmse)
)
WINDOWS = ((6, 12), (13, 30))  # The Well's windows of rollout steps, first and last (1-based, inclusive)


def summarised_metric(name: str) -> str | None:
    """The rollout metric a summary's name belongs to, else None: ``"rollout_gmean_nrmse"``,
    ``"rollout_window_6_12_nrmse"`` -> ``"nrmse"``."""
    for prefix in (ROLLOUT_GMEAN, ROLLOUT_VALID_STEPS):
        if name.startswith(prefix):
            return name.removeprefix(prefix)
    if name.startswith(ROLLOUT_WINDOW) and len(parts := name.removeprefix(ROLLOUT_WINDOW).split("_", 2)) == 3:
        return parts[2]
    return None


def rollout_gmean(curves: Float[np.ndarray, "... t"]) -> np.ndarray:
    """The geometric mean of rollout curves over their first ``min(T, 100)`` steps, in float64
    (a curve holding 0 gives 0, one holding inf or NaN gives inf or NaN).

    ```python
    rollout_gmean(np.array([0.1, 0.4, 1.6]))   # 0.4
    ```
    """
    c = np.asarray(curves, np.float64)[..., :ROLLOUT_GMEAN_STEPS]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.mean(np.log(c), axis=-1))


def valid_steps(curves: Float[np.ndarray, "... t"], threshold: float = 0.8) -> np.ndarray:
    """Steps a rollout stays valid: the number of leading steps of a ``correlation`` curve (entry
    ``t - 1``: after ``t`` steps) at or above ``threshold`` (0.8: the usual "valid rollout time";
    the step where it first drops below, minus one). A NaN counts as a drop.

    ```python
    valid_steps(np.array([0.99, 0.9, 0.79, 0.85]))   # 2
    ```
    """
    c = np.asarray(curves, np.float64)
    if c.ndim == 0 or c.shape[-1] == 0:
        raise ValueError(f"valid_steps: curves of shape {c.shape}; need at least one step on the last axis")
    below = ~(c >= threshold)
    return np.where(below.any(axis=-1), np.argmax(below, axis=-1), c.shape[-1])


def window_mean(curves: Float[np.ndarray, "... t"], first: int, last: int) -> np.ndarray:
    """The mean of rollout curves over steps ``first..last`` (1-based, inclusive; The Well reports
    steps 6-12 and 13-30), in float64; a curve shorter than ``last`` steps raises ValueError.

    ```python
    window_mean(np.arange(1.0, 31.0), 6, 12)   # 9.0
    ```
    """
    c = np.asarray(curves, np.float64)
    if not 1 <= first <= last or c.shape[-1] < last:
        raise ValueError(
            f"window_mean: steps {first}..{last} of curves of {c.shape[-1]} steps; need 1 <= first <= last <= steps"
        )
    return np.mean(c[..., first - 1 : last], axis=-1)
