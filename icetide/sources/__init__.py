"""The source databases capture, bootstrap and verify read: how to reach them.

* ``connect`` — a configured source's connection settings in the form each driver takes
  (pymysql, psycopg2, Spark's JDBC source), and opening a connection, with the one
  translation of "cannot connect" into :class:`~icetide.sources.errors.SourceUnavailableError`;
* ``quoting`` — MySQL/MariaDB and PostgreSQL identifier quoting, written once each;
* ``errors`` — the :class:`~icetide.sources.errors.SourceError` tree;
* ``postgres_types`` — PostgreSQL's types and the text of their values → Debezium JSON
  values, Connect schemas, SQL and icetide types (capture decodes pgoutput with it,
  bootstrap and verify read the same values through it, so all three agree);
* ``postgres_catalog`` — what ``pg_catalog`` says about a table's columns (domains by
  their base type, arrays by their element, enums by label), shared the same way.

This package sits low in the import graph (it imports only ``errors``, ``config``,
``events`` and ``schema``), and never Spark: capture, which must run without a JVM,
builds on it. The drivers are imported when a connection is opened, because they are
optional (the ``capture`` extra).
"""
