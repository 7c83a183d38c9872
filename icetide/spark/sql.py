"""Quoting for the SQL the stages build: the one helper, from :mod:`icetide.schema.quoting`."""

from __future__ import annotations

from icetide.schema.quoting import literal, qualified, quote

__all__ = ["literal", "qualified", "quote"]
