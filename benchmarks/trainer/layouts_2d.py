"""2D emulators on XLA:CPU: the block trainer's two member layouts, per architecture and size.

``"map"`` (the CPU default): members split over the host devices with ``shard_map``, one after
another on each (``lax.map``), every convolution a per-member ``vmap`` of ``lax.conv`` over the
minibatch. ``"vmap"``: members vectorised, so every convolution becomes a grouped ``lax.conv``
over members. The workload: ``apebench:phy_adv_diff_2d`` at ``N x N`` points (20 training
trajectories of 10 steps: 200 pairs), batch 20, 4 members, one chunk of ``--epochs`` epochs
after a warm-up chunk (compile), fastest of ``--repeats``; seed-epochs/s and the ratio.

    python -m benchmarks.trainer.layouts_2d [--sizes 32 64] [--epochs 2] [--repeats 2]

``--forms``: the convolution forms themselves, outside the trainer: one gradient of the MSE of a
ConvNet-shaped stack (``--depth`` periodic 3 x 3 convolutions of ``--hidden`` channels, ReLU)
for ``MEMBERS`` members on a batch of 20 ``N x N`` states, members laid out as ``map``
(``lax.map``, each a ``lax.conv`` over the batch) or ``vmap`` (one grouped ``lax.conv``), each
convolution either ``lax.conv`` or im2col/matmul (the 9 shifted copies of the input stacked,
then one contraction with the weights, as the 1D fast path ``sweep/models/_fast.py`` does with
its taps); seconds per gradient (fastest of ``--repeats``) and each form's ratio to ``map``:

    python -m benchmarks.trainer.layouts_2d --forms --sizes 32 64 128

``--product``: the product's own forwards (``sweep.models.batched_forward``'s matmul path, forms
``im2col`` and ``shifted``, against ``jax.vmap`` of pdequinox's ``lax.conv``) on a periodic 2D
(or ``--dims 3``) pdequinox ``ConvNet`` (``--hidden`` channels, ``--depth``), ``MEMBERS`` members under
``lax.map`` on a batch of 20 states: seconds per gradient of the MSE (training) and per forward
(inference), fastest of ``--repeats``, and each form's ratio to ``lax.conv``:

    python -m benchmarks.trainer.layouts_2d --product --sizes 16 32 48 64 96

``--trainer``: the trainer itself before and after its 2D convolutions became matmuls, side by
side in one run: the ``"map"`` layout's chunk (as above) with every convolution ``lax.conv``
(the matmul path switched off: before) and with the product's choice (after), per ``--arch``:

    python -m benchmarks.trainer.layouts_2d --trainer --sizes 32 64 --arch ConvNet
"""

from __future__ import annotations

import argparse
import time

ARCHITECTURES = {
    "ConvNet": {"hidden_channels": 16, "depth": 4},
    "ClassicResNet": {"hidden_channels": 16, "num_blocks": 2},
    "ClassicUNet": {"hidden_channels": 8, "num_levels": 2},
    "ClassicFNO": {"hidden_channels": 16, "num_modes": 8, "num_blocks": 2},
}
MEMBERS = 4


def _spec(arch: str, size: int):
    import sweep

    return sweep.SweepSpec(
        name="layouts-2d",
        problem=sweep.Problem(
            "apebench:phy_adv_diff_2d", num_points=size, num_train=20, train_steps=10, num_test=2, test_steps=2
        ),
        model=sweep.Model(arch, **ARCHITECTURES[arch]),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(epochs=100, batch_size=20, report_every=1),
        seeds=MEMBERS,
    )


def _chunk_seconds(spec, data, layout: str, epochs: int, repeats: int) -> float:
    import jax

    import sweep

    block, state = sweep.init_block(spec, list(range(MEMBERS)), data=data, layout=layout)
    jax.block_until_ready(sweep.run_chunk(block, state, epochs))  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(sweep.run_chunk(block, state, epochs))
        best = min(best, time.perf_counter() - start)
    return best


def _conv_lax(w, x):
    """Periodic 3 x 3 convolution: ``x [batch, in, N, N]``, ``w [out, in, 3, 3]``."""
    import jax
    import jax.numpy as jnp

    padded = jnp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="wrap")
    return jax.lax.conv_general_dilated(padded, w, (1, 1), "VALID")


def _conv_im2col(w, x):
    """The same convolution as one matmul over the 9 shifted copies of ``x``."""
    import jax.numpy as jnp

    taps = jnp.stack([jnp.roll(x, (1 - i, 1 - j), axis=(2, 3)) for i in range(3) for j in range(3)], axis=2)
    return jnp.einsum("bctxy,oct->boxy", taps, w.reshape(*w.shape[:2], 9))


def form_seconds(form: str, size: int, hidden: int, depth: int, repeats: int) -> float:
    import jax
    import jax.numpy as jnp

    layout, conv_name = form.split("/")
    conv = _conv_im2col if conv_name == "im2col" else _conv_lax
    keys = jax.random.split(jax.random.key(0), depth + 2)
    widths = [1, *[hidden] * depth, 1]
    weights = [0.1 * jax.random.normal(k, (MEMBERS, o, i, 3, 3)) for k, i, o in zip(keys, widths[:-1], widths[1:])]
    x = jax.random.normal(keys[-1], (20, 1, size, size))

    def loss(ws):
        h = x
        for n, w in enumerate(ws):
            h = conv(w, h)
            h = jax.nn.relu(h) if n < len(ws) - 1 else h
        return jnp.mean((h - x) ** 2)

    grad = jax.grad(loss)
    run = jax.jit(jax.vmap(grad) if layout == "vmap" else lambda ws: jax.lax.map(grad, ws))
    jax.block_until_ready(run(weights))  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run(weights))
        best = min(best, time.perf_counter() - start)
    return best


FORMS = ("map/lax", "vmap/lax", "map/im2col", "vmap/im2col")


def forms(sizes: list[int], hidden: int, depth: int, repeats: int) -> None:
    print("grid      form          s/gradient  map/lax / form")
    for size in sizes:
        base = None
        for form in FORMS:
            seconds = form_seconds(form, size, hidden, depth, repeats)
            base = base or seconds
            print(f"{f'{size}x{size}':<9} {form:<13} {seconds:10.4f}  {base / seconds:6.2f}", flush=True)


def product_seconds(form: str, size: int, dims: int, hidden: int, depth: int, repeats: int) -> tuple[float, float]:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import pdequinox as pdeq

    from sweep.models import batched_forward

    def one(key):
        net = pdeq.arch.ConvNet(dims, 1, 1, hidden_channels=hidden, depth=depth, boundary_mode="periodic", key=key)
        return eqx.filter(net, eqx.is_array)

    keys = jax.random.split(jax.random.key(0), MEMBERS)
    params = jax.vmap(one)(keys)
    template = pdeq.arch.ConvNet(dims, 1, 1, hidden_channels=hidden, depth=depth, boundary_mode="periodic", key=keys[0])
    static = eqx.filter(template, eqx.is_array, inverse=True)
    x = jax.random.normal(jax.random.key(1), (20, 1, *(size,) * dims))
    forward = (
        batched_forward(template, matmul=False) if form == "lax.conv" else batched_forward(template, form, matmul=True)
    )

    def loss(p, xb):
        return jnp.mean((forward(eqx.combine(p, static), xb) - xb) ** 2)

    seconds = []
    for one_member in (jax.grad(loss), lambda p, xb: forward(eqx.combine(p, static), xb)):
        # the states an argument, not a constant: XLA would fold their im2col into the program
        run = jax.jit(lambda ps, xb, f=one_member: jax.lax.map(lambda p: f(p, xb), ps))
        jax.block_until_ready(run(params, x))  # compile
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(run(params, x))
            best = min(best, time.perf_counter() - start)
        seconds.append(best)
    return seconds[0], seconds[1]


def product(sizes: list[int], dims: int, hidden: int, depth: int, repeats: int) -> None:
    print("grid      form        s/gradient  lax.conv / form  s/forward  lax.conv / form")
    for size in sizes:
        base = None
        for form in ("lax.conv", "im2col", "shifted"):
            grad, fwd = product_seconds(form, size, dims, hidden, depth, repeats)
            base = base or (grad, fwd)
            print(
                f"{'x'.join([str(size)] * dims):<9} {form:<10} {grad:11.4f}  {base[0] / grad:15.2f}  {fwd:9.4f}  {base[1] / fwd:15.2f}",
                flush=True,
            )


def trainer(sizes: list[int], archs: list[str], epochs: int, repeats: int) -> None:
    from unittest import mock

    import sweep

    sweep.configure()
    print(
        f"{'architecture':<14} {'grid':>7} {'lax.conv s':>10} {'product s':>10} {'speed-up':>9}  seed-epochs/s (before, after)"
    )
    for size in sizes:
        data = None
        for arch in archs:
            spec = _spec(arch, size)
            data = data if data is not None else sweep.load_data(spec)
            with mock.patch("sweep.models._fast._matmul_wins", lambda spatial: False):
                sweep.clear_caches()
                before = _chunk_seconds(spec, data, "map", epochs, repeats)
            sweep.clear_caches()
            after = _chunk_seconds(spec, data, "map", epochs, repeats)
            rate = MEMBERS * epochs
            print(
                f"{arch:<14} {f'{size}x{size}':>7} {before:10.3f} {after:10.3f} {before / after:9.2f}  "
                f"{rate / before:.2f}, {rate / after:.2f}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--arch", nargs="+", default=list(ARCHITECTURES))
    parser.add_argument("--forms", action="store_true", help="time the convolution forms (lax.conv, im2col)")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--dims", type=int, default=2, help="--product: spatial dimensions (2 or 3)")
    parser.add_argument("--product", action="store_true", help="time the product's forwards (im2col, shifted)")
    parser.add_argument("--trainer", action="store_true", help="the trainer with lax.conv (before) and the product")
    args = parser.parse_args(argv)
    if args.trainer:
        trainer(args.sizes, args.arch, args.epochs, args.repeats)
        return
    if args.product:
        product(args.sizes, args.dims, args.hidden, args.depth, args.repeats)
        return
    if args.forms:
        forms(args.sizes, args.hidden, args.depth, args.repeats)
        return

    import sweep

    sweep.configure()
    print(f"{'architecture':<14} {'grid':>7} {'map s':>8} {'vmap s':>8} {'map/vmap':>9}  seed-epochs/s (map, vmap)")
    for size in args.sizes:
        data = None
        for arch in args.arch:
            spec = _spec(arch, size)
            data = data if data is not None else sweep.load_data(spec)
            t_map = _chunk_seconds(spec, data, "map", args.epochs, args.repeats)
            t_vmap = _chunk_seconds(spec, data, "vmap", args.epochs, args.repeats)
            rate = MEMBERS * args.epochs
            print(
                f"{arch:<14} {f'{size}x{size}':>7} {t_map:8.3f} {t_vmap:8.3f} {t_map / t_vmap:9.2f}  "
                f"{rate / t_map:.2f}, {rate / t_vmap:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
