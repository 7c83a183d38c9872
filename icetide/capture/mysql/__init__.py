"""MySQL/MariaDB binlog capture.

* ``settings`` — check the server before reading (binlog on, ROW, FULL image and row
  metadata, server id) and say exactly what to put in ``my.cnf``;
* ``types`` — binlog values → Debezium JSON values, Connect schemas, SQL and icetide types;
* ``history`` — DDL recognition and the persisted schema history (JSON lines);
* ``reader`` — :class:`~icetide.capture.mysql.reader.BinlogReader`, the binlog → Debezium
  envelope stream with resumable offsets;
* ``handoff`` — the bootstrap's low watermark (the binlog position capture starts from).

Tested against MariaDB 10.11 (Debian). Known limits, for the rest of the capture work:

* MySQL 8 is handled by the same code (GTID events, ``gtid_executed`` sets, binary JSON)
  but not exercised by the tests here: no MySQL server is installable on this machine.
* ``source.query`` is always ``null`` (no ``binlog_annotate_row_events`` /
  ``binlog_rows_query_log_events`` reading yet); ``source.thread`` is only known from a
  ``BEGIN`` or DDL statement (MariaDB writes no ``BEGIN`` for transactional groups).
* Schema-change records carry the DDL text but an empty ``tableChanges``; the columns at
  every position are in the schema history (from the binlog's table maps), not yet turned
  into an evolution plan.
* TIME values outside 00:00–24:00 are captured exactly (microseconds, like Debezium) but
  icetide's ``time`` type cannot hold them: projection dead-letters them (``type_mismatch``).
* A MariaDB ``JSON`` column is a ``LONGTEXT`` in the binlog, so it arrives as a string
  (what a ``SELECT`` returns too); ``TINYINT(1)``/``BOOL`` arrives as a number (0/1),
  which icetide's ``boolean`` accepts.
* A start offset must be a transaction boundary (what ``CaptureRecord.resume`` and
  ``BinlogReader.committed`` give): row events whose table map precedes the start are
  skipped by python-mysql-replication.
"""
