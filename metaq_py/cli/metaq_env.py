"""METAQ's job-script variables, read as options of ``metaq run``.

A METAQ job script sets shell variables (``METAQ``, ``METAQ_NODES``, ``METAQ_RUN_TIME``, ...)
and then sources ``x/launch.sh``. Such a script changes only its launch line to run metaq-py::

    export ${!METAQ@}; METAQ_TASK_FOLDERS="${METAQ_TASK_FOLDERS[*]}" metaq run

(bash exports no arrays, so ``METAQ_TASK_FOLDERS`` is passed as its words). :func:`read_metaq_env`
turns those variables into the values of ``metaq run``'s options; the command line's flags
override them. A variable that has no meaning here gives one line of warning, never silence.
``docs/metaq-compat.md`` lists every variable with its equivalent.

This module is pure: it reads a mapping and returns a value, so it is tested without a shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from metaq_py.durations import DurationError, parse_duration
from metaq_py.errors import MetaqError

__all__ = ["IGNORED", "MetaqEnv", "MetaqEnvError", "read_metaq_env"]

IGNORED: dict[str, str] = {
    "METAQ_MAX_LAUNCHES": "metaq run launches tasks until nothing left fits, with no count",
    "METAQ_SLEEPY_TIME": "metaq run wakes on queue changes and on poll_interval of metaq.yaml",
    "METAQ_SLEEPY_TIME_TASK_SATURATION": "metaq run waits for a task to end, not a fixed time",
    "METAQ_VERBOSITY": "metaq run prints one line per decision and writes jobs/<id>/events.jsonl",
    "METAQ_MIN_NODES": "the scheduler (--scheduler) picks task sizes, without size bounds",
    "METAQ_MIN_GPUS": "the scheduler (--scheduler) picks task sizes, without size bounds",
    "METAQ_MAX_NODES": "the scheduler (--scheduler) picks task sizes, without size bounds",
    "METAQ_MAX_GPUS": "the scheduler (--scheduler) picks task sizes, without size bounds",
    "METAQ_SORT_TASKS": "tasks are taken in queue order (PRIORITY, then age), never shuffled",
    "METAQ_SKIP_ON_STOLEN": "a task another job claimed first is simply passed over",
    "METAQ_X": "metaq-py has no x/ folder; its commands are metaq subcommands",
}
"""METAQ's job-script variables that have no meaning for ``metaq run``, each with why."""

_TRUE = {"true": True, "false": False}


class MetaqEnvError(MetaqError):
    """A METAQ variable whose value cannot be read; ``str()`` is one sentence."""


@dataclass(frozen=True, slots=True)
class MetaqEnv:
    """What METAQ's variables say about a run; ``None``: the variable is not set (or was
    overridden by a flag). ``queue`` is ``METAQ``; ``nodes`` ``METAQ_NODES``;
    ``gpus_per_node`` is ``METAQ_GPUS`` (the job's GPUs in total) over the nodes; ``walltime``
    is ``METAQ_RUN_TIME`` in seconds; ``max_tasks`` is ``METAQ_SIMULTANEOUS_TASKS``;
    ``linger`` is ``METAQ_LOOP_FOREVER``; ``launch_pause`` is ``METAQ_SLEEP_AFTER_LAUNCH``.
    ``warnings`` holds one line for each variable set that has no meaning here."""

    queue: Path | None = None
    jobid: str | None = None
    machine: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    walltime: float | None = None
    max_tasks: int | None = None
    linger: bool | None = None
    launch_pause: float | None = None
    warnings: tuple[str, ...] = ()


def read_metaq_env(env: Mapping[str, str], *, nodes: int | None = None) -> MetaqEnv:
    """Read METAQ's job-script variables from ``env``. ``nodes`` is ``--nodes`` if given: it
    overrides ``METAQ_NODES`` and divides ``METAQ_GPUS``. Raises :class:`MetaqEnvError` for a
    value METAQ itself could not have used."""
    warnings: list[str] = []
    root = _text(env, "METAQ")
    queue = Path(root) if root is not None else None
    env_nodes = _count(env, "METAQ_NODES", least=1)
    nodes = nodes if nodes is not None else env_nodes
    folders = _text(env, "METAQ_TASK_FOLDERS")
    if folders is not None and not _default_folders(folders, root):
        warnings.append(f"METAQ_TASK_FOLDERS is ignored: metaq run takes tasks from every "
                        f"task folder of metaq.yaml (folders:), priority/ first, not from "
                        f"{folders!r}")
    for name, why in IGNORED.items():
        if _text(env, name) is not None:
            warnings.append(f"{name} is ignored: {why}")
    pause = _seconds(env, "METAQ_SLEEP_AFTER_LAUNCH")
    return MetaqEnv(
        queue=queue, jobid=_text(env, "METAQ_JOB_ID"), machine=_text(env, "METAQ_MACHINE"),
        nodes=env_nodes,
        gpus_per_node=_gpus_per_node(_count(env, "METAQ_GPUS", least=0), nodes, warnings),
        walltime=_seconds(env, "METAQ_RUN_TIME"),
        max_tasks=_count(env, "METAQ_SIMULTANEOUS_TASKS", least=1),
        linger=_boolean(env, "METAQ_LOOP_FOREVER"),
        launch_pause=pause, warnings=tuple(warnings))


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _count(env: Mapping[str, str], name: str, *, least: int) -> int | None:
    text = _text(env, name)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise MetaqEnvError(f"{name} must be a whole number, not {text[:40]!r}")
    value = int(text, 10)
    if value < least:
        raise MetaqEnvError(f"{name} must be at least {least}, not {value}")
    return value


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    text = _text(env, name)
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as e:
        raise MetaqEnvError(f"{name} {e}") from None


def _boolean(env: Mapping[str, str], name: str) -> bool | None:
    text = _text(env, name)
    if text is None:
        return None
    if text not in _TRUE:
        raise MetaqEnvError(f"{name} must be true or false (a bash boolean), not {text[:40]!r}")
    return _TRUE[text]


def _gpus_per_node(gpus: int | None, nodes: int | None, warnings: list[str]) -> int | None:
    """METAQ counts the job's GPUs as one pool; here each node has its own."""
    if gpus is None:
        return None
    if nodes is None:
        warnings.append(f"METAQ_GPUS {gpus} is ignored: it counts the job's GPUs in total, and "
                        f"without METAQ_NODES or --nodes the GPUs per node are not known")
        return None
    per_node, rest = divmod(gpus, nodes)
    if rest:
        warnings.append(f"METAQ_GPUS {gpus} over {nodes} nodes is not a whole number per "
                        f"node; each node offers {per_node} GPUs here")
    return per_node


def _default_folders(folders: str, root: str | None) -> bool:
    """Whether ``folders`` is METAQ's default, ``$METAQ/priority $METAQ/todo``: the order in
    which metaq run looks at them anyway."""
    if root is None:
        return False
    base = Path(root)
    return [Path(f) for f in folders.split()] == [base / "priority", base / "todo"]
