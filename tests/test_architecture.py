"""The dependency rules of docs/architecture.md, checked on the source itself.

- ``metaq_py.policy`` is pure: it imports nothing of metaq_py outside the policy package, so no
  driver, queue, batch system or clock can leak into a decision.
- ``sim`` depends on ``metaq_py``, never the other way: outside the CLI no module of
  ``metaq_py`` imports ``sim``, and the CLI does so only inside command functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "metaq_py"


def _imports(path: Path, *, top_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def test_policy_imports_only_itself_and_the_standard_library() -> None:
    offenders = {
        str(p.relative_to(ROOT)): name
        for p in _modules(PACKAGE / "policy")
        for name in _imports(p)
        if (name.startswith("metaq_py") and not name.startswith("metaq_py.policy"))
        or name.split(".")[0] in {"sim", "numpy", "typer", "yaml", "filelock", "watchdog"}
    }
    assert offenders == {}


def test_no_library_module_imports_the_simulator() -> None:
    offenders = {
        str(p.relative_to(ROOT)): name
        for p in _modules(PACKAGE)
        if "cli" not in p.relative_to(PACKAGE).parts
        for name in _imports(p)
        if name == "sim" or name.startswith("sim.")
    }
    assert offenders == {}


def test_the_cli_imports_the_simulator_only_inside_commands() -> None:
    offenders = {
        str(p.relative_to(ROOT)): name
        for p in _modules(PACKAGE / "cli")
        for name in _imports(p, top_level_only=True)
        if name == "sim" or name.startswith("sim.")
    }
    assert offenders == {}


def test_queue_folder_is_never_a_python_package() -> None:
    assert not (ROOT / "queue" / "__init__.py").exists()
