"""Metadata operations on the queue per task, counted with ``strace`` (issue 29, part 6:
at most 12 per standalone task, at most 2 per array index).

On Lustre and GPFS every open, stat, rename, unlink, mkdir and directory read is a round trip
to the one metadata server the whole machine shares. This bench runs a real ``metaq run``
(a process, as a batch job would start it) over N no-op tasks, and then over an array of N
indices, under ``strace -f -y``, and counts the metadata calls whose path or descriptor lies in
the queue, by call. The tasks' own processes are left out: a process counts as a task's from
its successful ``execve`` of anything but Python (the task script, run from its checked
``memfd``), and so do its children. Everything the runner does for a task before that
``execve`` (the spawn, the run folder, the log) counts.

Reads and writes of data are not metadata calls and are not counted; opens, closes of nothing,
stats, renames, links, unlinks, mkdirs, directory reads (``getdents64``), ``fstat`` and the
other calls in :data:`METADATA` are. The figures include the runner's start and end (reading
``metaq.yaml``, its job folder), spread over the tasks.

METAQ, counted the same way (issue 29's text), makes about 36 per task on its state folders.

Each is run with the queue's ``output`` as ``files`` (a log file per task) and as ``streams``
(the job's stream files), and an array with ``streams``.

    python bench/metadata_ops.py [--tasks N] [--nodes J] [--shapes K] [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_TASK = 12
"""The most metadata calls per standalone task issue 29 allows."""
TARGET_INDEX = 2
"""The most per array index."""
METAQ_PEER = 36
"""METAQ's count per task on its state folders, as issue 29 measured it."""

METADATA = frozenset({
    "open", "openat", "openat2", "creat", "stat", "lstat", "newfstatat", "fstatat64",
    "statx", "fstat", "access", "faccessat", "faccessat2", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "mkdir",
    "mkdirat", "rmdir", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat", "chown",
    "fchown", "fchownat", "lchown", "utime", "utimes", "utimensat", "futimesat", "truncate",
    "ftruncate", "getdents", "getdents64", "statfs", "fstatfs", "mknod", "mknodat",
    "inotify_add_watch", "fallocate", "fsync", "fdatasync", "getxattr", "lgetxattr",
    "fgetxattr", "setxattr", "fsetxattr", "listxattr", "flistxattr", "chdir", "fchdir",
})
"""The calls that reach a file system's metadata server (data reads and writes do not)."""

LINE = re.compile(r"^(\d+)\s+(.*)$")
CALL = re.compile(r"^([a-z_0-9]+)\(")
RESUMED = re.compile(r"^<\.\.\. ([a-z_0-9]+) resumed>")
CHILD = re.compile(r"^(?:clone3?|fork|vfork)\(.*= (\d+)")
EXECVE_OK = re.compile(r'^execve\("([^"]*)".*= 0')


SHAPE = (
    (re.compile(r"\{st_mode=[^}]*\}|0x[0-9a-f]+"), "_"),
    (re.compile(r"\d+<"), "<"),
    (re.compile(r"\b[0-9a-f]{6,}\b|\d+"), "N"),
    (re.compile(r"\s+"), " "),
)
"""What is cut from a call to see its shape: stat buffers, descriptors, numbers, tokens."""


@dataclass
class Count:
    """The metadata calls on the queue, by call (and by shape: the call with the queue's path
    as ``Q`` and numbers as ``N``), and the processes seen."""

    calls: Counter[str] = field(default_factory=Counter)
    shapes: Counter[str] = field(default_factory=Counter)
    task_pids: set[int] = field(default_factory=set)
    runner_pids: set[int] = field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def whole_calls(trace: Path):
    """Each traced call as (pid, text), an ``<unfinished ...>`` call joined to its
    ``resumed`` rest."""
    pending: dict[int, str] = {}
    with trace.open(errors="replace") as lines:
        for raw in lines:
            m = LINE.match(raw.rstrip("\n"))
            if not m:
                continue
            pid, text = int(m.group(1)), m.group(2)
            if text.endswith("<unfinished ...>"):
                pending[pid] = text[: -len("<unfinished ...>")]
                continue
            r = RESUMED.match(text)
            if r:
                head = pending.pop(pid, r.group(1) + "(")
                text = head + text[r.end():]
            yield pid, text


def count(trace: Path, queue: Path, top: int) -> Count:
    """Count the metadata calls on paths under ``queue`` in an ``strace -f -y`` trace, the
    task processes' excluded (see the module's docstring)."""
    out = Count()
    root = str(queue)
    out.runner_pids.add(top)
    for pid, text in whole_calls(trace):
        c = CHILD.match(text)
        if c:
            child = int(c.group(1))
            (out.task_pids if pid in out.task_pids else out.runner_pids).add(child)
            continue
        e = EXECVE_OK.match(text)
        if e and pid != top and "python" not in os.path.basename(e.group(1)) \
                and not e.group(1).endswith("/metaq"):
            out.task_pids.add(pid)
            out.runner_pids.discard(pid)
            continue
        if pid in out.task_pids:
            continue
        m = CALL.match(text)
        if not m or m.group(1) not in METADATA or root not in text:
            continue
        if " = -1 " in text and m.group(1) in {"close"}:
            continue
        out.calls[m.group(1)] += 1
        shape = text.replace(root, "Q").split(", ", 1)[-1] if text.startswith(
            ("newfstatat(AT_FDCWD", "openat(AT_FDCWD")) else text.replace(root, "Q")
        shape = m.group(1) + "(" + shape if not shape.startswith(m.group(1)) else shape
        for pattern, put in SHAPE:
            shape = pattern.sub(put, shape)
        out.shapes[shape[:150]] += 1
    return out


def script(path: Path, header: str = "") -> None:
    path.write_text(f"#!/bin/sh\n{header}exit 0\n")
    path.chmod(0o755)


def traced_run(queue: Path, nodes: int, trace: Path) -> int:
    """``metaq run`` over the queue under strace; returns the traced process's pid."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["strace", "-f", "-y", "-qq", "-s", "256", "-o", str(trace),
           "-e", "trace=%file,%desc,%process,getdents64",
           sys.executable, "-m", "metaq_py", "run", "--queue", str(queue),
           "--batch", "local", "--nodes", str(nodes), "--launch-pause", "0",
           "--jobid", "bench"]
    proc = subprocess.run(cmd, env=env, cwd=str(queue.parent), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"metaq run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    with trace.open(errors="replace") as lines:
        first = LINE.match(lines.readline())
    assert first is not None, "an empty trace"
    return int(first.group(1))


def inodes(folder: Path) -> int:
    return sum(1 + len(files) for _, _, files in os.walk(folder))


def measure(scratch: Path, name: str, tasks: int, nodes: int, array: bool,
            shapes: int = 0, output: str = "files") -> Count:
    name = f"{name}-{output}"
    queue = scratch / name / "queue"
    queue.parent.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "metaq_py", "init", str(queue)], check=True,
                   capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    (queue / "metaq.yaml").write_text(f"defaults:\n  min_wc_time: 1m\noutput: {output}\n")
    if array:
        src = scratch / name / "idx.sh"
        script(src)
        subprocess.run([sys.executable, "-m", "metaq_py", "submit", "--queue", str(queue),
                        "--array", f"0-{tasks - 1}", str(src)], check=True,
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    else:
        for i in range(tasks):
            script(queue / "todo" / f"t{i:05d}.sh")
    before = inodes(queue)
    trace = scratch / name / "strace.txt"
    top = traced_run(queue, nodes, trace)
    result = count(trace, queue, top)
    after = inodes(queue)
    what = f"an array of {tasks} indices" if array else f"{tasks} standalone no-op tasks"
    what += f" (output: {output})"
    per = result.total / tasks
    target = TARGET_INDEX if array else TARGET_TASK
    print(f"{what}, {nodes} at a time: {result.total} metadata calls on the queue, "
          f"{per:.1f} per {'index' if array else 'task'} (target <= {target}: "
          f"{'met' if per <= target else 'NOT met'}; METAQ about {METAQ_PEER} per task)")
    for call, n in result.calls.most_common():
        print(f"  {call:<18} {n:8d}  {n / tasks:7.2f} per {'index' if array else 'task'}")
    if shapes:
        print("  by shape (the most frequent):")
        for shape, n in result.shapes.most_common(shapes):
            print(f"    {n / tasks:6.2f}  {shape}")
    print(f"  processes: {len(result.runner_pids)} of the runner, "
          f"{len(result.task_pids)} of the tasks (not counted)")
    print(f"  inodes in the queue: {before} before, {after} after "
          f"({(after - before) / tasks:+.2f} per {'index' if array else 'task'})")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder and traces")
    ap.add_argument("--shapes", type=int, default=0, metavar="K",
                    help="also print the K most frequent calls by shape, per task")
    args = ap.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed (Debian: apt-get install strace)")
    scratch = Path(tempfile.mkdtemp(prefix="metaq-bench-meta-"))
    try:
        for output in ("files", "streams"):
            measure(scratch, "standalone", args.tasks, args.nodes, array=False,
                    shapes=args.shapes, output=output)
        measure(scratch, "array", args.tasks, args.nodes, array=True, shapes=args.shapes,
                output="streams")
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
