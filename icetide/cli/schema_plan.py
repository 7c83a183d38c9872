"""``icetide schema plan`` and ``icetide schema apply``: a table's schema change, reviewed
and then applied with an audit record.

Both join the ``schema`` command group through :func:`register_schema_group`: it returns
the group's subparsers, creating the group only when no module made it yet (another
module's ``schema`` parser, e.g. ``schema show``'s, is found and extended), so the group
exists once whichever module names it first in ``main.GROUPS``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING

from icetide.cli import context
from icetide.cli.context import command_parser, with_config, with_output
from icetide.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config.sections import SourceConfig
    from icetide.evolution.apply import ApplyResult
    from icetide.evolution.evidence import TableEvidence
    from icetide.evolution.plan import EvolutionPlan
    from icetide.pipeline import Pipeline
    from icetide.schema.model import TableSchema

_GROUP_ATTR = "_icetide_schema_group"


def register_schema_group(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The ``schema`` command group's subparsers, created on first call; every module
    adding a ``schema`` subcommand calls this."""
    existing = getattr(sub, _GROUP_ATTR, None)
    if existing is not None:
        return existing
    made = sub.choices.get("schema")
    if made is not None:  # another module made the group: extend its subcommands
        for action in made._actions:
            if isinstance(action, argparse._SubParsersAction):
                setattr(sub, _GROUP_ATTR, action)
                return action
    p = command_parser(
        sub,
        "schema",
        help="inspect, review and apply table schemas (show, plan, apply)",
        description="A table's schema file is its source of truth: show prints it and what is "
        "generated from it; plan and apply compare "
        "it with the source, classify each change, and apply the allowed and approved "
        "ones with an audit record.",
        example=(
            "icetide schema show customers --sql",
            "icetide schema plan --table customers",
            "icetide schema apply --table customers --approve sensitive:ssn --reason 'PII ok'",
        ),
    )
    group = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    setattr(sub, _GROUP_ATTR, group)
    return group


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.add_argument(
        "--from",
        dest="source",
        default="information_schema",
        metavar="information_schema|FILE",
        help="the source's new schema: read from the source's catalog (default), or a "
        "schema file (YAML; ids are matched, not trusted)",
    )
    p.add_argument(
        "--ddl",
        type=Path,
        help="a file of the DDL the source ran (evidence of renames, defaults, positions); "
        "MySQL sources also use capture's schema history",
    )
    p.add_argument(
        "--dialect",
        choices=("mysql", "postgres"),
        help="the --ddl file's SQL dialect (default: the table's source type)",
    )
    p.add_argument(
        "--empty",
        action="store_true",
        help="the tables hold no rows yet (a column added with a default needs no fill)",
    )
    p.add_argument(
        "--retype",
        action="append",
        default=[],
        metavar="COLUMN",
        help="compare COLUMN with the type its source type maps to now, not with the "
        "declared type the schema file keeps while the source still fits it (a PostgreSQL "
        "array declared json becomes a list: a held type_change that re-snapshots the "
        "table once approved); repeatable, with --from information_schema",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``schema plan`` and ``schema apply``."""
    group = register_schema_group(sub)
    p = with_output(
        with_config(
            command_parser(
                group,
                "plan",
                help="show what changed at the source, how each change is classified, the "
                "policy's decision and the phases (changes nothing)",
                example=(
                    "icetide schema plan",
                    "icetide schema plan --table customers --output json",
                    "icetide schema plan --table orders --from new-orders.yaml --ddl migration.sql",
                ),
            )
        )
    )
    _source_args(p)
    p.add_argument(
        "--approve", action="append", default=[], metavar="ID", help="plan as if approved"
    )
    p.set_defaults(func=cmd_plan)

    p = with_output(
        with_config(
            command_parser(
                group,
                "apply",
                help="apply a table's allowed and approved changes: ALTERs, the new schema "
                "version, an audit record",
                example=(
                    "icetide schema apply --table customers",
                    "icetide schema apply --table customers --approve narrow:amount "
                    "--by ana --reason 'ticket 42'",
                    "icetide schema apply --table t --approve 'ambiguous:email>mail=rename'",
                ),
            )
        )
    )
    _source_args(p)
    p.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="ID",
        help="apply this held change too (repeatable; ids as `schema plan` prints them)",
    )
    p.add_argument("--by", help="who applies (default: $USER)")
    p.add_argument("--reason", help="why, for the audit log")
    p.add_argument(
        "--no-ddl",
        action="store_true",
        help="do not run the ALTERs (the tables are altered elsewhere); record the version",
    )
    p.set_defaults(func=cmd_apply)


def build_plans(args: argparse.Namespace, pipeline: Pipeline) -> list[EvolutionPlan]:
    """One plan per selected table, from ``--from``, ``--ddl`` and the table's policy."""
    config = pipeline.config
    names = args.table or [t.name for t in config.tables]
    if args.source != "information_schema" and len(names) > 1:
        raise ConfigError(
            f"--from {args.source} is one table's schema; say which table with --table",
            hint=f"tables are {', '.join(t.name for t in config.tables)}",
        )
    return [table_plan(args, pipeline, name) for name in names]


def table_plan(args: argparse.Namespace, pipeline: Pipeline, name: str) -> EvolutionPlan:
    """One table's plan: its schema file's current version against ``--from``."""
    from icetide.evolution.classify import candidate_schema
    from icetide.evolution.plan import table_plan
    from icetide.evolution.policy import Policy

    table = pipeline.config.table(name)
    old = pipeline.schema(table.name)
    fresh = _fresh(args, pipeline, table.name, old)
    evidence = _evidence(args, pipeline, table.name)
    policy = Policy.from_config(table.evolution)
    new = candidate_schema(old, fresh, evidence, sensitive=policy.sensitive)
    return table_plan(pipeline, table.name, old, new, evidence, has_rows=not args.empty)


def _fresh(
    args: argparse.Namespace, pipeline: Pipeline, table: str, declared: TableSchema
) -> TableSchema:
    from icetide.config.loader import load_schema_file
    from icetide.evolution.source_schema import read_source_schema

    retype = getattr(args, "retype", None) or []
    if args.source != "information_schema":
        if retype:
            raise ConfigError(
                "--retype reads the source's catalog; it does not go with --from FILE",
                hint="write the column's new type in the file instead",
            )
        schema = load_schema_file(args.source, f"--from for table {table}")
        return schema.renamed(table)
    unknown = [
        n for n in retype if n.casefold() not in {c.name.casefold() for c in declared.columns}
    ]
    if unknown:
        raise ConfigError(
            f"--retype {', '.join(unknown)}: table {table} has no such column",
            hint=f"columns are {', '.join(c.name for c in declared.columns)}",
        )
    source = _source_of(pipeline, table)
    return read_source_schema(source, pipeline.config.table(table), declared, retype)


def _source_of(pipeline: Pipeline, table: str) -> SourceConfig:
    source = pipeline.config.source_of(table)
    if source is not None:
        return source
    raise ConfigError(
        f"table {table} has no source database in the config to read its catalog from",
        hint="add a sources: entry, or give the new schema with --from FILE",
    )


def _evidence(args: argparse.Namespace, pipeline: Pipeline, table: str) -> TableEvidence:
    from icetide.evolution.evidence import NO_EVIDENCE, TableEvidence, collect, from_mysql_history

    config = pipeline.config
    table_config = config.table(table)
    items: list[TableEvidence] = []
    source = None
    try:
        source = _source_of(pipeline, table)
    except ConfigError:
        pass
    if source is not None and source.type == "mysql" and "." in table_config.source:
        db, name = table_config.source.split(".", 1)
        history = (
            config.resolved_path(config.state_dir) / "capture" / f"{source.name}.history.jsonl"
        )
        items.append(from_mysql_history(history, db, name))
    if args.ddl is not None:
        dialect = args.dialect or (source.type if source is not None else "mysql")
        try:
            text = args.ddl.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read --ddl {args.ddl}: {exc}") from None
        items.append(collect([text], dialect, table_config.source.rsplit(".", 1)[-1]))
    if not items:
        return NO_EVIDENCE
    return TableEvidence(
        table,
        tuple(i for ev in items for i in ev.items),
        tuple(u for ev in items for u in ev.unparsed),
    )


def cmd_plan(args: argparse.Namespace) -> int:
    """Print each table's plan; exit 0 (a plan with held changes is not an error)."""
    pipeline = context.load_pipeline(args)
    plans = build_plans(args, pipeline)
    _check_approvals(plans, args.approve)
    if args.approve:
        plans = [p.with_approvals([a for a in args.approve if _names(p, a)]) for p in plans]
    if args.output == "json":
        print(json.dumps([p.to_json() for p in plans], indent=2, default=str))
    else:
        print("\n\n".join(p.render() for p in plans))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    """Apply each table's plan; exit 3 when changes stay held."""
    from icetide.evolution.apply import apply_plan, evolution_dir
    from icetide.evolution.queue import EvolutionQueue

    pipeline = context.load_pipeline(args)
    plans = build_plans(args, pipeline)
    _check_approvals(plans, args.approve, _applied_before(pipeline, plans))
    run_ddl: Callable[[str], None] | None = None
    spark: SparkSession | None = None
    if not args.no_ddl and any(p.changed or args.approve for p in plans):
        from icetide.spark.errors import jvm_boundary

        spark = context.spark_session(pipeline.config)

        def run_sql(statement: str) -> None:
            context.log(f"  {statement}")
            with jvm_boundary("schema apply"):
                spark.sql(statement)

        run_ddl = run_sql
        commit = _table_committer(pipeline, spark)
    else:
        commit = None

    results = []
    queue = EvolutionQueue(evolution_dir(pipeline.config))
    for plan in plans:
        with queue.lock(plan.table):
            # Planned again under the lock: a change another process applied meanwhile
            # is this plan's starting point, so concurrent applies end as sequential ones
            # (and one that applied the same change leaves nothing to do here).
            plan = table_plan(args, pipeline, plan.table)
            approve = [a for a in args.approve if _names(plan, a)]
            results.append(
                apply_plan(
                    plan,
                    pipeline.schemas,
                    run_ddl=run_ddl,
                    commit_tables=commit,
                    approve=approve,
                    by=args.by,
                    reason=args.reason,
                )
            )
    refreshed = refresh_artifacts(pipeline, results, spark if run_ddl is not None else None)
    if args.output == "json":
        out = [r.to_json() | {"artifacts": refreshed.get(r.table)} for r in results]
        print(json.dumps(out, indent=2, default=str))
    else:
        print("\n".join(r.render() for r in results))
        for table, built in refreshed.items():
            print(f"table {table}: artifacts published: {', '.join(built) or 'nothing new'}")
    return 3 if any(r.held for r in results) else 0


def _table_committer(
    pipeline: Pipeline, spark: SparkSession
) -> Callable[[EvolutionPlan, dict[str, str]], list[str]]:
    """Phase 1 of a plan as one Iceberg commit per table, base and ledger each at the new
    version with the audit properties (both in one commit where the catalog can)."""
    from icetide.lake.alter import kept_columns
    from icetide.lake.schema_update import TableVersion, commit_together
    from icetide.schema.contract import ledger as c
    from icetide.spark.errors import jvm_boundary

    def commit(plan: EvolutionPlan, properties: dict[str, str]) -> list[str]:
        assert plan.update is not None
        refs = pipeline.refs(plan.table)
        names = [col.name for col in plan.old.columns]
        version = {c.SCHEMA_VERSION_PROPERTY: str(plan.target.version), **properties}
        with jvm_boundary("schema apply"):
            base = plan.update.with_kept(kept_columns(spark, refs.base, names)).base
            ledger = plan.update.with_kept(kept_columns(spark, refs.cdc, names, c.AFTER)).ledger
            tables = [
                TableVersion(refs.base, base, plan.target.version, version),
                TableVersion(refs.cdc, ledger, plan.target.version, version),
            ]
            how = commit_together(spark, tables, c.SCHEMA_VERSION_PROPERTY)
        lines = [f"{t.table}: {op}" for t in tables for op in t.update.ops]
        context.log(f"  schema version {plan.target.version}: {how}")
        for line in lines:
            context.log(f"  {line}")
        return lines

    return commit


def refresh_artifacts(
    pipeline: Pipeline, results: list[ApplyResult], spark: SparkSession | None
) -> dict[str, list[str]]:
    """With ``artifacts.refresh: auto``, publish each table's newly applied version and
    the views above it (with ``spark``, the base table's ``avro.schema.literal`` too);
    table → the package versions built. A failure here leaves the applied change in
    place and says how to publish later."""
    if pipeline.config.artifacts.refresh != "auto":
        return {}
    from icetide.artifacts.workspace import on_table_changed
    from icetide.errors import IcetideError

    refreshed: dict[str, list[str]] = {}
    for result in results:
        if result.noop or result.version == result.from_version:
            continue
        try:
            report = on_table_changed(pipeline, result.table, result.version, spark)
        except IcetideError as exc:
            context.log(
                f"WARNING table {result.table}: schema version {result.version} applied, but "
                f"its artifacts were not published: {exc.message}; publish them with "
                "`icetide artifacts publish --all` (or set artifacts.refresh: off)"
            )
            continue
        refreshed[result.table] = [
            f"{o.package} {o.version}" for o in report.published if o.action == "published"
        ]
    return refreshed


def _names(plan: EvolutionPlan, approval: str) -> bool:
    """Whether ``approval`` names a change of ``plan`` (with several tables, each takes
    its own)."""
    return approval.partition("=")[0] in {c.id for c in plan.changes}


def _applied_before(pipeline: Pipeline, plans: list[EvolutionPlan]) -> set[str]:
    """The ids of the changes the tables' audit logs record as applied: approving one
    again (a rerun, or a second process that lost the race) has nothing left to do."""
    from icetide.evolution.audit import audit_path, read_audit

    config = pipeline.config
    found: set[str] = set()
    for plan in plans:
        log = audit_path(config.resolved_path(config.table(plan.table).schema_file))
        found |= {str(c.get("id")) for r in read_audit(log) for c in r.changes}
    return found


def _check_approvals(
    plans: list[EvolutionPlan], approvals: list[str], applied: AbstractSet[str] = frozenset()
) -> None:
    from icetide.errors import SchemaChangeError

    unknown = [
        a
        for a in approvals
        if not any(_names(p, a) for p in plans) and a.partition("=")[0] not in applied
    ]
    if unknown:
        known = sorted(c.id for p in plans for c in p.changes)
        raise SchemaChangeError(
            f"--approve {', '.join(unknown)}: no planned change has this id",
            hint="changes planned: " + (", ".join(known) or "none"),
        )
