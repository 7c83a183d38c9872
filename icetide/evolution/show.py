"""What ``icetide schema show`` prints: a table's schema with its sink config, and every
statement and plan the table-contract builder generates from them.

Nothing here touches Spark or a database: the output is what the stages would run, built
by the same :class:`~icetide.schema.contract.builder.TableContract` they use.
"""

from __future__ import annotations

from typing import Any

from icetide.lake.tables import TableRefs
from icetide.schema.contract.builder import TableContract
from icetide.schema.defaults import default_to_data
from icetide.schema.file import conversion_to_data, type_from_data, type_to_data

MERGE_SOURCE = "icetide_batch_{table}"
"""The temporary view the merge stage MERGEs from (one per table)."""


def schema_dict(contract: TableContract, refs: TableRefs, sql: bool) -> dict[str, Any]:
    """The schema, its sink config by column and, with ``sql``, everything generated."""
    schema, target = contract.schema, contract.target
    sink = schema.sink
    stored = {c.id: c for c in target.columns}
    columns = []
    for column in schema.columns:
        entry: dict[str, Any] = {
            "id": column.id,
            "name": column.name,
            "type": type_to_data(column.type),
            "nullable": column.nullable,
            "key": schema.key_ids.index(column.id) + 1 if column.id in schema.key_ids else None,
            "iceberg_name": stored[column.id].name,
            "iceberg_type": type_to_data(stored[column.id].type),
        }
        if column.default is not None:
            entry["default"] = default_to_data(column.default)
        if column.tags:
            entry["tags"] = sorted(column.tags)
        if column.id in sink.logical:
            entry["logical"] = sink.logical[column.id]
        if column.id in sink.types:
            entry["override"] = type_to_data(sink.types[column.id])
        if column.id in sink.conversions:
            entry["convert"] = conversion_to_data(sink.conversions[column.id])
        columns.append(entry)
    data: dict[str, Any] = {
        "table": schema.table,
        "version": schema.version,
        "primary_key": list(schema.primary_key),
        "last_column_id": schema.last_column_id,
        "columns": columns,
        "tables": {
            "base": refs.base.dotted,
            "ledger": refs.cdc.dotted,
            "dead_letter": refs.dead_letters.dotted,
        },
    }
    if sql:
        data["sql"] = {
            "base": [contract.base_ddl(refs.base), contract.identifier_fields_sql(refs.base)],
            "ledger": [contract.ledger_ddl(refs.cdc)],
            "dead_letter": [TableContract.dead_letter_ddl(refs.dead_letters)],
            "merge": contract.merge_sql(refs.base, MERGE_SOURCE.format(table=schema.table)),
            "projection": [str(step) for step in contract.projection()],
        }
    return data


def render(data: dict[str, Any]) -> str:
    """:func:`schema_dict` as text for people."""
    lines = [
        f"table {data['table']} (version {data['version']}, last column id "
        f"{data['last_column_id']}); key {', '.join(data['primary_key'])}",
        "",
    ]
    header = ("id", "name", "type", "null", "key", "iceberg name", "iceberg type", "sink")
    rows = [header]
    for c in data["columns"]:
        how = []
        if "convert" in c:
            convert = c["convert"]
            how.append(f"convert {convert if isinstance(convert, str) else convert['function']}")
        if "override" in c:
            how.append("type override")
        if "logical" in c:
            how.append(f"logical {c['logical']}")
        if "tags" in c:
            how.append(f"tags {', '.join(c['tags'])}")
        if "default" in c:
            default = c["default"]
            how.append(f"default {default['sql'] if isinstance(default, dict) else default!r}")
        rows.append(
            (
                str(c["id"]),
                c["name"],
                _type_text(c["type"]),
                "yes" if c["nullable"] else "no",
                str(c["key"] or ""),
                c["iceberg_name"],
                _type_text(c["iceberg_type"]),
                "; ".join(how),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    tables = data["tables"]
    lines += ["", f"tables: {tables['base']}, {tables['ledger']}, {tables['dead_letter']}"]
    if "sql" in data:
        sql = data["sql"]
        lines += ["", "-- base table", *[s + ";" for s in sql["base"]]]
        lines += ["", "-- ledger table", *[s + ";" for s in sql["ledger"]]]
        lines += ["", "-- dead-letter table", *[s + ";" for s in sql["dead_letter"]]]
        lines += ["", "-- merge (from the deduplicated batch view)", sql["merge"] + ";"]
        lines += ["", "-- ledger projection: id: source column -> conversion -> Iceberg column"]
        lines += sql["projection"]
    return "\n".join(lines)


def _type_text(value: Any) -> str:
    return value if isinstance(value, str) else str(type_from_data(value))
