"""Property-based: every Connect type name a converter writes is read, under either
spelling, and round-trips; a name none writes refuses its messages (a dead letter with a
reason), never the stage.

The spellings are the converters' own: Kafka's ``Schema.Type`` names (``float32``,
``float64``) and JsonConverter's (``float``, ``double``, from its ``JsonSchema``
constants), with every logical name Kafka and Debezium define.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icetide.config import Config
from icetide.events.logical_types import LOGICAL_DECODERS, decode_value
from icetide.evolution.carried import UNREADABLE_SCHEMA, VersionWalker
from icetide.pipeline import Pipeline
from icetide.schema.convert import ids_from
from icetide.schema.convert.connect import (
    HINTED,
    TYPE_NAMES,
    connect_schema,
    icetide_type,
    plain_type,
)
from icetide.schema.file import schema_from_dict

# Written here, not taken from the code under test: JsonConverter's JsonSchema constants
# (connect-json 4.1.1) and the names of Kafka's Schema.Type.
JSON_CONVERTER_NAMES = ["boolean", "int8", "int16", "int32", "int64", "float", "double"]
SCHEMA_TYPE_NAMES = ["boolean", "int8", "int16", "int32", "int64", "float32", "float64"]
PRIMITIVES = sorted({*JSON_CONVERTER_NAMES, *SCHEMA_TYPE_NAMES, "bytes", "string"})
LOGICAL: list[dict[str, Any]] = [
    {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2"},
    },
    {"type": "string", "name": "io.debezium.data.Enum", "parameters": {"allowed": "a,b"}},
    *[
        {"type": kind, "name": name}
        for name, (kind, _) in HINTED.items()
        if name != "org.apache.kafka.connect.data.Decimal"
    ],
    *[
        {"type": "string", "name": name}
        for name in LOGICAL_DECODERS
        if name not in HINTED
        and name.startswith("io.debezium.data.")
        and name not in ("io.debezium.data.Enum", "io.debezium.data.VariableScaleDecimal")
    ],
    {"type": "int32", "name": "io.debezium.time.Year"},
]


def _named(children: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**child, "field": f"f{n}", "optional": True} for n, child in enumerate(children)]


leaves = st.one_of(
    st.sampled_from(PRIMITIVES).map(lambda t: {"type": t}),
    st.sampled_from(LOGICAL),
)
schemas = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map(
            lambda xs: {"type": "struct", "fields": _named(xs)}
        ),
        inner.map(lambda x: {"type": "array", "items": {**x, "optional": True}}),
        inner.map(
            lambda x: {"type": "map", "keys": {"type": "string"}, "values": {**x, "optional": True}}
        ),
    ),
    max_leaves=8,
)


@given(schemas)
def test_every_type_name_reads_and_round_trips(schema: dict[str, Any]) -> None:
    ctype, hint = icetide_type(schema, ids_from(1))
    # What icetide writes for that type reads back as the same type.
    written = connect_schema(ctype, hint)
    assert icetide_type(written, ids_from(1)) == (ctype, hint)


@given(st.sampled_from(PRIMITIVES), st.sampled_from(["1.5", "7", "true", "x"]))
def test_both_spellings_of_a_type_decode_the_same(spelling: str, text: str) -> None:
    canonical = plain_type({"type": spelling})
    assert canonical is not None and plain_type({"type": canonical}) == canonical
    value: Any = {"1.5": 1.5, "7": 7, "true": True, "x": "x"}[text]

    def decoded(kind: str) -> Any:
        try:
            return ("ok", decode_value(value, {"type": kind}))
        except Exception as exc:  # the same refusal under both spellings
            return ("error", type(exc).__name__, str(exc).replace(kind, "?"))

    assert decoded(spelling) == decoded(canonical)


TABLE = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "v", "type": "string"},
        ],
    }
)
unknown = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12).filter(
    lambda n: n not in TYPE_NAMES
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(unknown, st.integers(min_value=0, max_value=2), schemas)
def test_an_unknown_type_name_refuses_its_messages_never_raises(
    tmp_path: Path, name: str, depth: int, sibling: dict[str, Any]
) -> None:
    doc = {"pipeline": "p", "tables": [{"name": "t", "source": "shop.t"}]}
    config = Config.model_validate(doc, context={"config_dir": tmp_path})
    walker = VersionWalker(None, Pipeline(config, {"t": TABLE}))  # type: ignore[arg-type]
    bad: dict[str, Any] = {"type": name}
    for _ in range(depth):  # somewhere inside a new column
        bad = {"type": "struct", "fields": [{**bad, "field": "inner", "optional": True}]}
    row = {
        "type": "struct",
        "fields": [
            {"field": "id", "type": "int64"},
            {**sibling, "field": "extra", "optional": True},
            {**bad, "field": "odd", "optional": True},
        ],
    }
    refused = walker.take_inline("t", "inline:k", row)
    assert refused["inline:k"][0] == UNREADABLE_SCHEMA
    assert repr(name) in refused["inline:k"][1]
