"""Issue 28's principle: ``ls``, ``status`` and ``show`` print names with control characters
escaped, so a name planted with a newline or a terminal escape neither forges a row nor
reaches the terminal as itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.runner_helpers import make_queue

NAME = "a\nb\x1b[31mred\t.sh"


def _metaq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metaq_py", *args], capture_output=True,
                          text=True, timeout=60)


def test_names_with_control_characters_are_printed_escaped(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    path = q.root / "todo" / NAME
    path.write_text("#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ PROJECT p\x1b]0;x\ntrue\n")
    path.chmod(0o755)
    outputs = {
        "ls": _metaq("ls", "-q", str(q.root)),
        "status": _metaq("status", "-q", str(q.root)),
        "show": _metaq("show", "-q", str(q.root), "todo/" + NAME),
    }
    for command, done in outputs.items():
        said = done.stdout + done.stderr
        assert "Traceback" not in said, said
        assert "\x1b" not in said and "\t" not in said.replace("    ", ""), (command, said)
    rows = outputs["ls"].stdout.splitlines()
    assert any(r.startswith("todo/a\\nb\\x1b[31mred\\t.sh") for r in rows), rows
    assert not any(r.startswith("b") for r in rows)  # no forged row
