"""Private servers only the tests and the benchmarks start: PostgreSQL, a Kafka broker, a
schema registry and a Kafka Connect worker running the real Debezium connectors.

Each starts on free loopback ports in a temporary folder and never touches a system
installation, on the shared plumbing of :mod:`icetide.devservers` (``lifecycle``,
``ports``, ``errors``); ``icetide demo`` needs none of them, so none ships in the wheel.
"""
