"""Capture stage: read a source database's own change log and emit Debezium envelopes.

``mysql/`` reads MySQL/MariaDB binlogs, ``postgres/`` PostgreSQL's logical replication
stream (pgoutput); each keeps its side of the bootstrap hand-off (``handoff``); ``errors``
holds the stage's :class:`~icetide.capture.errors.CaptureError` tree. Capture runs
without a JVM: nothing here imports Spark (a unit test follows the imports to check).
"""
