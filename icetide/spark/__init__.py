"""The engine: everything it takes to run Spark well here, and nothing about the tables.

``session`` builds the one SparkSession (Iceberg runtime, catalog, local or cluster) from
the JVM packages ``jars`` resolves by Maven coordinates; ``class_archive``,
``jit_priority``, ``worker_daemon`` and ``local_fs`` make a local session start and run
fast on few cores; ``jvm`` names JVM classes without py4j reflection; ``errors`` is the
one boundary where JVM errors become icetide errors, ``retry`` redoes a step that lost
a commit race, and ``threads`` runs one step for several items in threads of the one
session (the merge's tables, the ledger's chunks). What the stages read and write in the
tables lives in :mod:`icetide.lake`.
"""
