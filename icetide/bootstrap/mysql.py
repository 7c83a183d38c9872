"""Reading a MySQL/MariaDB table for the bootstrap: no snapshot, the low watermark
(:mod:`icetide.capture.mysql.handoff`) is enough."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from icetide.bootstrap.jdbc import read_name, spark_cast
from icetide.bootstrap.plan import Chunk
from icetide.capture.errors import CaptureError
from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig
from icetide.schema.model import TableSchema
from icetide.schema.types import Column
from icetide.sources.connect import connect_mysql, jdbc_url
from icetide.sources.quoting import mysql_qualified, mysql_quote

_MYSQL_TIME = (
    "IF(MICROSECOND({c}) = 0, TIME_FORMAT({c}, '%H:%i:%s'), TIME_FORMAT({c}, '%H:%i:%s.%f'))"
)
MYSQL_READ: dict[str, str] = {
    "boolean": "CAST({c} AS SIGNED)",
    # A number whatever the column: the driver hands YEAR over as a DATE.
    "int": "CAST({c} AS SIGNED)",
    "long": "CAST({c} AS SIGNED)",
    "float": "{c}",
    "double": "{c}",
    "decimal": "{c}",
    "string": "CAST({c} AS CHAR)",
    "json": "CAST({c} AS CHAR)",
    "uuid": "CAST({c} AS CHAR)",
    "enum": "CAST({c} AS CHAR)",
    "binary": "CAST({c} AS BINARY)",
    "date": "DATE_FORMAT({c}, '%Y-%m-%d')",
    "time": _MYSQL_TIME,
    "timestamp": "DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')",
    "timestamptz": "DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')",
}
"""icetide type → the MySQL expression (``{c}``: the quoted column) a chunk query reads
it with (see :func:`mysql_select_expression`)."""
UNSUPPORTED = ("struct", "list", "map")
"""Types no MySQL column has: a nested value arrives as JSON (declare it ``json``)."""


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
    kind = column.type.name
    if kind not in MYSQL_READ:
        raise CaptureError(
            f"column {column.name!r}: a {kind} column cannot be bootstrapped from MySQL",
            hint="MySQL has no such column type; declare it as json in the schema file",
        )
    if key and kind in ("int", "long"):
        return mysql_quote(column.name)  # as it is: the chunk predicates use its index
    return MYSQL_READ[kind].format(c=mysql_quote(column.name))


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
