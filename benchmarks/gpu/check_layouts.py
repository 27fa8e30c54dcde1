"""Check 2: block layouts on this backend, and how far block invariance holds there.

- Throughput: the ``"vmap"`` and ``"map"`` layouts at 128 seeds, seed-epochs/s of a warm chunk
  (the same chunk after a cold one), with the platform each layout's block ran on.
- Invariance: seeds 0..3 trained alone (blocks of one) against the same seeds inside blocks of
  16 and 1024, a few epochs, per layout: the largest absolute difference over every parameter
  (and relative to the largest parameter) and over the test losses. On CPU the ``"map"`` layout is
  bit-identical; the ``"vmap"`` numbers on a GPU are the tolerance the docs state (docs/guides/gpus.md).
"""

from __future__ import annotations

from benchmarks.gpu import _kit

FULL = {"seeds": 128, "epochs": 5, "probe_seeds": 4, "blocks": [16, 1024], "invariance_epochs": 3}
DRY = {"seeds": 4, "epochs": 1, "probe_seeds": 2, "blocks": [4, 8], "invariance_epochs": 1}
LAYOUTS = ("vmap", "map")


def throughput(spec, data, seeds: int, epochs: int, layout: str) -> dict:
    import sweep

    block, state = sweep.init_block(spec, range(seeds), data=data, layout=layout)
    cold_s, (state, _) = _kit.timed(lambda: sweep.run_chunk(block, state, epochs))
    warm_s, _ = _kit.timed(lambda: sweep.run_chunk(block, state, epochs))
    return {
        "platform": block.devices[0].platform,
        "devices": len(block.devices),
        "cold_s": cold_s,
        "warm_s": warm_s,
        "seed_epochs_per_s": seeds * epochs / warm_s,
    }


def _trained(spec, data, seeds, layout: str):
    """(parameter leaves as NumPy arrays with a member axis, last test loss per member)."""
    import equinox as eqx
    import jax
    import numpy as np

    import sweep

    model, history = sweep.train_block(spec, seeds, data=data, layout=layout)
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))]
    return leaves, np.asarray(history.test_loss[:, -1])


def invariance(spec, data, probe: int, blocks: list[int], layout: str) -> dict:
    import numpy as np

    alone = [_trained(spec, data, [s], layout) for s in range(probe)]
    scale = max(float(np.abs(leaf).max()) for leaves, _ in alone for leaf in leaves)
    out = {"largest_param": scale}
    for size in blocks:
        leaves, test = _trained(spec, data, range(size), layout)
        params = max(float(np.abs(a[0] - b[s]).max()) for s, (one, _) in enumerate(alone) for a, b in zip(one, leaves))
        losses = max(abs(float(loss[0]) - float(test[s])) for s, (_, loss) in enumerate(alone))
        out[str(size)] = {
            "params_max_abs": params,
            "params_max_rel": params / scale,
            "test_loss_max_abs": losses,
            "bitwise_equal": params == 0 and losses == 0,
        }
    return out


def main() -> None:
    args = _kit.options(__doc__.splitlines()[0])
    sizes = DRY if args.dry else FULL
    res = _kit.Result(args.out, check="layouts", sizes=sizes, throughput={}, invariance={})

    def body() -> None:
        _kit.setup_jax()
        import sweep

        work = _kit.workload(epochs=sizes["epochs"], report_every=sizes["epochs"], quick=args.dry)
        spec = _kit.heat_spec(work, name="check-layouts", seeds=sizes["seeds"])
        data = sweep.load_data(spec)
        res["default_layout"] = sweep.init_block(spec, [0], data=data)[0].layout
        for layout in LAYOUTS:
            res.data["throughput"][layout] = throughput(spec, data, sizes["seeds"], sizes["epochs"], layout)
            res.flush()
        vmap, map_ = res.data["throughput"]["vmap"], res.data["throughput"]["map"]
        res["vmap_over_map"] = vmap["seed_epochs_per_s"] / map_["seed_epochs_per_s"]
        print(
            f"check layouts: vmap {vmap['seed_epochs_per_s']:.1f} ({vmap['platform']}), map "
            f"{map_['seed_epochs_per_s']:.1f} ({map_['platform']}) seed-epochs/s",
            flush=True,
        )
        work.epochs = work.report_every = sizes["invariance_epochs"]
        short = _kit.heat_spec(work, name="check-invariance", seeds=sizes["seeds"])
        for layout in LAYOUTS:
            res.data["invariance"][layout] = invariance(short, data, sizes["probe_seeds"], sizes["blocks"], layout)
            res.flush()
            print(f"check layouts: invariance {layout}: {res.data['invariance'][layout]}", flush=True)

    _kit.report(res, body)


if __name__ == "__main__":
    main()
