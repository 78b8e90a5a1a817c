"""Task kinds: a class per kind of task, with its resources and its steps.

A lattice campaign has a few kinds of task (propagators, contractions, an analysis), each run
many times with different parameters. mpi_jm builds each kind as a Python class; so does
metaq-py::

    class Propagator(TaskKind):
        nodes = 4
        gpus = 16
        min_wc_time = "2h"
        project = "lattice"
        shapes = [Shape(nodes=8, gpus=32, min_wc_time="1h")]  # or twice the size, half the time

        def __init__(self, cfg: int) -> None:
            self.cfg = cfg

        def prologue(self) -> list[Line]:
            return [f"mkdir -p props/{self.cfg}"]

        def run(self) -> list[Line]:
            return [["srun", "./prop", "--cfg", str(self.cfg)]]

        def epilogue(self) -> list[Line]:
            return [f"touch props/{self.cfg}/done"]

The class attributes named as directives (``nodes``, ``gpus``, ``min_wc_time``, ... every
field of :class:`~metaq_py.api.script.Directives`) are what each task of the kind asks for; an
instance may set its own in ``__init__``. ``shapes`` lists the other sizes a task of the kind
accepts, and the policy starts it in the one that starts soonest. The steps are named
``prologue`` and ``epilogue``, as SLURM names the steps around a job, because ``after``
already means a dependency
(``AFTER``). The task's script runs the three steps in order under ``set -e``: it stops at
the first command that fails, with that command's exit status, so a failed prologue never
runs the solver and a failed solver never runs the epilogue.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import fields

from metaq_py.api.script import Directives, Line, shell_lines

__all__ = ["TaskKind"]


class TaskKind(ABC):
    """One kind of task: resources as class attributes, and three steps of shell lines."""

    shell: str = "/bin/bash"
    """The interpreter the task's script runs with (its shebang)."""

    # The directives are not declared again here: any attribute named as a field of
    # Directives (nodes, gpus, min_wc_time, ...) is one, and the rest keep their defaults.

    def prologue(self) -> Sequence[Line] | Line | None:
        """Shell lines run first (make folders, stage inputs); none by default."""
        return None

    @abstractmethod
    def run(self) -> Sequence[Line] | Line:
        """The task's work: shell lines, or commands as their words. Every kind defines it."""

    def epilogue(self) -> Sequence[Line] | Line | None:
        """Shell lines run after the work succeeded (move outputs, mark it done); none by
        default."""
        return None

    def directives(self) -> Directives:
        """What each task of this kind asks for, from the attributes named as directives."""
        return Directives(**{f.name: getattr(self, f.name) for f in fields(Directives)
                              if hasattr(self, f.name)})

    def body(self) -> list[str]:
        """The script's lines after its header: the three steps under ``set -e``."""
        lines = ["set -e"]
        for title, step in (("prologue", self.prologue()), ("run", self.run()),
                            ("epilogue", self.epilogue())):
            part = shell_lines(step)
            if part:
                lines += [f"# {title}", *part]
        return lines

    def describe(self) -> str:
        """What made the script, for the comment at its top."""
        cls = type(self)
        return f"metaq_py TaskKind {cls.__module__}.{cls.__qualname__}"
