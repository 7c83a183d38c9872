"""The ledger stage: every change event, appended once to the table's ``<t>_cdc``.

A Structured Streaming query (``stage``) reads raw messages from landing files or Kafka
(``source``, ``landing``), decodes them in the workers (``decode``; registry-framed ones
through ``registry_decode``), appends each event with its source position to the table's
ledger, and sends what it cannot read to the dead-letter table with a reason (``replay``
replays them after a fix). It watches for schema changes (``signals``), takes the
ledger's side of each (``versions``: phase 1, the projection switch, kept generations)
and reports each batch (``summary``).

The ledger is append-only and a schema change never purges it: a layout the change
cannot alter in place is kept as a generation (``<t>_cdc_g<N>``). The stage and
dead-letter replay append to it; the merge reads it.
"""
