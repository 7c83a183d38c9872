"""MySQL/MariaDB capture: server checks (``settings``), value conversion (``types``),
schema history (``history``) and the binlog reader (``reader``)."""
