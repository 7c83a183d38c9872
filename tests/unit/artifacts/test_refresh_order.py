"""Event-driven refresh is order-independent: E1 CREATE TABLE T, E2 CREATE VIEW V1 AS
SELECT * FROM T, E3 CREATE VIEW V2 AS SELECT * FROM V1, E4 ALTER TABLE T, in all 24
orders, end with V1 and V2 on T's second schema (published, too)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from icetide.artifacts.errors import ViewError
from icetide.artifacts.index import LocalIndex
from icetide.artifacts.publish import Publisher
from icetide.artifacts.refresh import Event, Refresher, TableChanged, ViewChanged
from icetide.artifacts.shape import Naming
from icetide.artifacts.views.registry import ViewRegistry
from icetide.schema.history import SchemaHistory
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, EnumType, LongType, StringType

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


def test_a_snapshot_with_no_change_generates_and_derives_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``publish --all`` twice: the second run (a new process: new refresher and
    publisher) finds every content hash in the index's fingerprint cache and every view's
    inputs unchanged, so it neither generates a package's sources nor derives a view; a
    view whose SQL changed is derived and published again."""
    import icetide.artifacts.publish as publish
    import icetide.artifacts.refresh as refresh

    calls = {"generate": 0, "derive": 0}

    def fake_wheel(files: dict[str, str], outdir: Path) -> Path:  # the bookkeeping is real
        outdir.mkdir(parents=True, exist_ok=True)
        wheel = outdir / f"w{len(list(outdir.iterdir()))}.whl"
        wheel.write_text(files["pyproject.toml"])
        return wheel

    def counted(name: str, real: object) -> object:
        def call(*args: object, **kwargs: object) -> object:
            calls[name] += 1
            return real(*args, **kwargs)  # type: ignore[operator]

        return call

    monkeypatch.setattr(publish, "build_wheel", fake_wheel)
    monkeypatch.setattr(publish, "package_files", counted("generate", publish.package_files))
    monkeypatch.setattr(refresh, "derive", counted("derive", refresh.derive))
    r = refresher(tmp_path, publish=True)
    for name in ("E2", "E3"):
        r.refresh(EVENTS[name])
    first = r.snapshot(["T"])
    assert sum(o.action == "published" for o in first.published) == 4
    calls.update(generate=0, derive=0)

    again = refresher(tmp_path, publish=True).snapshot(["T"])
    assert calls == {"generate": 0, "derive": 0}
    assert again.published and all(o.action == "unchanged" for o in again.published)

    # The view's SQL edited in its file (the registry is reviewed like code).
    registry = ViewRegistry(tmp_path / "views")
    record = registry.get("V2")
    assert record is not None
    registry.put(replace(record, sql="SELECT Id, State FROM V1"))
    changed = refresher(tmp_path, publish=True).snapshot(["T"])
    built = [(o.name, o.version) for o in changed.published if o.action == "published"]
    # 2.0.0 for the new columns; 1.0.1 as every version of a view carries its SQL
    assert built == [("V2", "1.0.1"), ("V2", "2.0.0")] and calls["derive"] == 1


def test_a_table_event_whose_publish_failed_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table's version is recorded only once its packages are published: the same
    event, sent again after a failed build, publishes it (it is not taken as done)."""
    import icetide.artifacts.publish as publish
    from icetide.artifacts.errors import ArtifactError

    def broken(files: dict[str, str], outdir: Path) -> Path:
        raise ArtifactError("building artifacts needs pypa build and hatchling")

    def fake_wheel(files: dict[str, str], outdir: Path) -> Path:
        outdir.mkdir(parents=True, exist_ok=True)
        wheel = outdir / f"w{len(list(outdir.iterdir()))}.whl"
        wheel.write_text(files["pyproject.toml"])
        return wheel

    monkeypatch.setattr(publish, "build_wheel", broken)
    r = refresher(tmp_path, publish=True)
    with pytest.raises(ArtifactError):
        r.refresh(TableChanged("T", 1))
    assert r.registry.tables() == {}
    monkeypatch.setattr(publish, "build_wheel", fake_wheel)
    report = r.refresh(TableChanged("T", 1))
    assert [(o.package, o.version) for o in report.published] == [
        ("icetide-schema-shop-t", "1.0.0")
    ]
    assert r.registry.tables() == {"T": 1}
