"""The compiled build (setup.py): what mypyc compiles type-checks, and compiled code builds
values and schedules exactly as the source does."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# One small run per kind of decision: EASY on a plain synthetic trace, and an on-demand
# mechanism on its hybrid workload (preemptions, shrinks, notices). Prints a digest of every
# job's outcome, so the installed build and the source can be compared.
RUN = """
import hashlib, json
import numpy as np
from sim.engine.core import simulate
from sim.trace.synthetic import synthetic_trace
from sim.workload.model import WorkloadModel, hybrid_workload
import metaq_py
import metaq_py.policy.model as model
from metaq_py.policy.model import Decision, Job, Kind, Notice, Preempt, Running, Start
from metaq_py.policy.snapshot import Snapshot

# values as a driver builds them: defaults, None for a mapping, a malleable job's min_size
job = Job("j", Kind.MALLEABLE, 4, 60.0, 1.0, min_size=2, runtime=30.0)
values = [job, Job(7, Kind.RIGID, 3, 5.0, 0.0), Running(job, (0, 1), 2.0, 62.0),
          Running(job, (2,), 2.0, 62.0, 32.0, 12.0, "n"), Start("j", (0,)), Start(7, (1, 2), "n"),
          Decision(), Decision((Start("j", (0,)), Preempt(7)), 9.0),
          Notice("n", 2, 5.0, 9.0, 1.0),
          Snapshot(0.0, 8, frozenset({1}), {}, [job]),
          Snapshot(0.0, 8, frozenset(), {}, [], reserved=None, notices=None, owed=None,
                   borrowers=None),
          Snapshot(1.0, 8, frozenset(), {}, [], {"n": frozenset({3})}, {}, {"j": (4,)}, 99.0,
                   {"n": {"j"}}, True, [], [], 0)]

trace = synthetic_trace(jobs=3000, seed=7)
runs = [("easy", trace, True), ("CUA&SPAA", hybrid_workload(trace, WorkloadModel(seed=7)), False),
        ("CUP&PAA", hybrid_workload(trace, WorkloadModel(seed=8)), False)]
digests = {}
for policy, source, oracle in runs:
    c = simulate(source, policy=policy, oracle=oracle).outcomes.columns
    h = hashlib.sha256()
    for column in (c.start, c.end, c.lost, c.preemptions, c.shrinks):
        h.update(np.ascontiguousarray(column).tobytes())
    digests[policy] = h.hexdigest()
print(json.dumps({"model": model.__file__, "build": metaq_py.build(), "digests": digests,
                  "values": [repr(v) for v in values]}))
"""


def compiled_modules() -> list[str]:
    """setup.py's COMPILED list, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "COMPILED" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no COMPILED list")


STRICT = ["metaq_py/policy", "metaq_py/cluster.py", "sim/engine"]
"""What ``mypy --strict`` holds (pyproject.toml's [tool.mypy] overrides, and the test below)."""


def mypy(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_compiled_module_exists_and_type_checks() -> None:
    """mypyc refuses code that mypy rejects, and the build would then fall back to pure
    Python without a word in CI: hold the compiled modules to mypy here. A plain
    ``python -m mypy`` checks what pyproject.toml names, which covers every compiled module."""
    pytest.importorskip("mypy", reason="mypy is in the test extras and the build requirements")
    modules = compiled_modules()
    assert modules and all((ROOT / m).is_file() for m in modules)
    mypy()
    try:
        import tomllib
    except ImportError:  # Python 3.10: the check above is what matters
        return
    named = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert all(any(m == f or m.startswith(f"{f}/") for f in named) for m in modules), named
    assert all(f in named for f in STRICT)


def test_the_policy_core_the_cluster_and_the_engine_pass_mypy_strict() -> None:
    """``mypy --strict`` on exactly these (the modules they import are not checked here)."""
    pytest.importorskip("mypy", reason="mypy is in the test extras and the build requirements")
    mypy("--strict", "--follow-imports=silent", *STRICT)


def test_the_source_says_it_is_pure_python() -> None:
    import metaq_py

    assert metaq_py.build() == "pure Python"  # tests import the checkout, never a build


def run(cwd: Path, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_installed_compiled_build_schedules_exactly_as_the_source(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [sys.executable, "-c", "import metaq_py.policy.model as m; print(m.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    installed = Path(where.stdout.strip()) if where.returncode == 0 else None
    if installed is None or installed.suffix == ".py":
        pytest.skip(f"the installed metaq-py is not compiled ({installed or 'not installed'}); "
                    "`pip install .` with a C compiler builds it")
    ours = run(ROOT, {**env, "PYTHONPATH": str(ROOT)})
    assert ours["model"].endswith(".py")  # the source, in pure Python
    assert ours["build"] == "pure Python"
    theirs = run(tmp_path, env)
    assert theirs["model"] == str(installed)
    assert theirs["build"] == "compiled (mypyc)"
    assert theirs["values"] == ours["values"]  # the same __init__s, compiled or not
    assert "reserved={}" in ours["values"][-2]  # None stands for a new empty mapping
    assert theirs["digests"] == ours["digests"]
    assert len(set(ours["digests"].values())) == 3  # three different runs, not one repeated
