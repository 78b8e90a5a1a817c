"""The dependency rules of docs/architecture.md, checked on the source itself.

- The layers, from the ground floor up (:data:`LAYERS`): no module imports a module of a layer
  above its own, counting every import (inside functions and behind ``TYPE_CHECKING`` too).
- ``metaq_py.policy`` is pure: besides itself it imports only an allow-list of standard-library
  modules (no clock, file system, randomness or processes) and the ground floor's pure values
  (:mod:`metaq_py.hybrid`), relative imports included.
- No two modules import each other, directly or through others, counting every import.
- ``sim`` depends on ``metaq_py``'s core, never on its live side: no module of ``sim`` imports
  the runner, the queue, the batch systems or the launcher.
- ``sim`` is never imported by ``metaq_py``, except lazily inside the CLI's simulator commands.
- The commands batch nodes start often (``run``, ``status``, ``submit``) import neither numpy
  nor matplotlib, read off ``sys.modules`` as real commands exit (``tests/imports.py``), and
  ``status`` loads at most :data:`MOST_MODULES` of metaq_py's modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.imports import imported_by, top_level

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "metaq_py"
SIM = ROOT / "sim"

POLICY_STDLIB = frozenset(
    {
        "__future__",
        "bisect",
        "collections",
        "dataclasses",
        "enum",
        "functools",
        "heapq",
        "itertools",
        "math",
        "operator",
        "types",
        "typing",
    }
)
"""What a decision may use of the standard library: pure data structures and arithmetic.
Notably absent: ``time``, ``os``, ``random``, ``subprocess``, ``pathlib``, ``threading``."""

POLICY_FLOOR = frozenset({"metaq_py.hybrid"})
"""What the policy may use of the ground floor: plain values that import only the standard
library themselves (checked below)."""

LIVE_SIDE = ("metaq_py.runner", "metaq_py.queue", "metaq_py.batch", "metaq_py.launch")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the ground floor", ("metaq_py.errors", "metaq_py.durations", "metaq_py.clock",
                          "metaq_py.hybrid", "metaq_py.ranges", "metaq_py.words",
                          "metaq_py.share", "metaq_py.queue.disk")),
    ("the core", ("metaq_py.policy", "metaq_py.holdings", "metaq_py.cluster")),
    ("the task format", ("metaq_py.task_spec", "metaq_py.directive_keys", "metaq_py.directives",
                         "metaq_py.outcomes",
                         "metaq_py.program")),
    ("the queue", ("metaq_py.queue",)),
    ("the machine", ("metaq_py.batch", "metaq_py.launch")),
    ("the drivers and readers", ("metaq_py.runner", "metaq_py.report", "metaq_py.alloc",
                                 "metaq_py.api")),
    ("the commands", ("metaq_py.cli", "metaq_py.__main__", "metaq_py")),
)
"""docs/architecture.md's layers, from the floor up: a module's layer is that of the longest
prefix naming it (``metaq_py.queue.disk`` is the floor, the rest of ``metaq_py.queue`` the
queue). ``metaq_py`` itself, the package every import passes through, imports nothing when
loaded; its ``open_queue``, ``TaskKind`` and ``build()`` load their modules when called."""


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str | None, level: int, importer: Path, root: Path) -> str:
    """The absolute name an ``import`` or ``from ... import`` statement names."""
    if level == 0:
        return module or ""
    package = _module_name(importer, root).split(".")
    if importer.name != "__init__.py":
        package.pop()
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _statements(tree: ast.Module, *, top_level_only: bool) -> Iterator[ast.stmt]:
    """Import statements: all of them, or those that run when the module is imported."""
    if not top_level_only:
        yield from (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
        return
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try | ast.With) and not _is_type_checking(node):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)


def _imports(path: Path, *, top_level_only: bool = False, root: Path = ROOT) -> list[str]:
    """Every module ``path`` imports, as absolute names; ``from m import x`` gives ``m.x`` too,
    since ``x`` may be a submodule."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in _statements(tree, top_level_only=top_level_only):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        else:
            base = _resolve(node.module, node.level, path, root)
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def _modules(folder: Path) -> list[Path]:
    """The package's modules under ``folder``. The files in folders below ``share`` (the
    example queue, the job scripts) are users' scripts the package ships, not code it
    imports, and are not counted."""
    return sorted(p for p in folder.rglob("*.py")
                  if "share" not in p.relative_to(folder).parts[:-2])


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_policy_imports_only_itself_and_an_allow_list_of_the_standard_library() -> None:
    offenders = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules(PACKAGE / "policy")
        for name in _imports(p)
        if not _under(name, "metaq_py.policy") and name.split(".")[0] not in POLICY_STDLIB
        and name.rpartition(".")[0] not in POLICY_FLOOR and name not in POLICY_FLOOR
    }
    assert offenders == set()


def test_the_floor_values_the_policy_uses_import_only_the_standard_library() -> None:
    for name in POLICY_FLOOR:
        path = ROOT / (name.replace(".", "/") + ".py")
        assert {i.split(".")[0] for i in _imports(path)} <= POLICY_STDLIB, name


def test_the_allow_list_check_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    policy = tmp_path / "metaq_py" / "policy"
    policy.mkdir(parents=True)
    sneaky = policy / "sneaky.py"
    sneaky.write_text("from .. import queue\ndef f():\n    import time\n    from os import path\n")
    found = set(_imports(sneaky, root=tmp_path))
    assert {"metaq_py.queue", "time", "os", "os.path"} <= found


def _graph(*, top_level_only: bool = False) -> dict[str, set[str]]:
    """Which module imports which, of ``metaq_py`` and ``sim``: every import by default
    (inside functions and behind ``TYPE_CHECKING`` too)."""
    paths = {_module_name(p): p for folder in (PACKAGE, SIM) for p in _modules(folder)}
    return {
        name: {i for i in _imports(path, top_level_only=top_level_only)
               if i in paths and i != name}
        for name, path in paths.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_there_are_no_import_cycles_of_any_kind() -> None:
    assert _cycles(_graph()) == []


def test_no_cycle_at_all_in_the_modules_as_they_load() -> None:
    assert _cycles(_graph(top_level_only=True)) == []


def test_the_policy_has_no_cycle_of_types() -> None:
    """``Snapshot`` (policy/snapshot.py) names ``SharedNodes`` and ``Waitlist``, whose modules
    use policy/model.py's values: it sits above all three, so no type leads back."""
    graph = _graph()
    assert "metaq_py.policy.snapshot" not in _reachable(graph, "metaq_py.policy.model")
    assert {"metaq_py.policy.shares", "metaq_py.policy.waitlist"} <= \
        _reachable(graph, "metaq_py.policy.snapshot")


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def _layer(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``'s layer (longest prefix)."""
    best = (-1, -1)
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if _under(module, p) and len(p) > best[1]:
                best = (i, len(p))
    return best[0]


def _upward(root: Path = ROOT) -> list[str]:
    """Every import of a module of ``metaq_py`` from a layer above its own."""
    package = root / "metaq_py"
    paths = {_module_name(p, root): p for p in _modules(package)}

    def module_of(name: str) -> str:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    found: set[str] = set()
    for name, path in sorted(paths.items()):
        for imported in _imports(path, root=root):
            target = module_of(imported) if _under(imported, "metaq_py") else ""
            if target in ("", "metaq_py", name):
                continue
            if _layer(target) > _layer(name):
                found.add(f"{name} ({LAYERS[_layer(name)][0]}) imports {target} "
                          f"({LAYERS[_layer(target)][0]})")
    return sorted(found)


def test_every_module_has_a_layer() -> None:
    assert [n for n in map(_module_name, _modules(PACKAGE)) if _layer(n) < 0] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert _upward() == []


def test_the_layer_check_sees_an_upward_import_behind_type_checking(tmp_path: Path) -> None:
    disk = tmp_path / "metaq_py" / "queue" / "disk"
    disk.mkdir(parents=True)
    (disk / "sneaky.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from metaq_py.runner.loop import Runner\n")
    runner = tmp_path / "metaq_py" / "runner"
    runner.mkdir()
    (runner / "loop.py").write_text("")
    assert _upward(tmp_path) == ["metaq_py.queue.disk.sneaky (the ground floor) imports "
                                 "metaq_py.runner.loop (the drivers and readers)"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_simulator_imports_nothing_of_the_live_side() -> None:
    offenders = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules(SIM)
        for name in _imports(p)
        if any(_under(name, side) for side in LIVE_SIDE)
    }
    assert offenders == set()


def test_no_library_module_imports_the_simulator() -> None:
    offenders = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules(PACKAGE)
        if "cli" not in p.relative_to(PACKAGE).parts
        for name in _imports(p)
        if _under(name, "sim")
    }
    assert offenders == set()


def test_the_cli_imports_the_simulator_only_inside_commands() -> None:
    offenders = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in _modules(PACKAGE / "cli")
        for name in _imports(p, top_level_only=True)
        if _under(name, "sim")
    }
    assert offenders == set()


def test_queue_folder_is_never_a_python_package() -> None:
    assert not (ROOT / "metaq_py" / "share" / "queue" / "__init__.py").exists()


HEAVY = ("numpy", "matplotlib")


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", "t.sh", "-q", "Q"],
        ["status", "-q", "Q"],
        ["run", "--nodes", "1", "--batch", "local", "--jobid", "J1", "-q", "Q"],
    ],
    ids=["submit", "status", "run"],
)
def test_batch_node_commands_import_neither_numpy_nor_matplotlib(
    tmp_path: Path, argv: list[str]
) -> None:
    imported = top_level(_command_imports(tmp_path, argv))
    assert {"metaq_py", "typer"} <= imported
    assert imported.isdisjoint(HEAVY)


def _command_imports(tmp_path: Path, argv: list[str]) -> set[str]:
    """What ``metaq ARGV`` loads on a fresh queue holding one task (submitted first)."""
    assert "metaq_py" in top_level(imported_by("init", "Q", cwd=tmp_path))
    task = tmp_path / "t.sh"
    task.write_text("#!/bin/sh\n#METAQ MIN_WC_TIME 1m\ntrue\n")
    task.chmod(0o755)
    if argv[0] != "submit":
        imported_by("submit", "t.sh", "-q", "Q", cwd=tmp_path)
    return imported_by(*argv, cwd=tmp_path)


MOST_MODULES = {"status": 36, "submit": 24, "run": 82}
"""The most of metaq_py's modules each command may load, packages (``__init__``) not counted, as
issue 36 counted them. Issue 36 asks for status 40, submit 25 and run 70; run is not there yet
(docs/architecture.md, "Layers"): this bound keeps it from growing. Run went from 87 to 90 with
:mod:`metaq_py.words`, :mod:`metaq_py.policy.completion` and :mod:`metaq_py.outcomes`, and from
90 to 82 when what a run of plain tasks under ``easy`` does not use came to be imported where it
is used: the on-demand stages and checkpoints (the schedulers built from
:mod:`metaq_py.policy.choices`), task shapes, ``AFTER``'s readiness, task arrays (a task in a
sub-folder), ``LOG`` checks, ``sacct``'s and SLURM's step helpers and the GPU and switch
topology. Submit went from 34 to 28 and status from 40 to 38 when the event log, the watcher,
the tally, the log-path checks and :mod:`metaq_py.words` came to be imported where they are
used; to 26 and 36 when task arrays and :mod:`metaq_py.program` did; and submit to 24 when it
came to work on the queue's folders alone (:mod:`metaq_py.queue.submit` on a
:class:`~metaq_py.queue.layout.Layout`), never loading the runner's moves
(:mod:`metaq_py.queue.claiming`, :mod:`metaq_py.queue.store`, :mod:`metaq_py.queue.moves`) nor
the people's other commands (:mod:`metaq_py.queue.admin`)."""


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", "t.sh", "-q", "Q"],
        ["status", "-q", "Q"],
        ["run", "--nodes", "1", "--batch", "local", "--jobid", "J1", "-q", "Q"],
    ],
    ids=["submit", "status", "run"],
)
def test_a_command_loads_at_most_its_share_of_modules(tmp_path: Path, argv: list[str]) -> None:
    modules = {m for m in _command_imports(tmp_path, argv) if _under(m, "metaq_py")}
    packages = {m for m in modules
                if (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    assert len(modules - packages) <= MOST_MODULES[argv[0]], sorted(modules - packages)


def test_the_import_check_sees_numpy_and_matplotlib_when_they_are_imported(
    tmp_path: Path,
) -> None:
    """``metaq simulate`` writes plots, so it must load both: the check can fail."""
    imported = top_level(imported_by("simulate", "--jobs", "300", "--out", "run", cwd=tmp_path))
    assert set(HEAVY) <= imported


def test_simulate_without_plots_imports_only_what_it_uses(tmp_path: Path) -> None:
    """An SWF trace simulated with --no-plots, its output not a terminal: no matplotlib, no
    reader of another format, no synthetic workload, no progress bar."""
    records = [f"{i} {60 * i} -1 {300 + 7 * i} {1 + i % 4} -1 -1 {1 + i % 4} 900 -1 1 1 1 -1 "
               f"1 -1 -1 -1" for i in range(1, 21)]
    (tmp_path / "t.swf").write_text("; MaxNodes: 8\n; MaxProcs: 8\n" + "\n".join(records) + "\n")
    imported = imported_by("simulate", "--trace", "t.swf", "--no-plots", "--no-cache", "--out",
                           "run", cwd=tmp_path)
    assert (tmp_path / "run" / "jobs.csv").read_text().count("\n") == 21
    assert "numpy" in top_level(imported) and "matplotlib" not in top_level(imported)
    unused = {"sim.trace.synthetic", "sim.trace.formats.sacct", "sim.trace.formats.pbs",
              "sim.trace.formats.alcf", "rich.progress"}
    assert imported.isdisjoint(unused), imported & unused
    # the same check sees them when a command does use them
    synthetic = imported_by("simulate", "--jobs", "50", "--no-plots", "--out", "run2",
                            cwd=tmp_path)
    assert "sim.trace.synthetic" in synthetic
