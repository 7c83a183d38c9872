"""Schema files, the column type system and conversions to Spark and Arrow."""

from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, parse_type

__all__ = ["Column", "IcetideType", "TableSchema", "parse_type", "schema_from_dict"]
