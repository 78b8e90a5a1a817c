"""What a real ``metaq`` command imports: run it in a fresh interpreter and read
``sys.modules`` as it exits.

``python -X importtime`` would miss modules loaded with :func:`importlib.import_module`, which
is how ``metaq_py.cli`` loads a command's module; ``sys.modules`` misses nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = """
import atexit, json, sys
atexit.register(lambda: print("MODULES=" + json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["metaq", *sys.argv[1:]]
from metaq_py.cli import main
main()
"""


def imported_by(*argv: str, cwd: Path) -> set[str]:
    """The modules loaded by ``metaq ARGV...`` run in ``cwd`` (which must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *argv], cwd=cwd, capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES="))
    return set(json.loads(line.removeprefix("MODULES=")))


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}
