"""The Avro schema as the Iceberg table property ``avro.schema.literal``.

Set with ``ALTER TABLE … SET TBLPROPERTIES`` (the table name quoted by
:class:`~icetide.schema.contract.names.TableName`, the JSON as a quoted Spark literal),
only when the table does not hold that literal already, so refreshing twice commits once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from icetide.artifacts.codegen import avro_schema
from icetide.artifacts.shape import Shape
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROPERTY = "avro.schema.literal"


def avro_literal(shape: Shape) -> str:
    """The property's value: the Avro schema as compact JSON."""
    return json.dumps(avro_schema(shape), separators=(",", ":"))


def set_avro_literal(spark: SparkSession, table: TableName, shape: Shape) -> bool:
    """Store the shape's Avro schema on ``table``; True when it changed."""
    value = avro_literal(shape)
    rows = spark.sql(f"SHOW TBLPROPERTIES {table.sql} ({literal(PROPERTY)})").collect()
    if rows and rows[0][1] == value:
        return False
    spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ({literal(PROPERTY)} = {literal(value)})")
    return True
