"""A spec's ``resources``: the CPUs and GPUs of one trial."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._errors import SpecError
from ._values import is_number


def check_resources(resources: Mapping[str, Any]) -> dict[str, float]:
    unknown = set(resources) - {"cpu", "gpu"}
    if unknown:
        raise SpecError(f"`resources`: unknown key(s) {sorted(unknown)}; allowed: cpu, gpu")
    cpu = resources.get("cpu", 1)
    gpu = resources.get("gpu", 0)
    if not is_number(cpu) or not math.isfinite(cpu) or cpu <= 0:
        raise SpecError(f"`resources.cpu`: got {cpu!r}; must be a finite number > 0")
    if not is_number(gpu) or not math.isfinite(gpu) or gpu < 0:
        raise SpecError(f"`resources.gpu`: got {gpu!r}; must be 0 (CPU only), a fraction in (0, 1] or a whole number")
    if gpu > 1 and gpu != int(gpu):
        raise SpecError(
            f"`resources.gpu`: got {gpu!r}; above 1 the GPU count must be a whole number (a fraction must be in (0, 1])"
        )
    return {"cpu": cpu, "gpu": gpu}
