"""Capture, the change-event model and the source connections run without a JVM.

Read from the source with ``ast`` (nothing is imported): every module under
``icetide/capture``, ``icetide/events`` and ``icetide/sources`` is followed through the
icetide modules it imports, module by module (package ``__init__`` files included, and
imports inside functions too, since those run as well), and none of them may import
``pyspark`` or ``py4j``. A failure prints the chain of imports that reaches Spark.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHECKED = ("icetide.capture", "icetide.events", "icetide.sources")
FORBIDDEN = ("pyspark", "py4j")


def module_path(module: str) -> Path | None:
    """The file of an icetide module or package, or None when there is none."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def modules_under(package: str) -> list[str]:
    """Every module of ``package``, by dotted name."""
    folder = ROOT.joinpath(*package.split("."))
    found = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _with_parents(module: str) -> Iterator[str]:
    """``icetide.a.b`` and the packages importing it runs first (``icetide``, ``icetide.a``)."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


@cache
def imports_of(module: str) -> tuple[str, ...]:
    """The modules ``module`` imports: icetide ones (with their parent packages) and the
    top-level name of any other."""
    path = module_path(module)
    if path is None:
        return ()
    is_package = path.name == "__init__.py"
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names = [base]
            # ``from icetide.capture import errors`` imports the module ``errors`` too.
            names += [f"{base}.{a.name}" for a in node.names if module_path(f"{base}.{a.name}")]
        for name in names:
            if name.split(".")[0] == "icetide":
                found.extend(m for m in _with_parents(name) if module_path(m))
            else:
                found.append(name.split(".")[0])
    return tuple(dict.fromkeys(m for m in found if m != module))


def chain_to_spark(start: str) -> list[str] | None:
    """The shortest chain of imports from ``start`` to pyspark or py4j, or None."""
    seen = {start}
    queue: list[list[str]] = [[start]]
    while queue:
        path = queue.pop(0)
        for imported in imports_of(path[-1]):
            if imported in FORBIDDEN:
                return [*path, imported]
            if imported.startswith("icetide") and imported not in seen:
                seen.add(imported)
                queue.append([*path, imported])
    return None


def test_capture_events_and_sources_never_reach_spark() -> None:
    modules = [m for package in CHECKED for m in modules_under(package)]
    assert len(modules) > 20  # the walk found the packages
    chains = [chain for m in modules if (chain := chain_to_spark(m)) is not None]
    assert not chains, "modules that need Spark:\n" + "\n".join(
        " -> ".join(chain) for chain in chains
    )


def test_the_check_sees_a_spark_import() -> None:
    # Guards the check itself: the merge stage does reach pyspark, and says how.
    chain = chain_to_spark("icetide.merge.stage")
    assert chain is not None and chain[0] == "icetide.merge.stage" and chain[-1] == "pyspark"
    assert chain_to_spark("icetide.capture.runner") is None
