"""Reading a PostgreSQL table for the bootstrap, inside the hand-off's snapshot.

Every JDBC partition imports the snapshot :mod:`icetide.capture.postgres.handoff` took
(:attr:`PgSnapshot.init_statement`), and the chunk query refuses to return rows unless
it runs in that snapshot (:meth:`PgSnapshot.checked`), so a driver that ran the query
outside the imported snapshot fails loudly instead of copying later rows.

An array column is read as its literal and turned into what capture's changes leave in
the base by capture's own conversion, in Python workers: the list (capture's element
conversion, then the ledger's projection: :func:`~icetide.sources.postgres_types.
list_value`) or, for a column declared ``json``, the JSON text (:func:`~icetide.capture.
postgres.types.array_json_text`). A value that does not fit the column's list (an array
of other dimensions than it declares) leaves the row marked with
:data:`~icetide.bootstrap.sink.CONVERSION_ERROR` for the bootstrap's dead-letter table,
as capture's change of it would be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.bootstrap.jdbc import read_name, spark_cast
from icetide.bootstrap.plan import Chunk
from icetide.bootstrap.sink import CONVERSION_ERROR, SOURCE_ROW
from icetide.capture.errors import CaptureError
from icetide.capture.postgres.publication import split_table
from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig
from icetide.errors import DecodeError
from icetide.schema.connector import CAPTURE, read_hints
from icetide.schema.convert.spark import arrow_type, arrow_value, sql_type
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote
from icetide.schema.types import Column
from icetide.sources.connect import jdbc_url
from icetide.sources.postgres_catalog import (
    SESSION_SETTINGS,
    SOURCE_VALUES,
    SourceColumn,
    source_columns,
)
from icetide.sources.postgres_types import PgType, array_json_text, list_value
from icetide.sources.quoting import postgres_qualified, postgres_quote

_SNAPSHOT_NAME = re.compile(r"^[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+$")
_SNAPSHOT_TEXT = re.compile(r"^\d+:\d+:[\d,]*$")
SNAPSHOT_GUARD = "icetide: this chunk was not read in the bootstrap snapshot"
"""The error text of a chunk query that ran outside the bootstrap's snapshot."""

# time → isoformat(): "HH:MM:SS" without microseconds, else "HH:MM:SS.ffffff".
_PG_TIME = (
    "CASE WHEN extract(microseconds FROM {t})::bigint % 1000000 = 0 "
    "THEN to_char({t}, 'HH24:MI:SS') ELSE to_char({t}, 'HH24:MI:SS.US') END"
)
PG_READ: dict[str, str] = {
    "boolean": "({c})::int",
    "int": "({c})::int",
    "long": "({c})::bigint",
    # Shortest exact text (PostgreSQL 12+, or 17 digits before): what capture parses too,
    # so a real column declared double holds the same double on both paths.
    "float": "({c})::text",
    "double": "({c})::text",
    "decimal": "({c})::text",
    # The type's output function, which is what capture receives: a cast to text is not
    # always that (char(n) loses its padding, inet shows its mask). format() of NULL is ''.
    "string": "CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END",
    "json": "({c})::text",
    "uuid": "({c})::text",
    "enum": "({c})::text",
    "binary": "{c}",
    "date": "to_char({c}, 'YYYY-MM-DD')",
    "time": _PG_TIME.format(t="({c})"),
    "timestamp": "to_char({c}, 'YYYY-MM-DD HH24:MI:SS.US')",
    "timestamptz": "to_char(({c}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
}
"""icetide type → the PostgreSQL expression (``{c}``: the quoted column) that reads it as
a number, bytes or text Spark casts exactly to the schema's Spark type."""
UNSUPPORTED = ("struct", "list", "map")
"""Types no PostgreSQL expression reads: composite columns arrive as JSON text, and a
``list`` is an array column, read as its literal and converted in Python
(:func:`typed_arrays`)."""
ARRAY_TYPES = ("json", "list")
"""The types an array column capture converts element by element may be declared as."""


def postgres_select_expression(column: Column, source: SourceColumn | None = None) -> str:
    """The SQL that reads ``column`` as text, bytes or a number Spark casts exactly.

    Times of day become ``datetime.time.isoformat()`` text and instants UTC text, so no
    session or JVM time zone touches them. An array capture sends as a JSON array is
    read as its literal (``{a,"b c"}``, in the settings capture's session pins) and
    turned into what capture's changes leave in the base by :func:`typed_arrays` (a
    list) or :func:`postgres_array_column` (JSON text).

    >>> from icetide.schema.types import parse_type
    >>> postgres_select_expression(Column(1, "at", parse_type("timestamptz")))
    'to_char(("at") AT TIME ZONE \\'UTC\\', \\'YYYY-MM-DD HH24:MI:SS.US\\')'
    """
    kind = column.type.name
    quoted = postgres_quote(column.name)
    if source is not None and source.json_array and kind in ARRAY_TYPES:
        return PG_READ["string"].format(c=quoted)
    if kind not in PG_READ:
        hint = "declare it as json in the schema file: capture sends composites as JSON"
        if kind == "list":
            hint = "a list column is read from a PostgreSQL array of a type capture converts"
        raise CaptureError(
            f"column {column.name!r}: a {kind} column cannot be bootstrapped from PostgreSQL yet",
            hint=hint,
        )
    value = SOURCE_VALUES.get((kind, source.type_name)) if source else None
    return PG_READ[kind].format(c=value.format(c=quoted) if value else quoted)


def postgres_array_column(column: Column, source: SourceColumn, read_as: str) -> SparkColumn:
    """The array literal read as ``read_as`` turned into the JSON text capture writes
    (:func:`~icetide.sources.postgres_types.array_json_text`, run by a Python UDF: the
    very conversion capture and the ledger apply, not a second implementation of it)."""
    kind = source.pg_type
    assert kind is not None

    def convert(text: str | None) -> str | None:
        return None if text is None else array_json_text(text, kind)

    return F.udf(convert, "string")(F.col(read_as)).alias(column.name)


def typed_arrays(frame: DataFrame, schema: TableSchema, arrays: Mapping[str, PgType]) -> DataFrame:
    """``frame`` (the schema's columns in their Spark types, except the list columns in
    ``arrays``, still their array literal) with those lists typed, plus
    :data:`~icetide.bootstrap.sink.CONVERSION_ERROR` (why a row's array does not fit
    its column) and :data:`~icetide.bootstrap.sink.SOURCE_ROW` (that row as read, the
    literal included) for the dead-letter table.

    Each literal goes through :func:`~icetide.sources.postgres_types.list_value` with the
    hints the ledger reads capture's messages by, then Arrow as the ledger gives it to
    Spark (:func:`~icetide.schema.convert.spark.arrow_value`): the very values capture's
    changes leave in the base, not a second implementation of them.
    """
    hints = read_hints(schema, CAPTURE)
    lists = {
        c.name: (c, arrays[c.name], hints.get(c.id), arrow_type(c.type))
        for c in schema.columns
        if c.name in arrays
    }
    names = [c.name for c in schema.columns]
    shape = ", ".join(
        [
            *(f"{quote(c.name)} {sql_type(c.type)}" for c in schema.columns),
            f"{CONVERSION_ERROR} STRING",
            f"{SOURCE_ROW} STRING",
        ]
    )

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            failed: dict[int, str] = {}
            out = []
            for name in names:
                if name not in lists:
                    out.append(batch.column(name))
                    continue
                column, kind, hint, arrow = lists[name]
                values = []
                for row, text in enumerate(batch.column(name).to_pylist()):
                    try:
                        value = None if text is None else list_value(text, kind, column, hint)
                    except DecodeError as exc:
                        failed.setdefault(row, exc.message)
                        value = None
                    values.append(arrow_value(value, column.type))
                out.append(pa.array(values, arrow))
            rows = range(batch.num_rows)
            out.append(pa.array([failed.get(i) for i in rows], pa.string()))
            source = [
                json.dumps(batch.slice(i, 1).to_pylist()[0], default=str) if i in failed else None
                for i in rows
            ]
            out.append(pa.array(source, pa.string()))
            yield pa.RecordBatch.from_arrays(out, names=[*names, CONVERSION_ERROR, SOURCE_ROW])

    return frame.select(*[quote(n) for n in names]).mapInArrow(run, shape)


def _pg_table(table: TableConfig) -> str:
    return postgres_qualified(*split_table(str(table.source)))


@dataclass(frozen=True)
class PgSnapshot:
    """A snapshot every chunk query imports: its name for ``SET TRANSACTION SNAPSHOT`` and
    its ``txid_current_snapshot()`` text, which the query checks it runs in."""

    name: str
    text: str

    def __post_init__(self) -> None:
        # Both are pasted into SQL: accept only the forms PostgreSQL produces.
        if not _SNAPSHOT_NAME.match(self.name) or not _SNAPSHOT_TEXT.match(self.text):
            raise CaptureError(f"unexpected snapshot {self.name!r} ({self.text!r})")

    @property
    def init_statement(self) -> str:
        """What each JDBC connection runs before its query (Spark's sessionInitStatement).

        Spark turns autocommit off before it runs this (PostgreSQL's dialect does, for a
        fetch size above 0, which the bootstrap always sets), so the driver has already
        sent its own ``BEGIN``: a ``BEGIN`` here would make the server log "there is
        already a transaction in progress" once per partition. ``SET TRANSACTION`` sets
        the isolation level and imports the snapshot in the driver's transaction; were
        the statement ever run outside one, ``SET TRANSACTION SNAPSHOT`` fails, and the
        chunk query's guard would catch a query in any other snapshot anyway. The
        ``SET LOCAL`` statements pin what capture's session pins, so values read as text (arrays,
        types declared ``string``) read as capture receives them.
        """
        settings = "; ".join(f"SET LOCAL {name} = '{value}'" for name, value in SESSION_SETTINGS)
        return (
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; "
            f"SET TRANSACTION SNAPSHOT '{self.name}'; {settings}"
        )

    def checked(self, expression: str) -> str:
        """``expression``, or an error when the query does not run in this snapshot.

        The check is a scalar sub-select, an InitPlan that PostgreSQL evaluates once, on
        the first row — not in Spark's ``WHERE 1=0`` schema probe, which runs without
        the session init statement. It wraps a column rather than filtering rows, so the
        chunk predicates on the key still use its index.
        """
        guard = (
            f"(SELECT CASE WHEN txid_current_snapshot()::text = '{self.text}' THEN true "
            f"ELSE ('{SNAPSHOT_GUARD}, but in ' || txid_current_snapshot()::text)::boolean END)"
        )
        return f"CASE WHEN {guard} THEN {expression} END"


class PostgresSnapshotReader:
    """Reads tables of a PostgreSQL source inside one imported snapshot.

    ``conn`` is a psycopg2 connection that has imported ``snapshot`` (see
    :func:`~icetide.capture.postgres.handoff.postgres_handoff`); the catalog and the key
    ranges are read through it, so they describe the same state as the chunks.
    """

    def __init__(self, source: SourceConfig, conn: Any, snapshot: PgSnapshot) -> None:
        self.source, self.conn, self.snapshot = source, conn, snapshot

    def quote(self, identifier: str) -> str:
        """A quoted identifier, for chunk predicates."""
        return postgres_quote(identifier)

    def source_columns(self, table: TableConfig) -> dict[str, SourceColumn]:
        """Column → its PostgreSQL type (domains resolved to their base type)."""
        schema, name = split_table(str(table.source))
        found = source_columns(self.conn, schema, name)
        if not found:
            raise CaptureError(
                f"table {table.name!r}: source table {table.source} not found in database "
                f"{self.source.database!r}",
                hint="check the table's source (schema.table) and the source's database",
            )
        return found

    def key_range(self, table: TableConfig, key: str) -> tuple[int | None, int | None, int]:
        """``min``, ``max`` of the integer key and the row count, in the snapshot."""
        q = postgres_quote(key)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT min({q}), max({q}), count(*) FROM {_pg_table(table)}")
            low, high, count = cur.fetchone()
        return (None if low is None else int(low), None if high is None else int(high), int(count))

    def chunk(
        self,
        spark: SparkSession,
        table: TableConfig,
        schema: TableSchema,
        chunk: Chunk,
        fetch_size: int,
    ) -> DataFrame:
        """One chunk through Spark's JDBC source, every partition in the snapshot."""
        found = self.source_columns(table)
        missing = [c.name for c in schema.columns if c.name not in found]
        if missing:
            raise CaptureError(
                f"table {table.name!r}: source table {table.source} has no column(s) "
                f"{', '.join(missing)}",
                hint="the schema file names columns the source table does not have",
            )
        # One column (not the key, whose predicates must reach its index) carries the
        # snapshot check; Spark selects every schema column, so it always runs.
        values = [c for c in schema.columns if c.name not in schema.primary_key]
        guarded = (values or list(schema.columns))[0].name
        expressions = []
        for column in schema.columns:
            expression = postgres_select_expression(column, found[column.name])
            if column.name == guarded:
                expression = self.snapshot.checked(expression)
            expressions.append(f"{expression} AS {read_name(schema, column.name)}")
        query = f"(SELECT {', '.join(expressions)} FROM {_pg_table(table)}) AS icetide_chunk"
        properties = {
            "user": str(self.source.user),
            "password": str(self.source.password or ""),
            "driver": "org.postgresql.Driver",
            # Above 0, or Spark leaves autocommit on and the snapshot is not imported.
            "fetchsize": str(max(1, fetch_size)),
            "sessionInitStatement": self.snapshot.init_statement,
        }
        frame = spark.read.jdbc(
            jdbc_url(self.source), query, predicates=list(chunk.predicates), properties=properties
        )
        out = []
        arrays: dict[str, PgType] = {}
        for column in schema.columns:
            source, read_as = found[column.name], read_name(schema, column.name)
            if source.json_array and column.type.name == "json":
                out.append(postgres_array_column(column, source, read_as))
            elif source.json_array and source.pg_type is not None and column.type.name == "list":
                out.append(F.col(read_as).alias(column.name))
                arrays[column.name] = source.pg_type
            else:
                out.append(spark_cast(column, read_as))
        frame = frame.select(*out)
        return typed_arrays(frame, schema, arrays) if arrays else frame
