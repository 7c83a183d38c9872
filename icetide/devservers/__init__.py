"""Private servers ``icetide demo`` starts, and the plumbing the tests' servers share.

``mariadb`` starts a MariaDB in a temporary folder, on a free port of 127.0.0.1
(``ports``), set up the way capture needs it; ``objectstore`` an S3-compatible object
store (SeaweedFS) and ``rest_catalog`` Iceberg's REST catalog server with its warehouse
on that store, the production shape on one machine (``icetide demo --lakehouse`` starts
them, and the tests do); ``lifecycle`` starts, waits for and stops a local server
process. They never touch a system installation; a server that cannot be
installed or started is a :class:`~icetide.devservers.errors.LocalServerError`. Nothing in
the pipeline's stages imports this package. The servers only the tests and benchmarks need
(PostgreSQL, Kafka, the schema registry, Kafka Connect) live in ``tests/devservers/``.
"""
