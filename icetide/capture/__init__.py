"""Capture stage: read a source database's own change log and emit Debezium envelopes.

``mysql/`` reads MySQL/MariaDB binlogs, ``postgres/`` PostgreSQL's logical replication
stream (pgoutput); ``mariadb_server`` and ``postgres_server`` start a private MariaDB or
PostgreSQL for tests and the demo; ``errors`` holds the stage's
:class:`~icetide.capture.errors.CaptureError` tree.
"""
