"""What a running pipeline shows: verification, status, freshness, metrics and its page.

``verify`` proves each base table holds exactly its source's rows (``checksum`` makes
the row text the same on MySQL/MariaDB, PostgreSQL and Spark; ``compare`` does it value
by value). ``status``, ``freshness``, ``capture_lag`` and ``convergence`` say where each
table is; ``metrics`` exports it all to Prometheus and ``board``/``page`` serve the status
page of ``icetide run``.
"""
