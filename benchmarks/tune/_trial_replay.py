"""A fresh process that does what a tiny trial's Ray worker does, step by step, timed (no Ray
cluster, no Tune): see ``trial_profile.py --replay``. Prints one JSON line of step -> seconds.

    python -m benchmarks.tune._trial_replay SPEC_JSON
"""

import json
import sys
import time

T0 = time.perf_counter()
steps = {}


def step(name, t):
    steps[name] = time.perf_counter() - t
    return time.perf_counter()


t = time.perf_counter()
import ray

t = step("import ray", t)
import ray.tune  # noqa: F401  (the function trainable's machinery)
from ray.train._internal import session  # noqa: F401

t = step("import ray.tune", t)
import sweep
from sweep.tune import _env
from sweep.tune._trainable import train_trial  # noqa: F401

t = step("import sweep (+ its trainable)", t)

spec = sweep.SweepSpec.from_dict(json.loads(sys.argv[1]))
config, hsets = spec.expand()[0]
_env.apply(dict(spec.resources))  # sweep.configure() with the trial's CPU count
t = step("trial env (before JAX starts)", t)
data = sweep.load_data(config)  # a trial takes it from the object store instead
t = time.perf_counter()
block, state = sweep.init_block(config, [0], hsets, data)
t = step("init_block (JAX backend, keys, initialiser from the compile cache)", t)
import tempfile
from pathlib import Path

from sweep.training import History, chunks, data_shapes, save_block

history = History.empty(block)
for i, n in enumerate(chunks(config.training)):
    state, evaluation = sweep.run_chunk(block, state, n)
    history = history.reported(state, evaluation)
    t = step(f"run_chunk {i + 1}" + (" (program from the compile cache)" if i == 0 else ""), t)
    with tempfile.TemporaryDirectory() as tmp:
        save_block(
            Path(tmp) / "block", spec=config, state=state, history=history, shapes=data_shapes(data), trial_id="x"
        )
    t = step(f"save_block {i + 1}", t)
steps["total in process"] = time.perf_counter() - T0
print(json.dumps(steps))
