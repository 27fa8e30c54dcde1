"""Check 8: the forms of a 2D convolution on this device, the measurement behind the trainer's
choice of form (issue 31; ``benchmarks/trainer/layouts_2d.py`` measures them on CPU).

- ``forms``: one gradient of the MSE of a ConvNet-shaped stack (periodic 3 x 3 convolutions,
  ReLU) for 4 members on a batch of 20 ``N x N`` states, members laid out as ``map`` (``lax.map``)
  or ``vmap`` (one grouped ``lax.conv``), each convolution ``lax.conv`` or im2col/matmul; seconds
  per gradient, fastest of ``repeats``.
- ``product``: the product's own forwards (``sweep.models.batched_forward``: ``lax.conv``,
  and the matmul forms ``im2col`` and ``shifted``) on a periodic 2D pdequinox ConvNet, 4 members
  under ``lax.map``: seconds per gradient (training) and per forward (inference).
"""

from __future__ import annotations

from benchmarks.gpu import _kit

FULL = {"sizes": [32, 64, 128], "hidden": 16, "depth": 4, "repeats": 3}
DRY = {"sizes": [8], "hidden": 2, "depth": 1, "repeats": 1}
PRODUCT_FORMS = ("lax.conv", "im2col", "shifted")


def measure(sizes: dict, say=print) -> dict:
    """The check's numbers at ``sizes`` (:data:`FULL` or :data:`DRY`), in this process."""
    import jax

    from benchmarks.trainer.layouts_2d import FORMS, form_seconds, product_seconds

    out: dict = {"platform": jax.devices()[0].platform, "forms": {}, "product": {}}
    h, d, r = sizes["hidden"], sizes["depth"], sizes["repeats"]
    for size in sizes["sizes"]:
        forms = {form: form_seconds(form, size, h, d, r) for form in FORMS}
        product = {}
        for form in PRODUCT_FORMS:
            gradient, forward = product_seconds(form, size, 2, h, d, r)
            product[form] = {"gradient_s": gradient, "forward_s": forward}
        out["forms"][str(size)], out["product"][str(size)] = forms, product
        fastest = min(forms, key=forms.__getitem__)
        best = min(product, key=lambda f: product[f]["gradient_s"])
        say(f"check layouts2d: {size}x{size}: fastest form {fastest}; the product's fastest gradient {best}")
    return out


if __name__ == "__main__":
    _kit.measured_check("layouts2d", __doc__.splitlines()[0], measure, (FULL, DRY))
