"""The change-event model and everything that turns a raw message into typed events.

Every stage downstream of capture speaks :mod:`~icetide.events.model` (a
:class:`~icetide.events.model.ChangeEvent` with a typed, totally ordered
:mod:`~icetide.events.position`). ``envelope`` reads a Debezium message's JSON,
``wire`` registry-framed Avro/Protobuf/JSON Schema messages, ``logical_types`` decodes
values by their Connect schema, ``project`` puts an event onto a table's schema with every
value typed, ``rescue`` keeps the fields a schema does not know yet, and ``convert``
applies a sink's conversions. Pure Python, no Spark: the ledger runs these steps inside
its workers.
"""
