"""Private database servers for tests, the demo and the benchmarks.

``mariadb`` starts a MariaDB and ``postgres`` a PostgreSQL in a temporary folder, on a
free port of 127.0.0.1 (``ports``), set up the way capture needs them. They never touch a
system installation; a server that cannot be installed or started is a
:class:`~icetide.devservers.errors.LocalServerError`. Nothing in the pipeline's stages
imports this package: only the demo, the tests and the benchmarks start servers.
"""
