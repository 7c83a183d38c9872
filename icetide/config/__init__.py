"""The pipeline config: one YAML file, validated into frozen pydantic models."""

from icetide.config.example import write_example
from icetide.config.loader import load_config, load_table_schemas
from icetide.config.model import Config
from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig

__all__ = [
    "Config",
    "SourceConfig",
    "TableConfig",
    "load_config",
    "load_table_schemas",
    "write_example",
]
