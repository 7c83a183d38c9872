"""The merge stage: new ledger events since the base's watermark, merged into the base.

``stage`` reads the events past the watermark and what their plan needs, plans the batch
in pure code (``strategy.plan_batch``: the strategy, the tombstone history or not, the
commit's properties), deduplicates the events to the latest per key by source position
(``steps``), and merges them with a version guard through the chosen ``strategy``,
committing the new watermark in the same Iceberg commit. Around that: key changes and
unchanged-TOAST values (``inherit``, ``earlier``), the merge's side of a schema change
(``phases``), and a merge ``round``: its tables, a re-snapshot's chunks, phase-3 fills
(``converge``, ``backfill``) and the small-file bin-packing after merges (``compact``).
"""
