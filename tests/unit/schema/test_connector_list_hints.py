"""A list column's hint is its elements' (a PostgreSQL array's): the connector settings
complete or override it by the list's innermost type, and icetide's capture, which sends
every time and timestamp array's elements in microseconds, reads millisecond hints of
lists as microseconds (a scalar column keeps its millisecond hint)."""

from __future__ import annotations

from icetide.schema.connector import CAPTURE, DEBEZIUM_DEFAULTS, ConnectorSettings, read_hints
from icetide.schema.file import schema_from_dict


def _list(element_id: int, element: object) -> dict[str, object]:
    return {"list": {"element_id": element_id, "element": element}}


SCHEMA = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "decs", "type": _list(10, "decimal(12,4)")},
            {"id": 3, "name": "stamps", "type": _list(11, "timestamp")},
            {"id": 4, "name": "times", "type": _list(12, _list(13, "time"))},
            {"id": 5, "name": "stamp", "type": "timestamp"},
            {"id": 6, "name": "free", "type": _list(14, "string")},
            {"id": 7, "name": "dates", "type": _list(15, "date")},
        ],
        "sink": {
            "logical": {
                "stamps": "io.debezium.time.Timestamp",
                "times": "io.debezium.time.Time",
                "stamp": "io.debezium.time.Timestamp",
                "free": "io.debezium.data.VariableScaleDecimal",
                "dates": "io.debezium.time.Date",
            }
        },
    }
)


def test_debezium_reads_lists_by_their_elements_hint() -> None:
    hints = read_hints(SCHEMA, DEBEZIUM_DEFAULTS)
    assert hints[2] == "org.apache.kafka.connect.data.Decimal"  # precise: base64 elements
    assert (hints[3], hints[5]) == ("io.debezium.time.Timestamp",) * 2  # milliseconds
    assert hints[4] == "io.debezium.time.Time"
    assert hints[6] == "io.debezium.data.VariableScaleDecimal"
    connect = read_hints(SCHEMA, ConnectorSettings("string", "connect"))
    assert (connect[2], connect[6]) == ("string", "string")
    assert connect[4] == "org.apache.kafka.connect.data.Time"
    assert connect[7] == "org.apache.kafka.connect.data.Date"
    micros = read_hints(SCHEMA, ConnectorSettings("precise", "adaptive_time_microseconds"))
    assert micros[4] == "io.debezium.time.MicroTime"


def test_capture_reads_time_and_timestamp_lists_in_microseconds() -> None:
    hints = read_hints(SCHEMA, CAPTURE)
    assert hints[3] == "io.debezium.time.MicroTimestamp"
    assert hints[4] == "io.debezium.time.MicroTime"
    assert hints[5] == "io.debezium.time.Timestamp"  # a scalar column: as its precision
    assert (hints[2], hints[6], hints[7]) == ("string", "string", "io.debezium.time.Date")
