"""exponax 0.1's ``fourier`` initial states, recorded for ``tests/test_scenarios.py``: run in the
APEBench venv (exponax 0.1.0, what APEBench draws its states with), never imports ``sweep``.

Writes ``tests/exponax01_fourier.npz``: for each case of :data:`CASES` (dimensions, points,
options of ``exponax.ic.RandomTruncatedFourierSeries``), the first states of the 4 training
trajectories of a problem with ``data_seed=0``, drawn the way ``sweep.problems`` draws them
(trajectory ``i`` from ``fold_in(fold_in(key(0), 0), i)``, through exponax's multi-channel
generator), with exponax 0.1's generator; and the cases as JSON.

    <apebench-venv>/bin/python -m benchmarks.trainer._exponax01_ic_side
"""

from __future__ import annotations

import json
from pathlib import Path

import exponax as ex
import jax
import numpy as np

CASES = {
    "d1": (1, 16, {"cutoff": 5, "max_one": True}),
    "d2": (2, 16, {"cutoff": 5, "max_one": True}),
    "d3": (3, 8, {"cutoff": 3, "max_one": True}),
    "offset": (1, 16, {"cutoff": 3, "offset_range": [-0.5, 0.5], "max_one": False}),
}


def main() -> None:
    assert ex.__version__.startswith("0.1"), f"exponax {ex.__version__}: run this in the APEBench venv (exponax 0.1)"
    arrays = {}
    for name, (dims, points, options) in CASES.items():
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        gen = ex.ic.RandomMultiChannelICGenerator([ex.ic.RandomTruncatedFourierSeries(dims, **kwargs)])
        train = jax.random.fold_in(jax.random.key(0), 0)  # split 0: "train"
        arrays[name] = np.stack([np.asarray(gen(points, key=jax.random.fold_in(train, i))) for i in range(4)])
    out = Path(__file__).resolve().parents[2] / "tests" / "exponax01_fourier.npz"
    np.savez_compressed(out, cases=json.dumps(CASES), exponax=ex.__version__, **arrays)
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
