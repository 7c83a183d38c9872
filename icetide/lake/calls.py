"""``CALL <catalog>.system.<procedure>(…)`` statements, quoted once.

Iceberg's procedures take the table as a string it parses as a (quoted) multi-part name,
and options as a ``map`` of strings: both built here, every identifier quoted and every
value a literal, for maintenance and for the merge's own small-file rewrite.

>>> from icetide.schema.contract.names import TableName
>>> procedure_call(TableName("lake", "shop", "orders"), "rewrite_manifests")
"CALL `lake`.system.rewrite_manifests(table => '`shop`.`orders`')"
>>> options_map({"min-input-files": "2"})
"map('min-input-files', '2')"
"""

from __future__ import annotations

from icetide.schema.contract.names import TableName
from icetide.schema.quoting import literal, qualified, quote


def procedure_call(table: TableName, procedure: str, **args: str) -> str:
    """``CALL`` Iceberg's ``procedure`` on ``table``; ``args`` are SQL expressions."""
    target = literal(qualified(table.namespace, table.name))
    rest = "".join(f", {name} => {value}" for name, value in args.items())
    return f"CALL {quote(table.catalog)}.system.{procedure}(table => {target}{rest})"


def options_map(options: dict[str, str]) -> str:
    """A procedure's ``options`` argument."""
    return "map(" + ", ".join(f"{literal(k)}, {literal(v)}" for k, v in options.items()) + ")"
