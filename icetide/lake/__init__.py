"""The lake: the Iceberg tables a pipeline keeps, as the stages read and write them.

``tables`` names a pipeline's tables (:class:`~icetide.lake.tables.TableRefs`) and
answers small catalog look-ups; ``alter`` applies properties and a table's schema version,
whole (``schema_update``: Iceberg's ``UpdateSchema`` and the version property in one
commit), ``defaults`` Iceberg v3 initial-defaults, ``align`` fits a frame
to the table it is appended to; ``commit`` attaches snapshot summary properties to a
commit and ``branches`` publishes several statements at once; ``progress`` reads a
stage's progress back from snapshot summaries and ``ledger_figures`` the figures the
ledger recorded for the merge; ``payload`` is the dead-letter payload column,
``calls`` the quoted ``CALL`` of a maintenance procedure and ``orphans`` the removal of
unreferenced files, listed as the table's storage needs.

What the ledger promises the merge is declared once in :mod:`icetide.schema.contract`;
this package carries it out on Iceberg through Spark (:mod:`icetide.spark`). A new catalog
or storage belongs here and in :mod:`icetide.spark.session`.
"""
