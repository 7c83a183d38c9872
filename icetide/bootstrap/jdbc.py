"""The rules every chunk read through Spark's JDBC source follows, whatever the source.

A chunk query names each column by its position (:func:`read_name`) and reads it as
text, bytes or a number Spark casts exactly (each source's ``select_expression``);
:func:`spark_cast` turns the read value into the schema's Spark type under the column's
own name. A :class:`TableReader` is one source's way of reading: quoting, key ranges
and chunk frames.
"""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.bootstrap.plan import Chunk
from icetide.config.tables import TableConfig
from icetide.schema.convert.spark import sql_type
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote as spark_quote
from icetide.schema.types import Column


def read_name(schema: TableSchema, column: str) -> str:
    """The name a chunk query gives ``column``: ``c<position>``.

    Source column names can be anything (``dot.ted``, a quote, a backtick); Spark's JDBC
    source pastes the names of the columns it reads into its own SQL, quoted by its
    dialect (PostgreSQL's does not escape a ``"`` inside), and a dot in a DataFrame
    column name means a struct field. So the query renames every column to a plain name,
    the chunk predicates use those, and :func:`spark_cast` names them back.

    >>> from icetide.schema.types import parse_type
    >>> key = Column(1, "id", parse_type("int"), nullable=False)
    >>> columns = (key, Column(2, "dot.ted", parse_type("int")))
    >>> read_name(TableSchema("t", columns, ("id",)), "dot.ted")
    'c1'
    """
    names = [c.name for c in schema.columns]
    return f"c{names.index(column)}"


def spark_cast(column: Column, read_as: str | None = None) -> SparkColumn:
    """The read value (the frame's column ``read_as``, default ``column``'s own name) as
    the schema's Spark type, named as the column (timestamptz text is UTC)."""
    value = F.col(read_as) if read_as is not None else F.col(spark_quote(column.name))
    kind = column.type.name
    if kind == "timestamptz":
        return F.concat(value, F.lit("+00:00")).cast("timestamp").alias(column.name)
    if kind == "boolean":
        return (value != 0).alias(column.name)
    return value.cast(sql_type(column.type)).alias(column.name)


class TableReader(Protocol):
    """How the bootstrap reads one source's tables: key ranges and chunk frames."""

    def quote(self, identifier: str) -> str:
        """A quoted identifier, for chunk predicates."""
        ...

    def key_range(self, table: TableConfig, key: str) -> tuple[int | None, int | None, int]:
        """``MIN``, ``MAX`` of the integer key and the row count."""
        ...

    def chunk(
        self,
        spark: SparkSession,
        table: TableConfig,
        schema: TableSchema,
        chunk: Chunk,
        fetch_size: int,
    ) -> DataFrame:
        """One chunk as the schema's columns."""
        ...
