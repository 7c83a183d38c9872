"""One replicated table's settings (``tables[i]``): its source, schema file, layout, merge
and schema evolution.

Which source database captures a table, and which events it takes, is
:mod:`icetide.config.routing`.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from icetide.config.sections import DebeziumConfig, Section
from icetide.config.types import (
    Count,
    Duration,
    Identifier,
    LocalPath,
    SourceName,
    Text,
    at_least_one,
)
from icetide.schema.change_kinds import CHANGE_KINDS
from icetide.schema.contract.base import DropMode, StrategySetting, WriteMode


def _split_server(data: dict[str, Any]) -> dict[str, Any]:
    """``source: server.db.table`` → ``server: server``, ``source: db.table``."""
    source = data.get("source")
    if not isinstance(source, str) or source.count(".") != 2 or any(c.isspace() for c in source):
        return data
    server, rest = source.split(".", 1)
    given = data.get("server")
    if given is not None and given != server:
        raise ValueError(
            f"source {source!r} names server {server!r} but server is {given!r}; "
            "give the server once"
        )
    return {**data, "server": server, "source": rest}


EvolutionMode = Literal["evolve", "freeze", "discard_row", "discard_value"]
"""The schema-contract modes of the dlt library (dlthub): ``evolve`` takes the change
(held kinds wait for approval), ``freeze`` refuses it (events that need it go to the
dead-letter table), ``discard_row`` drops the rows that carry it, ``discard_value`` drops
just the values it brings."""


def _change_kinds(value: Any) -> Any:
    if isinstance(value, dict):
        for kind in value:
            if kind not in CHANGE_KINDS:
                close = difflib.get_close_matches(str(kind), CHANGE_KINDS, n=1)
                raise ValueError(
                    f"unknown change kind {kind!r}"
                    + (f"; did you mean {close[0]!r}?" if close else "")
                    + f" (kinds: {', '.join(CHANGE_KINDS)})"
                )
    return value


class EvolutionConfig(Section):
    """``evolution:`` of a table: what happens when its source schema changes.

    ``mode`` is the contract mode for every kind of change, ``modes`` overrides it per
    kind (``{type_change: freeze, add_column: discard_value}``). ``drop`` says what a
    dropped source column does to the tables (``soft``: kept, commented, no longer
    written; ``hard``: dropped). ``sensitive`` lists name patterns (``fnmatch``, no case)
    whose new columns are tagged ``sensitive`` and held until approved. ``auto_apply``:
    changes that need no approval apply without a human (``false``: they wait for
    ``icetide schema apply``). ``enabled: false`` turns evolution off for the table: a
    message whose carried schema (registry version, inline Debezium schema) differs from
    the table's goes to the dead-letter table instead. ``soft_delete`` is the registry
    world's name for ``drop`` (``true`` = ``soft``, ``false`` = ``hard``); giving both with
    different answers is refused.
    """

    mode: EvolutionMode = "evolve"
    modes: Annotated[dict[str, EvolutionMode], BeforeValidator(_change_kinds)] = {}
    drop: DropMode = "soft"
    sensitive: tuple[Text, ...] = ()
    auto_apply: bool = True
    enabled: bool = True
    soft_delete: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _soft_delete_is_drop(cls, data: Any) -> Any:
        """``soft_delete`` sets ``drop``; a contradiction names both keys."""
        if not isinstance(data, dict) or not isinstance(data.get("soft_delete"), bool):
            return data
        wanted = "soft" if data["soft_delete"] else "hard"
        if data.get("drop") not in (None, wanted):
            raise ValueError(
                f"soft_delete: {str(data['soft_delete']).lower()} contradicts "
                f"drop: {data['drop']}; keep one of them (soft_delete: true is drop: soft)"
            )
        return {**data, "drop": wanted}


HistoryMode = Literal["off", "scd2"]
"""A table's ``history``: ``scd2`` keeps a slowly-changing-dimension type 2 table of every
version of its rows beside the base, ``off`` none."""


def _history_mode(value: Any) -> Any:
    """YAML reads a bare ``off`` as false: it means ``off`` here."""
    return "off" if value is False else value


class TableMergeConfig(Section):
    """Per-table merge settings (``tables[i].merge``)."""

    strategy: StrategySetting = "auto"
    """How the batch meets the base (:mod:`icetide.merge.strategy`); ``auto`` chooses
    from the base's size and the batch's. ``delete_insert`` applies only to a batch in
    order with whole row images; any other batch gets ``auto``'s choice."""
    compact_every: int = Field(4, ge=0)
    """Once this many merges have added data files since the base's last rewrite, the
    merge bin-packs each bucket's small files (:mod:`icetide.merge.compact`); 0: never
    (leave it to ``icetide maintain``). Small bases too: a merge that shuffles a small
    base reads every file it has, so without the rewrite each merge is slower than the
    last (docs/merge-performance.md, "Small bases bin-packed too")."""
    resnapshot_chunk_rows: int = Field(200_000, ge=1)
    """Rows per chunk when the merge re-snapshots the table for a change no ALTER
    expresses (:mod:`icetide.bootstrap.resnapshot`): one chunk per merge round, each its
    own resumable commit."""


class TableConfig(Section):
    """One replicated table: its Debezium source, schema file and layout.

    ``source`` is ``table``, ``db.table`` (MySQL) or ``schema.table`` (PostgreSQL); a
    3-part ``server.db.table`` is split into ``server`` and ``source`` when loaded, so
    every reader of ``source`` sees the table in its database. ``server`` is the Debezium
    server name (``source.name`` in events, the topic prefix): when it is known, only
    events of that server reach this table (see :func:`icetide.config.routing.table_server`).
    """

    name: Identifier
    source: SourceName
    server: Identifier | None = None
    schema_file: LocalPath = Field(alias="schema")
    primary_key: Annotated[tuple[Text, ...], AfterValidator(at_least_one)] | None = None
    buckets: Count = Field(16, ge=1, le=4096)
    mode: WriteMode = "merge-on-read"
    format_version: Literal[2, 3] = 2
    """The base table's Iceberg format version. 3 lets a column added at the source with a
    constant ``DEFAULT`` carry it as ``initial-default`` (old rows read it, nothing is
    rewritten; :mod:`icetide.lake.defaults`); readers of the base must support v3."""
    merge: TableMergeConfig = Field({}, validate_default=True)
    history: Annotated[HistoryMode, BeforeValidator(_history_mode)] = "off"
    """``scd2``: the merge also keeps ``<table>_history``, one row per version of each
    source row with its validity interval (:mod:`icetide.merge.history`); ``off`` (the
    default) keeps none."""
    freshness_sla: Duration | None = None
    """The base table must hold the source's changes this recent; a breach is logged,
    exported as a metric and fails ``icetide status --check``."""
    evolution: EvolutionConfig = Field({}, validate_default=True)
    debezium: DebeziumConfig | None = None
    """The connector settings of this table's feed, over the pipeline's ``debezium:``."""

    @model_validator(mode="before")
    @classmethod
    def _defaults_from_name(cls, data: Any) -> Any:
        """``source`` defaults to the name, ``schema`` to ``schemas/<name>.yaml``; an
        explicit ``null`` means the default too."""
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            name = data["name"]
            data = dict(data)
            if data.get("source") is None:
                data["source"] = name
            data = _split_server(data)
            if data.get("schema") is None:
                data["schema"] = f"schemas/{name}.yaml"
        return data

    def qualified(self, namespace: str) -> str:
        """``namespace.name``, the table's Iceberg identifier without the catalog."""
        return f"{namespace}.{self.name}"
