"""Which type changes are widenings a table can take in place: one table, one function.

Iceberg's rules (table spec, "Schema Evolution", valid type promotions,
https://iceberg.apache.org/spec/#schema-evolution):

==============  ========================  ===========================
from            format v1, v2             format v3 adds
==============  ========================  ===========================
int             long                      —
float           double                    —
decimal(P,S)    decimal(P',S), P' > P     —
date            —                         timestamp (never timestamptz)
==============  ========================  ===========================

icetide's tables are written with format version 2 (:data:`FORMAT_VERSION`, as in their
``TBLPROPERTIES``), so ``date → timestamp`` is refused unless a caller says the table is
version 3. Iceberg's ``int → double`` is *not* a promotion, and neither is ours.

icetide adds two for ``enum``, which is stored as its text: an enum may gain symbols (the
new one holds every old symbol, in any order), and an enum may become ``string``.

Nested types keep their shape and ids: a struct promotes when the new one has the same
field ids and each field promotes (names may differ: a rename is by id); a list when its
element id is the same and its element promotes; a map when its key and value ids are the
same and both promote. A nested field, list element or map value may become optional,
never required.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from icetide.errors import SchemaChangeError
from icetide.schema.types import (
    DecimalType,
    EnumType,
    IcetideType,
    ListType,
    MapType,
    StructType,
)

FORMAT_VERSION = 2
"""The Iceberg format version of the tables icetide writes."""

WIDENINGS: tuple[tuple[str, str, int], ...] = (
    ("int", "long", 1),
    ("float", "double", 1),
    ("date", "timestamp", 3),
    ("enum", "string", 1),
)
"""``(from, to, first Iceberg format version that allows it)`` between different types;
the changes within ``decimal``, ``enum`` and the nested types follow their own rules."""

_HINT = (
    "a change the type cannot widen to needs a new column: add it under a new name, "
    "fill it, then drop the old one"
)


def promote(
    source: IcetideType, target: IcetideType, *, format_version: int = FORMAT_VERSION
) -> IcetideType:
    """``target`` if a column of type ``source`` may change to it in place; otherwise a
    :class:`~icetide.errors.SchemaChangeError` naming both types and what ``source`` may
    become.

    >>> from icetide.schema.types import IntType, LongType, StringType
    >>> promote(IntType(), LongType())
    LongType()
    >>> promote(LongType(), IntType())
    Traceback (most recent call last):
    ...
    icetide.errors.SchemaChangeError: cannot promote long to int: long may become only long
    """
    reason = _refusal(source, target, format_version)
    if reason is not None:
        raise SchemaChangeError(
            f"cannot promote {source} to {target}: {reason}",
            from_type=str(source),
            to_type=str(target),
            hint=_HINT,
        )
    return target


def allowed_targets(source: IcetideType, format_version: int = FORMAT_VERSION) -> list[str]:
    """What ``source`` may become, in words, for messages.

    >>> from icetide.schema.types import IntType
    >>> allowed_targets(IntType())
    ['int', 'long']
    """
    kind = _KIND_TARGETS.get(source.name)
    own = kind(source) if kind else str(source)
    return [own] + [t for s, t, since in WIDENINGS if s == source.name and format_version >= since]


def _refusal(source: IcetideType, target: IcetideType, version: int) -> str | None:
    """Why ``source`` cannot become ``target`` (``None`` when it can)."""
    if source == target:
        return None
    if source.name == target.name and source.name in _SAME_KIND:
        return _SAME_KIND[source.name](source, target, version)
    for name, to, since in WIDENINGS:
        if (name, to) == (source.name, target.name):
            if version >= since:
                return None
            return (
                f"{name} to {to} needs Iceberg format version {since} and the table is "
                f"version {version}; {_may_become(source, version)}"
            )
    return _may_become(source, version)


def _may_become(source: IcetideType, version: int) -> str:
    targets = allowed_targets(source, version)
    if len(targets) == 1:
        return f"{source} may become only {targets[0]}"
    return f"{source} may become {', '.join(targets[:-1])} or {targets[-1]}"


# -- rules within one kind ------------------------------------------------------------------


def _decimal(source: IcetideType, target: IcetideType, version: int) -> str | None:
    assert isinstance(source, DecimalType) and isinstance(target, DecimalType)
    if target.scale == source.scale and target.precision >= source.precision:
        return None
    return f"the precision may only grow and the scale stays; {_may_become(source, version)}"


def _enum(source: IcetideType, target: IcetideType, version: int) -> str | None:
    assert isinstance(source, EnumType) and isinstance(target, EnumType)
    lost = [s for s in source.symbols if s not in target.symbols]
    if not lost:
        return None
    return f"symbols {', '.join(lost)} would be lost; {_may_become(source, version)}"


def _struct(source: IcetideType, target: IcetideType, version: int) -> str | None:
    assert isinstance(source, StructType) and isinstance(target, StructType)
    old = {f.id: f for f in source.fields}
    new = {f.id: f for f in target.fields}
    if old.keys() != new.keys():
        gone = ", ".join(str(i) for i in sorted(old.keys() - new.keys())) or "none"
        added = ", ".join(str(i) for i in sorted(new.keys() - old.keys())) or "none"
        return (
            f"the fields differ by id (only before: {gone}; only after: {added}); adding or "
            "dropping a field is a schema change, not a promotion"
        )
    for fid, after in new.items():
        before = old[fid]
        reason = _child(
            f"field {after.name!r} (id {fid})",
            before.type,
            after.type,
            before.nullable,
            after.nullable,
            version,
        )
        if reason:
            return reason
    return None


def _list(source: IcetideType, target: IcetideType, version: int) -> str | None:
    assert isinstance(source, ListType) and isinstance(target, ListType)
    if source.element_id != target.element_id:
        return _id_changed("element", source.element_id, target.element_id)
    return _child(
        f"element (id {target.element_id})",
        source.element,
        target.element,
        source.element_nullable,
        target.element_nullable,
        version,
    )


def _map(source: IcetideType, target: IcetideType, version: int) -> str | None:
    assert isinstance(source, MapType) and isinstance(target, MapType)
    if source.key_id != target.key_id:
        return _id_changed("key", source.key_id, target.key_id)
    if source.value_id != target.value_id:
        return _id_changed("value", source.value_id, target.value_id)
    return _child(
        f"key (id {target.key_id})", source.key, target.key, False, False, version
    ) or _child(
        f"value (id {target.value_id})",
        source.value,
        target.value,
        source.value_nullable,
        target.value_nullable,
        version,
    )


def _child(
    label: str,
    before: IcetideType,
    after: IcetideType,
    was_nullable: bool,
    nullable: bool,
    version: int,
) -> str | None:
    if was_nullable and not nullable:
        return f"{label}: may become optional, never required"
    reason = _refusal(before, after, version)
    return f"{label}: {reason}" if reason else None


def _id_changed(what: str, before: int, after: int) -> str:
    return f"the {what} id changes from {before} to {after}; a field keeps its id for life"


_SAME_KIND: Mapping[str, Callable[[IcetideType, IcetideType, int], str | None]] = MappingProxyType(
    {"decimal": _decimal, "enum": _enum, "struct": _struct, "list": _list, "map": _map}
)
"""The rule for a change within one parametric or nested kind."""


def _decimal_targets(source: IcetideType) -> str:
    assert isinstance(source, DecimalType)
    return f"decimal(P,{source.scale}) with {source.precision} <= P <= 38"


def _list_targets(source: IcetideType) -> str:
    assert isinstance(source, ListType)
    return f"a list with element id {source.element_id} whose element promotes"


def _map_targets(source: IcetideType) -> str:
    assert isinstance(source, MapType)
    return (
        f"a map with key id {source.key_id} and value id {source.value_id} "
        "whose key and value promote"
    )


_KIND_TARGETS: Mapping[str, Callable[[IcetideType], str]] = MappingProxyType(
    {
        "decimal": _decimal_targets,
        "enum": lambda source: f"an enum holding every symbol of {source}",
        "struct": lambda source: "a struct with the same field ids whose fields promote",
        "list": _list_targets,
        "map": _map_targets,
    }
)
"""How to say what a parametric or nested type may become within its kind."""
