"""How ``metaq run`` behaves (:class:`RunOptions`), and the error that stops it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from metaq_py.errors import MetaqError

__all__ = ["RunOptions", "RunnerError"]


class RunnerError(MetaqError):
    """The runner cannot go on (its queue vanished, the batch system cannot say what it holds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How ``metaq run`` behaves; every field has a command-line flag of the same name.

    ``max_tasks`` and ``launch_pause`` protect the batch node (``None``: ``caps.tasks`` and
    ``caps.launch_pause`` of ``metaq.yaml``); on-demand tasks are time-critical and ignore the
    cap. ``grace`` is how long a task without ``#METAQ SIGNAL`` gets between its SIGTERM and
    its kill, and also the warning before a resize by restart. ``margin`` is kept free before
    the end of the allocation, after every task's grace period, for requeueing and exiting.
    ``srun`` wraps each task in its own ``srun`` step. ``release_after`` and ``warning`` go to
    the on-demand mechanisms (see ``docs/model.md``). ``fs_events`` lets file-system events
    (watchdog) wake the runner at once when the queue changes; without them it finds changes
    by polling every ``poll_interval`` of ``metaq.yaml``. ``handle_signals`` (no flag; tests
    turn it off) installs the stop handlers when the runner is in the main thread.
    """

    scheduler: str = "easy"
    """The scheduler's name (:func:`~metaq_py.policy.mechanisms.make_scheduler`): ``easy``,
    ``conservative`` or an on-demand mechanism such as ``CUA&SPAA``."""
    linger: bool = False
    max_tasks: int | None = None
    launch_pause: float | None = None
    grace: float = 60.0
    margin: float = 10.0
    srun: bool = False
    srun_args: tuple[str, ...] = ()
    release_after: float = 600.0
    warning: float = 120.0
    fs_events: bool = True
    handle_signals: bool = True
    end_signal: str = "USR1"
    """The stop signal that means the allocation's wall clock is ending (as the batch
    script's ``--signal`` sends it): the runner then takes the end to be its grace and margin
    away. Every other stop signal stops and requeues the tasks just the same."""

    def __post_init__(self) -> None:
        for name in ("grace", "margin", "release_after", "warning"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise RunnerError(f"--{name.replace('_', '-')} must be a finite number of "
                                  f"seconds >= 0, not {value}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise RunnerError(f"--max-tasks must be at least 1, not {self.max_tasks}")
        if self.end_signal not in ("TERM", "USR1", "INT", "HUP", "USR2", "ALRM"):
            raise RunnerError(f"--end-signal must be one of TERM, USR1, INT, HUP, USR2 and "
                              f"ALRM, not {self.end_signal!r}")
        if self.launch_pause is not None and not 0 <= self.launch_pause < 3600:
            raise RunnerError(f"--launch-pause must be between 0 and an hour, not "
                              f"{self.launch_pause}")
