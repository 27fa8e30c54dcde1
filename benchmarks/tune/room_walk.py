"""The room walk of ``sweep.run``: how often following its ``spec`` through the code re-enters a
module (a "room") it already left.

The walk, precisely: ``sweep.run`` trains a tiny fixed-seed spec in-process
(``RunOptions(executor="local")``: the loop, the fixed-seed policy, the local executor, the
aggregation) under ``sys.setprofile``. Every call of a function of ``sweep`` that receives the
spec object itself as an argument (not as ``self``: a method of the spec reads the parameter, it
goes nowhere) is a step, in the order the calls start; its room is the function's module.
Consecutive steps in one room are one visit. A re-entry is a visit to a room the walk has been in
before. ``--rounds`` gives the same walk for an adaptive race (a round policy of several rounds).

    python -m benchmarks.tune.room_walk            # the count, and the walk room by room
    python -m benchmarks.tune.room_walk --race     # the same for seeds=sweep.Adaptive(...)

The count is in docs/design.md (the target of issue 32: at most 10 for the fixed-seed walk).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import sweep

PACKAGE = str(Path(sweep.__file__).parent)


def tiny_spec(race: bool) -> sweep.SweepSpec:
    """A spec that trains in about a second per block on CPU (tests/helpers.py's ``tiny_spec``)."""
    seeds = sweep.Adaptive(start=2, step=2, max=4) if race else 4
    return sweep.SweepSpec(
        name="walk",
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0),
        model=sweep.Model("ConvNet", hidden_channels=4, depth=2, activation="relu", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-3),
        training=sweep.Training(epochs=2, batch_size=16, report_every=1),
        grid={"model.depth": (1, 2)} if race else {},
        seeds=seeds,
        seeds_per_trial=2,
    )


def walk(spec: sweep.SweepSpec, storage: str) -> list[str]:
    """The rooms (modules, dotted below ``sweep``) of the steps of the walk, one per visit."""
    steps: list[str] = []

    def profile(frame, event, arg) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(PACKAGE):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(frame.f_locals.get(n) is spec for n in names if n not in ("self", "cls")):
            room = frame.f_globals.get("__name__", "?").removeprefix("sweep.")
            if not steps or steps[-1] != room:
                steps.append(room)

    sys.setprofile(profile)
    try:
        sweep.run(spec, storage=storage, options=sweep.RunOptions(executor="local", progress="off"))
    finally:
        sys.setprofile(None)
    return steps


def reentries(rooms: list[str]) -> list[int]:
    """The positions of the visits to a room visited before."""
    seen: set[str] = set()
    out = []
    for i, room in enumerate(rooms):
        if room in seen:
            out.append(i)
        seen.add(room)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the re-entries of the room walk of sweep.run")
    parser.add_argument("--race", action="store_true", help="walk an adaptive race instead of fixed seeds")
    args = parser.parse_args(argv)
    sweep.configure()
    with tempfile.TemporaryDirectory() as storage:
        rooms = walk(tiny_spec(args.race), storage)
    again = set(reentries(rooms))
    for i, room in enumerate(rooms):
        print(f"{i:3d} {'again' if i in again else '     '} {room}")
    kind = "adaptive race" if args.race else "fixed seeds"
    print(f"{kind}: {len(rooms)} visits to {len(set(rooms))} rooms, {len(again)} re-entries")


if __name__ == "__main__":
    main()
