"""The mutants of one source file, for bench/mutants.py: small deliberate bugs, one at a time.

Each mutant is one change of the source text at one place, the rest of the file left byte for
byte as it was (so a mutant differs from the original by exactly its change):

- a comparison's boundary or sense (``<`` and ``<=``, ``==`` and ``!=``, ``in`` and ``not in``,
  ``is`` and ``is not``), ``and`` and ``or``, a ``not`` dropped;
- arithmetic (``+`` and ``-``, ``*`` and ``/``, ``//`` and ``/``, ``+=`` and ``-=``), ``min``
  and ``max`` swapped;
- a flag dropped from a ``|`` of flags (``O_RDONLY | O_NOFOLLOW`` without ``O_NOFOLLOW``),
  ``&`` and ``|`` swapped; dropping ``O_RDONLY`` (zero) or ``O_CLOEXEC`` (which ``os.open``
  adds itself, PEP 446) would change nothing, so those are not made;
- a number plus one, ``True`` and ``False`` swapped, a name or format string changed (strings
  without white space: prose, docstrings and f-strings are not mutated);
- a returned value replaced by ``None``, a call made for its effect removed, ``break`` and
  ``continue`` swapped.

A mutant's key names its file, the function that holds it and the change, so that it stays
the same when lines move: ``metaq_py/queue/lease.py | claim_slot | n == 1 -> n != 1``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "mutants_of"]


@dataclass(frozen=True)
class Mutant:
    """One mutant: ``source`` is the whole mutated file; ``line`` the first line it changes
    (in the original); ``key`` names it for the equivalence file."""

    path: str
    line: int
    end_line: int
    function: str
    before: str
    after: str
    source: str
    uses: tuple[int, ...] = ()
    """For a change at module level: the lines of the file that read the names it assigns
    (the tests that run those lines are the ones that can see it); empty when unknown."""
    statement: int = 0
    """The first line of the innermost statement that holds the change: line coverage
    records a statement at its first line only, so a change on a later line of a statement
    written over several lines is run by the tests that run this one (0: ``line``)."""

    @property
    def key(self) -> str:
        return f"{self.path} | {self.function} | {self.before} -> {self.after}"


_COMPARE_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.BitAnd: ast.BitOr, ast.LShift: ast.RShift,
    ast.RShift: ast.LShift, ast.Mod: ast.FloorDiv,
}


def mutants_of(path: str, text: str, functions: frozenset[str] | None = None
               ) -> list[Mutant]:
    """Every mutant of the file ``path`` (its content ``text``), in source order; with
    ``functions``, only those inside the functions of those qualified names (``Queue.claim``)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    raw = text.encode()
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    uses = _uses(tree)
    starts_at = _statement_starts(tree)
    for function, node, replacement in _sites(tree):
        if functions is not None and function not in functions:
            continue
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        new = raw[:begin] + replacement.encode() + raw[end:]
        before = _one_line(raw[begin:end].decode())
        after = _one_line(replacement)
        key = f"{function}|{before}|{after}"
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:  # the same change twice in one function: tell them apart
            after = f"{after}  #{seen[key]}"
        used: tuple[int, ...] = ()
        if function == "<module>":
            used = uses.get(_assigned_at(tree, node.lineno), ())
        out.append(Mutant(path, node.lineno, node.end_lineno or node.lineno, function, before,
                          after, new.decode(), used, starts_at.get(node.lineno, node.lineno)))
    return out


def _statement_starts(tree: ast.Module) -> dict[int, int]:
    """For each line inside a statement, the first line of the innermost statement that
    holds it (for a compound statement, up to its body: the header's lines)."""
    out: dict[int, int] = {}
    for node in ast.walk(tree):  # outer statements before the inner ones they hold
        if isinstance(node, ast.stmt):
            body = [getattr(node, f) for f in ("body", "orelse", "finalbody", "handlers")
                    if isinstance(getattr(node, f, None), list) and getattr(node, f)]
            last = min((b[0].lineno - 1 for b in body), default=node.end_lineno or node.lineno)
            for n in range(node.lineno, max(node.lineno, last) + 1):
                out[n] = node.lineno
    return out


def _assigned_at(tree: ast.Module, line: int) -> str:
    """The name a module-level assignment covering ``line`` binds, or ``""``."""
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                    isinstance(stmt.targets[0], ast.Name):
                return stmt.targets[0].id
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                return stmt.target.id
    return ""


def _uses(tree: ast.Module) -> dict[str, tuple[int, ...]]:
    """For each name assigned at module level, the lines inside functions that read it."""
    names = {_assigned_at(tree, s.lineno) for s in tree.body} - {""}
    lines: dict[str, set[int]] = {n: set() for n in names}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id in lines:
                    lines[node.id].add(node.lineno)
    return {n: tuple(sorted(v)) for n, v in lines.items() if v}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _sites(tree: ast.Module) -> Iterator[tuple[str, ast.AST, str]]:
    """(function, node, replacement text) for each change, walking with the qualified name of
    the function (or class, or ``<module>``) around each node."""

    def walk(node: ast.AST, scope: str) -> Iterator[tuple[str, ast.AST, str]]:
        for child in _children(node):
            if _skipped(child):
                continue
            name = scope
            if _is_def(child):
                name = child.name if scope == "<module>" else f"{scope}.{child.name}"
            yield from ((scope, n, r) for n, r in _changes(child))
            yield from walk(child, name)

    yield from walk(tree, "<module>")


def _children(node: ast.AST) -> list[ast.AST]:
    """The nodes below ``node`` that may be mutated: a function's defaults and body (not its
    annotations), a class's bases and body (decorators such as ``@dataclass(frozen=True)`` are
    declarations, not logic), an annotated assignment's value."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        args = node.args
        return [*args.defaults, *(d for d in args.kw_defaults if d is not None), *node.body]
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *node.body]
    if isinstance(node, ast.AnnAssign):
        return [node.value] if node.value is not None else []
    return list(ast.iter_child_nodes(node))


def _is_def(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)


def _skipped(node: ast.AST) -> bool:
    """Nodes not mutated, nor anything inside them: docstrings, f-strings, annotations,
    ``__all__``, ``if TYPE_CHECKING:`` blocks."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
            isinstance(node.value.value, str):
        return True
    if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
        return True
    if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
            node.test.id == "TYPE_CHECKING":
        return True
    return isinstance(node, ast.Import | ast.ImportFrom)


def _changes(node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """The replacements of ``node`` itself (the nodes below it are walked separately)."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None:
                ops = [*node.ops]
                ops[i] = swap()
                yield node, _paren(ast.Compare(node.left, ops, node.comparators))
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield node, _paren(ast.BoolOp(other, node.values))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield node, _paren(node.operand)
    elif isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitOr):  # a flag dropped from a set of flags
            if not _no_op_flag(node.right):
                yield node, _paren(node.left)
            if not _no_op_flag(node.left):
                yield node, _paren(node.right)
        swap = _BINOP_SWAPS.get(type(node.op))
        if swap is not None:
            yield node, _paren(ast.BinOp(node.left, swap(), node.right))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("min", "max"):
        yield node.func, "max" if node.func.id == "min" else "min"
    elif isinstance(node, ast.Constant):
        yield from _constant(node)
    elif isinstance(node, ast.AugAssign):
        swap = _BINOP_SWAPS.get(type(node.op))
        if swap is not None:
            yield node, ast.unparse(ast.AugAssign(node.target, swap(), node.value))
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        yield node, "return None"
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        yield node, "pass"
    elif isinstance(node, ast.Break):
        yield node, "continue"
    elif isinstance(node, ast.Continue):
        yield node, "break"


_NO_OP_FLAGS = ("O_RDONLY", "O_CLOEXEC")
"""Flags whose drop changes nothing in Python: ``O_RDONLY`` is zero, and ``os.open`` adds
``O_CLOEXEC`` to every descriptor itself (PEP 446)."""


def _no_op_flag(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in _NO_OP_FLAGS


def _constant(node: ast.Constant) -> Iterator[tuple[ast.AST, str]]:
    value = node.value
    if isinstance(value, bool):
        yield node, repr(not value)
    elif isinstance(value, int | float):
        yield node, repr(value + 1)
    elif isinstance(value, str) and value and not any(c.isspace() for c in value):
        yield node, repr(f"XX{value}XX")


def _paren(node: ast.AST) -> str:
    return f"({ast.unparse(node)})"
