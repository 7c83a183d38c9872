"""PostgreSQL logical-replication capture (``pgoutput``, protocol 1, through psycopg2).

* ``settings`` — check the server before reading (``wal_level=logical``, replication
  slots and WAL senders, a REPLICATION user, tables PostgreSQL would refuse updates on
  once published) and say exactly what to put in ``postgresql.conf`` / run;
* the type knowledge (pgoutput text values → Debezium JSON values, Connect schemas, SQL
  and icetide types) is :mod:`icetide.sources.postgres_types`, shared with bootstrap and
  verify;
* ``pgoutput`` — the protocol's binary messages decoded into plain values;
* ``connection`` — capture's connections, with the session settings the types parse;
* ``offset`` — :class:`~icetide.capture.postgres.offset.LsnOffset`, where capture resumes;
* ``slot`` — the replication slot: create, wait for, advance, and
  :func:`~icetide.capture.postgres.slot.slot_status` / ``slot_lag`` for monitoring;
* ``publication`` — the publication listing the captured tables, and table names;
* ``snapshot`` — :func:`~icetide.capture.postgres.snapshot.exported_snapshot` (a new slot
  with an exported snapshot, for bootstrap) and ``import_snapshot``;
* ``reader`` — :class:`~icetide.capture.postgres.reader.PgOutputReader`, the slot →
  Debezium envelope stream with resumable offsets, acknowledged only by the caller;
* ``handoff`` — the bootstrap's snapshot on the slot and the offset capture starts from.

Tested against PostgreSQL 15 (Debian). Known limits:

* DDL is not in the logical stream: a column change is noticed at the next row change of
  the table (pgoutput then re-sends the table's Relation message) and becomes a
  schema-change record with ``ddl: null`` and the new columns in ``tableChanges``. The
  first layout seen after a (re)connect is taken as known, so a change made while capture
  was stopped gives no schema-change record.
* Primary keys, nullability, enum labels and domain base types come from the catalog as
  it is when the Relation message arrives, not as it was when the change was written.
* With ``REPLICA IDENTITY DEFAULT`` an update's ``before`` is ``null`` and a delete's
  holds only the key; an unchanged TOAST value (large text/bytea/jsonb/array not touched
  by the update) is the placeholder ``__debezium_unavailable_value``, kept from the stored
  row by the merge. ``REPLICA IDENTITY FULL`` gives full before images and no
  placeholders. ``USING INDEX`` on a non-primary index gives deletes whose ``before``
  lacks the primary key.
* Values are converted as :mod:`~icetide.sources.postgres_types` lists: ``numeric`` as an
  exact string (Debezium's ``decimal.handling.mode=string``), ``interval`` as
  microseconds with 30.4375-day months, arrays as JSON arrays (icetide ``list`` of the
  element, as deep as the column's declared dimensions; a value of other dimensions is a
  dead letter downstream); types without a dedicated conversion (money, network, bit
  strings, ranges, geometry, arrays of those, composites) arrive as PostgreSQL's text
  (icetide ``string``). Values outside
  what icetide types hold (BC or ±infinity dates and timestamps, ``24:00:00``) are
  captured exactly and dead-lettered downstream, never bent.
* A partitioned table is captured under its own name: publications capture creates
  publish via the partition root; an existing one that does not is refused with the
  ``ALTER PUBLICATION`` that fixes it. A row moving between partitions arrives as a
  delete and an insert.
* Transactions bigger than the server's ``logical_decoding_work_mem`` are spilled to
  disk by the server and sent at commit (no streaming of in-progress transactions:
  protocol 1). Two-phase transactions are sent at ``COMMIT PREPARED``.
* The non-blocking end of the WAL is found with a logical message
  (``pg_logical_emit_message``, PostgreSQL 14+): each non-blocking run writes one small
  WAL record. Older servers end on the first keepalive past the WAL position at start.
"""
