"""Trackers that see members, not trials: TensorBoard, MLflow and Weights & Biases.

A trial reports per-member vectors (``member_train_loss``, ``member_test_loss``, and
``member_val_loss`` / ``member_<split>_<metric>`` where the problem has them) with its block's
seeds; a logger splits them into one run per member (``per="member"``, the default), named by
its grid values and seed (``depth=6 learning_rate=0.0003 seed=3``) with every grid value and
the seed as parameters and one curve per vector (``train_loss``, ``test_loss``, ...) over
epochs; or into one run per configuration (``per="config"``) with the mean, std, min and max
over its members at each epoch, logged once every member of this run has reported it.

The loggers run in the driver (they are fed by ``sweep.run``'s Tune callback) and import their
package only when asked for: ``pip install "seed-sweep[mlflow]"`` (or ``[tensorboard]``,
``[wandb]``).
"""

from __future__ import annotations

import math
import os
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from .._canonical import digest
from .._errors import SpecError, did_you_mean
from ..planning import TrialPlan, config_label, grid_names, hparams_key
from ..spec import SweepSpec
from ..store import FIXED_COLUMNS
from ._closed_writer import close_writer
from ._quiet import scoped_environ

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

PER = ("member", "config")
_WandbMode = Literal["online", "offline", "disabled", "shared"]  # wandb.init(mode=...)


class MemberLogger:
    """Base of the trackers: turns trial results into per-member (or per-configuration) runs.

    Subclasses implement ``_open(key, name, params, group) -> handle``, ``_write(handle,
    metrics, step)`` and ``_finish(handle)``.
    """

    package: str = ""  # what the tracker needs installed
    extra: str = ""  # the seed-sweep extra that installs it
    per: str
    sweep_dir: str
    names: dict[str, str]  # grid key -> column name

    def __init__(self, per: str = "member"):
        if per not in PER:
            raise SpecError(f"`per`: got {per!r}; choose 'member' (one run per member) or 'config'")
        self.per = per
        self.spec: SweepSpec | None = None
        self.sweep_dir = ""
        self._trials: dict[str, TrialPlan] = {}
        self._runs: dict[str, Any] = {}
        self._pending: dict[tuple[str, int], dict[str, list[float]]] = {}
        self._expected: dict[str, int] = {}
        self.off = False  # failed during the run, and taken off it (``_relay.notify``)

    # -- set-up by sweep.run --------------------------------------------------------------------
    def bind(self, spec: SweepSpec, sweep_dir: str) -> MemberLogger:
        """Attach to a sweep (called by ``sweep.run`` before Ray starts); imports the package."""
        _require(self.package, self.extra)
        self.spec, self.sweep_dir, self.off = spec, sweep_dir, False
        self.names = grid_names(spec.varied, reserved=FIXED_COLUMNS)
        return self

    def add(self, trials: Iterable[TrialPlan]) -> None:
        """The trials whose results will come (their members' grid values and seeds)."""
        for t in trials:
            if t.trial_key not in self._trials:
                self._trials[t.trial_key] = t
                for h in t.hparams:
                    label = self._label(t, h)
                    self._expected[label] = self._expected.get(label, 0) + len(t.seeds)

    def hint(self) -> str | None:
        """A line telling where the runs are, printed at the end of ``sweep.run``."""
        return None

    def close(self) -> None:
        for (label, epoch), metrics in sorted(self._pending.items(), key=lambda kv: kv[0][1]):
            self._write_config(label, epoch, metrics)  # configurations some members never reached
        self._pending.clear()
        for handle in self._runs.values():
            self._finish(handle)
        self._runs.clear()

    # -- Tune events ----------------------------------------------------------------------------
    def on_trial_result(self, trial: Trial, result: Mapping[str, Any], **info: Any) -> None:
        plan = self._trials.get((trial.config or {}).get("trial_key", ""))  # "" is no trial's key
        if plan is None or "epoch" not in result or "paused_at" in result:  # a pause repeats its last report
            return
        epoch = int(result["epoch"])
        vectors = {
            k.removeprefix("member_"): v
            for k, v in result.items()
            if k.startswith("member_") and k != "member_seeds" and isinstance(v, (list, tuple))
        }
        for i, (h, seed) in enumerate(plan.members()):
            metrics = {
                k: float(v[i])
                for k, v in vectors.items()
                if i < len(v) and v[i] is not None and math.isfinite(float(v[i]))
            }
            if self.per == "member":
                self._write(self._member_run(plan, h, seed), metrics, epoch)
            else:
                label = self._label(plan, h)
                pending = self._pending.setdefault((label, epoch), {"_count": []})
                pending["_count"].append(1.0)
                for k, value in metrics.items():
                    pending.setdefault(k, []).append(value)
                if len(pending["_count"]) >= self._expected[label]:
                    self._write_config(label, epoch, self._pending.pop((label, epoch)))

    # -- runs -----------------------------------------------------------------------------------
    def _label(self, plan: TrialPlan, hparams: Mapping[str, float]) -> str:
        assert self.spec is not None  # bind() sets it before Tune reports anything
        return config_label(plan.grid_values(self.spec.varied, hparams), self.names) or plan.config_id

    def _params(self, plan: TrialPlan, hparams: Mapping[str, float]) -> dict[str, Any]:
        assert self.spec is not None  # bind() sets it before Tune reports anything
        values = plan.grid_values(self.spec.varied, hparams)
        return {"sweep": self.spec.name, "config_id": plan.config_id, **{self.names[k]: v for k, v in values.items()}}

    def _member_run(self, plan: TrialPlan, hparams: Mapping[str, float], seed: int):
        key = digest([plan.config_id, hparams_key(hparams), seed])
        if key not in self._runs:
            label = self._label(plan, hparams)
            self._runs[key] = self._open(
                key, f"{label} seed={seed}", {**self._params(plan, hparams), "seed": seed}, label
            )
        return self._runs[key]

    def _write_config(self, label: str, epoch: int, metrics: dict[str, list[float]]) -> None:
        if label not in self._runs:
            plan, h = next((t, h) for t in self._trials.values() for h in t.hparams if self._label(t, h) == label)
            self._runs[label] = self._open(
                digest([plan.config_id, hparams_key(h)]), label, self._params(plan, h), label
            )
        out = {"members": float(len(metrics.pop("_count", ())))}
        for k, values in metrics.items():
            a = np.asarray(values, np.float64)
            out |= {
                f"{k}_mean": float(a.mean()),
                f"{k}_std": float(a.std()),
                f"{k}_min": float(a.min()),
                f"{k}_max": float(a.max()),
            }
        self._write(self._runs[label], out, epoch)

    def _open(self, key: str, name: str, params: dict[str, Any], group: str):
        raise NotImplementedError

    def _write(self, handle, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def _finish(self, handle) -> None:
        raise NotImplementedError


def _require(package: str, extra: str) -> None:
    import importlib

    try:
        importlib.import_module(package)
    except ImportError:
        raise SpecError(
            f'`loggers`: the {extra} logger needs the {package!r} package; pip install "seed-sweep[{extra}]"'
        ) from None


def _safe(name: str) -> str:
    """A run name as one path part (TensorBoard runs are folders)."""
    return re.sub(r"[^\w.=+-]+", ",", name).strip(",") or "run"


class TensorBoardLogger(MemberLogger):
    """Event files under ``logdir`` (default ``<sweep dir>/tensorboard``, or
    ``./tensorboard/<name>`` for remote sweeps): one folder per configuration, one run per
    member in it (``depth=2,learning_rate=0.003/seed=3``), the grid values and seed in the
    HPARAMS tab. ``max_open``: event writers kept open at once (the oldest is closed first)."""

    package: str = "tensorboardX"
    extra: str = "tensorboard"
    logdir: str | os.PathLike[str] | None  # a str once bound
    max_open: int

    def __init__(self, logdir: str | os.PathLike[str] | None = None, per: str = "member", max_open: int = 128):
        super().__init__(per)
        self.logdir, self.max_open = logdir, max_open
        self._writers: OrderedDict[str, Any] = OrderedDict()

    def bind(self, spec: SweepSpec, sweep_dir: str) -> TensorBoardLogger:
        super().bind(spec, sweep_dir)
        if self.logdir is None:
            self.logdir = (
                os.path.join(sweep_dir, "tensorboard")
                if "://" not in sweep_dir
                else os.path.join("tensorboard", spec.name)
            )
        self.logdir = str(self.logdir)
        return self

    def hint(self) -> str:
        return f"tensorboard: tensorboard --logdir {self.logdir}"

    def _open(self, key: str, name: str, params: dict[str, Any], group: str):
        assert self.logdir is not None  # bind() sets it before Tune reports anything
        seed = params.get("seed")
        folder = (
            os.path.join(self.logdir, _safe(group), f"seed={seed}")
            if seed is not None
            else os.path.join(self.logdir, _safe(group))
        )
        handle = {"dir": folder, "params": params}
        from tensorboardX.summary import hparams

        writer = self._writer(handle)
        for summary in hparams({k: v for k, v in params.items()}, {}):
            writer.file_writer.add_summary(summary)
        return handle

    def _writer(self, handle):
        from tensorboardX import SummaryWriter

        folder = handle["dir"]
        if folder in self._writers:
            self._writers.move_to_end(folder)
            return self._writers[folder]
        while len(self._writers) >= self.max_open:
            close_writer(self._writers.popitem(last=False)[1])
        self._writers[folder] = SummaryWriter(logdir=folder, flush_secs=10)
        return self._writers[folder]

    def _write(self, handle, metrics: dict[str, float], step: int) -> None:
        writer = self._writer(handle)
        for k, value in metrics.items():
            writer.add_scalar(k, value, global_step=step)

    def _finish(self, handle) -> None:
        writer = self._writers.pop(handle["dir"], None)
        if writer is not None:
            close_writer(writer)


# MLflow's defaults (7 retries, backoff factor 2, 120 s timeout) report an unreachable server after
# about four minutes: the check before Ray starts retries once (unless the user set them).
MLFLOW_PROBE_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


class MLflowLogger(MemberLogger):
    """MLflow runs in the experiment ``experiment`` (default: the sweep's name) of
    ``tracking_uri`` (default: MLflow's own, e.g. ``$MLFLOW_TRACKING_URI``). A member's run is
    tagged ``sweep.member`` so that a resumed sweep continues the same run."""

    package: str = "mlflow"
    extra: str = "mlflow"
    tracking_uri: str | None
    experiment: str | None

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None, per: str = "member"):
        super().__init__(per)
        self.tracking_uri, self.experiment = tracking_uri, experiment
        self._client = None

    def bind(self, spec: SweepSpec, sweep_dir: str) -> MLflowLogger:
        """Connect to the tracking store and find or create the experiment (errors before Ray starts)."""
        super().bind(spec, sweep_dir)
        from mlflow.tracking import MlflowClient

        try:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
            name = self.experiment or spec.name
            with scoped_environ(MLFLOW_PROBE_ENV):  # an unreachable server: an error in seconds, not minutes
                found = self._client.get_experiment_by_name(name)
                self._experiment_id = found.experiment_id if found else self._client.create_experiment(name)
        except Exception as e:  # MlflowException, OSError, ...
            raise SpecError(
                f"`loggers`: mlflow at {self.tracking_uri or 'its default tracking URI'}: {' '.join(str(e).split())}"
            ) from None
        return self

    def hint(self) -> str:
        assert self.spec is not None and self._client is not None  # bind() sets them
        return f"mlflow: experiment {self.experiment or self.spec.name!r} at {self._client.tracking_uri}"

    def _open(self, key: str, name: str, params: dict[str, Any], group: str):
        from mlflow.entities import Param

        client, experiment_id = self._client, self._experiment_id
        assert client is not None  # bind() sets it before Tune reports anything
        found = client.search_runs([experiment_id], filter_string=f"tags.`sweep.member` = '{key}'", max_results=1)
        if found:
            return found[0].info.run_id
        run = client.create_run(experiment_id, run_name=name, tags={"sweep.member": key, "sweep.configuration": group})
        client.log_batch(run.info.run_id, params=[Param(k, str(v)) for k, v in params.items()])
        return run.info.run_id

    def _write(self, handle, metrics: dict[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        assert self._client is not None  # bind() sets it before Tune reports anything
        self._client.log_batch(handle, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def _finish(self, handle) -> None:
        assert self._client is not None  # bind() sets it before Tune reports anything
        self._client.set_terminated(handle)


class WandbLogger(MemberLogger):
    """Weights & Biases runs in ``project`` (default: the sweep's name), grouped by
    configuration; ``mode="offline"`` (or ``WANDB_MODE=offline``) writes them locally."""

    package: str = "wandb"
    extra: str = "wandb"
    project: str | None
    dir: str | None

    def __init__(
        self,
        project: str | None = None,
        mode: _WandbMode | None = None,
        dir: str | None = None,
        per: str = "member",
    ):
        super().__init__(per)
        modes = get_args(_WandbMode)
        if mode is not None and mode not in modes:
            raise SpecError(
                f"`mode`: got {mode!r}; choose one of {', '.join(map(repr, modes))}{did_you_mean(mode, modes)}"
            )
        self.project, self.dir = project, dir
        self.mode: _WandbMode | None = mode

    def _open(self, key: str, name: str, params: dict[str, Any], group: str):
        import wandb

        assert self.spec is not None  # bind() sets it before Tune reports anything
        return wandb.init(
            project=self.project or self.spec.name,
            name=name,
            id=key,
            resume="allow",
            group=group,
            config=params,
            mode=self.mode,
            dir=self.dir,
            reinit="create_new",
        )

    def _write(self, handle, metrics: dict[str, float], step: int) -> None:
        handle.log({**metrics, "epoch": step})

    def _finish(self, handle) -> None:
        handle.finish()


LOGGERS = {"tensorboard": TensorBoardLogger, "mlflow": MLflowLogger, "wandb": WandbLogger}


def make_loggers(
    loggers: Sequence[str | MemberLogger] | str | None, spec: SweepSpec, sweep_dir: str
) -> list[MemberLogger]:
    """Bound logger objects for ``sweep.run(loggers=...)``: a name gets that logger's defaults."""
    if isinstance(loggers, (str, MemberLogger)):
        loggers = [loggers]
    out = []
    for item in loggers or ():
        if isinstance(item, str):
            if item not in LOGGERS:
                raise SpecError(
                    f"`loggers`: unknown logger {item!r}; choose from {', '.join(LOGGERS)} "
                    f"or pass a sweep.tune logger object"
                )
            item = LOGGERS[item]()
        elif not isinstance(item, MemberLogger):
            raise SpecError(
                f"`loggers`: got {item!r}; give a name ({', '.join(LOGGERS)}) or a sweep.tune logger "
                f"(pass Tune callbacks as callbacks=[...])"
            )
        out.append(item.bind(spec, sweep_dir))
    return out
