"""The fast forwards (im2col and shifted matmuls) equal ``jax.vmap(model)`` (outputs and gradients)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pdequinox as pdeq
import pytest
from helpers import convolves
from jax import lax

from sweep.models import batched_forward

KEY = jax.random.PRNGKey(0)
RTOL, ATOL = 1e-5, 1e-6
# float32 rounding: the shifted conv sums its taps one by one, im2col in one dot, and the vmap
# reference's convolution sums in an order that depends on the CPU (both agree with vmap to
# ~1e-15 in float64; in float32 an im2col gradient differed by 3.1e-6 on an AMD EPYC, by less
# than 1e-6 on the machines before it)
TOLERANCE = {"im2col": (RTOL, 2e-5), "shifted": (RTOL, 2e-5)}


def _make(cls, *args, seed: int = 0, **kwargs):
    """Build `cls` abstractly and fill its arrays from numpy (eager random init is slow)."""
    abstract = eqx.filter_eval_shape(cls, *args, key=KEY, **kwargs)
    rng = np.random.default_rng(seed)
    return jax.tree.map(
        lambda s: (
            jnp.asarray(rng.uniform(-0.7, 0.7, s.shape).astype(s.dtype)) if isinstance(s, jax.ShapeDtypeStruct) else s
        ),
        abstract,
    )


def _vmap(m, xb):
    return jax.vmap(m)(xb)


@eqx.filter_jit
def _value_and_grad(fwd, model, xb):
    def loss(m):
        out = fwd(m, xb)
        return jnp.mean((out - jnp.cos(out)) ** 2), out

    (_, out), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model)
    return out, grads


@pytest.fixture(params=["im2col", "shifted"])
def conv(request):
    return request.param


def _assert_matches(model, xb, *, fast: bool, conv: str):
    """``batched_forward`` takes the matmul path for ``model`` at these small sizes (if ``fast``),
    and that path equals ``jax.vmap(model)`` (``matmul=True``: whatever the backend and size would
    choose)."""
    assert convolves(batched_forward(model, conv=conv), model, xb) == (not fast)
    fwd = batched_forward(model, conv=conv, matmul=fast or None)
    out_ref, g_ref = _value_and_grad(_vmap, model, xb)
    out, g = _value_and_grad(fwd, model, xb)
    assert out.shape == out_ref.shape and out.dtype == out_ref.dtype
    rtol, atol = TOLERANCE[conv]
    np.testing.assert_allclose(out, out_ref, rtol=rtol, atol=atol)
    leaves_ref, leaves = jax.tree.leaves(g_ref), jax.tree.leaves(g)
    assert len(leaves) == len(leaves_ref) > 0
    for a, b in zip(leaves, leaves_ref):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _x(*shape):
    return jax.random.normal(jax.random.PRNGKey(1), shape)


@pytest.mark.parametrize(
    "dims, boundary_mode, kernel_size, use_bias, activation",
    [
        (1, "periodic", 3, True, jax.nn.relu),
        (1, "dirichlet", 4, False, jax.nn.tanh),
        (1, "neumann", 5, True, jax.nn.gelu),
        (1, "neumann", 2, False, lambda x: jax.nn.softmax(x)),  # not elementwise: per-sample path
        (2, "periodic", 3, True, jax.nn.relu),
        (2, "dirichlet", 4, False, jax.nn.tanh),
        (2, "neumann", 2, False, lambda x: jax.nn.softmax(x)),
    ],
)
def test_convnet_matches_vmap(dims, boundary_mode, kernel_size, use_bias, activation, conv):
    model = _make(
        pdeq.arch.ConvNet,
        dims,
        2,
        1,
        hidden_channels=3,
        depth=2,
        kernel_size=kernel_size,
        activation=activation,
        use_bias=use_bias,
        use_final_bias=not use_bias,
        boundary_mode=boundary_mode,
    )
    _assert_matches(model, _x(3, 2, 9) if dims == 1 else _x(2, 2, 6, 5), fast=True, conv=conv)


def test_classic_resnet_1d_matches_vmap(conv):
    model = _make(
        pdeq.arch.ClassicResNet,
        1,
        1,
        2,
        hidden_channels=(3, 4),
        num_blocks=1,
        use_norm=True,
        boundary_mode="dirichlet",
    )
    _assert_matches(model, _x(2, 1, 8), fast=True, conv=conv)


@pytest.mark.parametrize("dims, boundary_mode, shape", [(1, "periodic", (2, 2, 8)), (2, "neumann", (2, 2, 6, 6))])
def test_dilated_resnet_matches_vmap(dims, boundary_mode, shape, conv):
    model = _make(
        pdeq.arch.DilatedResNet,
        dims,
        2,
        1,
        hidden_channels=3,
        num_blocks=1,
        dilation_rates=(1, 2),
        boundary_mode=boundary_mode,
    )
    _assert_matches(model, _x(*shape), fast=True, conv=conv)


def test_strided_eqx_conv_matches_vmap(conv):
    layer = _make(eqx.nn.Conv, 1, 2, 3, 3, stride=2, padding="SAME", padding_mode="REFLECT")
    _assert_matches(layer, _x(2, 2, 9), fast=True, conv=conv)


def test_convnet_3d_matches_vmap(conv):
    model = _make(pdeq.arch.ConvNet, 3, 1, 1, hidden_channels=2, depth=1, boundary_mode="dirichlet")
    _assert_matches(model, _x(2, 1, 4, 5, 3), fast=True, conv=conv)


def test_classic_resnet_2d_matches_vmap(conv):
    model = _make(
        pdeq.arch.ClassicResNet, 2, 1, 1, hidden_channels=4, num_blocks=1, use_norm=True, boundary_mode="periodic"
    )
    _assert_matches(model, _x(2, 1, 5, 6), fast=True, conv=conv)


def test_strided_eqx_conv_2d_matches_vmap(conv):
    layer = _make(eqx.nn.Conv, 2, 2, 3, (3, 2), stride=(2, 1), dilation=(1, 2), padding="SAME", padding_mode="REFLECT")
    _assert_matches(layer, _x(2, 2, 7, 6), fast=True, conv=conv)


def test_2d_and_3d_take_the_matmul_path_where_it_was_measured_to_win():
    """On CPU: im2col (training) and shifted (inference) in 2D up to 96 x 96 points and in 3D up to
    16^3, ``lax.conv`` beyond; 1D always (docs/trainer-variants.md)."""
    assert jax.default_backend() == "cpu"

    def net(dims):
        return eqx.filter_eval_shape(pdeq.arch.ConvNet, dims, 1, 1, hidden_channels=2, depth=1, key=KEY)

    net_1d, net_2d, net_3d = net(1), net(2), net(3)
    for conv in ("im2col", "shifted"):
        forward = batched_forward(net_2d, conv=conv)
        assert not convolves(forward, net_2d, jnp.zeros((2, 1, 96, 96)))
        assert convolves(forward, net_2d, jnp.zeros((2, 1, 96, 97)))
        forward = batched_forward(net_3d, conv=conv)
        assert not convolves(forward, net_3d, jnp.zeros((2, 1, 16, 16, 16)))
        assert convolves(forward, net_3d, jnp.zeros((2, 1, 16, 16, 17)))
        assert not convolves(batched_forward(net_1d, conv=conv), net_1d, jnp.zeros((2, 1, 100_000)))


def test_unknown_conv_is_an_error():
    model = _make(pdeq.arch.ConvNet, 1, 1, 1, hidden_channels=2, depth=1)
    with pytest.raises(ValueError, match="`conv`: got 'fft'"):
        batched_forward(model, conv="fft")


def test_unsupported_falls_back():
    model, xb = _make(pdeq.arch.MLP, 1, 1, 1, num_points=8, width_size=4, depth=1), _x(2, 1, 8)
    fwd = batched_forward(model)
    np.testing.assert_array_equal(eqx.filter_jit(fwd)(model, xb), jax.vmap(model)(xb))
    with pytest.raises(ValueError, match=r"`matmul=True`: MLP has a layer without a matmul form"):
        batched_forward(model, matmul=True)


def test_unsupported_detected_structurally():
    def shape(cls, *args, **kwargs):
        return eqx.filter_eval_shape(cls, *args, key=KEY, **kwargs)

    unet = shape(pdeq.arch.ClassicUNet, 1, 1, 1, hidden_channels=2, num_levels=1)
    fno = shape(pdeq.arch.ClassicFNO, 1, 1, 1, hidden_channels=2, num_modes=2, num_blocks=1)
    modern = shape(pdeq.arch.ModernResNet, 1, 1, 1, hidden_channels=2, num_blocks=1)
    grouped = shape(eqx.nn.Conv, 1, 2, 2, 3, groups=2)
    for model in (unet, fno, modern, grouped):
        with pytest.raises(ValueError, match=f"`matmul=True`: {type(model).__name__} has a layer without"):
            batched_forward(model, matmul=True)
        assert convolves(batched_forward(model), model, jnp.zeros((2, 2 if model is grouped else 1, 8)))


def test_matmul_false_is_jax_vmap_and_other_values_are_refused():
    model, xb = _make(pdeq.arch.ConvNet, 1, 1, 1, hidden_channels=2, depth=1), _x(2, 1, 8)
    assert convolves(batched_forward(model, matmul=False), model, xb)
    np.testing.assert_array_equal(batched_forward(model, matmul=False)(model, xb), jax.vmap(model)(xb))
    with pytest.raises(ValueError, match=r"`matmul`: got 'yes'; expected True, False or None"):
        batched_forward(model, matmul="yes")  # type: ignore[arg-type]


def test_under_lax_map_over_members():
    """Stacked per-member params, lax.map over members inside jit, as the trainer does."""
    models = [
        _make(pdeq.arch.ConvNet, 1, 1, 1, hidden_channels=3, depth=1, boundary_mode="dirichlet", seed=i)
        for i in range(3)
    ]
    params = [eqx.partition(m, eqx.is_array)[0] for m in models]
    static = eqx.partition(models[0], eqx.is_array)[1]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *params)
    xb = _x(4, 1, 7)
    fwd = batched_forward(models[0])

    @jax.jit
    def run(stacked):
        return lax.map(lambda p: fwd(eqx.combine(p, static), xb), stacked)

    out = run(stacked)
    ref = jax.jit(lambda p: jax.vmap(lambda q: _vmap(eqx.combine(q, static), xb))(p))(stacked)
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
