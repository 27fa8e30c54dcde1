"""Check 5: ``Ensemble.predict`` on the device against a loop of ``filter_jit`` member calls.

512 and 8192 randomly initialised members of the reference ConvNet (hidden 16, depth 6, 48
points; the store of ``benchmarks/ensemble/predict.py``, ``_shared/members.py``, built on the host) on 200 inputs. Each
member count runs in a fresh process: the device's peak memory after ``predict`` (before the
loop's members are put on the device) is what ``predict`` used. ``predict`` streams members from
the host, at its default chunk size and a larger one; the loop calls one jitted function per
member with the stacked parameters already on the device (it takes member i inside) and leaves
its outputs there (the loop's best case). Members x inputs per second, best of
``repeats`` (the methods take turns).
"""

from __future__ import annotations

import json
import tempfile

from benchmarks.gpu import _kit

FULL = {"members": [512, 8192], "inputs": 200, "chunks": [64, 1024], "repeats": 3}
DRY = {"members": [8, 16], "inputs": 20, "chunks": [4, 16], "repeats": 1}


def measure(members: int, inputs: int, chunks: list[int], repeats: int) -> dict:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import sweep
    from benchmarks._shared.members import random_store
    from benchmarks._shared.timing import best_of

    with tempfile.TemporaryDirectory() as tmp:
        with jax.default_device(jax.devices("cpu")[0]):  # the members are made on the host
            path = random_store(tmp, members)
        ens = sweep.load(path)
        x = np.asarray(jax.random.normal(jax.random.key(1), (inputs, 1, 48)), np.float32)
        out: dict = {"members": members, "inputs": inputs, "memory_before": _kit.device_memory(), "methods": {}}
        fns = {}
        for chunk in chunks:
            first_s, y = _kit.timed(lambda chunk=chunk: ens.predict(x, chunk_size=chunk))
            out[f"memory_after_predict_chunk_{chunk}"] = _kit.device_memory()
            out[f"first_call_s_chunk_{chunk}"] = first_s
            fns[f"predict_chunk_{chunk}"] = lambda chunk=chunk: ens.predict(x, chunk_size=chunk)
        out["output_bytes"] = int(y.nbytes)

        params, static = eqx.partition(ens.stacked(), eqx.is_array)
        params, x_device = jax.device_put((params, x))
        indices = list(jnp.arange(members))

        @eqx.filter_jit
        def one(params, i, x):  # member i of the stacked parameters on the device, on every input
            return jax.vmap(eqx.combine(jax.tree_util.tree_map(lambda a: a[i], params), static))(x)

        np.testing.assert_allclose(
            y[:4], np.stack([one(params, i, x_device) for i in indices[:4]]), rtol=1e-4, atol=1e-5
        )
        fns["jitted_loop"] = lambda: [one(params, i, x_device) for i in indices]
        times = best_of(fns, repeats)
    loop = times["jitted_loop"]
    for name, seconds in times.items():
        out["methods"][name] = {
            "seconds": seconds,
            "member_inputs_per_s": members * inputs / seconds,
            "speedup_over_loop": loop / seconds,
        }
    out["memory_end"] = _kit.device_memory()
    return out


def worker_options(parser) -> None:
    parser.add_argument("--worker", action="store_true", help="(internal) measure one member count")
    parser.add_argument("--members", type=int)


def main() -> None:
    args = _kit.options(__doc__.splitlines()[0], worker_options)
    sizes = DRY if args.dry else FULL
    if args.worker:
        _kit.setup_jax()
        print(json.dumps(_kit.plain(measure(args.members, sizes["inputs"], sizes["chunks"], sizes["repeats"]))))
        return
    deadline = _kit.deadline_from_env()
    res = _kit.Result(args.out, check="predict", sizes=sizes, runs={})

    def body() -> None:
        for members in sizes["members"]:
            flags = ["--worker", "--members", str(members)] + (["--dry"] if args.dry else [])
            res.data["runs"][str(members)] = run = _kit.run_worker(__spec__.name, flags, _kit.remaining(deadline))
            res.flush()
            rates = {k: f"{v['member_inputs_per_s']:.3g}" for k, v in run["methods"].items()}
            print(f"check predict: {members} members: member-inputs/s {rates}", flush=True)

    _kit.report(res, body)


if __name__ == "__main__":
    main()
