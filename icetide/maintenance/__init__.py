"""Table maintenance: compaction, delete-file rewrite, snapshot expiry, orphans, manifests.

A pipeline that commits every few seconds leaves small data files, position-delete
files and a growing list of snapshots. :func:`~icetide.maintenance.run.maintain_table`
tidies one table's base, ledger and dead-letter tables through Iceberg's own Spark
procedures, keeping every snapshot a stage still needs (see
:mod:`icetide.maintenance.retention`), and retrying when a live merge commits first.
"""
