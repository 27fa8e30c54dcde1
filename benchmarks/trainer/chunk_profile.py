"""Where one compiled training chunk of the reference workload spends its time (``jax.profiler``).

Workload of ``vs_reference.py`` (heat1d 48 points, 1000 samples with ``val_fraction=0``: 800 to
train on; ConvNet hidden 16, depth 6, relu, dirichlet; adam 3e-4; batch 32; 10 seeds), the CPU
default layout. After a
warm-up chunk: the steady chunk time (fastest of ``--repeats``), seed-epochs/s, XLA's FLOP count of
the chunk program (``cost_analysis``) against a 2048x2048 float32 matmul measured in the same run,
then one chunk under ``jax.profiler.trace`` with the trace summarised per XLA operation (summed
over the host devices' threads, share of the busy time), grouped into kinds (dot/matmul, convolution,
copy/concatenate/pad/slice data movement, elementwise fusions, reductions, gather/scatter, rng, other).

    python -m benchmarks.trainer.chunk_profile [--epochs 5] [--seeds 10] [--repeats 3] [--top 25] [--hlo-dump DIR]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import re
import tempfile
import time
from pathlib import Path

from benchmarks._shared.flops import matmul_peak, seed_epoch_flops
from benchmarks._shared.workload import BATCH, heat_spec

KINDS = [  # (kind, regex on an HLO op name), first match wins
    ("dot", r"dot|matmul|gemm"),
    ("convolution", r"conv"),
    (
        "data movement (concatenate/pad/slice/copy)",
        r"concat|pad|slice|copy|transpose|broadcast|reshape|bitcast|dynamic-update",
    ),
    ("gather/scatter (minibatch rows)", r"gather|scatter"),
    ("reduce", r"reduce"),
    ("rng/sort (shuffle)", r"sort|rng|threefry|random|permut"),
    ("control (while/call)", r"while|call|conditional|tuple|parameter|constant|after-all|partition"),
    (
        "elementwise",
        r"fusion|add|multiply|subtract|divide|select|compare|maximum|exp|sqrt|rsqrt|log|tanh|negate|convert",
    ),
]
BOOKKEEPING = re.compile(r"ThunkExecutor|ThreadpoolListener|wait for", re.IGNORECASE)  # runtime, not work


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, pattern in KINDS:
        if re.search(pattern, low):
            return kind
    return "other"


def summarise(trace_dir: str) -> tuple[collections.Counter, float, int]:
    """(self microseconds per HLO op, span of the device threads' events in us, device threads) of the
    newest trace. Only XLA's device threads are counted (the Python thread waits for them); nested
    events (a while loop and the ops it runs) count once, as self time."""
    files = sorted(Path(trace_dir).rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise SystemExit(f"no trace written under {trace_dir}")
    trace = json.loads(gzip.decompress(files[-1].read_bytes()))
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    by_thread = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and "XLA" in names.get((e["pid"], e["tid"]), ""):
            by_thread[(e["pid"], e["tid"])].append(e)
    per_op: collections.Counter = collections.Counter()
    t0, t1 = float("inf"), 0.0
    for events in by_thread.values():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # [end, name, self]
        for e in events:
            while stack and stack[-1][0] <= e["ts"]:
                _, name, own = stack.pop()
                per_op[name] += own
            name = e.get("args", {}).get("hlo_op") or e["name"].removeprefix("end: ")
            if BOOKKEEPING.search(name):
                name = "(XLA runtime: thunk executor, waiting)"
            if stack:
                stack[-1][2] -= e["dur"]
            stack.append([e["ts"] + e["dur"], name, e["dur"]])
            t0, t1 = min(t0, e["ts"]), max(t1, e["ts"] + e["dur"])
        for _, name, own in stack:
            per_op[name] += own
    return per_op, t1 - t0, len(by_thread)


def fusion_contents(dump_dir: str) -> dict[str, str]:
    """HLO fusion name -> the kinds of work in it (dot, convolution, reduce, gather, ...), read from
    the after-optimisations HLO dumps of the chunk program."""
    out = {}
    for path in Path(dump_dir).glob("*after_optimizations.txt"):
        text = path.read_text()
        computations = dict(re.findall(r"^(?:%)?(\S+) [^\n]*\{\n(.*?)^\}", text, re.MULTILINE | re.DOTALL))
        for name, callee in re.findall(r"%?([\w.\-]+) = [^\n]*? fusion\([^\n]*calls=%?([\w.\-]+)", text):
            body = computations.get(callee, "")
            found = [
                k
                for k in ("dot", "convolution", "gather", "scatter", "reduce", "concatenate", "pad", "slice")
                if re.search(rf"\b{k}\(", body)
            ]
            if found and found[0] in ("dot", "convolution"):
                out[name] = f"{found[0]} (fused{' with ' + '+'.join(found[1:]) if found[1:] else ''})"
            elif found and found[0] == "reduce":
                out[name] = "reduce fusion"
            elif found:
                out[name] = f"data movement fusion ({'+'.join(found)})"
            else:
                out[name] = "elementwise fusion"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=5, help="epochs per chunk")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--trace-dir", default=None)
    parser.add_argument(
        "--hlo-dump",
        default=None,
        help="where XLA dumps the HLO that says what each fusion holds (default: a temporary directory)",
    )
    args = parser.parse_args()
    args.hlo_dump = args.hlo_dump or tempfile.mkdtemp(prefix="sweep-chunk-hlo-")
    # before JAX starts a backend
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={args.hlo_dump} --xla_dump_hlo_as_text"
    import sweep

    sweep.configure()
    import jax

    spec = heat_spec(name="chunk", epochs=args.epochs, val_fraction=0)
    data = sweep.load_data(spec)
    block, state = sweep.init_block(spec, range(args.seeds), data=data)
    start = time.perf_counter()
    state, _ = sweep.run_chunk(block, state, args.epochs)
    first = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        state, losses = sweep.run_chunk(block, state, args.epochs)
        jax.block_until_ready(losses)
        times.append(time.perf_counter() - start)
    chunk = min(times)
    rate = args.seeds * args.epochs / chunk

    num_train = data.num_train
    batches = num_train // BATCH
    analytic = seed_epoch_flops(data.sample_shape[-1], num_train) * args.epochs * args.seeds
    peak = matmul_peak()

    print(
        f"chunk: {args.seeds} seeds x {args.epochs} epochs ({batches} steps of batch {BATCH} per epoch), layout "
        f"{block.layout}, {len(block.devices)} host devices; first call (compile) {first:.2f} s; steady "
        f"{chunk:.3f} s (fastest of {args.repeats}: {', '.join(f'{t:.3f}' for t in times)}) = {rate:.1f} seed-epochs/s"
    )
    print(
        f"matmul peak (2048x2048 float32, all cores) {peak / 1e9:.1f} GFLOP/s; conv matmul FLOPs (analytic, fwd + 2x bwd) "
        f"{analytic / 1e9:.2f} GFLOP per chunk = {analytic / chunk / 1e9:.1f} GFLOP/s = {analytic / chunk / peak:.0%} of the peak"
    )

    trace_dir = args.trace_dir or tempfile.mkdtemp(prefix="sweep-chunk-trace-")
    with jax.profiler.trace(trace_dir):
        state, losses = sweep.run_chunk(block, state, args.epochs)
        jax.block_until_ready(losses)
    per_op, span, threads = summarise(trace_dir)
    contents = fusion_contents(args.hlo_dump)
    runtime = per_op.pop("(XLA runtime: thunk executor, waiting)", 0.0)
    total = sum(per_op.values())
    print(
        f"trace ({trace_dir}): {len(per_op)} HLO ops on {threads} XLA threads over a {span / 1e6:.3f} s span: "
        f"{total / 1e6:.3f} thread-s in ops, {runtime / 1e6:.3f} thread-s in XLA's runtime (thunk executor, waiting); "
        f"shares below are of the time in ops"
    )

    def what(name: str) -> str:
        base = name.split(" ")[0]
        return contents.get(base) or kind_of(base)

    kinds: collections.Counter = collections.Counter()
    for name, us in per_op.items():
        kinds[what(name)] += us
    for kind, us in kinds.most_common(15):
        print(f"  {kind:<52} {us / 1e6:8.3f} s  {us / total:6.1%}")
    print(f"top {args.top} ops (self time):")
    for name, us in per_op.most_common(args.top):
        print(f"  {name[:60]:<60} {us / 1e6:8.3f} s  {us / total:6.1%}  [{what(name)}]")


if __name__ == "__main__":
    main()
