"""How a run ends: the outcome names, the exit-code classes and the retry schedule.

One word per outcome, the same in the ``end`` events, ``metaq report``, ``metaq status`` and
every ``--json`` (:data:`OUTCOMES`). What an exit code means is decided here once, for the
runner that settles an exit and for the runner that settles one left unmoved by a lost job:

- an exit code in ``REQUEUE_ON`` (default 75, ``EX_TEMPFAIL`` of ``sysexits.h``) sends the task
  back to its folder with its place kept and no retry spent (Merlin's ``$(MERLIN_RETRY)``);
- one in ``SOFT_FAIL_ON`` finishes it, with its code and a warning kept (Merlin's
  ``$(MERLIN_SOFT_FAIL)``);
- any other non-zero code is a failure, retried while ``RETRIES`` lasts.

A retried or requeued task waits before it may run again: ``RETRY_DELAY`` after its first
failure, doubled at each one after, never more than the cap (:func:`retry_delay`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from metaq_py.directive_keys import TIMEOUT_WORD, codes_of
from metaq_py.task_spec import TaskSpec

__all__ = [
    "CANCELLED",
    "DEFAULT_REQUEUE_ON",
    "DONE_OUTCOMES",
    "FAILED",
    "FAILURE",
    "FINISHED",
    "OOM",
    "OUTCOMES",
    "PREEMPTED",
    "RECLAIMED",
    "REQUEUE",
    "REQUEUED",
    "RETRY",
    "SKIPPED",
    "SOFT_FAIL",
    "SOFT_FAILED",
    "SUCCESS",
    "TIMEOUT",
    "TIMEOUT_WORD",
    "Plan",
    "Policy",
    "code_requeues",
    "exit_class",
    "plan_end",
    "retry_delay",
]

FINISHED = "finished"
"""Exit code 0: the task is done."""
SOFT_FAILED = "soft-failed"
"""An exit code in ``SOFT_FAIL_ON``: done, with the code and a warning kept in ``finished/``."""
SKIPPED = "skipped"
"""Never run: every output its ``CREATES`` names existed when it was claimed."""
FAILED = "failed"
"""A non-zero exit with no retry left: the task is in ``failed/``."""
RETRY = "retry"
"""A non-zero exit with a retry left: back in its folder, to run after its retry delay."""
TIMEOUT = "timeout"
"""Stopped at its ``TIME_LIMIT``; retried like a failure unless ``REQUEUE_ON`` lists
``timeout``."""
OOM = "oom"
"""Killed by the kernel's OOM killer for passing its ``MEM`` (its cgroup's ``memory.events``
counts the kill; without such a cgroup, a ``SIGKILL`` the runner did not send with the peak
memory at ``MEM``): retried like a failure while ``RETRIES`` last, else in ``failed/``; its
``end`` event carries the peak memory."""
REQUEUED = "requeued"
"""Back in its folder with no retry spent: an exit code in ``REQUEUE_ON``, or interrupted by
the end of its allocation."""
PREEMPTED = "preempted"
"""Stopped for on-demand work, back in its folder."""
RECLAIMED = "reclaimed"
"""Taken back by another job (this one lost its claim)."""
CANCELLED = "cancelled"
"""Stopped by ``metaq cancel``."""

OUTCOMES = (FINISHED, SOFT_FAILED, SKIPPED, FAILED, RETRY, TIMEOUT, OOM, REQUEUED, PREEMPTED,
            RECLAIMED, CANCELLED)
"""Every outcome an ``end`` event may carry, in the order reports show them."""

DONE_OUTCOMES = (FINISHED, SOFT_FAILED, SKIPPED)
"""The outcomes that leave a task in ``finished/``."""

SUCCESS, SOFT_FAIL, REQUEUE, FAILURE = "success", "soft-fail", "requeue", "failure"
"""The classes of an exit code (:func:`exit_class`)."""

DEFAULT_REQUEUE_ON = (75,)
"""``EX_TEMPFAIL``: "try again later", the code a task exits with when the fault is not its
own (a file system down, a licence server away)."""


def exit_class(code: int, *, requeue_on: Iterable[int], soft_fail_on: Iterable[int],
               timed_out: bool = False, requeue_timeout: bool = False) -> str:
    """The class of a run that ended with exit ``code`` (0-255): :data:`SUCCESS`,
    :data:`SOFT_FAIL`, :data:`REQUEUE` or :data:`FAILURE`. A run stopped at its time limit
    (``timed_out``) is a failure whatever its code, unless ``requeue_timeout`` or the task
    answered its warning with a ``REQUEUE_ON`` code (it saved its work and asks to go on
    later); a code listed in both classes is a requeue, the kinder reading."""
    if timed_out:
        return REQUEUE if requeue_timeout or code in requeue_on else FAILURE
    if code == 0:
        return SUCCESS
    if code in requeue_on:
        return REQUEUE
    if code in soft_fail_on:
        return SOFT_FAIL
    return FAILURE


def retry_delay(n: int, first: float, cap: float) -> float:
    """The wait before a task may run again after its ``n``-th failure in a row (``n`` from
    1): ``first`` doubled ``n - 1`` times, never more than ``cap``. Never negative."""
    if n < 1 or first <= 0:
        return 0.0
    try:
        doubled = math.ldexp(first, min(n - 1, 4096))
    except OverflowError:
        doubled = math.inf
    return max(0.0, min(cap, doubled))


@dataclass(frozen=True, slots=True)
class Policy:
    """The queue's side of an end (``metaq.yaml``): its defaults for what a header does not
    say (``retries``, ``retry_delay`` and its ``retry_delay_cap``, ``requeue_on``,
    ``soft_fail_on``) and its caps (``attempts``: unsuccessful runs; ``requeues``:
    ``REQUEUE_ON`` exits)."""

    retries: int = 0
    retry_delay: float = 0.0
    retry_delay_cap: float = 3600.0
    requeue_on: tuple[str, ...] = ("75",)
    soft_fail_on: tuple[str, ...] = ()
    attempts: int = 5
    requeues: int = 20


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with a task whose run ended: ``outcome`` (the ``end`` event's word),
    ``back`` (whether it goes back to its folder, there to wait ``delay`` seconds before it may
    run again), ``attempts`` (its unsuccessful runs after this one) and ``note`` (the reason
    kept with it)."""

    outcome: str
    back: bool
    delay: float
    attempts: int
    note: str | None


def code_requeues(history: Iterable[Mapping[str, Any]]) -> int:
    """How many times a task was requeued by its own exit (a ``REQUEUE_ON`` code, or a
    ``timeout`` listed there), from its logbook's history: the ``requeued`` entries that carry
    an exit code."""
    return sum(1 for h in history if h.get("event") == "requeued"
               and h.get("exit_code") is not None)


def delay_of(spec: TaskSpec | None, policy: Policy, n: int) -> float:
    """The wait after the ``n``-th unsuccessful run in a row of a task of ``spec``."""
    first, cap = policy.retry_delay, policy.retry_delay_cap
    if spec is not None and spec.retry_delay is not None:
        first = spec.retry_delay[0]
        cap = spec.retry_delay[1] if spec.retry_delay[1] is not None else max(cap, first)
    return retry_delay(n, first, cap)


def plan_end(spec: TaskSpec | None, policy: Policy, *, exit_code: int, attempts: int,
             requeues: int, what: str, timed_out: bool = False, oom: bool = False) -> Plan:
    """The plan for a run of a task of ``spec`` that ended with ``exit_code`` (0-255), the
    task having ``attempts`` unsuccessful runs and ``requeues`` code requeues before it;
    ``what`` says how it ended, for the note; ``timed_out``: stopped at its ``TIME_LIMIT``;
    ``oom``: killed by the kernel's OOM killer past its ``MEM``, a failure whatever its code
    (retried while ``RETRIES`` last, as the memory a run needs may vary), with the outcome
    :data:`OOM`."""
    requeue_on = spec.requeue_on if spec is not None and spec.requeue_on is not None \
        else policy.requeue_on
    soft_on = spec.soft_fail_on if spec is not None and spec.soft_fail_on is not None \
        else policy.soft_fail_on
    cls = exit_class(exit_code, requeue_on=codes_of(requeue_on),
                     soft_fail_on=codes_of(soft_on), timed_out=timed_out,
                     requeue_timeout=TIMEOUT_WORD in requeue_on)
    if oom and not timed_out:
        cls = FAILURE
    ended = TIMEOUT if timed_out else OOM if oom else FAILED
    if cls == SUCCESS:
        return Plan(FINISHED, False, 0.0, attempts, None)
    if cls == SOFT_FAIL:
        return Plan(SOFT_FAILED, False, 0.0, attempts,
                    f"{what}; finished with a warning (SOFT_FAIL_ON)")
    if cls == REQUEUE:
        n = requeues + 1
        if n >= policy.requeues:
            return Plan(ended, False, 0.0, attempts, f"{what}; requeued (REQUEUE_ON) {n} "
                                                     f"times, which reaches caps.requeues")
        return Plan(REQUEUED, True, delay_of(spec, policy, n), attempts,
                    f"{what}; requeued with no retry spent (REQUEUE_ON)")
    retries = spec.retries if spec is not None and spec.retries is not None \
        else policy.retries
    n = attempts + 1
    if n <= retries and n < policy.attempts:
        return Plan(RETRY if ended == FAILED else ended, True, delay_of(spec, policy, n), n,
                    what)
    return Plan(ended, False, 0.0, n, f"{what}; gave up after {n} run{'s' if n > 1 else ''}")
