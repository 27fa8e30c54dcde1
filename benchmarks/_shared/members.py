"""Members that were never trained, as a block, a store or a whole sweep directory: what the
ensemble, serving, store and GPU benchmarks read, without the time training would take.

```python
ens = sweep.load(random_store(tmp, 512))        # 512 reference ConvNets, heat1d 48 points
members = member_list(ens)                      # each member alone (a baseline's loop)
untrained_sweep(root, spec)                     # plan.json + a block checkpoint per planned trial
```
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from benchmarks._shared.workload import DEPTH, HIDDEN, POINTS, heat_spec


def random_block(members: int, trajectory_steps: int = 0, hidden: int = HIDDEN, depth: int = DEPTH) -> SimpleNamespace:
    """A block of ``members`` randomly initialised reference ConvNets (``hidden`` 16, ``depth`` 6 unless
    given) on heat1d with 48 points and 250 samples (200 of them the test
    set), as the aggregator takes blocks (with ``trajectory_steps``, its problem makes test
    trajectories of that many steps)."""
    import equinox as eqx
    import jax
    import numpy as np

    from sweep.models import build_model
    from sweep.training import History

    steps = {"trajectory_steps": trajectory_steps} if trajectory_steps else {}
    spec = heat_spec(samples=250, seeds=members, hidden=hidden, depth=depth, **steps)
    keys = jax.random.split(jax.random.key(0), members)
    model = eqx.filter_vmap(lambda k: build_model("ConvNet", dict(spec.model.options), (1, POINTS), 1, key=k))(keys)
    seeds = tuple(range(members))
    zeros = np.zeros((members, 1), np.float32)
    history = History(
        seeds, ({},), np.array([1], np.int32), zeros, {"loss": zeros}, {"loss": zeros}, np.zeros(members, bool)
    )
    return SimpleNamespace(
        spec=spec,
        seeds=seeds,
        hparams=({},),
        shapes=((1, POINTS), 1, 200),
        history=history,
        state=SimpleNamespace(params=eqx.filter(model, eqx.is_array)),
        trial_id="bench",
    )


def random_store(directory: str, members: int, hidden: int = HIDDEN, depth: int = DEPTH) -> str:
    """A store of :func:`random_block`'s members under ``directory``; returns its path."""
    from sweep.store import aggregate_blocks

    return aggregate_blocks(f"{directory}/ensembles", [random_block(members, hidden=hidden, depth=depth)])


def member_list(ensemble) -> list:
    """Every member of ``ensemble`` alone (its stacked parameters sliced), in member order."""
    import equinox as eqx
    import jax

    stacked = ensemble.stacked()
    return [
        jax.tree_util.tree_map(lambda a, i=i: a[i] if eqx.is_array(a) else a, stacked) for i in range(len(ensemble))
    ]


def untrained_sweep(root: Path, spec, *, rng=None, progress: Callable[[int, int], None] | None = None) -> None:
    """A sweep directory as ``sweep.run`` leaves it, without training: ``plan.json`` from the
    product's planner and, for every planned trial, its block's initial state (``init_block``)
    saved with the product's writer as ``tune-0001/<trial_key>/checkpoint_000000``, with a history
    of one report: zero losses, or made-up lognormal ones drawn from ``rng`` (a NumPy generator).
    ``progress(done, trials)`` is called after each block."""
    import numpy as np

    import sweep
    from sweep.planning import make_plan
    from sweep.training import History, data_shapes, save_block

    plan = make_plan(spec)
    root.mkdir(parents=True)
    (root / "plan.json").write_text(json.dumps(plan.to_dict()))
    data = sweep.load_data(plan.trials[0].spec)
    shapes = data_shapes(data)
    for i, trial in enumerate(plan.trials):
        block, state = sweep.init_block(trial.spec, trial.seeds, trial.hparams, data)
        m = len(trial.seeds) * len(block.hparams)
        if rng is None:
            train = val = test = np.zeros((m, 1), np.float32)
        else:
            train = rng.lognormal(-4, 1, (m, 1)).astype(np.float32)
            val, test = ((train * rng.lognormal(0, 0.1, (m, 1))).astype(np.float32) for _ in range(2))
        history = History(
            block.seeds, block.hparams, np.array([1], np.int32), train, {"loss": val}, {"loss": test}, np.zeros(m, bool)
        )
        save_block(
            root / "tune-0001" / trial.trial_key / "checkpoint_000000",
            spec=trial.spec,
            state=state,
            history=history,
            shapes=shapes,
            trial_id=trial.trial_key,
        )
        if progress is not None:
            progress(i + 1, len(plan.trials))
