"""Ray Tune orchestration: the only package that imports ``ray`` (lazily, inside ``run``)."""

from ._plan import Plan as Plan
from ._plan import TrialPlan as TrialPlan
from ._plan import make_plan as make_plan


def plan(spec, storage=None, storage_filesystem=None) -> Plan:
    """The trials a sweep would run (structural configs x blocks of seeds), before anything runs."""
    return make_plan(spec)
