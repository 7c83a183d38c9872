"""icetide: change data capture from operational databases into Apache Iceberg on Spark."""

__version__ = "0.1.0"
