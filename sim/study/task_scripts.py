"""A study as ``#METAQ`` task scripts, so a site can run it through its own queue.

:func:`emit_tasks` writes, into one directory:

- ``specs/<key>.json``: each run's :class:`~sim.run.spec.RunSpec`;
- ``tasks/<key>.sh``: one executable task script per run, with ``#METAQ NODES 1``,
  ``MIN_WC_TIME`` and ``PROJECT`` directives (written by
  :func:`metaq_py.directives.format_directives` and read back with its parser, so every
  script is valid), which runs ``metaq experiment --run-one specs/<key>.json --out runs``;
- ``grid.json``: the manifest: the study, its context and every run's key, in grid order.

Drop ``tasks/`` into a queue (``metaq submit``), let batch jobs run it, and
:func:`collect` (``metaq experiment --collect DIR``) reads ``runs/`` back in grid order, so
the table, figures and report equal those of running the grid directly.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metaq_py.directives import format_directives, parse_header
from metaq_py.task_spec import TaskSpec
from sim.run.spec import RunSpec, SpecError
from sim.study.execution import FinishedRun, RunStore

MANIFEST = "grid.json"
SPECS = "specs"
TASKS = "tasks"
RUNS = "runs"
DEFAULT_TASK_WALLTIME = 1800.0
"""A Theta-2022 run takes seconds to a minute; half an hour leaves room on a slow node."""


@dataclass(frozen=True, slots=True)
class Emitted:
    """What :func:`emit_tasks` wrote: the task scripts, in grid order."""

    directory: Path
    tasks: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class Collected:
    """The stored runs of an emitted grid, in grid order, and the keys still missing."""

    records: tuple[FinishedRun, ...]
    missing: tuple[str, ...]
    context: dict[str, object]


def _script(spec_path: Path, runs: Path, *, walltime: float, project: str,
            python: str) -> str:
    header = format_directives(TaskSpec(path="", nodes=1, min_wc_time=walltime,
                                        project=project))
    command = [python, "-m", "metaq_py", "experiment", "--run-one", str(spec_path),
               "--out", str(runs)]
    return ("#!/bin/bash\n" + header +
            "# One run of a metaq-py study, written by `metaq experiment --emit-tasks`.\n"
            "set -euo pipefail\n" + "exec " + shlex.join(command) + "\n")


def emit_tasks(specs: Sequence[RunSpec], directory: Path, *, context: dict[str, object],
               walltime: float = DEFAULT_TASK_WALLTIME, project: str = "metaq-study",
               python: str | None = None) -> Emitted:
    """Write the grid ``specs`` as task scripts under ``directory`` (see the module doc).

    ``python`` is the interpreter the scripts run ``metaq_py`` with (default: this one, so
    the scripts use the same installation). Paths in the scripts are absolute.
    """
    if not specs:
        raise SpecError("there is no run to emit")
    directory = directory.resolve()
    for sub in (SPECS, TASKS, RUNS):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    python = python or sys.executable
    tasks: list[Path] = []
    for spec in specs:
        spec_path = directory / SPECS / f"{spec.key}.json"
        spec_path.write_text(spec.to_json() + "\n")
        text = _script(spec_path, directory / RUNS, walltime=walltime, project=project,
                       python=python)
        parse_header(text.encode(), path=str(spec_path))  # a script we cannot read is a bug
        task = directory / TASKS / f"{spec.key}.sh"
        task.write_text(text)
        task.chmod(task.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        tasks.append(task)
    manifest = {"context": context, "runs": [s.key for s in specs]}
    tmp = directory / f".{MANIFEST}.tmp{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(directory / MANIFEST)
    return Emitted(directory=directory, tasks=tuple(tasks))


def collect(directory: Path) -> Collected:
    """The runs an emitted grid produced so far, in grid order, and the keys still missing."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
        keys = [str(k) for k in manifest["runs"]]
        context = dict(manifest.get("context", {}))
    except FileNotFoundError:
        raise SpecError(f"{directory} has no {MANIFEST}; it was not written by "
                        f"--emit-tasks") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise SpecError(f"{path} is not a grid manifest ({e})") from None
    store = RunStore(directory / RUNS)
    records: list[FinishedRun] = []
    missing: list[str] = []
    for key in keys:
        spec = RunSpec.from_json((directory / SPECS / f"{key}.json").read_text())
        record = store.get(spec)
        if record is None:
            missing.append(key)
        else:
            records.append(record)
    return Collected(records=tuple(records), missing=tuple(missing), context=context)
