"""The stage packages import one another in one direction only (no cycles).

Read from the source with ``ast``, so the check needs no imports and no JVM. A cycle
between packages means two stages reach into each other; the fix is to move the shared
piece down (as the batch summary moved from ``observe/`` into ``ledger/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "icetide"


def package_imports() -> dict[str, set[str]]:
    """Stage package → the other icetide stage packages its modules import."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    edges: dict[str, set[str]] = {name: set() for name in packages}
    for path in PACKAGE.rglob("*.py"):
        here = path.relative_to(PACKAGE).parts[0]
        if here not in packages:
            continue  # top-level modules (cli, errors, stopping) sit above the stages
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "icetide" and len(parts) > 1 and parts[1] in packages:
                    if parts[1] != here:
                        edges[here].add(parts[1])
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle of the graph, each as the path that closes it (depth-first).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": set()})
    [['a', 'b', 'a']]
    """
    found: set[tuple[str, ...]] = set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                loop = path[path.index(nxt) :]
                start = loop.index(min(loop))
                found.add(tuple(loop[start:] + loop[:start]))
            else:
                walk(nxt, [*path, nxt])

    for node in sorted(edges):
        walk(node, [node])
    return [[*loop, loop[0]] for loop in sorted(found)]


def test_the_stage_packages_form_no_import_cycle() -> None:
    assert cycles(package_imports()) == []


def test_the_check_sees_real_edges() -> None:
    # Guards the check itself: the ledger stage does import the schema model, and status
    # reads the ledger's landing receipts. (The merge no longer imports the ledger: both
    # read the ledger table's contract in schema/contract/.)
    edges = package_imports()
    assert "schema" in edges["ledger"] and "ledger" in edges["observe"]
    assert "ledger" not in edges["merge"]
