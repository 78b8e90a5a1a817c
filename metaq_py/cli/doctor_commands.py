"""``metaq doctor``: the queue's owners see every anomaly in its folders, and fix some.

It reads only, unless given ``--fix`` (see :mod:`metaq_py.queue.doctor` for what each fix
does, and what it leaves to people). The exit status is 0 when nothing is left to see, and 1
when an anomaly remains (so a cron job can mail the owners).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from metaq_py.cli.shared import JsonOpt, QueueOpt, app, open_queue, reported
from metaq_py.queue.doctor import Anomaly, examine, repair


@app.command()
def doctor(
    fix: Annotated[bool, typer.Option(
        "--fix", help="Apply the fixes that lose no one's data: remove links, FIFOs and empty "
                      "folders, take back stale claims, set bad notices aside, reject "
                      "untrusted waiting tasks, take write permission from others.")] = False,
    json_out: JsonOpt = False,
    queue: QueueOpt = Path("queue"),
) -> None:
    """List every anomaly in the queue with what to do about it; change nothing unless --fix.

    Links, FIFOs, files of other owners or modes, stale and malformed leases, bad notices,
    names too long, folders that should not be there, and what runners set aside."""
    with reported():
        q = open_queue(queue)
        found = examine(q, now=time.time())
        fixed = dict((id(a), what) for a, what in repair(q, found)) if fix else {}
        left = [a for a in found if id(a) not in fixed or fixed[id(a)].startswith("not fixed")]
        if json_out:
            typer.echo(json.dumps([_json(q.root, a, fixed.get(id(a))) for a in found],
                                  indent=2))
        else:
            for a in found:
                _print(q.root, a, fixed.get(id(a)))
            typer.echo(_summary(len(found), len(found) - len(left), fix))
    if left:
        raise typer.Exit(1)


def _where(root: Path, a: Anomaly) -> str:
    try:
        return str(a.path.relative_to(root))
    except ValueError:
        return str(a.path)


def _print(root: Path, a: Anomaly, fixed: str | None) -> None:
    typer.echo(f"{a.kind.value}: {_where(root, a)}: {a.problem}")
    typer.echo(f"    what to do: {a.remedy}")
    if fixed is not None:
        typer.echo(f"    fixed: {fixed}")
    elif a.fix is not None:
        typer.echo(f"    --fix would {a.fix.value}")


def _json(root: Path, a: Anomaly, fixed: str | None) -> dict[str, object]:
    return {"kind": a.kind.value, "path": _where(root, a), "problem": a.problem,
            "remedy": a.remedy, "fix": a.fix.value if a.fix else None, "fixed": fixed}


def _summary(found: int, fixed: int, fix: bool) -> str:
    if not found:
        return "no anomaly found"
    if not fix:
        return f"{found} anomal{'y' if found == 1 else 'ies'} found; nothing was changed"
    return f"{found} anomal{'y' if found == 1 else 'ies'} found, {fixed} fixed"
