"""The kinds of schema change, declared once.

Two layers name them: the config refuses an ``evolution.modes`` key that is not one
(:mod:`icetide.config`), and evolution classifies every change as one
(:mod:`icetide.evolution.classify`, whose ``KINDS`` table gives each kind its
classification, phase-3 fill and manual path). The config sits below evolution, so the
one declaration lives here, at the bottom, and both import it.
"""

from __future__ import annotations

from typing import Literal, get_args

ChangeKind = Literal[
    "add_column",
    "add_nested",
    "add_with_default",
    "add_required",
    "widen",
    "source_only",
    "optional",
    "required",
    "rename",
    "drop",
    "ambiguous",
    "narrow",
    "type_change",
    "key_change",
    "sensitive",
    "metadata",
]

CHANGE_KINDS: tuple[ChangeKind, ...] = get_args(ChangeKind)
"""Every kind, in the order above: the keys an ``evolution.modes`` mapping may use."""
