"""Which source database captures a table, and which table an event belongs to.

A table is captured by the source whose ``tables:`` lists it, or by the only source when
there is one and it lists none. :func:`capturing_source` is the one answer to that
question; a source's tables (:func:`captured_tables`) and a table's server are read from
it. The ledger routes each event by its Debezium server name (``source.name``) and its
``db.table``: a table takes the events of its server (:func:`table_server`), or of any
server when that is not known (:func:`table_for_source`).
:meth:`icetide.config.model.Config._check` refuses a config in which two tables could
take one event.
"""

from __future__ import annotations

from collections.abc import Sequence

from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig


def capturing_source(sources: Sequence[SourceConfig], table: str) -> SourceConfig | None:
    """The source that captures the table named ``table`` (any case); None: none does.

    >>> a = SourceConfig(name="a", type="mysql", tables=("orders",))
    >>> b = SourceConfig(name="b", type="postgres", tables=("Customers",))
    >>> capturing_source([a, b], "customers").name, capturing_source([a, b], "x")
    ('b', None)
    >>> capturing_source([SourceConfig(name="only", type="mysql")], "x").name
    'only'
    """
    wanted = table.casefold()
    for source in sources:
        if any(t.casefold() == wanted for t in source.tables):
            return source
    if len(sources) == 1 and not sources[0].tables:
        return sources[0]
    return None


def captured_tables(
    sources: Sequence[SourceConfig], tables: Sequence[TableConfig], source: SourceConfig
) -> tuple[TableConfig, ...]:
    """The tables :func:`capturing_source` gives ``source``, in the order its ``tables:``
    lists them (the config's order for a lone source listing none).

    >>> a = SourceConfig(name="a", type="mysql", tables=("t3", "T1"))
    >>> b = SourceConfig(name="b", type="mysql", tables=("t2",))
    >>> tables = [TableConfig(name=n) for n in ("t1", "t2", "t3")]
    >>> [t.name for t in captured_tables([a, b], tables, a)]
    ['t3', 't1']
    """
    name = source.name.casefold()

    def captures(table: TableConfig) -> bool:
        found = capturing_source(sources, table.name)
        return found is not None and found.name.casefold() == name

    listed = {t.casefold(): i for i, t in enumerate(source.tables)}
    mine = [t for t in tables if captures(t)]
    return tuple(sorted(mine, key=lambda t: listed.get(t.name.casefold(), 0)))


def table_server(sources: Sequence[SourceConfig], table: TableConfig) -> str | None:
    """The Debezium server name (``source.name``) whose events ``table`` takes.

    The table's own ``server`` (or the first part of a 3-part ``source``), else the
    name of the configured source that captures it (icetide's capture writes its
    source's name there), else ``None``: events of any server, as Debezium's
    ``db.table`` alone cannot tell servers apart.
    """
    if table.server is not None:
        return str(table.server)
    source = capturing_source(sources, table.name)
    return str(source.name) if source is not None else None


def table_for_source(
    sources: Sequence[SourceConfig],
    tables: Sequence[TableConfig],
    source: str,
    server: str | None = None,
) -> TableConfig | None:
    """The table replicating Debezium source ``source`` (``db.table``) of ``server``.

    A table bound to a server takes only that server's events; one that is not takes
    the events of any server (the config allows no overlap between the two).
    """
    wanted = source.casefold()
    for table in tables:
        if table.source.casefold() != wanted:
            continue
        own = table_server(sources, table)
        if own is None or (server is not None and own.casefold() == server.casefold()):
            return table
    return None
