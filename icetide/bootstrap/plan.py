"""A table's integer key range split into chunks, each one resumable commit.

The plan (key range, row count, rows per chunk, partitions per chunk) is worked out once
per bootstrap and kept in its state file (:mod:`icetide.bootstrap.state`): a resume
must split the keys exactly as the first run did, or chunks would overlap or leave gaps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NUMERIC_KEYS = {"int", "long"}
"""Key types a table is chunked by; any other key is read as one chunk."""


@dataclass(frozen=True)
class Chunk:
    """One resumable piece of a table: a primary-key range read as ``parts`` partitions."""

    index: int
    predicates: tuple[str, ...]


def plan_chunks(
    key: str, low: int | None, high: int | None, rows: int, chunk_rows: int, parts: int
) -> list[Chunk]:
    """Split ``[low, high]`` of an integer key into chunks of about ``chunk_rows`` rows.

    The first and last chunks are open-ended so keys written outside the range while the
    bootstrap runs are read too (the log would bring them anyway).

    >>> [c.predicates for c in plan_chunks("`id`", 1, 100, 100, 50, 1)]
    [('`id` < 51',), ('`id` >= 51',)]
    """
    if low is None or high is None or rows == 0:
        return [Chunk(0, ("TRUE",))]
    count = max(1, math.ceil(rows / chunk_rows))
    span = high - low + 1
    bounds = [low + (span * i) // (count * parts) for i in range(count * parts + 1)]
    chunks: list[Chunk] = []
    for i in range(count):
        predicates = []
        for j in range(parts):
            n = i * parts + j
            lo, hi = bounds[n], bounds[n + 1]
            first, last = n == 0, n == count * parts - 1
            if first and last:
                predicates.append("TRUE")
            elif first:
                predicates.append(f"{key} < {hi}")
            elif last:
                predicates.append(f"{key} >= {lo}")
            else:
                predicates.append(f"{key} >= {lo} AND {key} < {hi}")
        chunks.append(Chunk(i, tuple(predicates)))
    return chunks
