"""What was tried to speed up the trainer's chunk (issue 14), measured in alternating fresh processes.

``--flags=VALUE`` (repeated): the steady chunk of ``trainer_chunk_profile.py``'s workload (10 seeds x 5 epochs of the
reference ConvNet, the CPU default layout, fastest of 4 chunks after a warm-up) under each
``XLA_FLAGS`` variant given, ``--rounds`` times in turn. ``--convs``: one member's epoch (25 steps of
batch 32 inside ``lax.scan``, one host device) with the convolution written each way below, and
the largest gradient difference to the product's forward:

- ``product``: ``sweep.models.batched_forward`` (im2col, one matmul per layer);
- ``custom_vjp``: the same forward with a hand-written backward (input gradient as the im2col of
  the padded output gradient times the flipped kernel; weight gradient from the saved patches);
- ``elementwise_ends``: lifting (1 input channel) and projection (1 output channel) as fused
  multiply-adds instead of degenerate matmuls;
- ``unrolled_scan``: the product's forward with ``lax.scan(..., unroll=5)`` over the steps;
- ``native``: pdequinox's own convolution, ``jax.vmap(model)`` (jax#12868 in a scan).

    python benchmarks/trainer_variants.py --flags= --flags=--xla_cpu_use_xnnpack=false --rounds 2
    python benchmarks/trainer_variants.py --convs product custom_vjp elementwise_ends unrolled_scan native
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CONVS = ("product", "custom_vjp", "elementwise_ends", "unrolled_scan", "native")


def chunk_seconds() -> float:
    import jax

    import sweep

    sweep.configure(compile_cache=None)
    spec = sweep.SweepSpec(
        name="c",
        problem=sweep.Problem("heat1d", val_fraction=0),
        model=sweep.Model("ConvNet", hidden_channels=16, depth=6, activation="relu", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-4),
        training=sweep.Training(epochs=5, batch_size=32, report_every=5),
    )
    block, state = sweep.init_block(spec, range(10), data=sweep.load_data(spec))
    state, out = sweep.run_chunk(block, state, 5)
    jax.block_until_ready(out)
    times = []
    for _ in range(4):
        start = time.perf_counter()
        state, out = sweep.run_chunk(block, state, 5)
        jax.block_until_ready(out)
        times.append(time.perf_counter() - start)
    return min(times)


def _im2col(x, k: int, lo: int, hi: int):
    """``x`` (B, N, C) zero-padded, K shifted copies side by side: (B * N', K * C), N'."""
    import jax.numpy as jnp

    b, n, c = x.shape
    padded = jnp.pad(x, ((0, 0), (lo, hi), (0, 0)))
    n_out = n + lo + hi - k + 1
    return jnp.concatenate([padded[:, i : i + n_out] for i in range(k)], -1).reshape(b * n_out, k * c), n_out


def _conv(x, w, lo: int = 1, hi: int = 1):
    """1D convolution of channels-last ``x`` with ``w`` (O, C, K) as one matmul."""
    o, c, k = w.shape
    patches, n_out = _im2col(x, k, lo, hi)
    return (patches @ w.transpose(0, 2, 1).reshape(o, k * c).T).reshape(x.shape[0], n_out, o)


def _conv_custom_vjp():
    import jax

    @jax.custom_vjp
    def conv(x, w):
        return _conv(x, w)

    def forward(x, w):
        o, c, k = w.shape
        patches, n_out = _im2col(x, k, 1, 1)
        return (patches @ w.transpose(0, 2, 1).reshape(o, k * c).T).reshape(x.shape[0], n_out, o), (
            patches,
            w,
            x.shape[1],
        )

    def backward(res, g):
        patches, w, n = res
        o, c, k = w.shape
        b, n_out, _ = g.shape
        dw = (g.reshape(b * n_out, o).T @ patches).reshape(o, k, c).transpose(0, 2, 1)
        low = k - 1 - 1  # dx[n] = sum_i W_i^T g[n + lo - i]: the im2col of g with the taps flipped
        g_patches, _ = _im2col(g, k, low, n + k - 1 - low - n_out)
        dx = (g_patches @ w[:, :, ::-1].transpose(2, 0, 1).reshape(k * o, c)).reshape(b, n, c)
        return dx, dw

    conv.defvjp(forward, backward)
    return conv


def _conv_elementwise_ends(x, w):
    import jax.numpy as jnp

    o, c, k = w.shape
    n = x.shape[1]
    padded = jnp.pad(x, ((0, 0), (1, 1), (0, 0)))
    if c == 1:
        return sum(padded[:, i : i + n, :] * w[:, 0, i] for i in range(k))
    if o == 1:
        return sum(jnp.sum(padded[:, i : i + n, :] * w[0, :, i], -1, keepdims=True) for i in range(k))
    return _conv(x, w)


def member_epoch_seconds(conv: str) -> tuple[float, float]:
    """(fastest seconds of one member's epoch, largest gradient difference to the product's)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax
    import pdequinox as pdeqx

    jax.config.update("jax_num_cpu_devices", 1)
    from sweep.models import batched_forward

    key = jax.random.PRNGKey(0)
    net = pdeqx.arch.ConvNet(
        1, 1, 1, hidden_channels=16, depth=6, activation=jax.nn.relu, key=key, boundary_mode="dirichlet"
    )
    x, y = jax.random.normal(key, (800, 1, 48)), jax.random.normal(jax.random.PRNGKey(1), (800, 1, 48))
    params, static = eqx.partition(net, eqx.is_array)
    optimizer = optax.adam(3e-4)

    def layers_with(conv_fn):
        def forward(model, xb):
            h = jnp.swapaxes(xb, 1, 2)
            for i, layer in enumerate(model.layers):
                h = conv_fn(h, layer.weight) + layer.bias.reshape(-1)
                h = jax.nn.relu(h) if i < len(model.layers) - 1 else h
            return jnp.swapaxes(h, 1, 2)

        return forward

    forward = {
        "product": batched_forward(net),
        "unrolled_scan": batched_forward(net),
        "custom_vjp": layers_with(_conv_custom_vjp()),
        "elementwise_ends": layers_with(_conv_elementwise_ends),
        "native": lambda m, xb: jax.vmap(m)(xb),
    }[conv]

    def loss(p, fwd, xb, yb):
        return jnp.mean((fwd(eqx.combine(p, static), xb) - yb) ** 2)

    @jax.jit
    def epoch(p, s):
        def step(carry, i):
            p, s = carry
            xb, yb = (jax.lax.dynamic_slice_in_dim(a, i * 32, 32) for a in (x, y))
            g = jax.grad(loss)(p, forward, xb, yb)
            updates, s = optimizer.update(g, s, p)
            return (optax.apply_updates(p, updates), s), None

        return jax.lax.scan(step, (p, s), jnp.arange(25), unroll=5 if conv == "unrolled_scan" else 1)[0]

    grads = [jax.grad(loss)(params, f, x[:32], y[:32]) for f in (batched_forward(net), forward)]
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(*map(jax.tree_util.tree_leaves, grads)))
    state = epoch(params, optimizer.init(params))
    jax.block_until_ready(state)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(5):
            state = epoch(*state)
        jax.block_until_ready(state)
        best = min(best, (time.perf_counter() - start) / 5)
    return best, diff


def child(args: list[str], env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--flags",
        action="append",
        metavar="XLA_FLAGS",
        help="an XLA_FLAGS variant, as --flags=VALUE ('' for none); repeat for more",
    )
    parser.add_argument("--convs", nargs="+", choices=CONVS)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs="?", const="chunk", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "chunk":
        print(json.dumps({"seconds": chunk_seconds()}))
        return
    if args.child:
        seconds, diff = member_epoch_seconds(args.child)
        print(json.dumps({"seconds": seconds, "diff": diff}))
        return
    for r in range(args.rounds):
        for flags in args.flags or []:
            s = child(["--child"], {**os.environ, "XLA_FLAGS": flags})["seconds"]
            print(f"round {r + 1} XLA_FLAGS={flags!r:<58} chunk {s:.3f} s = {50 / s:6.1f} seed-epochs/s", flush=True)
        for conv in args.convs or []:
            out = child(["--child", conv])
            print(
                f"round {r + 1} {conv:<18} {out['seconds'] * 1e3:7.2f} ms per member-epoch "
                f"({1 / out['seconds']:5.1f} epochs/s), gradient max difference {out['diff']:.1e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
