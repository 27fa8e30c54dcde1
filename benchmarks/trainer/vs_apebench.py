"""seed-sweep against APEBench on one scenario (1D, 2D or 3D): training time per seed-step, rollout nRMSE.

APEBench runs in its own environment (``--ape-python``, a venv with ``pip install apebench``)
through ``_apebench_side.py`` (run as a module of this repository), which trains N seeds of the
scenario as APEBench does (``one``, or ``sup;K`` with ``--unroll K``) and saves the exact data it
used and the trained networks.
This side is the product as a user runs it: ``Problem("apebench:<scenario>_<N>d", ...)`` (the
product's table of APEBench's scenarios) generates the scenario's data (the same PDE, stepper, grid, time step, trajectory counts and lengths and
initial-state generator; its own random draws), and ``sweep.train_block`` trains the same
architecture, optimiser (Adam with APEBench's warmup-cosine schedule), batch size, number of
update steps and unrolling (``Training(unroll=K)``), with the product's rollout metric
evaluated inside the compiled program at the report (``Training(rollout_steps=T,
rollout_metrics=("nrmse",))``). Then one function (:func:`rollout_nrmse`, APEBench's
``mean_nRMSE``) computes the rollout nRMSE of BOTH sides' networks on APEBench's test
trajectories, and the per-seed geometric means over the first 100 steps are compared with a
Mann–Whitney U test (two-sided; Welch's t and its 95% interval of the difference beside it).

Cross-checks printed: our stepper applied to APEBench's test states gives APEBench's next
states (the same PDE); :func:`rollout_nrmse` against APEBench's own ``perform_tests`` on its
networks, and against the product's in-program ``test_rollout_nrmse`` on seed-sweep's
networks and test trajectories.

    python -m benchmarks.trainer.vs_apebench --ape-python <apebench-venv>/bin/python [--smoke] [--unroll K]
    python -m benchmarks.trainer.vs_apebench --ape-python ... --scenario phy_adv_diff --dims 2 --points 32

Time per seed-step = training wall time / (seeds x update steps), each side timed in its own
process until the trained networks are ready (data generated before the clock starts, on both
sides), with the part spent compiling (JAX's compile events, ``_compile_clock``) shown and
taken out in the "net of compile" line, and the CPU time of the process beside it (the work
done: on a shared machine other processes stretch the wall clock of one side, not its CPU time). The seed-sweep time includes its in-program test
rollouts at the report; APEBench's excludes its tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._shared.compile_clock import clock
from benchmarks._shared.repo import ROOT

PRESETS = {  # APEBench's default network is Conv;34;10;relu, its default budget 10_000 steps
    "smoke": {"network": "Conv;16;6;relu", "steps": 250, "seeds": 8, "test_samples": 10, "test_steps": 100},
    "full": {"network": "Conv;34;10;relu", "steps": 1000, "seeds": 8, "test_samples": 30, "test_steps": 200},
}
REPORT_STEPS = (1, 5, 10, 25, 50, 100, 200)


def rollout_nrmse(stacked, trajectories) -> np.ndarray:
    """Per-step rollout nRMSE ``[members, steps]`` of a stacked (leading member axis) network.

    Each member rolls out autoregressively from ``trajectories[:, 0]`` for ``steps =
    trajectories.shape[1] - 1`` steps; at step ``t`` the error is APEBench's ``mean_nRMSE``
    (``exponax.metrics.mean_metric(exponax.metrics.nRMSE, pred, ref)``): over samples the mean
    of the sum over channels of ``||pred - ref||_2 / ||ref||_2`` over space (every spatial axis),
    the built-in ``apebench_nrmse``.
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from sweep.metrics import BUILTINS

    params, static = eqx.partition(stacked, eqx.is_array)
    nrmse = jax.vmap(BUILTINS["apebench_nrmse"].per_sample)

    @jax.jit
    def step(p, u, ref):  # one member, all samples [samples, channels, *space]: next state and its nRMSE
        u = jax.vmap(eqx.combine(p, static))(u)
        return u, jnp.mean(nrmse(u, ref))

    trajectories = jnp.asarray(trajectories)
    members = jax.tree_util.tree_leaves(params)[0].shape[0]
    out = np.zeros((members, trajectories.shape[1] - 1))
    for m in range(members):  # a jitted step per call: convs inside lax.scan are slow on XLA:CPU
        p, u = jax.tree_util.tree_map(lambda a, m=m: a[m], params), trajectories[:, 0]
        for t in range(out.shape[1]):
            u, out[m, t] = step(p, u, trajectories[:, t + 1])
    return out


def gmean_first(curves: np.ndarray, upto: int = 100) -> np.ndarray:
    """Geometric mean over steps 1..min(T, upto) per member (APEBench's ``aggregate_gmean``)."""
    return np.exp(np.mean(np.log(curves[:, :upto]), axis=1))


def run_apebench(args, preset: dict, out: Path) -> dict:
    cmd = [
        args.ape_python,
        "-m",
        "benchmarks.trainer._apebench_side",
        "--scenario",
        args.scenario,
        "--scenario-kwargs",
        json.dumps(scenario_kwargs(preset, args.unroll, args.dims, args.points)),
        "--optim-config",
        optim_config(preset),
        "--network",
        preset["network"],
        "--train",
        "one" if args.unroll == 1 else f"sup;{args.unroll}",
        "--num-seeds",
        str(preset["seeds"]),
        "--out",
        str(out),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS")}
    with open(out / "apebench.log", "w") as log:
        done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        sys.exit(f"APEBench side failed (exit {done.returncode}); see {out / 'apebench.log'}")
    return json.loads((out / "side.json").read_text())


def scenario_kwargs(preset: dict, unroll: int, dims: int, points: int | None) -> dict:
    """Test set size and horizon of the preset, the spatial dimensions and (if given) the points
    per axis; with ``sup;K`` training trajectories of 49 + K steps, so that each holds 50 windows
    of K + 1 states, as many as one-step training has pairs (and the windows fill whole
    minibatches of 20 on both sides)."""
    out = {
        "num_test_samples": preset["test_samples"],
        "test_temporal_horizon": preset["test_steps"],
        "num_spatial_dims": dims,
    }
    out |= {"num_points": points} if points is not None else {}
    return out | ({"train_temporal_horizon": 49 + unroll} if unroll > 1 else {})


def optim_config(preset: dict) -> str:
    """APEBench's default schedule shape (warm-up over the first 20% of the steps) for ``steps``."""
    return f"adam;{preset['steps']};warmup_cosine;0.0;1e-3;{preset['steps'] // 5}"


def problem_of(sweep, side: dict):
    """seed-sweep's ``Problem("apebench:<scenario>_<N>d", ...)`` of the scenario ``side`` ran: the
    product's own table gives the PDE and its coefficients; the grid, time step, trajectory counts
    and lengths, warm-up and initial-state generator are the ones APEBench's side used."""
    from sweep.problems import STEPPERS

    c, dims = side["config"], side["config"]["num_spatial_dims"]
    if not any(row.apebench == side["scenario"] and dims in row.dims for row in STEPPERS.values()):
        sys.exit(f"--scenario {side['scenario']!r} in {dims}D: not in the product's table (sweep.problems.STEPPERS)")
    kind, cutoff, zero_mean, max_one = c["ic_config"].split(";")
    if (kind, zero_mean, max_one) != ("fourier", "true", "true"):
        sys.exit(f"ic_config {c['ic_config']!r}: only fourier;CUTOFF;true;true is mapped here")
    return sweep.Problem(
        f"apebench:{side['scenario']}_{dims}d",
        num_points=c["num_points"],
        domain_extent=c["domain_extent"],
        dt=c["dt"],
        num_train=c["num_train_samples"],
        train_steps=c["train_temporal_horizon"],
        num_val=0,
        num_test=c["num_test_samples"],
        test_steps=c["test_temporal_horizon"],
        warmup_steps=c["num_warmup_steps"],
        ic="fourier",
        ic_options={"cutoff": int(cutoff)},
    )


def stepper_check(problem, test_traj: np.ndarray) -> tuple[float, float]:
    """Max |our stepper(APEBench state t) - APEBench state t + 1| over APEBench's test trajectories,
    at t = 0 and over all t: the stepper seed-sweep's problem builds is the scenario's PDE.
    (exponax 0.2 also dealiases the nonlinear term after evaluating it, 0.1, APEBench 0.1.1's,
    does not: on steep Burgers fronts the two differ by a few percent.)"""
    import jax

    from sweep.problems import pde_stepper

    solver = pde_stepper(problem.name, problem.options)
    error = np.abs(np.asarray(jax.vmap(jax.vmap(solver))(test_traj[:, :-1])) - test_traj[:, 1:])
    return float(error[:, 0].max()), float(error.max())


def train_seed_sweep(sweep, side: dict, unroll: int):
    """The product on the scenario: its exponax problem, the same networks, optimiser, batch size,
    update steps and unrolling, and its in-program rollout metric on its own test trajectories."""
    import jax

    name, hidden, depth, activation = side["network"].split(";")
    if name.lower() != "conv":
        sys.exit(f"--network {side['network']!r}: only APEBench's Conv;WIDTH;DEPTH;ACTIVATION is mapped here")
    c = side["config"]
    windows = c["num_train_samples"] * (c["train_temporal_horizon"] + 1 - unroll)
    per_epoch, steps = windows // side["batch_size"], side["num_training_steps"]
    if steps % per_epoch or windows % side["batch_size"]:
        sys.exit(
            f"steps={steps}: must be a multiple of the {per_epoch} minibatches per epoch ({windows} windows "
            f"// batch {side['batch_size']}, none left over) so both sides take the same update steps"
        )
    epochs = steps // per_epoch
    optimiser, _, schedule, init, peak, warmup = side["config"]["optim_config"].split(";")
    if (optimiser, schedule) != ("adam", "warmup_cosine"):
        sys.exit(f"optim_config {side['config']['optim_config']!r}: only adam;STEPS;warmup_cosine;... is mapped here")
    spec = sweep.SweepSpec(
        name="vs_apebench",
        problem=problem_of(sweep, side),
        model=sweep.Model(
            "ConvNet", hidden_channels=int(hidden), depth=int(depth), activation=activation, boundary_mode="periodic"
        ),
        optimizer=sweep.Optimizer(
            "adam",
            learning_rate=float(peak),
            schedule={
                "name": "warmup_cosine_decay_schedule",
                "init_value": float(init) / float(peak),
                "peak_value": 1.0,
                "warmup_steps": int(warmup),
                "decay_steps": steps,
            },
        ),
        training=sweep.Training(
            epochs=epochs,
            batch_size=side["batch_size"],
            report_every=epochs,
            unroll=unroll,
            rollout_steps=c["test_temporal_horizon"],
            rollout_metrics=("nrmse",),
        ),
        seeds=len(side["seeds"]),
    )
    data = sweep.load_data(spec)  # generated before the clock, as APEBench's side does
    with clock() as timing:
        model, history = sweep.train_block(spec, seeds=range(len(side["seeds"])), data=data)
        jax.block_until_ready(model)
    timing["evaluation_seconds"] = evaluation_seconds(sweep, spec, data, len(side["seeds"]))
    return spec, data, model, history, timing, steps


def evaluation_seconds(sweep, spec, data, seeds: int, repeats: int = 2) -> float:
    """What the one in-program evaluation at the report costs (one-step loss on the test pairs and
    the test rollouts), which APEBench's timing leaves out: every chunk evaluates once at its end,
    so with chunks of 1 and 2 epochs (each compiled first, then timed; the fastest of ``repeats``)
    evaluation = 2 t(1) - t(2)."""
    import jax

    block, state = sweep.init_block(spec, range(seeds), data=data)
    fastest = {}
    for epochs in (1, 2):
        sweep.run_chunk(block, state, epochs)  # compiles
        times = []
        for _ in range(repeats):
            with clock() as t:
                jax.block_until_ready(sweep.run_chunk(block, state, epochs)[0].params)
            times.append(t["seconds"])
        fastest[epochs] = min(times)
    return max(0.0, 2 * fastest[1] - fastest[2])


def _mean_std(x: np.ndarray) -> str:
    return f"{x.mean():.4g} ± {x.std(ddof=1):.2g}"


def report(
    side: dict, ss_timing: dict, steps: int, curves: dict[str, dict[str, np.ndarray]], checks: dict[str, float]
) -> dict:
    """Print and return the timing per seed-step and, per test set, the rollout quality of both sides."""
    seeds = len(side["seeds"])
    seed_steps = seeds * steps
    ape = {
        "seconds": side["train_seconds"],
        "compile_seconds": side["compile_seconds"],
        "cpu_seconds": side["train_cpu_seconds"],
    }
    rows = {"APEBench": ape, "seed-sweep": ss_timing}
    print(
        f"\nscenario {side['scenario']} ({side['scenario_class']}), network {side['network']}, "
        f"train {side['train']!r}, {seeds} seeds x {steps} update steps, batch {side['batch_size']}, "
        f"optimiser {side['config']['optim_config']}"
    )
    print(
        f"{'':12} {'train s':>9} {'compile s':>10} {'ms/seed-step':>13} {'net of compile':>15} {'CPU s':>8} "
        f"{'CPU ms/seed-step':>17}"
    )
    per = {}
    for name, t in rows.items():
        per[name] = (
            t["seconds"] / seed_steps * 1e3,
            (t["seconds"] - t["compile_seconds"]) / seed_steps * 1e3,
            t["cpu_seconds"] / seed_steps * 1e3,
        )
        print(
            f"{name:12} {t['seconds']:9.2f} {t['compile_seconds']:10.2f} {per[name][0]:13.3f} {per[name][1]:15.3f} "
            f"{t['cpu_seconds']:8.1f} {per[name][2]:17.3f}"
        )
    speed, speed_net, speed_cpu = (per["APEBench"][i] / per["seed-sweep"][i] for i in range(3))
    print(
        f"speed ratio (APEBench time / seed-sweep time per seed-step): {speed:.2f}x, net of compile {speed_net:.2f}x, "
        f"by CPU time {speed_cpu:.2f}x"
    )
    evaluation = ss_timing["evaluation_seconds"]
    training_only = (ss_timing["seconds"] - ss_timing["compile_seconds"] - evaluation) / seed_steps * 1e3
    speed_training = per["APEBench"][1] / training_only
    print(
        f"seed-sweep's in-program evaluation at the report (test loss on the test pairs, test rollouts), "
        f"measured apart (2 t(1 epoch) - t(2 epochs)): {evaluation:.2f} s; net of compile and of it "
        f"{training_only:.3f} ms/seed-step: {speed_training:.2f}x APEBench's net of compile (which excludes its tests)"
    )
    result = {
        "ms_per_seed_step": per,
        "speed_ratio": speed,
        "speed_ratio_net_of_compile": speed_net,
        "speed_ratio_cpu": speed_cpu,
        "speed_ratio_training_only": speed_training,
        "quality": {test_set: quality(test_set, c) for test_set, c in curves.items()},
        "checks": checks,
    }
    import exponax

    print(
        f"\ncross-checks, max |diff|: our stepper (exponax {exponax.__version__}; APEBench's "
        f"{side['versions']['exponax']}) on APEBench's test states vs its next states {checks['stepper'][0]:.2e} "
        f"at step 1, {checks['stepper'][1]:.2e} over all steps; this metric vs APEBench's own perform_tests on its networks {checks['apebench']:.2e}; "
        f"vs seed-sweep's in-program test_rollout_nrmse on its networks and test set (relative) {checks['seed-sweep']:.2e}"
    )
    return result


def quality(test_set: str, curves: dict[str, np.ndarray]) -> dict:
    """Rollout nRMSE of both sides on one test set: mean ± std over seeds at some steps, per-seed
    geometric means over steps 1..min(T, 100), Mann–Whitney U and Welch's t on those."""
    from scipy import stats

    horizon = next(iter(curves.values())).shape[1]
    print(f"\nrollout nRMSE on {test_set} (mean ± std over seeds; one function for both sides' networks)")
    print(f"{'step':>6} " + " ".join(f"{n:>20}" for n in curves))
    for s in (s for s in REPORT_STEPS if s <= horizon):
        print(f"{s:6d} " + " ".join(f"{_mean_std(c[:, s - 1]):>20}" for c in curves.values()))
    g = {n: gmean_first(c) for n, c in curves.items()}
    print(f"gmean over steps 1..{min(horizon, 100)}: " + ", ".join(f"{n} {_mean_std(v)}" for n, v in g.items()))
    a, b = g["APEBench"], g["seed-sweep"]
    mw = stats.mannwhitneyu(a, b, alternative="two-sided")
    welch = stats.ttest_ind(a, b, equal_var=False)
    ci = welch.confidence_interval(0.95)
    print(
        f"Mann–Whitney U (two-sided) on per-seed gmeans: U = {mw.statistic:.1f}, p = {mw.pvalue:.3f}; "
        f"Welch t = {welch.statistic:.2f}, p = {welch.pvalue:.3f}, "
        f"difference APEBench - seed-sweep 95% CI [{ci.low:.4g}, {ci.high:.4g}]"
    )
    return {
        "gmean": {n: v.tolist() for n, v in g.items()},
        "mannwhitney_p": mw.pvalue,
        "welch_p": welch.pvalue,
        "welch_ci": [ci.low, ci.high],
        "curves": {n: c.tolist() for n, c in curves.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ape-python", required=True, help="python of an environment with apebench installed")
    p.add_argument("--smoke", action="store_true", help="small network and budget (about a minute)")
    p.add_argument("--scenario", default="phy_burgers", help="key of apebench.scenarios.scenario_dict")
    p.add_argument("--dims", type=int, default=1, choices=(1, 2, 3), help="spatial dimensions of the scenario")
    p.add_argument("--points", type=int, help="points per axis, default: APEBench's for the scenario")
    p.add_argument("--network", help="APEBench network string, default: the preset's")
    p.add_argument("--steps", type=int, help="update steps, default: the preset's")
    p.add_argument("--seeds", type=int, help="seeds per side (>= 8 for the test), default: the preset's")
    p.add_argument("--unroll", type=int, default=1, help="unrolled steps K (APEBench 'sup;K', Training(unroll=K))")
    p.add_argument("--out", type=Path, help="keep data, networks and results here (default: a temp dir)")
    args = p.parse_args()
    preset = PRESETS["smoke" if args.smoke else "full"] | {
        k: v for k, v in (("network", args.network), ("steps", args.steps), ("seeds", args.seeds)) if v is not None
    }
    out = args.out or Path(tempfile.mkdtemp(prefix="vs_apebench-"))
    out.mkdir(parents=True, exist_ok=True)

    side = run_apebench(args, preset, out)
    import equinox as eqx

    import sweep

    sweep.configure(compile_cache=None)  # CPU split into devices; no persistent cache: compile time is real
    spec, data, model, history, ss_timing, steps = train_seed_sweep(sweep, side, args.unroll)
    ape_model = eqx.tree_deserialise_leaves(out / "nets.eqx", model)  # the same pdequinox ConvNet

    with np.load(out / "data.npz") as f:
        test_traj = f["test_traj"]
    test_sets = {"APEBench's test set": test_traj, "seed-sweep's test set": data.test_traj}
    curves = {
        name: {"APEBench": rollout_nrmse(ape_model, t), "seed-sweep": rollout_nrmse(model, t)}
        for name, t in test_sets.items()
    }
    own = side["apebench_metrics"].get("mean_nRMSE")
    checks = {
        "stepper": stepper_check(spec.problem, test_traj),
        "apebench": float(np.max(np.abs(np.asarray(own) - curves["APEBench's test set"]["APEBench"])))
        if own
        else math.nan,
        "seed-sweep": float(
            np.max(np.abs(history.test_rollout["nrmse"] / curves["seed-sweep's test set"]["seed-sweep"] - 1))
        ),
    }
    result = report(side, ss_timing, steps, curves, checks)
    result |= {
        "preset": preset,
        "unroll": args.unroll,
        "apebench_config": side["config"],
        "versions": side["versions"],
        "seed_sweep_spec": spec.to_dict(),
        "seed_sweep_diverged": np.asarray(history.diverged).tolist(),
    }
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(f"\nfiles in {out}")


if __name__ == "__main__":
    main()
