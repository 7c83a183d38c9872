"""Schema files, the column type system and conversions to Spark and Arrow."""

from icetide.schema.model import Column, ColumnType, TableSchema, load_schema_file, parse_type

__all__ = ["Column", "ColumnType", "TableSchema", "load_schema_file", "parse_type"]
