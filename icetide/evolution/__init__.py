"""Schema evolution: notice a source schema change, decide it, and carry it out.

``source_schema`` reads what the source catalog says now and ``evidence`` what its DDL
says; ``classify`` turns the difference into changes by field id (automatic, drop,
rename, ambiguous or held, and why) and ``policy`` decides each one; ``plan`` is the
resulting schema version and its three phases; ``apply`` writes it once, in order
(``queue``), with an ``audit`` record. At runtime ``detect`` does all this from the
ledger's signals, and ``carried`` from schemas the messages carry themselves;
``versions`` walks a registry's versions. ``onboard`` writes a table's first schema.

The public face is the ``icetide schema`` and ``icetide onboard`` commands and
:class:`~icetide.evolution.detect.Detector`, which the ledger stage calls.
"""
