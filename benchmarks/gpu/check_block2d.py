"""Check 7: the largest block of seeds that fits in 2D at APEBench's resolution on this device.

``apebench:phy_adv_2d`` at APEBench's defaults (160 x 160, 2500 training pairs) with APEBench's
default network (``Conv;34;10;relu``) and batch 20, the training program compiled (not run) in the
accelerator layout (``"vmap"``: every member at once) for blocks of ``small`` and ``large``
members (``benchmarks/trainer/largest_block_2d.py``, which measures the CPU's ``"map"`` layout):
XLA's memory analysis gives the bytes per member and the fixed bytes; the largest block is what
fits in ``headroom`` of the device's memory (``bytes_limit``; a fixed 2 GiB on CPU, a dry run).
That block is compiled too, and its bytes checked against the device's memory (``fits``).
"""

from __future__ import annotations

from benchmarks.gpu import _kit

FULL = {"scenario": "phy_adv", "points": None, "hidden": 34, "depth": 10, "small": 2, "large": 16, "headroom": 0.9}
# on CPU (no bytes_limit): a fixed 2 GiB stands for the device, so the dry run is the same anywhere
DRY = {
    "scenario": "phy_adv",
    "points": 8,
    "hidden": 2,
    "depth": 1,
    "small": 2,
    "large": 3,
    "headroom": 0.9,
    "limit": 2**31,
}


def measure(sizes: dict, say=print) -> dict:
    """The check's numbers at ``sizes`` (:data:`FULL` or :data:`DRY`), in this process."""
    import sweep
    from benchmarks.trainer.largest_block_2d import GIB, apebench_2d_spec, block_bytes
    from sweep.training import compiled_bytes

    spec = apebench_2d_spec(sizes["scenario"], sizes["points"], sizes["hidden"], sizes["depth"])
    data = sweep.load_data(spec)
    memory = _kit.device_memory()
    limit = memory["bytes_limit"] or sizes["limit"]
    per_member, fixed = block_bytes(
        spec, data, sizes["small"], sizes["large"], "vmap", lambda line: say(f"check block2d: {line}")
    )
    if per_member <= 0:
        raise SystemExit(
            f"check block2d: a member adds {per_member} bytes by XLA's memory analysis; cannot size a block"
        )
    largest = int((sizes["headroom"] * limit - fixed) // per_member)
    largest_bytes = compiled_bytes(spec, data, (), largest, layout="vmap")
    fits = largest_bytes <= limit  # sized for the headroom: the rest is the estimate's slack
    say(
        f"check block2d: {spec.problem.name}, train x {tuple(data.train.x.shape)}: per member "
        f"{per_member / 2**20:.2f} MiB, fixed {fixed / GIB:.3f} GiB; the largest block in "
        f"{sizes['headroom']:.0%} of {limit / GIB:.1f} GiB ({memory['platform']}): {largest} members "
        f"({largest_bytes / GIB:.2f} GiB compiled, fits: {fits})"
    )
    return {
        "train_x_shape": list(data.train.x.shape),
        "memory": memory | {"limit_bytes": limit},
        "per_member_bytes": per_member,
        "fixed_bytes": fixed,
        "largest_block": largest,
        "largest_block_bytes": largest_bytes,
        "fits": fits,
    }


def verdict(numbers: dict) -> None:
    if not numbers["fits"]:
        raise SystemExit("check block2d: the largest block estimated does not fit when compiled")


if __name__ == "__main__":
    _kit.measured_check("block2d", __doc__.splitlines()[0], measure, (FULL, DRY), verdict)
