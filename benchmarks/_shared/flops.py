"""The reference workload's arithmetic and this machine's matmul rate, for "share of the matmul peak".

The reference ConvNet (hidden 16, depth 6, kernel 3) is 7 convolutions: lifting 1 -> 16, five
16 -> 16, projection 16 -> 1. Counted analytically as matmuls: forward ``2 x batch x points x
kernel x in x out`` per layer, backward twice that (input and weight gradients), so 3x the
forward per training step.
"""

from __future__ import annotations

import time

from benchmarks._shared.workload import BATCH, DEPTH, HIDDEN

LAYERS = [(1, HIDDEN)] + [(HIDDEN, HIDDEN)] * (DEPTH - 1) + [(HIDDEN, 1)]  # (in, out) channels of each conv
KERNEL = 3


def step_flops(num_points: int, batch_size: int = BATCH) -> int:
    """Conv matmul FLOPs of one training step of one member (forward + backward)."""
    return 3 * sum(2 * batch_size * num_points * KERNEL * cin * cout for cin, cout in LAYERS)


def seed_epoch_flops(num_points: int, num_train: int, batch_size: int = BATCH) -> int:
    """Conv matmul FLOPs of one member's epoch (``num_train // batch_size`` steps)."""
    return step_flops(num_points, batch_size) * (num_train // batch_size)


def matmul_peak(size: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of a ``size x size`` float32 matmul on the default device (all cores), fastest of ``repeats``."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((size, size), jnp.float32)
    matmul = jax.jit(lambda x: x @ x)
    matmul(a).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best
