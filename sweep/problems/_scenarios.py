"""The one table of PDEs ``Problem("exponax:<Stepper>")`` solves, with APEBench's defaults.

Each row is an exponax stepper, the spatial dimensions APEBench defines its physical scenario
in, the scenario's name in APEBench (``apebench.scenarios.physical.scenario_dict``) and the
values of that scenario where they differ from the defaults common to every row
(:data:`COMMON`) and from exponax's own class defaults. The coefficients are transcribed from
APEBench (github.com/Ceyron/apebench, commit 77c27f8, ``apebench/scenarios/physical``) and
converted to the named exponax stepper's arguments; ``tests/test_scenarios.py`` checks each
against the generic exponax stepper APEBench builds from its coefficient tuples.

APEBench's scenario names are aliases: ``Problem("apebench:phy_adv_2d")`` is
``Problem("exponax:Advection", num_spatial_dims=2)``: ``apebench:<scenario>_<N>d``, with
``<scenario>`` APEBench's key (its run name is ``<N>d_<scenario>``).

Grids: 160 points per axis in 1D and 2D (APEBench's ``num_points``), 32 per axis in 3D (the
resolution of APEBench's 3D experiments; ``32**3`` points, as ``160**2`` is in 2D), but 96 for
Kuramoto-Sivashinsky in 3D (a row's ``points``): on ``[0, 60)^3`` it blows up within 110 steps at
32 and 64 points per axis, in APEBench's scenario as here (an under-resolved grid: smaller
substeps do not help), and stays finite at 96 (as in 2D from 64 points, in 1D from 64).

APEBench's ``phy_kolm_flow`` runs on exponax 0.1, whose zeroth-order Laplacian (what
``KolmogorovFlowVorticity`` multiplies its ``drag`` by) is the number of axes, not 1 as in 0.2:
its ``drag=-0.1`` damps at -0.2 in 2D, so the row gives ``drag=-0.2`` (checked in
``tests/test_scenarios.py``).

Known difference: APEBench's ``phy_fisher`` uses exponax's generic polynomial stepper, which
in 2D and 3D applies the zeroth-order coefficient once per axis (a growth rate of 40 in 2D);
here ``exponax:FisherKPP`` solves ``u_t = 0.004 Δu + 20 u (1 - u)`` in every dimension (equal to
APEBench's in 1D).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from .._errors import SpecError, did_you_mean

EXPONAX = "exponax:"  # the problem-name prefix: "exponax:<Stepper>"
APEBENCH = "apebench:"  # the alias prefix: "apebench:<scenario>_<N>d"
RESOLUTION = {1: 160, 2: 160, 3: 32}  # the default num_points per axis, by spatial dimensions

COMMON: dict[str, Any] = {
    "num_spatial_dims": 1,
    "num_points": None,  # RESOLUTION[num_spatial_dims]
    "domain_extent": 1.0,
    "dt": 0.1,
    "num_substeps": 1,
    "num_train": 50,
    "num_val": 0,
    "num_test": 30,
    "train_steps": 50,
    "test_steps": 200,
    "ic": "fourier",
    "ic_options": {},
    "ic_clamp": None,
    "warmup_steps": 0,
    "data_seed": 0,
}


class Row(NamedTuple):
    """One PDE: where exponax has its stepper, the dimensions, APEBench's name and values, and the
    default grids (points per axis, by dimensions) where :data:`RESOLUTION`'s is too coarse."""

    module: str  # "stepper" or "stepper.reaction" (of exponax)
    dims: tuple[int, ...]
    apebench: str
    options: dict[str, Any]
    points: Mapping[int, int] = {}


STEPPERS: dict[str, Row] = {
    # linear: APEBench's GeneralLinearStepper coefficients a_1 = -0.25 (advection), a_2 = 0.008,
    # a_3 = 0.00025 (dt 0.001), a_4 = -0.000075 (dt 0.00001)
    "Advection": Row("stepper", (1, 2, 3), "phy_adv", {"velocity": 0.25}),
    "Diffusion": Row("stepper", (1, 2, 3), "phy_diff", {"diffusivity": 0.008}),
    "AdvectionDiffusion": Row("stepper", (1, 2, 3), "phy_adv_diff", {"velocity": 0.25, "diffusivity": 0.008}),
    "Dispersion": Row("stepper", (1, 2, 3), "phy_disp", {"dispersivity": 0.00025, "dt": 0.001}),
    "HyperDiffusion": Row("stepper", (1, 2, 3), "phy_hyp_diff", {"hyper_diffusivity": 0.000075, "dt": 0.00001}),
    # nonlinear: convection b = -0.125 with a_2 = 0.0003 (Burgers, one channel per axis); single-
    # channel convection b_1 = -6, a_3 = -1, a_4 = -0.125 on [0, 50) (KdV); gradient norm b_2 = -1,
    # a_2 = -1, a_4 = -1 on [0, 60) after 500 steps (KS)
    "Burgers": Row(
        "stepper", (1, 2, 3), "phy_burgers", {"diffusivity": 0.0003, "convection_scale": 0.125, "conservative": True}
    ),
    "KortewegDeVries": Row(
        "stepper",
        (1, 2, 3),
        "phy_kdv",
        {
            "domain_extent": 50.0,
            "convection_scale": 6.0,
            "dispersivity": 1.0,
            "hyper_diffusivity": 0.125,
            "single_channel": True,
        },
    ),
    "KuramotoSivashinsky": Row(
        "stepper", (1, 2, 3), "phy_ks", {"domain_extent": 60.0, "warmup_steps": 500}, points={3: 96}
    ),
    # reaction-diffusion: a_0 = 20, a_2 = 0.004, quadratic -20 (dt 0.001), IC clamped to [0, 1]
    "FisherKPP": Row(
        "stepper.reaction",
        (1, 2, 3),
        "phy_fisher",
        {
            "diffusivity": 0.004,
            "reactivity": 20.0,
            "dt": 0.001,
            "ic_options": {"offset_range": [-0.5, 0.5], "max_one": False},
            "ic_clamp": [0.0, 1.0],
        },
    ),
    "SwiftHohenberg": Row("stepper.reaction", (2, 3), "phy_sh", {"domain_extent": 10 * math.pi, "num_substeps": 5}),
    "GrayScott": Row(
        "stepper.reaction",
        (2, 3),
        "phy_gs",
        {
            "dt": 10.0,
            "num_substeps": 10,
            "ic": ["gaussian_blobs", "gaussian_blobs"],
            "ic_options": [{"one_complement": True}, {}],
        },
    ),
    # 2D vorticity
    "NavierStokesVorticity": Row("stepper", (2,), "phy_decay_turb", {"diffusivity": 0.0001}),
    "KolmogorovFlowVorticity": Row(
        "stepper",
        (2,),
        "phy_kolm_flow",
        # drag: APEBench's -0.1 acts twice in 2D there (exponax 0.1's zeroth-order Laplacian sums one per axis)
        {"domain_extent": 2 * math.pi, "diffusivity": 0.01, "drag": -0.2, "num_substeps": 20, "warmup_steps": 500},
    ),
}
ALIASES = {row.apebench: stepper for stepper, row in STEPPERS.items()}  # APEBench's key -> stepper


def resolution(stepper: str, dims: int) -> int:
    """The default ``num_points`` per axis of ``stepper`` in ``dims`` dimensions (0: none there).

    ```python
    resolution("Burgers", 3), resolution("KuramotoSivashinsky", 3)   # (32, 96)
    ```
    """
    return STEPPERS[stepper].points.get(dims, RESOLUTION.get(dims, 0))


def apebench_names() -> list[str]:
    """Every alias: ``apebench:<scenario>_<N>d`` for each row and dimension."""
    return [f"{APEBENCH}{row.apebench}_{d}d" for row in STEPPERS.values() for d in row.dims]


def resolve_alias(name: str) -> tuple[str, int]:
    """``(stepper, num_spatial_dims)`` of ``"apebench:<scenario>_<N>d"``, or a :class:`SpecError`
    naming the aliases there are.

    ```python
    resolve_alias("apebench:phy_adv_2d")   # ("Advection", 2)
    ```
    """
    scenario, _, dims = name.removeprefix(APEBENCH).rpartition("_")
    stepper = ALIASES.get(scenario)
    if stepper is None or dims not in {f"{d}d" for d in STEPPERS[stepper].dims}:
        whole = name.removeprefix(APEBENCH)
        if whole in ALIASES:  # the scenario without its dimensions
            hint = f" (give its dimensions: {', '.join(f'{name}_{d}d' for d in STEPPERS[ALIASES[whole]].dims)})"
        elif stepper is not None:  # a scenario in dimensions it is not defined in
            named = ", ".join(f"{APEBENCH}{scenario}_{d}d" for d in STEPPERS[stepper].dims)
            hint = f" (it is defined as {named})"
        else:  # the dimensions written elsewhere ("2d_phy_adv"), or a name mistyped
            words = whole.split("_")
            moved = [w for w in words if re.fullmatch(r"\d+d", w)]
            turned = f"{APEBENCH}{'_'.join(w for w in words if w not in moved)}_{moved[0]}" if len(moved) == 1 else ""
            hint = (
                f" (did you mean {turned!r}?)" if turned in apebench_names() else did_you_mean(name, apebench_names())
            )
        raise SpecError(
            f"`problem.name`: unknown APEBench scenario {name!r}{hint}; give apebench:<scenario>_<N>d, one of "
            f"{', '.join(apebench_names())}"
        )
    return stepper, int(dims[:-1])


def check_dims(stepper: str, dims: Any = None) -> None:
    """Raise :class:`SpecError` unless ``stepper`` is defined in ``dims`` spatial dimensions (None:
    not given, 1)."""
    allowed = STEPPERS[stepper].dims
    if (1 if dims is None else dims) not in allowed or isinstance(dims, bool):
        got = "1 by default" if dims is None else f"got {dims!r}"
        raise SpecError(
            f"`problem.num_spatial_dims`: {got}; exponax:{stepper} is defined (as APEBench's "
            f"{STEPPERS[stepper].apebench}) in {' or '.join(map(str, allowed))} spatial dimension(s)"
            + (f": set num_spatial_dims={allowed[0]}" if dims is None else "")
        )
