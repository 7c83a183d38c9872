"""The Iceberg table contracts, built from a table's schema in one place.

:class:`~icetide.schema.contract.builder.TableContract` turns a schema and its table
settings into everything a stage needs: the ledger table's DDL and Arrow shape, the base
and dead-letter DDL, the merge's value slots and MERGE statement, and (in
:mod:`~icetide.schema.contract.alter`) the ALTER statements that take each table from one
schema version to the next. The column and property names the stages share live in
:mod:`~icetide.schema.contract.ledger` and :mod:`~icetide.schema.contract.base`; table
names travel as :class:`~icetide.schema.contract.names.TableName`.
"""
