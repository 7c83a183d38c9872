"""Row images of a binlog row event, decoded straight into Debezium JSON values.

python-mysql-replication parses a row event's values in pure Python, a dozen calls per
value, and builds ``datetime``/``Decimal`` objects that :mod:`~icetide.capture.mysql.types`
then turns into numbers and text again: about three quarters of the reader's time. A
:class:`RowDecoder` reads the same bytes with one precomputed function per column and
gives, for every value, exactly what ``value_converter(info)(library value)`` gives (the
library's quirks included), so the envelopes do not change.

Only what the decoder knows is taken this way; :func:`row_decoder` returns ``None`` for a
table with another column type (MySQL's binary JSON, the pre-5.6 temporal types), and
:meth:`RowDecoder.images` returns ``None`` for an event it does not read (partial JSON
updates, a row image without every column): the reader then asks the library.

The row format (MySQL's ``Rows_log_event``): per row image a null bitmap over the columns
present, then each present, non-null value in column order; an update row is the before
image followed by the after image.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any

from icetide.capture.mysql import types as t
from icetide.capture.mysql.types import ColumnInfo, Converter, value_converter

Reader = Callable[[bytes, int], tuple[Any, int]]
"""``(event body, offset) -> (Debezium JSON value, offset after the value)``."""

# Row event types the decoder reads: MySQL 5.1–8 V1 and V2 write/update/delete (MariaDB
# writes V1); not PARTIAL_UPDATE_ROWS_EVENT, whose after image may hold JSON diffs.
_WRITE, _UPDATE, _DELETE = (0x17, 0x1E), (0x18, 0x1F), (0x19, 0x20)
ROW_EVENT_TYPES = frozenset(_WRITE + _UPDATE + _DELETE)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH = datetime(1970, 1, 1)
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a packed DECIMAL group of n digits
_FSP_SCALE = tuple(10 ** (6 - fsp) for fsp in range(7))  # fraction units → microseconds
_INTS = {
    (t.TINY, False): "<b",
    (t.TINY, True): "<B",
    (t.SHORT, False): "<h",
    (t.SHORT, True): "<H",
    (t.LONG, False): "<i",
    (t.LONG, True): "<I",
    (t.LONGLONG, False): "<q",
    (t.LONGLONG, True): "<Q",
}


class RowDecoder:
    """Decodes the row images of one table's row events (built once per table map)."""

    def __init__(self, names: Sequence[str], readers: Sequence[Reader]) -> None:
        self._count = len(names)
        self._null_bytes = (self._count + 7) // 8
        self._all_present = (1 << self._count) - 1
        self._readers = tuple(zip(names, readers, strict=True))
        self._fields = tuple((1 << i, name, read) for i, (name, read) in enumerate(self._readers))
        self._full = full_image_reader(names, readers)

    def images(self, event: Any) -> list[dict[str, Any]] | None:
        """Every row image of ``event`` in order (an update gives before, after, before …).

        Consumes the event's row data, so ``event.rows`` is empty afterwards. ``None``
        (nothing consumed) when the event is not one this decoder reads.
        """
        if event.event_type not in ROW_EVENT_TYPES or event.number_of_columns != self._count:
            return None
        bitmaps = [event.columns_present_bitmap]
        if event.event_type in _UPDATE:
            bitmaps.append(event.columns_present_bitmap2)
        if any(int.from_bytes(b, "little") != self._all_present for b in bitmaps):
            return None  # a minimal or noblob image: the library fills in the absent columns
        packet = event.packet
        data = packet.read(event.event_size - packet.read_bytes)
        out: list[dict[str, Any]] = []
        append = out.append
        pos, end, null_bytes = 0, len(data), self._null_bytes
        fields, full, columns = self._fields, self._full, self._all_present
        while pos < end:
            # The bitmap's bits past the last column are not nulls (servers set them).
            nulls = int.from_bytes(data[pos : pos + null_bytes], "little") & columns
            pos += null_bytes
            if not nulls:  # the usual case: every column, read by the table's own function
                image, pos = full(data, pos)
                append(image)
                continue
            image = {}
            for bit, name, read in fields:
                if nulls & bit:
                    image[name] = None
                else:
                    image[name], pos = read(data, pos)
            append(image)
        return out


def full_image_reader(
    names: Sequence[str], readers: Sequence[Reader]
) -> Callable[[bytes, int], tuple[dict[str, Any], int]]:
    """One function reading a row image without nulls: ``(data, pos) -> (image, pos)``.

    Written out for the table, column after column, as the dataclasses module writes
    ``__init__``: no loop, no per-column tuple, and the fixed-size numbers and strings
    read in place instead of through their reader. Only generated names (``v0``, ``r0``
    …) appear in the code; the column names are values bound to it, never code.
    """
    lines = []
    bound: dict[str, Any] = {}
    for i, (name, read) in enumerate(zip(names, readers, strict=True)):
        bound[f"k{i}"] = name
        if isinstance(read, _Fixed):
            bound[f"u{i}"] = read.unpack
            lines.append(f"v{i} = u{i}(data, pos)[0]; pos += {read.size}")
        elif isinstance(read, _Text) and read.prefix == 1:
            bound[f"e{i}"] = read.encoding
            lines.append(f"end = pos + 1 + data[pos]; v{i} = data[pos + 1:end].decode(e{i})")
            lines.append("pos = end")
        elif isinstance(read, _Text):
            bound[f"e{i}"] = read.encoding
            lines.append(f"start = pos + {read.prefix}")
            lines.append('pos = start + int.from_bytes(data[pos:start], "little")')
            lines.append(f"v{i} = data[start:pos].decode(e{i})")
        else:
            bound[f"r{i}"] = read
            lines.append(f"v{i}, pos = r{i}(data, pos)")
    image = ", ".join(f"k{i}: v{i}" for i in range(len(names)))
    body = "\n".join(f"        {line}" for line in lines)
    source = (
        f"def make({', '.join(bound)}):\n"
        "    def read_image(data, pos):\n"
        f"{body}\n"
        f"        return {{{image}}}, pos\n"
        "    return read_image\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<row image reader>", "exec"), namespace)  # noqa: S102
    made: Callable[[bytes, int], tuple[dict[str, Any], int]] = namespace["make"](**bound)
    return made


def row_decoder(columns: Sequence[Any], infos: Sequence[ColumnInfo]) -> RowDecoder | None:
    """A decoder for a table map's columns (python-mysql-replication ``Column`` objects and
    their :class:`ColumnInfo`), or ``None`` when a column type needs the library."""
    readers = []
    for column, info in zip(columns, infos, strict=True):
        read = column_reader(column, info)
        if read is None or column.name is None:
            return None  # without names the library keys values differently
        readers.append(read)
    return RowDecoder([info.name for info in infos], readers)


def column_reader(column: Any, info: ColumnInfo) -> Reader | None:
    """The reader of one column's non-null values, or ``None`` for a type not handled here.

    Values are decoded as python-mysql-replication decodes them, then converted as
    :func:`~icetide.capture.mysql.types.value_converter` converts them; the common types
    skip the intermediate Python object.
    """
    code = int(column.type)
    convert = value_converter(info)
    unsigned = bool(getattr(column, "unsigned", False))
    if (code, unsigned) in _INTS:
        return _struct_reader(_INTS[code, unsigned], None)
    if code == t.INT24:
        return _int24_reader(unsigned)
    if code == t.FLOAT:
        return _struct_reader("<f", convert)
    if code == t.DOUBLE:
        return _struct_reader("<d", None)
    if code == t.NEWDECIMAL:
        return _decimal_reader(int(column.precision), int(column.decimals))
    if code == t.YEAR:
        return _year_reader
    if code == t.DATE:
        return _date_reader
    if code == t.DATETIME2:
        return _datetime2_reader(int(column.fsp), millis=info.fsp <= 3)
    if code == t.TIMESTAMP2:
        return _timestamp2_reader(int(column.fsp), convert)
    if code == t.TIME2:
        return _time2_reader(int(column.fsp))
    if code in (t.VARCHAR, t.STRING):
        prefix = 2 if int(column.max_length) > 255 else 1
        return _string_reader(prefix, column.character_set_name, convert)
    if code == t.BLOB:
        return _string_reader(int(column.length_size), column.character_set_name, convert)
    if code == t.GEOMETRY:
        return _bytes_reader(int(column.length_size), convert)
    if code == t.ENUM:
        return _enum_reader(int(column.size), column.enum_values)
    if code == t.SET:
        return _set_reader(int(column.size), column.set_values, info.set_values)
    if code == t.BIT:
        return _bit_reader(int(column.bytes), int(column.bits), info.bits)
    return None


# --- readers ----------------------------------------------------------------------------------


class _Fixed:
    """A fixed-size number as it is (the integers, DOUBLE): read in place by
    :func:`full_image_reader`, called elsewhere."""

    __slots__ = ("size", "unpack")

    def __init__(self, fmt: str) -> None:
        self.unpack = struct.Struct(fmt).unpack_from
        self.size = struct.calcsize(fmt)

    def __call__(self, data: bytes, pos: int) -> tuple[Any, int]:
        return self.unpack(data, pos)[0], pos + self.size


class _Text:
    """A length-prefixed string in a character set Python knows: read in place by
    :func:`full_image_reader`, called elsewhere."""

    __slots__ = ("encoding", "prefix")

    def __init__(self, prefix: int, encoding: str) -> None:
        self.prefix = prefix
        self.encoding = encoding

    def __call__(self, data: bytes, pos: int) -> tuple[Any, int]:
        start = pos + self.prefix
        end = start + int.from_bytes(data[pos:start], "little")
        return data[start:end].decode(self.encoding), end


def _struct_reader(fmt: str, convert: Converter | None) -> Reader:
    if convert is None:
        return _Fixed(fmt)
    unpack = struct.Struct(fmt).unpack_from
    size = struct.calcsize(fmt)

    def read_converted(data: bytes, pos: int) -> tuple[Any, int]:
        return convert(unpack(data, pos)[0]), pos + size

    return read_converted


def _int24_reader(unsigned: bool) -> Reader:
    signed = not unsigned

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        return int.from_bytes(data[pos : pos + 3], "little", signed=signed), pos + 3

    return read


def _uint(data: bytes, pos: int, size: int) -> int:
    return int.from_bytes(data[pos : pos + size], "little")


def _fraction(data: bytes, pos: int, fsp: int) -> tuple[int, int]:
    """Microseconds of a TIME2/DATETIME2/TIMESTAMP2 (the library's ``__read_fsp``)."""
    if fsp == 0:
        return 0, pos
    size = (fsp + 1) // 2
    value = int.from_bytes(data[pos : pos + size], "big", signed=True)
    if fsp % 2:
        value = int(value / 10)
    return value * _FSP_SCALE[fsp], pos + size


def _decimal_reader(precision: int, scale: int) -> Reader:
    """DECIMAL(p,s): packed groups of 9 digits, sign in the top bit, negatives inverted;
    as ``format(Decimal, "f")`` text (the library's value through ``decimal_text``)."""
    int_groups, int_digits = divmod(precision - scale, 9)
    frac_groups, frac_digits = divmod(scale, 9)
    head, tail = _DIG2BYTES[int_digits], _DIG2BYTES[frac_digits]
    size = head + 4 * (int_groups + frac_groups) + tail
    sign_bit = 0x80 << 8 * (size - 1)
    negative = ((1 << 8 * size) - 1) ^ sign_bit
    # (bits, digits) of every group but the head, least significant first; the number
    # (all digits, no point) is the sum of group * weight, the head's weight being the
    # last ``factor``.
    layout = [(32, 9)] * (frac_groups + int_groups)
    if tail:
        layout.insert(0, (8 * tail, frac_digits))
    groups, factor = [], 1
    for bits, digits in layout:
        groups.append(((1 << bits) - 1, bits, factor))
        factor *= 10**digits
    width = scale + 1  # at least one digit before the point

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        packed = int.from_bytes(data[pos : pos + size], "big")
        if packed & sign_bit:
            packed, sign = packed ^ sign_bit, ""
        else:  # a clear top bit: a negative number, stored with every bit inverted
            packed, sign = packed ^ negative, "-"
        number = 0
        for mask, bits, weight in groups:
            number += (packed & mask) * weight
            packed >>= bits
        number += packed * factor
        if not scale:
            return f"{sign}{number}", pos + size
        digits = str(number).rjust(width, "0")
        return f"{sign}{digits[:-scale]}.{digits[-scale:]}", pos + size

    return read


def _year_reader(data: bytes, pos: int) -> tuple[Any, int]:
    return t.year_value(data[pos] + 1900), pos + 1


def _date_reader(data: bytes, pos: int) -> tuple[Any, int]:
    packed = int.from_bytes(data[pos : pos + 3], "little")
    year, month, day = (packed >> 9) & 0x7FFF, (packed >> 5) & 0xF, packed & 0x1F
    if not packed or not year or not month or not day:
        return None, pos + 3  # a zero date
    return date(year, month, day).toordinal() - _EPOCH_ORDINAL, pos + 3


@lru_cache(maxsize=1 << 16)
def _day_number(year_month_day: int) -> int | None:
    """Days from 1970-01-01 to a DATETIME2's date (17 bits year*13+month, 5 bits day);
    ``None`` when ``datetime`` would refuse the date. Dates repeat a lot: cached."""
    year_month, day = year_month_day >> 5, year_month_day & 0x1F
    try:
        return date(year_month // 13, year_month % 13, day).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None


def _datetime2_reader(fsp: int, *, millis: bool) -> Reader:
    """DATETIME2: 40 bits (sign, year*13+month, day, hour, minute, second) + fraction, as
    epoch micro- or milliseconds of the wall-clock time; ``None`` when not a valid time
    (the library's ``datetime(...)`` raised)."""
    pos_after = 5 + (fsp + 1) // 2
    odd, unit = fsp % 2, _FSP_SCALE[fsp]

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        packed = int.from_bytes(data[pos : pos + 5], "big")
        end = pos + pos_after
        micros = 0
        if fsp:  # _fraction inlined: a call less on the commonest temporal type
            micros = int.from_bytes(data[pos + 5 : end], "big", signed=True)
            micros = (int(micros / 10) if odd else micros) * unit
        pos = end
        days = _day_number((packed >> 17) & 0x3FFFFF)
        hour, minute, second = (packed >> 12) & 0x1F, (packed >> 6) & 0x3F, packed & 0x3F
        if days is None or hour > 23 or minute > 59 or second > 59:
            return None, pos  # a zero or invalid date
        if micros > 999_999:
            raise ValueError(f"microsecond must be in 0..999999, not {micros}")
        total = days * 86_400 + hour * 3600 + minute * 60 + second
        total = total * 1_000_000 + (micros if micros > 0 else 0)
        return (total // 1000 if millis else total), pos

    return read


def _timestamp2_reader(fsp: int, convert: Converter) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        seconds = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        micros, pos = _fraction(data, pos + 4, fsp)
        value = _EPOCH + timedelta(seconds=seconds)
        if micros > 0:
            value = value.replace(microsecond=micros)
        return convert(value), pos

    return read


def _time2_reader(fsp: int) -> Reader:
    """TIME2: 24 bits (sign, unused, hour, minute, second) + fraction, as signed
    microseconds, the way the library reads it. The server stores a negative TIME as
    whole seconds rounded down plus a positive fraction; the library negates the seconds
    and adds the fraction read as signed, so a negative TIME with a fraction is off
    (``-00:00:00.001`` reads as -0.999 s). Kept, so that both paths agree."""

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        packed = int.from_bytes(data[pos : pos + 3], "big", signed=True)
        sign = 1
        if not (packed >> 23) & 1:
            sign, packed = -1, -packed
        micros, pos = _fraction(data, pos + 3, fsp)
        hours, minutes, seconds = (packed >> 12) & 0x3FF, (packed >> 6) & 0x3F, packed & 0x3F
        return sign * ((hours * 3600 + minutes * 60 + seconds) * 1_000_000 + micros), pos

    return read


def _string_reader(prefix: int, charset: str | None, convert: Converter) -> Reader:
    """CHAR/VARCHAR/TEXT/BINARY/BLOB: a length, then the bytes, decoded by the column's
    character set when Python knows it (else left as bytes, like the library)."""
    from pymysqlreplication.row_event import RowsEvent

    encoding = "utf-8" if charset is None else RowsEvent.charset_to_encoding(charset)
    try:
        codecs.lookup(encoding)
    except LookupError:
        return _bytes_reader(prefix, convert)
    if convert is not t.text_or_base64:  # a str passes through that one unchanged
        return _converted(_string_reader(prefix, charset, t.text_or_base64), convert)
    return _Text(prefix, encoding)


def _converted(read: Reader, convert: Converter) -> Reader:
    def read_converted(data: bytes, pos: int) -> tuple[Any, int]:
        value, pos = read(data, pos)
        return convert(value), pos

    return read_converted


def _bytes_reader(prefix: int, convert: Converter) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        start = pos + prefix
        end = start + int.from_bytes(data[pos:start], "little")
        return convert(data[start:end]), end

    return read


def _enum_reader(size: int, values: Sequence[str] | None) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        index = _uint(data, pos, size)
        return (values[index] if values else None), pos + size

    return read


def _set_reader(size: int, values: Sequence[str] | None, allowed: Sequence[str]) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        mask = _uint(data, pos, size)
        members = {v for i, v in enumerate(values or ()) if mask & (1 << i)}
        # The library reports an empty set as None ("empty set"), which capture writes as "".
        return (t.set_text(members, allowed) if members else ""), pos + size

    return read


def _bit_reader(size: int, bits: int, width: int) -> Reader:
    mask = (1 << bits) - 1

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        number = int.from_bytes(data[pos : pos + size], "big") & mask
        return t.bits_number(number, width), pos + size

    return read
