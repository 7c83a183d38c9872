"""The config's field types: each an annotated type that parses and checks one value.

Durations (``10s``), sizes (``128MiB``), identifiers, paths and passthrough option maps
are read here, once, wherever a section uses them. Relative paths resolve against the
config file's folder (the loader passes it as validation context ``config_dir``). A string
written with ``${VAR}`` arrives as a :class:`~icetide.config.secrets.Secret` and stays one
through validation; every value in an option map whose key names a credential becomes
one. Numbers, durations, choices and local paths are typed values, not secrets, even when
they come from the environment.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from icetide.config.secrets import Secret

SECRET_KEY = re.compile(r"password|secret|token|credential|jaas|key", re.IGNORECASE)
"""A passthrough key matching this names a credential; its value is a :class:`Secret`."""


# -- durations ---------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> timedelta:
    """Parse ``"500ms"``, ``"10s"``, ``"5m"``, ``"1h"``, ``"7d"`` or a number of seconds.

    >>> parse_duration("5m"), parse_duration(30)
    (datetime.timedelta(seconds=300), datetime.timedelta(seconds=30))
    """
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        result = timedelta(seconds=value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip())):
        result = timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2) or "s"])
    else:
        raise ValueError("not a duration; use e.g. 500ms, 10s, 5m, 1h, 7d or a number of seconds")
    if result <= timedelta(0):
        raise ValueError("must be a positive duration")
    return result


def format_duration(value: timedelta) -> str:
    """The shortest exact form of ``value`` in the units :func:`parse_duration` reads.

    >>> format_duration(timedelta(days=7)), format_duration(timedelta(milliseconds=1500))
    ('7d', '1500ms')
    """
    millis = round(value.total_seconds() * 1000)
    for unit in ("d", "h", "m", "s"):
        size = int(_UNITS[unit] * 1000)
        if millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


_SIZE = re.compile(r"(\d+)\s*(b|kb|kib|mb|mib|gb|gib)?", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3}
_SIZE_UNITS["gib"] = 1024**3


def parse_size(value: Any) -> int:
    """Parse ``"128MiB"``, ``"512MB"``, ``"1GiB"`` or a number of bytes.

    >>> parse_size("128MiB"), parse_size(1024)
    (134217728, 1024)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        result = int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()]
    else:
        raise ValueError("not a size; use e.g. 128MiB, 512MB, 1GiB or a number of bytes")
    if result <= 0:
        raise ValueError("must be a positive size")
    return result


# -- field types -------------------------------------------------------------------------


def _keep_secret(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate ``value`` and keep it a :class:`Secret` if it was one (pydantic copies str
    subclasses into plain str)."""
    out = handler(value)
    if not (isinstance(value, Secret) and isinstance(out, str)):
        return out
    kept = Secret(out)
    kept.parts = value.parts
    return kept


def _matching(regex: str, rule: str) -> AfterValidator:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(rule)
        return value

    return AfterValidator(check)


def config_dir_of(info: ValidationInfo) -> Path:
    """The config file's folder, as the loader passes it (the working folder without)."""
    context = info.context if isinstance(info.context, dict) else {}
    return Path(context.get("config_dir") or Path.cwd())


def resolve_path(base: Path, path: str | Path) -> Path:
    """``path`` made absolute against ``base`` (``~`` expanded, ``..`` folded, links kept)."""
    return Path(os.path.normpath(base / Path(path).expanduser()))


def _local_path(value: Path, info: ValidationInfo) -> Path:
    return resolve_path(config_dir_of(info), value)


def _non_empty_path(value: Any) -> Any:
    # Path("") is ".": an empty value is a mistake, not "the config folder".
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty")
    return value


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//|/)")


def _location(value: str, info: ValidationInfo) -> str:
    """A URI (``s3a://…``, ``hdfs://…``, ``file:/…``) as is, a local path made absolute."""
    if not value.strip():
        raise ValueError("must not be empty")
    if _URI.match(value):
        return value
    return str(resolve_path(config_dir_of(info), value))


def _jar_source(value: str, info: ValidationInfo) -> str:
    if value in ("auto", "provided"):
        return value
    if not value.endswith(".jar"):
        raise ValueError("must be auto, provided or a path to a .jar file")
    return _location(value, info)


def _scalar_text(value: Any) -> Any:
    """Spark options are strings: write YAML booleans the way Spark spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None or isinstance(value, dict | list):
        raise ValueError("must be a string, number or boolean")
    return value


def _text_keys(value: Any) -> Any:
    """YAML reads ``1: x`` or ``true: x`` with a non-string key; option keys are strings."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _scalar_text(k): v for k, v in value.items()}
    return value


def at_least_one(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values`` if it holds any; a list that must not be empty is checked with this."""
    # Not Field(min_length=1): pydantic then also reports an empty list whenever one item
    # is invalid, which sends the user looking for a problem that is not there.
    if not values:
        raise ValueError("needs at least one entry")
    return values


def _mark_secret_keys(values: dict[str, str]) -> dict[str, str]:
    # A value from ${VAR} is a Secret already: kept, with the parts it was made of.
    return {
        k: Secret(v) if SECRET_KEY.search(k) and not isinstance(v, Secret) else v
        for k, v in values.items()
    }


Text = Annotated[str, Field(min_length=1), WrapValidator(_keep_secret)]
"""A non-empty string that stays a :class:`Secret` when it came from the environment."""

Identifier = Annotated[
    str,
    _matching(
        r"[A-Za-z_][A-Za-z0-9_]*",
        "must be an identifier: letters, digits and _, not starting with a digit",
    ),
    WrapValidator(_keep_secret),
]
Namespace = Annotated[
    str,
    _matching(
        r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*",
        "must be an identifier or dotted identifiers (a.b)",
    ),
    WrapValidator(_keep_secret),
]
PipelineName = Annotated[
    str,
    _matching(r"[a-z0-9_-]+", "must use only lowercase letters, digits, _ and -"),
    WrapValidator(_keep_secret),
]
SourceName = Annotated[
    str,
    _matching(
        r"[^\s.]+(\.[^\s.]+){0,2}",
        "must be table, db.table (MySQL) or schema.table (PostgreSQL), without spaces",
    ),
    WrapValidator(_keep_secret),
]
Suffix = Annotated[
    str,
    _matching(r"[A-Za-z0-9_]+", "must be letters, digits and _"),
    WrapValidator(_keep_secret),
]
LocalPath = Annotated[Path, BeforeValidator(_non_empty_path), AfterValidator(_local_path)]
"""A local path; relative paths resolve against the config file's folder."""
Location = Annotated[str, AfterValidator(_location), WrapValidator(_keep_secret)]
"""A URI kept as is, or a local path made absolute like :data:`LocalPath`."""
JarSource = Annotated[str, AfterValidator(_jar_source), WrapValidator(_keep_secret)]
OptionValue = Annotated[str, BeforeValidator(_scalar_text), WrapValidator(_keep_secret)]
SecretMap = Annotated[
    dict[str, OptionValue], BeforeValidator(_text_keys), AfterValidator(_mark_secret_keys)
]
"""Passthrough options; values under credential-like keys become :class:`Secret`."""
Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
Size = Annotated[int, BeforeValidator(parse_size)]


def _not_bool(value: Any) -> Any:
    # pydantic reads true as 1; `buckets: true` is a mistake, not one bucket.
    if isinstance(value, bool):
        raise ValueError("must be a whole number")
    return value


Count = Annotated[int, BeforeValidator(_not_bool)]
"""A whole number; a numeric string (from ``${VAR}``) is read as one, a boolean is not."""


def plain_map(values: dict[str, str]) -> dict[str, str]:
    """An option map with its secrets revealed, for the library that takes the values."""
    return {str(k): str(v) for k, v in values.items()}
