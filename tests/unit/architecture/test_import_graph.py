"""The stage packages import one another in one direction only, and so do the modules
inside each package (no cycles at either level).

Read from the source with ``ast``, so the check needs no imports and no JVM. Every
import counts, also one inside a function or under ``TYPE_CHECKING``: a circle hidden
that way is still two pieces that cannot be understood apart. A cycle between packages
means two stages reach into each other; the fix is to move the shared piece down (as the
batch summary moved from ``observe/`` into ``ledger/``). A cycle inside a package is
fixed the same way, one floor down (``Column`` lives with the types it is part of, as
PyIceberg keeps ``NestedField`` in ``types.py``).
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


def module_imports() -> dict[str, set[str]]:
    """Module → the other icetide modules it imports (``from p import m`` of a submodule
    ``m`` is an edge to ``p.m``; a package stands for its ``__init__.py``)."""
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                ]
            edges[name] |= {t for t in targets if t in modules and t != name}
    return edges


def package_of(module: str) -> str:
    """The package a module sits in (for a package, itself)."""
    path = PACKAGE.parent / Path(*module.split("."))
    return module if path.is_dir() else module.rsplit(".", 1)[0]


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


def test_the_modules_of_each_package_form_no_import_cycle() -> None:
    """Inside every package, module by module."""
    edges = module_imports()
    inside = {
        name: {t for t in targets if package_of(t) == package_of(name) or t == package_of(name)}
        for name, targets in edges.items()
    }
    assert cycles(inside) == []


def test_the_module_check_sees_a_circle() -> None:
    """Guards the check itself: real edges are seen, and a circle made of them is found."""
    edges = module_imports()
    assert "icetide.schema.types" in edges["icetide.schema.model"]
    edges["icetide.schema.types"].add("icetide.schema.model")
    assert ["icetide.schema.model", "icetide.schema.types", "icetide.schema.model"] in cycles(edges)


def test_the_check_sees_real_edges() -> None:
    # Guards the check itself: the ledger stage does import the schema model, and status
    # reads the ledger's landing receipts. (The merge no longer imports the ledger: both
    # read the ledger table's contract in schema/contract/.)
    edges = package_imports()
    assert "schema" in edges["ledger"] and "ledger" in edges["observe"]
    assert "ledger" not in edges["merge"]
