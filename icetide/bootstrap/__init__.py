"""Bootstrap: copy each table into its empty base table, then hand off to the log.

The handoff is exact without locking the source and without one long transaction.

MySQL/MariaDB, by a low watermark:

1. record the log position *before* reading anything (the *low watermark* ``P``) and
   make it capture's start offset;
2. read the table with Spark's JDBC source in primary-key chunks, in parallel, while the
   source keeps taking writes; every row is stamped with position ``P``;
3. capture replays the log from ``P``. Every change after ``P`` has a larger position and
   carries the whole row (binlog ``FULL`` image), so the merge's version guard lets it
   replace whatever a chunk read; a key no change touched after ``P`` was read exactly.

So the base converges to the source as soon as the merge has applied the log up to
the source's current position — the argument of Netflix's DBLog, without its in-log
watermarks (the merge's version guard plays their part).

PostgreSQL, by the slot's exported snapshot:

1. ensure the publication, then create the replication slot with an exported snapshot;
   its *consistent point* ``C`` becomes capture's start offset, and the replication
   connection stays open (the snapshot lives only as long as it) until every table is
   read;
2. every JDBC partition imports that snapshot in the driver's transaction
   (``sessionInitStatement`` = ``SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ
   ONLY; SET TRANSACTION SNAPSHOT …``, see
   :attr:`~icetide.bootstrap.postgres.PgSnapshot.init_statement`) and the
   chunk query refuses to return rows unless ``txid_current_snapshot()`` is the
   exported one, so a driver that ran the query outside that transaction fails loudly
   instead of copying later rows. The copy is the database exactly as of ``C``;
3. the slot streams exactly the transactions that commit after ``C``.

Snapshot rows are stamped with position **0**, not with ``C``: positions come from the
*change's* LSN, and a transaction that began before ``C`` and commits after it has
changes at LSNs below ``C`` — stamped ``C``, the copy would wrongly win over them. At 0,
every streamed change beats the copy, which is right because the stream holds only
changes the copy has not seen. (An unchanged TOAST value in such a change keeps the
copied value, which is the value the row had before the change.)

Resuming a PostgreSQL bootstrap: the exported snapshot died with the killed process, so
the missing chunks are read in a *new* snapshot (``pg_export_snapshot()`` on a plain
connection), still stamped 0, with the same slot and the same start offset ``C``. That is
still exact: a key that no transaction committing after ``C`` touched reads the same in
any snapshot taken after ``C``; a key that one did is overwritten by the stream's last
change of it (the stream from ``C`` still holds them all, and each carries the row). A
row moved between chunks by a key update is deleted and re-created by the stream. The
same reasoning lets a bootstrap start on an existing slot (capture already running, or a
table added later): its start offset is the saved offset, else the slot's confirmed
point read before the snapshot. Before taking such a snapshot the bootstrap waits for
the transactions that were running when the publication was ensured, because changes
written before a table joined the publication are not published. A resume whose slot is
gone is refused: the changes since ``C`` are lost and only a new bootstrap can help.

Both sources: while a bootstrap runs, the base table's newest ``icetide.bootstrap.state``
snapshot property is ``running`` and the merge leaves the table alone; chunks commit one
by one with ``icetide.bootstrap.chunk``, so a killed bootstrap resumes at the first chunk
not committed. Each table's chunk plan (key range and row count) is kept in the
bootstrap's state file, so a resume splits the keys exactly as the first run did.

The modules, in the order a bootstrap uses them:

* ``state`` — the bootstrap's state file (id, capture's start offset, the stamp, the
  chunk plans) and ``plan`` — a table's key range split into resumable chunks;
* ``jdbc`` — the rules every chunk read follows (plain column names, the cast to the
  schema's Spark type) and the :class:`~icetide.bootstrap.jdbc.TableReader` protocol;
* ``mysql`` and ``postgres`` — the chunk queries of each source;
* ``write`` — committing a chunk to the base table and reading back which are done;
* ``run`` — :class:`~icetide.bootstrap.run.Bootstrap`, the command's top level.

The source side of the hand-off stays with each reader: the low watermark in
:mod:`icetide.capture.mysql.handoff`, the slot's snapshot in
:mod:`icetide.capture.postgres.handoff`. The base table's columns and the bootstrap's
snapshot properties are the merge's table contract (:mod:`icetide.schema.contract.base`).
"""
