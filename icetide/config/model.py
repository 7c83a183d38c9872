"""The typed pipeline config: one YAML file per pipeline, validated into frozen models.

The package splits it by job: the field types (:mod:`icetide.config.types`), the
sections (:mod:`icetide.config.sections`), a table's settings
(:mod:`icetide.config.tables`), table/source routing (:mod:`icetide.config.routing`),
and here the :class:`Config` that holds them. Field checks live on the fields; every
rule that needs two fields lives in :meth:`Config._check`, so there is one place to read
them all. Paths are resolved against the config file's folder (passed by the loader as
validation context ``config_dir``).

Secrets: a string value written with ``${VAR}`` and every value in ``catalog.properties``,
``transport.options`` or ``spark.conf`` whose key names a credential become a
:class:`~icetide.config.secrets.Secret` — a ``str`` that Spark takes as is, but that
``repr()`` shows as ``'***'``, so printing a config, a sub-model or a dict of it never
shows one, and :meth:`Config.redacted` masks it.
"""

from __future__ import annotations

import difflib
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, Field, PrivateAttr, ValidationInfo, model_validator

from icetide.config import routing
from icetide.config.secrets import Secret
from icetide.config.sections import (
    ArtifactsConfig,
    CatalogConfig,
    DeadLetterConfig,
    DebeziumConfig,
    MaintenanceConfig,
    MergeConfig,
    ScheduleConfig,
    Section,
    SourceConfig,
    SparkConfig,
    TransportConfig,
)
from icetide.config.tables import TableConfig
from icetide.config.types import (
    LocalPath,
    Location,
    PipelineName,
    at_least_one,
    config_dir_of,
    format_duration,
    resolve_path,
)
from icetide.errors import ConfigError
from icetide.schema.connector import CAPTURE, DEBEZIUM_DEFAULTS, ConnectorSettings
from icetide.schema.contract import ledger as c

Loc = tuple[str | int, ...]


class ConfigProblems(ValueError):
    """Cross-field problems found by :meth:`Config._check`, each with its YAML location.

    A ``ValueError`` so pydantic reports it as a validation error; the loader unpacks
    ``problems`` into one line per problem.
    """

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(f"{format_loc(loc)}: {msg}" for loc, msg in problems))
        self.problems = problems


def format_loc(loc: Loc) -> str:
    """Render a location as a YAML path.

    >>> format_loc(("tables", 0, "buckets"))
    'tables[0].buckets'
    >>> format_loc(("spark", "conf", "spark.sql.ansi.enabled"))
    'spark.conf["spark.sql.ansi.enabled"]'
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


class Config(Section):
    """One pipeline: catalog, Spark, transport, schedule and the tables it replicates."""

    pipeline: PipelineName
    state_dir: LocalPath = Field(Path(".icetide"), validate_default=True)
    state: Location | None = None
    """Where the state a new machine needs to resume is kept: ``s3://bucket/prefix`` on
    the catalog's object store (with the ``kafka`` transport), or a folder; unset, in
    ``state_dir``. See docs/deploy.md, "What state lives where"."""
    # Sections default to {} and are validated, so their relative paths resolve too.
    catalog: CatalogConfig = Field({}, validate_default=True)
    spark: SparkConfig = Field({}, validate_default=True)
    transport: TransportConfig = Field({}, validate_default=True)
    schedule: ScheduleConfig = Field({}, validate_default=True)
    merge: MergeConfig = Field({}, validate_default=True)
    maintenance: MaintenanceConfig = Field({}, validate_default=True)
    dead_letter: DeadLetterConfig = Field({}, validate_default=True)
    artifacts: ArtifactsConfig = Field({}, validate_default=True)
    debezium: DebeziumConfig = Field({}, validate_default=True)
    sources: tuple[SourceConfig, ...] = ()
    tables: Annotated[tuple[TableConfig, ...], AfterValidator(at_least_one)]

    _config_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Self:
        """Every rule that spans fields, reported together with each one's YAML path."""
        problems: list[tuple[Loc, str]] = []
        catalog, transport = self.catalog, self.transport
        if catalog.type in ("rest", "hive", "jdbc") and not catalog.uri:
            problems.append((("catalog", "uri"), f"required for a {catalog.type} catalog"))
        if catalog.type == "custom" and "catalog-impl" not in catalog.properties:
            problems.append(
                (("catalog", "properties"), "a custom catalog needs catalog-impl (its class)")
            )
        if transport.type == "kafka":
            if not transport.bootstrap_servers:
                problems.append(
                    (("transport", "bootstrap_servers"), "required for the kafka transport")
                )
            if not transport.topics and not transport.topic_pattern:
                problems.append(
                    (("transport", "topics"), "the kafka transport needs topics or topic_pattern")
                )
            if transport.topics and transport.topic_pattern:
                problems.append(
                    (("transport", "topic_pattern"), "give topics or topic_pattern, not both")
                )
        problems.extend(self._state_problems())
        # casefold() of a Secret is a plain str: print the field itself, which hides it.
        suffix = self.dead_letter.suffix.casefold()
        unrouted = self.dead_letter.unrouted_table.casefold()
        names: dict[str, int] = {}
        # Spark identifiers are case-insensitive, so "Orders" and "orders" collide.
        for i, table in enumerate(self.tables):
            name = table.name.casefold()
            if name in names:
                problems.append(
                    (("tables", i, "name"), f"duplicate table name (as tables[{names[name]}])")
                )
            names.setdefault(name, i)
            if name.endswith(suffix):
                problems.append(
                    (
                        ("tables", i, "name"),
                        f"must not end with the dead-letter suffix {self.dead_letter.suffix!r}",
                    )
                )
            if name.endswith(c.SUFFIX):
                problems.append(
                    (
                        ("tables", i, "name"),
                        f"must not end with {c.SUFFIX!r} (the CDC ledger tables)",
                    )
                )
            if name == unrouted:
                problems.append(
                    (("tables", i, "name"), "is the name of dead_letter.unrouted_table")
                )
            source = routing.capturing_source(self.sources, table.name)
            if table.debezium is not None and source is not None and source.captured_by_icetide:
                problems.append(
                    (
                        ("tables", i, "debezium"),
                        f"the table is captured by icetide (source {source.name!r}), which "
                        "writes decimals as text and times as the MySQL connector's "
                        "defaults; remove this key, or give the source debezium: if an "
                        "external Debezium connector captures it",
                    )
                )
        problems.extend(self._source_problems())
        problems.extend(self._route_problems())
        if problems:
            raise ConfigProblems(problems)
        self._config_dir = config_dir_of(info)
        return self

    def _state_problems(self) -> list[tuple[Loc, str]]:
        """A shared state location needs a transport that outlives the machine too: capture
        saves an offset there once its events are in the transport, so events kept in a
        local landing folder would be lost while the offset says they were captured."""
        state = self.state
        if state is None:
            return []
        scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", state)
        if scheme and scheme.group(1).lower() not in ("s3", "s3a", "s3n", "file"):
            return [
                (
                    ("state",),
                    f"{scheme.group(1)}:// is not a state location: give s3://bucket/prefix "
                    "(the catalog's object store) or a folder",
                )
            ]
        if scheme and scheme.group(1).lower() != "file" and self.transport.type == "files":
            return [
                (
                    ("transport", "type"),
                    f"state: {state} keeps capture's offsets off this machine, but the files "
                    "transport lands events in a local folder that is lost with it: use "
                    "transport: {type: kafka, ...}, or a local state folder",
                )
            ]
        return []

    def _source_problems(self) -> list[tuple[Loc, str]]:
        problems: list[tuple[Loc, str]] = []
        known = {t.name.casefold() for t in self.tables}
        owner: dict[str, int] = {}
        seen: dict[str, int] = {}
        for i, source in enumerate(self.sources):
            if source.name.casefold() in seen:
                problems.append(
                    (
                        ("sources", i, "name"),
                        f"duplicate source name (as sources[{seen[source.name.casefold()]}])",
                    )
                )
            seen.setdefault(source.name.casefold(), i)
            if source.type == "postgres" and not source.database:
                problems.append((("sources", i, "database"), "required for a postgres source"))
            if len(self.sources) > 1 and not source.tables:
                problems.append(
                    (
                        ("sources", i, "tables"),
                        "list the tables of each source when there are several",
                    )
                )
            for j, table in enumerate(source.tables):
                name = table.casefold()
                if name not in known:
                    close = difflib.get_close_matches(table, [t.name for t in self.tables], n=1)
                    problems.append(
                        (
                            ("sources", i, "tables", j),
                            f"no table named {table!r} in tables"
                            + (f" (did you mean {close[0]!r}?)" if close else ""),
                        )
                    )
                elif name in owner:
                    problems.append(
                        (("sources", i, "tables", j), f"already captured by sources[{owner[name]}]")
                    )
                owner.setdefault(name, i)
        return problems

    def table_server(self, table: TableConfig) -> str | None:
        """The Debezium server name whose events ``table`` takes; None: any server's
        (:func:`icetide.config.routing.table_server`)."""
        return routing.table_server(self.sources, table)

    def _route_problems(self) -> list[tuple[Loc, str]]:
        """Two tables that could both take one event make routing a guess: refuse them."""
        problems: list[tuple[Loc, str]] = []
        claimed: list[tuple[str, str | None, int]] = []
        for i, table in enumerate(self.tables):
            server = self.table_server(table)
            source = routing.capturing_source(self.sources, table.name)
            if table.server is not None and source is not None:
                if str(table.server).casefold() != str(source.name).casefold():
                    problems.append(
                        (
                            ("tables", i, "source"),
                            f"names server {table.server!r} but the table is captured by "
                            f"source {source.name!r}, whose events carry {source.name!r}",
                        )
                    )
            qualified = table.source.casefold()
            for other_qualified, other_server, j in claimed:
                if other_qualified != qualified:
                    continue
                if (
                    server is None
                    or other_server is None
                    or (server.casefold() == other_server.casefold())
                ):
                    either = server or other_server
                    where = f"of server {either!r} " if either else ""
                    problems.append(
                        (
                            ("tables", i, "source"),
                            f"source already used by tables[{j}]: tables[{j}] "
                            f"({self.tables[j].name}) and tables[{i}] ({table.name}) would "
                            f"both take the events {where}for {table.source!r}; give each "
                            f"its server as a 3-part source (server.{table.source}) or "
                            "list them under different sources",
                        )
                    )
            claimed.append((qualified, server, i))
        return problems

    def connector(self, table: str) -> ConnectorSettings:
        """How the values of ``table``'s schemaless messages are encoded: icetide's
        capture's way for a table it captures, else the table's ``debezium:`` over its
        source's over the pipeline's over Debezium's defaults (icetide.schema.connector)."""
        settings = self.table(table)
        source = routing.capturing_source(self.sources, settings.name)
        if source is not None and source.debezium is None:
            return CAPTURE
        chosen = self.debezium.over(DEBEZIUM_DEFAULTS)
        if source is not None and source.debezium is not None:
            chosen = source.debezium.over(chosen)
        return settings.debezium.over(chosen) if settings.debezium is not None else chosen

    def source(self, name: str) -> SourceConfig:
        """The source called ``name``; ConfigError if there is none."""
        for source in self.sources:
            if source.name.casefold() == name.casefold():
                return source
        known = [s.name for s in self.sources]
        raise ConfigError(
            f"pipeline {self.pipeline!r} has no source {name!r}",
            hint=f"sources are {', '.join(known)}" if known else "add a sources: section",
        )

    def source_tables(self, source: SourceConfig) -> tuple[TableConfig, ...]:
        """The pipeline tables that ``source`` captures (all of them for a lone source)."""
        return routing.captured_tables(self.sources, self.tables, source)

    def source_of(self, table: str) -> SourceConfig | None:
        """The configured source that captures ``table`` (None: no source does);
        ConfigError if the pipeline has no such table."""
        return routing.capturing_source(self.sources, self.table(table).name)

    @property
    def config_dir(self) -> Path:
        """The folder of the config file; relative paths in it resolve against it."""
        return self._config_dir

    @property
    def app_name(self) -> str:
        """The Spark application name: ``spark.app_name`` or ``icetide-<pipeline>``."""
        return self.spark.app_name or f"icetide-{self.pipeline}"

    def resolved_path(self, path: str | Path) -> Path:
        """``path`` made absolute against :attr:`config_dir`."""
        return resolve_path(self.config_dir, path)

    def table(self, name: str) -> TableConfig:
        """The table called ``name`` (case-insensitive); ConfigError if there is none."""
        for table in self.tables:
            if table.name.casefold() == name.casefold():
                return table
        known = [t.name for t in self.tables]
        close = difflib.get_close_matches(name, known, n=1)
        raise ConfigError(
            f"pipeline {self.pipeline!r} has no table {name!r}",
            hint=f"did you mean {close[0]!r}?" if close else f"tables are {', '.join(known)}",
        )

    def table_for_source(self, source: str, server: str | None = None) -> TableConfig | None:
        """The table replicating Debezium source ``source`` (``db.table``) of ``server``.

        A table bound to a server takes only that server's events; one that is not takes
        the events of any server (the config allows no overlap between the two).
        """
        return routing.table_for_source(self.sources, self.tables, source, server)

    def redacted(self) -> dict[str, Any]:
        """The config as plain data with secrets as ``***``: what ``config show`` prints.

        Keys are the YAML keys, durations are written as ``10s``, paths as strings.
        """
        result = _redact(self)
        assert isinstance(result, dict)
        return result


def _redact(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {
            (field.alias or name): _redact(getattr(value, name))
            for name, field in type(value).model_fields.items()
        }
    if isinstance(value, Secret):
        return "***"
    if isinstance(value, str | Path):
        return str(value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, dict):
        return {str(k): _redact(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_redact(v) for v in value]
    return value
