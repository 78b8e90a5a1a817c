"""``metaq log``: one task's output, from any node that sees the queue."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from metaq_py.cli.shared import QueueOpt, TaskArg, app, open_queue, reported
from metaq_py.errors import QueueError
from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.disk.fileio import Refused, open_regular
from metaq_py.queue.layout import WORKING
from metaq_py.queue.store import Queue
from metaq_py.report.task_output import OutputReader, jobs_of

FOLLOW_POLL = 0.5
"""Seconds between two reads of a running task's stream files with ``--follow`` (a shared
file system tells no other node when a file grows)."""


@app.command("log")
def log_command(
    task: TaskArg,
    attempt: Annotated[int | None, typer.Option(
        "--attempt", min=1, help="The attempt whose output to print (default: the last).")]
    = None,
    stderr: Annotated[bool, typer.Option(
        "--stderr", help="Only what the task wrote on stderr.")] = False,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing while the task runs.")] = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """Print one task's output, stdout and stderr as it wrote them.

    From its batch jobs' stream files (output: streams in metaq.yaml), or else from its log
    files."""
    with reported():
        q = open_queue(queue)
        admin = QueueAdmin(q)
        e = admin.find(task)
        jobs = jobs_of(q, e)
        out = sys.stdout.buffer
        if q.config.output != "streams":
            _print_files(q, e.id, jobs, attempt=attempt, stderr=stderr)
            return
        if attempt is None:
            seen = {f.attempt for f in OutputReader(q, e.id, jobs).frames()}
            attempt = max(seen) if seen else None
        reader = OutputReader(q, e.id, jobs, stderr_only=stderr)
        wrote = _print_new(reader, attempt, out, follow=follow)
        while follow and _running(admin, e.id):
            time.sleep(FOLLOW_POLL)
            wrote |= _print_new(reader, attempt, out, follow=True)
        if follow:
            _print_new(reader, attempt, out, follow=True)  # what came before it ended
        for problem in dict.fromkeys(reader.problems):
            typer.echo(f"metaq log: {problem}", err=True)
        if not wrote and not follow:
            which = f"attempt {attempt} of " if attempt is not None else ""
            typer.echo(f"metaq log: no output of {which}{e.id} in the stream files of "
                       f"{_jobs_words(jobs)}", err=True)


def _print_new(reader: OutputReader, attempt: int | None, out: BinaryIO, *,
               follow: bool) -> bool:
    wrote = False
    for frame in reader.frames():
        if attempt is None or frame.attempt == attempt or (follow and frame.attempt > attempt):
            out.write(frame.data)
            wrote = True
    out.flush()
    return wrote


def _running(admin: QueueAdmin, task: str) -> bool:
    try:
        return admin.find(task).state == WORKING
    except QueueError:
        return False


def _print_files(q: Queue, task: str, jobs: list[str], *, attempt: int | None,
                 stderr: bool) -> None:
    """Where the queue writes a log file per task: print those of ``task``'s jobs."""
    if attempt is not None or stderr:
        raise QueueError("--attempt and --stderr need output: streams in metaq.yaml; this "
                         "queue writes a log file per task, all attempts and both streams "
                         "together")
    folder, _, rel = task.partition("/")
    found = False
    for job in jobs:
        path = q.job_dir(job) / "logs" / folder / f"{rel}.log"
        try:
            fd, _ = open_regular(path)  # never through a link, never waiting on a FIFO
        except Refused as e:
            if not e.vanished:
                typer.echo(f"metaq log: {e}; skipped", err=True)
            continue
        try:
            while piece := os.read(fd, 1 << 20):
                sys.stdout.buffer.write(piece)
        finally:
            os.close(fd)
        found = True
    sys.stdout.buffer.flush()
    if not found:
        typer.echo(f"metaq log: no log of {task} in {_jobs_words(jobs)}", err=True)


def _jobs_words(jobs: list[str]) -> str:
    if not jobs:
        return "any batch job (it has not run)"
    return ("batch job " if len(jobs) == 1 else "batch jobs ") + ", ".join(jobs)
