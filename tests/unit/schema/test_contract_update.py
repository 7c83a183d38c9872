"""A schema version as Iceberg ``UpdateSchema`` operations (icetide.schema.contract.update),
for every golden case: the contract's ALTER cases (``golden/alter.yaml``, the calls kept
in ``golden/expected/update/<case>.txt``) and every evolution golden plan that alters the
tables (``tests/unit/evolution/golden``).

Each case's operations are also replayed on a model of the tables that follows
``UpdateSchema``'s own rules (every name resolved against the schema the update started
from; an add refused under a name that schema still holds; moves after the adds, in call
order; a rename or delete of a field the update added refused), and the result must be
the new version's shape: the new schema's fields in its order at every level, each of
the leaf type the new version gives it, and the soft-dropped ones still there with their
comment. A broken operation list (a widening named by the new name, a move behind a
sibling's new name, an add that collides) fails here without a JVM; the real Iceberg
runs them in tests/integration/test_schema_update.py.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.alter import KEPT_AS
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.update import SchemaOp, TableUpdate, version_update
from icetide.schema.convert.spark import sql_type
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "evolution"))
from test_contract_golden import ALTER, SCHEMAS, check, slug  # noqa: E402
from test_evolution_golden import CASES as EVOLUTION  # noqa: E402
from test_evolution_golden import plan_of  # noqa: E402

DROPPED = b.DROPPED_COMMENT.split("{", 1)[0]


@dataclass(eq=False)
class Node:
    """A field of the modelled table: a leaf (``leaf``: its Spark SQL type) or a struct,
    list or map with its children (``element``, ``key``, ``value`` for the last two)."""

    name: str
    leaf: str | None = None
    children: list[Node] = field(default_factory=list)
    doc: str | None = None

    def shape(self) -> Any:
        """Names, leaf types and order, soft-dropped fields left out."""
        if self.leaf is not None:
            return self.leaf
        return [(n.name, n.shape()) for n in self.children if not (n.doc or "").startswith(DROPPED)]


def node(name: str, ctype: IcetideType) -> Node:
    if isinstance(ctype, StructType):
        return Node(name, children=[node(f.name, f.type) for f in ctype.fields])
    if isinstance(ctype, ListType):
        return Node(name, children=[node("element", ctype.element)])
    if isinstance(ctype, MapType):
        return Node(name, children=[node("key", ctype.key), node("value", ctype.value)])
    return Node(name, leaf=sql_type(ctype))


def fields(columns: Sequence[Column], kept: Sequence[str] = ()) -> list[Node]:
    """A table's (or row image's) fields: ``columns``, then ``kept`` soft-dropped ones."""
    out = [node(col.name, col.type) for col in columns]
    return out + [Node(name, leaf="STRING", doc=DROPPED + "in version 1") for name in kept]


def table(schema: TableSchema, kept: Sequence[str] = (), ledger: bool = False) -> Node:
    """The base (or ledger: top-level key columns, then both row images) of ``schema``."""
    if not ledger:
        return Node("", children=fields(schema.columns, kept))
    keys = [col for col in schema.columns if col.id in set(schema.key_ids)]
    images = [Node(image, children=fields(schema.columns, kept)) for image in c.ROW_IMAGES]
    return Node("", children=fields(keys) + images)


def index(root: Node) -> dict[tuple[str, ...], Node]:
    out: dict[tuple[str, ...], Node] = {}

    def walk(n: Node, path: tuple[str, ...]) -> None:
        for child in n.children:
            out[(*path, child.name)] = child
            walk(child, (*path, child.name))

    walk(root, ())
    return out


def parent_of(root: Node, target: Node) -> Node:
    for n in [root, *index(root).values()]:
        if any(child is target for child in n.children):
            return n
    raise AssertionError(f"{target.name} has no parent")


def replay(root: Node, update: TableUpdate) -> None:
    """Carry ``update`` out on ``root`` the way Iceberg's ``SchemaUpdate`` does."""
    for one in update.passes:
        start = index(root)
        deleted: set[int] = set()
        added: dict[tuple[str, ...], Node] = {}
        moves: list[SchemaOp] = []

        def existing(path: tuple[str, ...], start: dict[tuple[str, ...], Node] = start) -> Node:
            assert path in start, f"no field {'.'.join(path)} in the schema the update began with"
            return start[path]

        for op in one:
            if op.kind == "add":
                parent = existing(op.path) if op.path else root
                if parent.children and parent.children[0].name == "element":
                    parent = parent.children[0]  # a list's element struct
                holder = start.get((*op.path, op.name or ""))
                assert holder is None or id(holder) in deleted, (
                    f"name already exists: {'.'.join((*op.path, op.name or ''))}"
                )
                assert op.type is not None and op.name is not None
                new = node(op.name, op.type)
                parent.children.append(new)
                added[(*op.path, op.name)] = new
            elif op.kind == "rename":
                assert op.name is not None
                existing(op.path).name = op.name
            elif op.kind == "widen":
                target = existing(op.path)
                assert target.leaf is not None and op.type is not None
                target.leaf = sql_type(op.type)
            elif op.kind == "doc":
                existing(op.path).doc = op.doc
            elif op.kind == "delete":
                deleted.add(id(existing(op.path)))
            else:
                moves.append(op)
        for op in moves:
            moving = added.get(op.path) or existing(op.path)
            siblings = parent_of(root, moving).children
            siblings.remove(moving)
            if op.kind == "move_first":
                siblings.insert(0, moving)
            else:
                assert op.after is not None
                behind = added.get(op.after) or existing(op.after)
                siblings.insert(siblings.index(behind) + 1, moving)
        for n in [root, *index(root).values()]:
            n.children = [child for child in n.children if id(child) not in deleted]
            names = [child.name for child in n.children]
            assert len(names) == len(set(names)), f"duplicate names {names}"


def check_replay(old: TableContract, new: TableContract, drop: str) -> TableUpdate:
    """Replay the version's updates on the base and ledger of ``old``; they must have
    ``new``'s shape. Returns the base's update."""
    update = version_update(old, new, drop)  # type: ignore[arg-type]
    was, now = old.target, new.target
    base = table(was)
    replay(base, update.base)
    assert base.shape() == table(now).shape()
    ledger = table(was, ledger=True)
    replay(ledger, update.ledger)
    assert ledger.shape() == table(now, ledger=True).shape()
    dropped = {col.id for col in was.columns} - {col.id for col in now.columns}
    for col in was.columns:
        if col.id in dropped:
            moved = KEPT_AS.format(name=col.name, version=was.version)
            held = [n for n in base.children if n.name in (col.name, moved)]
            marked = [n for n in held if (n.doc or "").startswith(DROPPED)]
            assert len(marked) == (1 if drop == "soft" else 0), col.name
    return update.base


ALTERING = [case for case in ALTER if "error" not in case]


@pytest.mark.parametrize("case", ALTERING, ids=[slug(c["name"]) for c in ALTERING])
def test_alter_golden_as_one_update(case: dict[str, Any]) -> None:
    old = TableContract(schema_from_dict(SCHEMAS[case["from"]], case["from"]))
    new = TableContract(schema_from_dict(case["to"], case["name"]))
    drop = case.get("drop", "soft")
    check_replay(old, new, drop)
    update = version_update(old, new, drop)
    text = "\n".join(["-- base", update.base.render(), "-- ledger", update.ledger.render()])
    check("update", case, text)


ALTERED = [(f, case) for f, case in EVOLUTION if plan_of(case).ddl]


@pytest.mark.parametrize("file,case", ALTERED, ids=[f"{f}-{slug(c['name'])}" for f, c in ALTERED])
def test_evolution_golden_as_one_update(file: str, case: dict[str, Any]) -> None:
    plan = plan_of(case)
    drop = (case.get("policy") or {}).get("drop", "soft")
    check_replay(TableContract(plan.old), TableContract(plan.target), drop)


def test_every_evolution_plan_with_ddl_is_covered() -> None:
    assert len(ALTERED) >= 25


def test_columns_swapping_names_need_no_temporary_names() -> None:
    """One update resolves both names against where it started: a swap is two renames."""
    old = schema_from_dict(SCHEMAS["flat"], "flat")
    data = {
        "table": old.table,
        "version": 2,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long"},
            {"id": 2, "name": "balance", "type": "string"},
            {"id": 3, "name": "email", "type": "decimal(12,2)"},
            {"id": 4, "name": "updated_at", "type": "timestamp"},
        ],
    }
    new = TableContract(schema_from_dict(data, "swap"))
    ops = [str(op) for op in version_update(TableContract(old), new).base.ops]
    assert ops == ['renameColumn("email", "balance")', 'renameColumn("balance", "email")']
    check_replay(TableContract(old), new, "soft")


def test_an_add_under_a_kept_name_is_a_second_pass() -> None:
    """Iceberg refuses an add under a name the table holds, even one the same update
    renames away: the kept column moves in a first update, the add follows."""
    old = schema_from_dict(SCHEMAS["flat"], "flat")
    data = {
        "table": old.table,
        "version": 2,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long"},
            {"id": 2, "name": "email", "type": "string"},
            {"id": 3, "name": "balance", "type": "decimal(12,2)"},
            {"id": 4, "name": "updated_at", "type": "timestamp"},
            {"id": 5, "name": "note", "type": "string"},
        ],
    }
    update = version_update(
        TableContract(old), TableContract(schema_from_dict(data, "k")), kept=["note"]
    )
    assert [[str(op) for op in one] for one in update.base.passes] == [
        [
            f'renameColumn("note", "{KEPT_AS.format(name="note", version=1)}")',
            'updateColumnDoc("note", "icetide: dropped from the schema in version 1 (was note)")',
        ],
        ['addColumn(null, "note", STRING)', 'moveAfter("note", "updated_at")'],
    ]
    base = table(old, kept=["note"])
    replay(base, update.base)
    assert [n.name for n in base.children] == [
        "id",
        "email",
        "balance",
        "updated_at",
        "note",
        "note__dropped_v1",
    ]


def test_a_hard_drop_frees_its_name_within_one_update() -> None:
    """A column dropped hard and another added under its name: one update, the delete
    before the add (Iceberg takes an add under a name the same update deletes)."""
    old = schema_from_dict(SCHEMAS["flat"], "flat")
    data = {
        "table": old.table,
        "version": 2,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long"},
            {"id": 2, "name": "email", "type": "string"},
            {"id": 4, "name": "updated_at", "type": "timestamp"},
            {"id": 5, "name": "balance", "type": "string"},
        ],
    }
    new = TableContract(schema_from_dict(data, "again"))
    update = version_update(TableContract(old), new, "hard")
    assert [[str(op) for op in one] for one in update.base.passes] == [
        [
            'deleteColumn("balance")',
            'addColumn(null, "balance", STRING)',
            'moveAfter("balance", "updated_at")',
        ]
    ]
    check_replay(TableContract(old), new, "hard")
