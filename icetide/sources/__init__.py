"""The source databases capture, bootstrap and verify read: how to reach them.

* ``connect`` — a configured source's connection settings in the form each driver takes
  (pymysql, psycopg2, Spark's JDBC source), and opening a connection, with the one
  translation of "cannot connect" into :class:`~icetide.sources.errors.SourceUnavailableError`;
* ``quoting`` — MySQL/MariaDB and PostgreSQL identifier quoting, written once each;
* ``errors`` — the :class:`~icetide.sources.errors.SourceError` tree.

This package sits low in the import graph (it imports only ``errors`` and ``config``),
and never Spark: capture, which must run without a JVM, builds on it. The drivers are
imported when a connection is opened, because they are optional (the ``capture`` extra).
"""
