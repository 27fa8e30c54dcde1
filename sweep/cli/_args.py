"""The command line's own values: ``--where`` and ``--set`` items, the choices of ``--logger``,
``--log-per``, ``--format`` and ``--kind``, ``.npy`` files in and out, and library messages
phrased for the command line (a Python call in a message becomes the option that does the same)."""

from __future__ import annotations

import copy
import dataclasses
import enum
import re
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import typer

from .._errors import SweepError, did_you_mean


class CLIError(SweepError):
    """A command-line argument or input file that cannot be used."""


# Library messages name Python calls; on the command line the same thing is an option.
_CLI_PHRASES = [
    (
        re.compile(r"\.?\bwhere\(([^()]*)\)"),
        lambda m: (
            " ".join(f"--where {kv.replace(chr(39), '')}" for kv in re.split(r", (?=\w+=)", m.group(1)))
            if m.group(1)
            else "--where"
        ),
    ),
    (re.compile(r"\bbest\(k=([^()]*)\)"), lambda m: f"--best {m.group(1)}"),
    (re.compile(r"\bexport\(path=([^()]*)\)"), lambda m: f"--out {m.group(1)}"),
    (re.compile(r"\bexport\(steps=([^()]*)\)"), lambda m: f"--steps {m.group(1)}"),
    (re.compile(r"\bleave steps out\b"), lambda m: "leave --steps out"),
    (re.compile(r"\be\.g\. metric='([^']*)'"), lambda m: f"e.g. --metric {m.group(1)}"),
    (re.compile(r"\b\w+\(metric='([^']*)'\)"), lambda m: f"--metric {m.group(1)}"),
    (re.compile(r"\bplot\(kind='([^']*)'\)"), lambda m: f"--kind {m.group(1)}"),
    (re.compile(r"\bplot\(rollout_metric='([^']*)'\)"), lambda m: f"--rollout-metric {m.group(1)}"),
    (re.compile(r"load it with trust_code=True \([^()]*\)"), lambda m: "give --trust-code"),
    (re.compile(r"\bwith_calibration\(\)"), lambda m: "--calibration"),
    (re.compile(r"\brecalibrate\(\)"), lambda m: "--recalibrate"),
    (re.compile(r"\bload_calibration\('([^']*)'\)"), lambda m: f"--calibration {m.group(1)}"),
    (
        re.compile(r"\bscores\(thresholds=\[([^()]*)\]\)"),
        lambda m: " ".join(f"--threshold {v}" for v in m.group(1).split(", ")),
    ),
    (re.compile(r"`out`"), lambda m: "--out"),
    (re.compile(r"`(port|host)`"), lambda m: f"--{m.group(1)}"),
    (re.compile(r"`kind`"), lambda m: "--kind"),
]


def cli_phrasing(text: str) -> str:
    """``"where(depth=7): no member matches"`` -> ``"--where depth=7: no member matches"``, and
    ``best(k=0)`` -> ``--best 0``, ``summary(metric='x')`` -> ``--metric x``."""
    for pattern, replace in _CLI_PHRASES:
        text = pattern.sub(replace, text)
    return text


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_where(items: list[str] | None) -> dict[str, Any]:
    """``["depth=6", "learning_rate=3e-4"]`` -> ``{"depth": 6, "learning_rate": 0.0003}``; a key
    given twice keeps either value (``depth=4 depth=6`` -> ``{"depth": [4, 6]}``)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise CLIError(f"--where: got {item!r}; use key=value, e.g. --where depth=6")
        value = _parse_value(value.strip())
        if key in out:
            out[key] = [*(out[key] if isinstance(out[key], list) else [out[key]]), value]
        else:
            out[key] = value
    return out


def choice(choices: Iterable[Any], aliases: dict[str, Any] | None = None) -> Callable[[Any], Any]:
    """The ``parser`` of an option of fixed ``choices`` (an enum's members, or strings): the choice a
    value names (or its older name among ``aliases``), else ``Invalid value for '--kind': got 'curve';
    choose one of overview, curves, ... (did you mean 'curves'?)`` (typer's own message starts with
    pydantic's "Value error, ")."""
    named = {c.value if isinstance(c, enum.Enum) else c: c for c in choices}

    def parse(value: Any) -> Any:
        if isinstance(value, enum.Enum):  # the default
            return value
        if value in named or value in (aliases or {}):
            return named.get(value) or (aliases or {})[value]
        raise typer.BadParameter(f"got {value!r}; choose one of {', '.join(named)}{did_you_mean(value, named)}")

    return parse


class Logger(str, enum.Enum):
    tensorboard = "tensorboard"
    mlflow = "mlflow"
    wandb = "wandb"


class LogPer(str, enum.Enum):
    member = "member"
    config = "config"


class Progress(str, enum.Enum):
    auto = "auto"
    live = "live"
    plain = "plain"
    off = "off"  # sweep.RunOptions' name; the older "none" is still taken (an alias, not shown)


class Executor(str, enum.Enum):
    tune = "tune"
    local = "local"


class Format(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def _key_parts(key: str) -> list[str]:
    """The parts of a dotted TOML key, quoted parts whole: ``search.space."model.depth"`` ->
    ``["search", "space", "model.depth"]``."""
    try:
        tree: Any = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError:
        return key.split(".")
    parts = []
    while isinstance(tree, dict) and len(tree) == 1:
        ((part, tree),) = tree.items()
        parts.append(part)
    return parts


def apply_overrides(data: dict[str, Any], items: list[str]):
    """The spec of the table ``data`` (a spec file's) with ``["training.epochs=50", "seeds=8",
    "grid.model.depth=[2, 4]"]`` set, validated like the spec file itself; a part of a table inside
    a field by its path (``"seeds.adaptive.max=32"``), quoted as in TOML or not
    (``'grid."model.depth"=[2, 4]'``)."""
    from ..spec import SweepSpec

    data = copy.deepcopy(data)
    fields = {f.name for f in dataclasses.fields(SweepSpec)}
    set_keys: dict[str, str] = {}  # dotted field -> its value as given
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        field, *rest = _key_parts(key) if key else [""]
        if not eq or not key:
            raise CLIError(f"--set: got {item!r}; use field=value, e.g. --set training.epochs=50")
        if field not in fields:
            raise CLIError(
                f"--set {key}: {field!r} is not a spec field{did_you_mean(field, fields)}; "
                f"fields: {', '.join(sorted(fields))}"
            )
        value = _toml_value(text.strip())
        set_keys[".".join([field, *rest])] = text.strip()
        if rest:
            target = data.setdefault(field, {})  # a table the file leaves out: its defaults
            if not isinstance(target, dict):
                raise CLIError(f"--set {key}: {field!r} has no parts; use --set {field}=VALUE")
            while len(rest) > 1 and isinstance(target.get(rest[0]), dict):  # seeds.adaptive.max
                target, rest = target[rest[0]], rest[1:]
            target[".".join(rest)] = value  # grid.model.depth: the grid's key "model.depth"
        else:
            data[field] = value
    grid = data.get("grid") or {}
    for key, text in set_keys.items():  # the grid's values win over a field's: say so, not ignore it
        if key in grid and isinstance(grid, dict):
            raise CLIError(
                f"--set {key}: the grid sets {key} ({grid[key]}), and its values take precedence; set the "
                f"grid instead: --set 'grid.{key}=[{text}]'"
            )
    return SweepSpec.from_dict(data)


class Kind(str, enum.Enum):
    overview = "overview"
    curves = "curves"
    spread = "spread"
    predictions = "predictions"
    rollout_error = "rollout_error"
    rollout = "rollout"
    calibration = "calibration"
    spread_skill = "spread_skill"
    ensemble_size = "ensemble_size"
    search = "search"
    all = "all"


def load_npy(path: Path, option: str):
    """An array from a .npy file (never unpickled); errors name the option and the file."""
    import numpy as np

    if not path.is_file():
        raise CLIError(f"{option}: {str(path)!r} does not exist or is not a file")
    with open(path, "rb") as f:
        head = f.read(len(np.lib.format.MAGIC_PREFIX))
    if head != np.lib.format.MAGIC_PREFIX and not head.startswith(b"PK"):  # .npy, or .npz (a zip)
        raise CLIError(f"{option}: {str(path)!r} is not a .npy file; give an array saved with numpy.save")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as e:
        if "allow_pickle" in str(e):  # an array of Python objects: never unpickled
            raise CLIError(
                f"{option}: {str(path)!r} holds Python objects (dtype object), which are never unpickled; "
                f"save a numeric array"
            ) from None
        raise CLIError(f"{option}: {str(path)!r} is not a readable .npy array ({e})") from None
    except (OSError, EOFError) as e:
        raise CLIError(f"{option}: {str(path)!r} is not a readable .npy array ({e})") from None
    if not isinstance(array, np.ndarray):
        array.close()
        raise CLIError(f"{option}: {str(path)!r} is an .npz archive; give one array saved with numpy.save (.npy)")
    return array


def save_npy(path: Path, array) -> None:
    """``array`` to ``path`` (.npy), creating its folder."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)
