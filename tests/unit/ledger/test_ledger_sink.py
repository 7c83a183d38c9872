"""The ledger projection with a sink config (no JVM): names mapped, types overridden and
values converted for a whole Arrow batch, a value that cannot be converted dead-lettered
alone."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from icetide.errors import ConfigError
from icetide.events.model import UNAVAILABLE
from icetide.events.sink_values import CONVERSION_FAILED, convert_values
from icetide.ledger.decode import DEAD, ERROR, REASON, ROW, STATUS, project_batches
from icetide.schema.file import schema_from_dict
from icetide.schema.sink_functions import Conversion, conversion_problems
from icetide.schema.types import Column, IntType, LongType, StringType, StructType, TimeType
from tests.ledger_lines import line

USERS = schema_from_dict(
    {
        "table": "users",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int"},
            {"id": 2, "name": "email", "type": "string"},
            {"id": 3, "name": "created_ms", "type": "long"},
            {"id": 4, "name": "prefs", "type": "string"},
            {"id": 5, "name": "card", "type": "string"},
            {"id": 6, "name": "nick", "type": "string"},
        ],
        "sink": {
            "columns": {
                "id": {"name": "user_id", "type": "long"},
                "email": {"name": "email_hash", "convert": "sha256"},
                "created_ms": {"name": "created_at", "convert": "epoch_millis_to_timestamp"},
                "prefs": {
                    "convert": {
                        "function": "json_text_to_struct",
                        "type": {
                            "struct": [
                                {"id": 7, "name": "theme", "type": "string"},
                                {"id": 8, "name": "size", "type": "int"},
                            ]
                        },
                    }
                },
                "card": {"convert": {"function": "mask", "keep": 4}},
                "nick": {"convert": "trim"},
            }
        },
    }
)


def message(pos: int, op: str = "c", before: Any = None, **after: Any) -> bytes:
    row = {
        "id": 1,
        "email": "a@example.com",
        "created_ms": 1_700_000_000_123,
        "prefs": '{"theme": "dark", "size": 3, "extra": true}',
        "card": "4111222233334444",
        "nick": "  ann ",
        **after,
    }
    return line(
        {
            "before": before,
            "after": None if op == "d" else row,
            "source": {
                "connector": "mysql",
                "name": "srv",
                "db": "app",
                "table": "users",
                "file": "b.000001",
                "pos": pos,
                "row": 0,
                "ts_ms": 1,
            },
            "op": op,
            "ts_ms": 2,
        }
    )


def project(raws: list[bytes]) -> list[dict[str, Any]]:
    batch = pa.RecordBatch.from_pydict(
        {"message_id": [f"m{i}" for i in range(len(raws))], "raw": raws}
    )
    out = list(project_batches(USERS, INGESTED)([batch]))
    assert len(out) == 1
    return out[0].to_pylist()


INGESTED = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)


def test_the_ledger_row_has_the_iceberg_names_types_and_converted_values() -> None:
    (row,) = project([message(4)])
    assert row[STATUS] == ROW
    assert row["user_id"] == 1 and "id" not in row
    after = row["_after"]
    assert list(after) == ["user_id", "email_hash", "created_at", "prefs", "card", "nick"]
    assert after["email_hash"] == hashlib.sha256(b"a@example.com").hexdigest()
    assert after["created_at"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert after["prefs"] == {"theme": "dark", "size": 3}
    assert after["card"] == "************4444"
    assert after["nick"] == "ann"
    assert row["_before"] is None
    assert row["_ingested_at"] == INGESTED  # the batch's, on every row


def test_a_value_the_sink_cannot_convert_dead_letters_only_its_row() -> None:
    rows = project([message(4), message(5, prefs="{not json"), message(6, prefs="[1]")])
    assert [r[STATUS] for r in rows] == [ROW, DEAD, DEAD]
    assert rows[1][REASON] == CONVERSION_FAILED
    assert "column prefs of table users" in rows[1][ERROR]
    assert "json_text_to_struct" in rows[1][ERROR]
    assert "not an object" in rows[2][ERROR]
    assert rows[0]["_after"]["prefs"] == {"theme": "dark", "size": 3}


def test_a_delete_keeps_its_mapped_key_and_converted_before_image() -> None:
    before = {"id": 1, "email": "x@y", "created_ms": 0, "prefs": None, "card": "12", "nick": None}
    (row,) = project([message(7, op="d", before=before)])
    assert row[STATUS] == ROW and row["_op"] == "d" and row["user_id"] == 1
    assert row["_before"]["created_at"] == datetime(1970, 1, 1, tzinfo=UTC)
    assert row["_before"]["card"] == "12"
    assert row["_after"] is None


@pytest.mark.parametrize(
    ("values", "conversion", "expected"),
    [
        (
            ["abcdef", "ab", "", None],
            Conversion("mask", (("keep", 2),)),
            ["****ef", "ab", "", None],
        ),
        (["héllo"], Conversion("mask", (("keep", 0), ("char", "#"))), ["#####"]),
        (["MiXed"], Conversion("lower"), ["mixed"]),
        (["MiXed"], Conversion("upper"), ["MIXED"]),
    ],
)
def test_text_conversions(values: list[Any], conversion: Conversion, expected: list[Any]) -> None:
    assert convert_values(pa.array(values), StringType(), conversion).array.to_pylist() == expected


def test_epoch_seconds_and_an_out_of_range_value() -> None:
    converted = convert_values(
        pa.array([0, 2**62, None], pa.int64()), LongType(), Conversion("epoch_seconds_to_timestamp")
    )
    assert converted.array.to_pylist() == [datetime(1970, 1, 1, tzinfo=UTC), None, None]
    assert list(converted.failed) == [1] and "out of bounds" in converted.failed[1]


def test_an_override_casts_and_a_plain_column_is_left_alone() -> None:
    ints = pa.array([1, None], pa.int32())
    assert convert_values(ints, IntType(), target=LongType()).array.type == pa.int64()
    assert convert_values(ints, IntType(), target=IntType()).array is ints


def test_an_unchanged_toast_placeholder_is_named_by_its_iceberg_name() -> None:
    (row,) = project([message(8, op="u", email=UNAVAILABLE)])
    assert row[STATUS] == ROW and row["_unavailable"] == ["email_hash"]
    assert row["_after"]["email_hash"] is None


def test_an_empty_batch_and_a_time_nested_in_a_converted_struct() -> None:
    assert project([]) == []
    struct = StructType((Column(1, "at", TimeType()),))  # time is text in Arrow
    conversion = Conversion("json_text_to_struct", (("type", struct),))
    converted = convert_values(
        pa.array(['{"at": "10:00:00"}', '{"at": 5}', None]), StringType(), conversion
    )
    assert converted.array.to_pylist() == [{"at": "10:00:00"}, {"at": "00:00:00.000005"}, None]
    assert converted.failed == {}


def test_sha256_with_a_salt_from_the_environment_is_keyed_and_never_shows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    salted = Conversion("sha256", (("salt_env", "ICETIDE_TEST_SALT"),))
    values = pa.array(["a@example.com", None])
    monkeypatch.setenv("ICETIDE_TEST_SALT", "pepper-7")
    hashed = convert_values(values, StringType(), salted).array.to_pylist()
    assert hashed[0] == hmac.new(b"pepper-7", b"a@example.com", hashlib.sha256).hexdigest()
    assert hashed[0] != hashlib.sha256(b"a@example.com").hexdigest() and hashed[1] is None
    assert "pepper" not in salted.describe()
    monkeypatch.setenv("ICETIDE_TEST_SALT", "other")
    assert convert_values(values, StringType(), salted).array[0].as_py() != hashed[0]
    monkeypatch.delenv("ICETIDE_TEST_SALT")
    with pytest.raises(ConfigError, match="ICETIDE_TEST_SALT is not set") as caught:
        convert_values(values, StringType(), salted)
    assert "pepper" not in str(caught.value) + str(caught.value.hint)
    problems = conversion_problems(
        Conversion("sha256", (("salt_env", "not a name"),)), StringType()
    )
    assert problems == [(("salt_env",), "must name an environment variable, e.g. HASH_SALT")]
