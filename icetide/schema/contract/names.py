"""Table names as typed identifiers: quoted once, when SQL text is made."""

from __future__ import annotations

from dataclasses import dataclass

from icetide.schema.quoting import qualified


@dataclass(frozen=True)
class TableName:
    """``catalog.namespace.name`` of one Iceberg table; ``str()`` is its quoted SQL form.

    >>> name = TableName("lake", "cdc", "we`ird")
    >>> str(name), str(name.suffixed("_cdc"))
    ('`lake`.`cdc`.`we``ird`', '`lake`.`cdc`.`we``ird_cdc`')
    """

    catalog: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return qualified(self.catalog, self.namespace, self.name)

    @property
    def sql(self) -> str:
        """The quoted, qualified name for SQL text."""
        return str(self)

    @property
    def dotted(self) -> str:
        """``catalog.namespace.name`` unquoted: the path Iceberg's DataFrame reader
        ``load()`` takes (it does not read backtick quoting)."""
        return f"{self.catalog}.{self.namespace}.{self.name}"

    def suffixed(self, suffix: str) -> TableName:
        """The table whose name is this one's plus ``suffix`` (``_cdc``, ``_dlt``)."""
        return TableName(self.catalog, self.namespace, self.name + suffix)

    def branch(self, branch: str) -> str:
        """A branch of this table, quoted for SQL: Iceberg's ``branch_<name>`` suffix.

        >>> TableName("lake", "cdc", "orders").branch("icetide_merge")
        '`lake`.`cdc`.`orders`.`branch_icetide_merge`'
        """
        return qualified(self.catalog, self.namespace, self.name, f"branch_{branch}")

    def child(self, table: str) -> str:
        """A metadata table of this one (``snapshots``, ``history``), quoted."""
        return qualified(self.catalog, self.namespace, self.name, table)
