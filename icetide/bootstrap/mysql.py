"""Reading a MySQL/MariaDB table for the bootstrap: no snapshot, the low watermark
(:mod:`icetide.capture.mysql.handoff`) is enough."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from icetide.bootstrap.jdbc import read_name, spark_cast
from icetide.bootstrap.plan import Chunk
from icetide.capture.errors import CaptureError
from icetide.config.model import SourceConfig, TableConfig
from icetide.schema.model import Column, TableSchema
from icetide.sources.connect import connect_mysql, jdbc_url
from icetide.sources.quoting import mysql_qualified, mysql_quote


def mysql_select_expression(column: Column, *, key: bool = False) -> str:
    """The SQL that reads ``column`` as text, bytes or a number Spark casts exactly.

    Date and time values go through text so no JVM time zone touches them; TIMESTAMP
    columns are read in UTC (the session's ``time_zone`` is set to ``+00:00``). Binary
    columns are read as ``CAST(… AS BINARY)``: the bytes of a BINARY/VARBINARY/BLOB
    unchanged, and a ``BIT(n)`` as its ``ceil(n/8)`` bytes, most significant first — the
    form capture's ``Bits`` values are stored in (the JDBC driver would hand a BIT(n)
    over as a 64-bit number, whose 8 bytes are not the column's value). A ``key`` column
    of an integer type is read as it is, so the chunk predicates on it use its index.

    >>> from icetide.schema.types import parse_type
    >>> mysql_select_expression(Column(1, "b`it", parse_type("binary")))
    'CAST(`b``it` AS BINARY)'
    """
    name = mysql_quote(column.name)
    kind = column.type.name
    if kind == "timestamp" or kind == "timestamptz":
        return f"DATE_FORMAT({name}, '%Y-%m-%d %H:%i:%s.%f')"
    if kind == "date":
        return f"DATE_FORMAT({name}, '%Y-%m-%d')"
    if kind == "time":
        return (
            f"IF(MICROSECOND({name}) = 0, TIME_FORMAT({name}, '%H:%i:%s'), "
            f"TIME_FORMAT({name}, '%H:%i:%s.%f'))"
        )
    if kind == "boolean" or (kind in ("int", "long") and not key):
        # A number whatever the column: the driver hands YEAR over as a DATE.
        return f"CAST({name} AS SIGNED)"
    if kind in ("string", "json", "uuid"):
        return f"CAST({name} AS CHAR)"
    if kind == "binary":
        return f"CAST({name} AS BINARY)"
    return name


def _mysql_table(table: TableConfig) -> tuple[str, str]:
    db, _, name = str(table.source).rpartition(".")
    if not db:
        raise CaptureError(
            f"table {table.name!r}: source {table.source!r} names no database",
            hint="write the source as db.table for a MySQL source",
        )
    return db, name


def mysql_key_range(
    source: SourceConfig, table: TableConfig, key: str
) -> tuple[int | None, int | None, int]:
    """``MIN``, ``MAX`` of the integer key and the row count, to plan chunks."""
    db, name = _mysql_table(table)
    conn = connect_mysql(source, autocommit=True)
    try:
        with conn.cursor() as cur:
            q = mysql_quote(key)
            cur.execute(f"SELECT MIN({q}), MAX({q}), COUNT(*) FROM {mysql_qualified(db, name)}")
            row = cur.fetchone()
    finally:
        conn.close()
    assert row is not None
    low, high, count = row
    return (None if low is None else int(low), None if high is None else int(high), int(count))


def read_chunk_mysql(
    spark: SparkSession,
    source: SourceConfig,
    table: TableConfig,
    schema: TableSchema,
    chunk: Chunk,
    fetch_size: int,
) -> DataFrame:
    """One chunk through Spark's JDBC source, one partition per predicate."""
    db, name = _mysql_table(table)
    select = ", ".join(
        f"{mysql_select_expression(c, key=c.name in schema.primary_key)} "
        f"AS {read_name(schema, c.name)}"
        for c in schema.columns
    )
    query = f"(SELECT {select} FROM {mysql_qualified(db, name)}) AS icetide_chunk"
    properties = {
        "user": str(source.user),
        "password": str(source.password or ""),
        "driver": "org.mariadb.jdbc.Driver",
        "fetchsize": str(fetch_size),
        "sessionInitStatement": "SET time_zone = '+00:00'",
    }
    frame = spark.read.jdbc(
        jdbc_url(source, db), query, predicates=list(chunk.predicates), properties=properties
    )
    return frame.select(*[spark_cast(c, read_name(schema, c.name)) for c in schema.columns])


class MySQLReader:
    """Reads tables of a MySQL/MariaDB source; no snapshot, the low watermark is enough."""

    def __init__(self, source: SourceConfig) -> None:
        self.source = source

    def quote(self, identifier: str) -> str:
        """A quoted identifier, for chunk predicates."""
        return mysql_quote(identifier)

    def key_range(self, table: TableConfig, key: str) -> tuple[int | None, int | None, int]:
        """See :func:`mysql_key_range`."""
        return mysql_key_range(self.source, table, key)

    def chunk(
        self,
        spark: SparkSession,
        table: TableConfig,
        schema: TableSchema,
        chunk: Chunk,
        fetch_size: int,
    ) -> DataFrame:
        """See :func:`read_chunk_mysql`."""
        return read_chunk_mysql(spark, self.source, table, schema, chunk, fetch_size)
