"""Per-table evolution policy as data, and the one function that decides a change.

A :class:`Policy` is the dlt library's schema contract (dlthub) for one table: a mode
per change kind (``evolve | freeze | discard_row | discard_value``, default ``evolve``),
what a drop does (``soft``/``hard``), which new column names are sensitive, whether
allowed changes apply with no human (``auto_apply``), and the held changes someone
approved. It is read from the table's ``evolution:`` block
(:class:`icetide.config.tables.EvolutionConfig`).

:func:`decide` is the only place a change meets a policy:

==============  =========================================================================
mode            decision
==============  =========================================================================
evolve          ``apply`` an automatic, rename or drop change; a held or ambiguous one is
                ``hold`` until approved (then ``apply``)
freeze          ``reject``: the schema stays; events that need the change go to the
                dead-letter table
discard_row     ``discard_row``: the schema stays; rows carrying the change are dropped
discard_value   ``discard_value``: the schema stays; the values it brings are dropped
==============  =========================================================================

``evolution.enabled: false`` overrides every mode: each change is ``reject`` with the
reason :data:`EVOLUTION_DISABLED`, whether it was detected from DDL or carried by the
messages (a registry version, an inline Debezium schema), so both paths refuse it alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from icetide.config.tables import EvolutionConfig, EvolutionMode
from icetide.errors import SchemaChangeError
from icetide.evolution.classify import SchemaChange
from icetide.schema.change_kinds import ChangeKind
from icetide.schema.contract.base import DropMode

Mode = EvolutionMode
Action = Literal["apply", "hold", "reject", "discard_row", "discard_value"]
Resolution = Literal["rename", "drop_add"]
EVOLUTION_DISABLED = "schema_evolution_disabled"
"""Dead-letter / refusal reason: ``evolution.enabled`` is false and a change would alter
the table."""
RESOLUTIONS: tuple[Resolution, ...] = ("rename", "drop_add")


@dataclass(frozen=True)
class Policy:
    """One table's evolution policy (see module doc)."""

    mode: Mode = "evolve"
    modes: Mapping[str, Mode] = field(default_factory=lambda: MappingProxyType({}))
    drop: DropMode = "soft"
    sensitive: tuple[str, ...] = ()
    auto_apply: bool = True
    approved: frozenset[str] = frozenset()
    """Approved change ids; an ambiguous one as ``id=rename`` or ``id=drop_add``."""
    enabled: bool = True
    """``evolution.enabled``: false refuses every change (see module doc)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "modes", MappingProxyType(dict(self.modes)))
        object.__setattr__(self, "approved", frozenset(self.approved))

    def __hash__(self) -> int:
        return hash(
            (self.mode, tuple(sorted(self.modes.items())), self.drop, self.sensitive, self.enabled)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and self.to_json() == other.to_json()

    def mode_of(self, kind: ChangeKind) -> Mode:
        """The contract mode for changes of ``kind``."""
        return self.modes.get(kind, self.mode)

    def approving(self, ids: Iterable[str]) -> Policy:
        """This policy with ``ids`` approved too."""
        return replace(self, approved=self.approved | frozenset(ids))

    @classmethod
    def from_config(cls, config: EvolutionConfig | None) -> Policy:
        """The policy a table's ``evolution:`` block describes (defaults when absent)."""
        if config is None:
            return cls()
        return cls(
            mode=config.mode,
            modes=dict(config.modes),
            drop=config.drop,
            sensitive=tuple(str(p) for p in config.sensitive),
            auto_apply=config.auto_apply,
            enabled=config.enabled,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form for plans."""
        return {
            "mode": self.mode,
            "modes": dict(sorted(self.modes.items())),
            "drop": self.drop,
            "sensitive": list(self.sensitive),
            "auto_apply": self.auto_apply,
            "approved": sorted(self.approved),
            **({} if self.enabled else {"enabled": False}),
        }


@dataclass(frozen=True)
class Decision:
    """What to do with one change: ``action`` and why. ``resolution`` says how an
    approved ambiguous change applies (``rename`` keeps the id, ``drop_add`` does not)."""

    change: str
    action: Action
    mode: Mode
    reason: str
    approved: bool = False
    resolution: Resolution | None = None

    @property
    def applies(self) -> bool:
        """Whether the change goes into the new schema version."""
        return self.action == "apply"

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form for plans."""
        data: dict[str, Any] = {
            "change": self.change,
            "action": self.action,
            "mode": self.mode,
            "reason": self.reason,
        }
        if self.approved:
            data["approved"] = True
        if self.resolution:
            data["resolution"] = self.resolution
        return data


_NOT_APPLIED: dict[str, tuple[Action, str]] = {
    "freeze": (
        "reject",
        "the policy freezes {kind}: the schema stays, events that need the change go to "
        "the dead-letter table",
    ),
    "discard_row": (
        "discard_row",
        "the policy discards rows for {kind}: the schema stays, rows carrying the change "
        "are dropped",
    ),
    "discard_value": (
        "discard_value",
        "the policy discards values for {kind}: the schema stays, the values the change "
        "brings are dropped",
    ),
}


def decide(change: SchemaChange, policy: Policy) -> Decision:
    """The decision for ``change`` under ``policy`` (see module doc).

    >>> from icetide.evolution.classify import SchemaChange
    >>> held = SchemaChange("narrow:n", "narrow", "held", ("n",), 2, "long → int")
    >>> decide(held, Policy()).action, decide(held, Policy().approving(["narrow:n"])).action
    ('hold', 'apply')
    >>> decide(held, Policy(modes={"narrow": "freeze"})).action
    'reject'
    >>> decide(held, Policy(enabled=False)).reason.split(":")[0]
    'schema_evolution_disabled'
    """
    mode = policy.mode_of(change.kind)
    if not policy.enabled:
        return Decision(
            change.id,
            "reject",
            mode,
            f"{EVOLUTION_DISABLED}: evolution.enabled is false for the table: the schema "
            "stays; events that need the change go to the dead-letter table",
        )
    if mode != "evolve":
        action, text = _NOT_APPLIED[mode]
        return Decision(change.id, action, mode, text.format(kind=change.kind))
    if change.kind == "ambiguous":
        resolution = _resolution(change.id, policy.approved)
        if resolution is None:
            return Decision(change.id, "hold", mode, f"ambiguous: {change.reason}")
        return Decision(
            change.id,
            "apply",
            mode,
            f"approved as {resolution.replace('_', ' + ')}",
            approved=True,
            resolution=resolution,
        )
    if change.held:
        if change.id in policy.approved:
            return Decision(change.id, "apply", mode, "approved", approved=True)
        return Decision(change.id, "hold", mode, f"held: {change.reason}")
    return Decision(change.id, "apply", mode, f"{change.classification}: {change.reason}")


def _resolution(change_id: str, approved: frozenset[str]) -> Resolution | None:
    for entry in approved:
        name, _, how = entry.partition("=")
        if name != change_id:
            continue
        if how not in RESOLUTIONS:
            raise SchemaChangeError(
                f"--approve {entry!r}: an ambiguous change is approved as "
                f"{change_id}=rename or {change_id}=drop_add",
                hint="rename keeps the column's id and values; drop_add starts a new column",
            )
        return "rename" if how == "rename" else "drop_add"
    return None
