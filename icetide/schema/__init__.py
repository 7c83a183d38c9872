"""Schema files, the column type system and conversions to Spark and Arrow."""

from icetide.schema.model import Column, ColumnType, TableSchema, parse_type, schema_from_dict

__all__ = ["Column", "ColumnType", "TableSchema", "parse_type", "schema_from_dict"]
