"""Event-driven refresh is order-independent: E1 CREATE TABLE T, E2 CREATE VIEW V1 AS
SELECT * FROM T, E3 CREATE VIEW V2 AS SELECT * FROM V1, E4 ALTER TABLE T, in all 24
orders, end with V1 and V2 on T's second schema (published, too)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from icetide.artifacts.errors import ViewError
from icetide.artifacts.index import LocalIndex
from icetide.artifacts.publish import Publisher
from icetide.artifacts.refresh import Event, Refresher, TableChanged, ViewChanged
from icetide.artifacts.shape import Naming
from icetide.artifacts.views.registry import ViewRegistry
from icetide.schema.history import SchemaHistory
from icetide.schema.model import Column, TableSchema
from icetide.schema.types import EnumType, LongType, StringType

V1_SCHEMA = TableSchema(
    "T",
    (Column(1, "Id", LongType(), False), Column(2, "State", EnumType(("new", "done")), False)),
    ("Id",),
)
V2_SCHEMA = V1_SCHEMA.with_columns(
    (*V1_SCHEMA.columns, Column(3, "Email", StringType())), version=2
)
HISTORY = SchemaHistory("T", (V1_SCHEMA, V2_SCHEMA))

EVENTS: dict[str, Event] = {
    "E1": TableChanged("T", 1),
    "E2": ViewChanged("V1", "SELECT * FROM T"),
    "E3": ViewChanged("V2", "SELECT * FROM V1"),
    "E4": TableChanged("T", 2),
}


def refresher(root: Path, publish: bool = False) -> Refresher:
    publisher = Publisher(LocalIndex(root / "index")) if publish else None
    return Refresher(
        ViewRegistry(root / "views"),
        lambda t: HISTORY if t == "T" else None,
        Naming("shop"),
        publisher=publisher,
    )


def final_columns(r: Refresher, view: str) -> list[tuple[str, str, bool]]:
    record = r.registry.get(view)
    assert record is not None and record.status == "ready" and record.current is not None
    return [(c.name, str(c.type), c.nullable) for c in record.current.columns]


EXPECTED = [("Id", "long", False), ("State", "enum(new, done)", False), ("Email", "string", True)]


@pytest.mark.parametrize("order", list(itertools.permutations(EVENTS)), ids="-".join)
def test_every_order_ends_on_the_second_schema(tmp_path: Path, order: tuple[str, ...]) -> None:
    r = refresher(tmp_path)
    for name in order:
        r.refresh(EVENTS[name])
    assert final_columns(r, "V1") == EXPECTED
    assert final_columns(r, "V2") == EXPECTED
    assert r.registry.tables() == {"T": 2}
    v2 = r.registry.get("V2")
    assert v2 is not None and v2.current is not None
    assert v2.current.inputs == {"V1": r.registry.get("V1").current.version}  # type: ignore[union-attr]


def test_a_view_waits_for_its_inputs_and_refreshing_publishes_dependents(tmp_path: Path) -> None:
    r = refresher(tmp_path, publish=True)
    report = r.refresh(EVENTS["E3"])
    assert report.pending == ["V2"]
    v2 = r.registry.get("V2")
    assert v2 is not None and v2.missing == ("V1",)
    report = r.refresh(EVENTS["E2"])
    assert report.pending == ["V1", "V2"]
    report = r.refresh(EVENTS["E4"])
    assert report.views == ["V1", "V2"] and report.pending == []
    published = sorted((o.package, o.version) for o in report.published if o.action == "published")
    assert published == [
        ("icetide-schema-shop-t", "1.0.0"),
        ("icetide-schema-shop-t", "1.1.0"),
        ("icetide-schema-shop-v1", "1.0.0"),
        ("icetide-schema-shop-v2", "1.0.0"),
    ]
    # The older table event arrives late: nothing moves back, nothing new is built.
    report = r.refresh(EVENTS["E1"])
    assert report.tables == [] and all(o.action == "unchanged" for o in report.published)
    assert final_columns(r, "V2") == EXPECTED


def test_a_cycle_and_a_self_reference_are_refused(tmp_path: Path) -> None:
    r = refresher(tmp_path)
    r.refresh(TableChanged("T", 1))
    with pytest.raises(ViewError, match="reads itself"):
        r.refresh(ViewChanged("A", "SELECT * FROM A"))
    r.refresh(ViewChanged("A", "SELECT * FROM B"))
    with pytest.raises(ViewError, match="cycle"):
        r.refresh(ViewChanged("B", "SELECT * FROM A"))
    assert r.registry.get("B") is None  # refused before anything was written
    with pytest.raises(ViewError, match="a table has that name"):
        r.refresh(ViewChanged("T", "SELECT 1 AS x"))


def test_sql_that_cannot_work_is_refused_and_a_view_broken_later_is_marked_failed(
    tmp_path: Path,
) -> None:
    r = refresher(tmp_path)
    r.refresh(TableChanged("T", 2))
    with pytest.raises(ViewError, match="'nope' could not be resolved"):
        r.refresh(ViewChanged("A", "SELECT nope FROM T"))
    assert r.registry.get("A") is None
    r.refresh(ViewChanged("A", "SELECT Email FROM T"))
    r.refresh(ViewChanged("B", "SELECT Id FROM T"))
    # T's history goes back to version 1 (no Email): A fails, B is still derived.
    r.registry.set_tables({})
    report = r.refresh(TableChanged("T", 1))
    assert list(report.failed) == ["A"] and "Email" in report.failed["A"].replace("email", "Email")
    a, b = r.registry.get("A"), r.registry.get("B")
    assert a is not None and a.status == "failed" and a.current is not None  # v1 kept
    assert b is not None and b.status == "ready"
