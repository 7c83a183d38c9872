"""``icetide demo``: the whole pipeline on embedded defaults, checked end to end.

``run`` drives the stages over a seeded, generated Debezium stream (``workload``) and
compares the base tables with the generator's expected end state; ``live`` starts a
private MariaDB with a shop database (``shop``), captures it, bootstraps, streams, merges
and verifies. The generator doubles as an oracle for tests and benchmarks.
"""
