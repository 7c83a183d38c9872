"""The kind → classification → fill table is data (``classify.KINDS``); the tables people
read (the module doc of ``icetide.evolution.classify`` and docs/schema-evolution.md) are
held to it here, so neither can drift from what the code does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from icetide.evolution import classify
from icetide.evolution.classify import BY_DIFF_KIND, HELD, KINDS
from icetide.schema.change_kinds import CHANGE_KINDS
from icetide.schema.diff import Kind as DiffKind

DOCS = Path(__file__).parents[3] / "docs" / "schema-evolution.md"


def simple_table(text: str) -> list[list[list[str]]]:
    """The rows of the first reStructuredText simple table in ``text``: each row a list of
    cells, each cell its lines (a row's continuation lines have an empty first column)."""
    lines = text.splitlines()
    borders = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*=+( +=+)+\s*", line)]
    top, head, bottom = borders[:3]
    spans = [m.span() for m in re.finditer(r"=+", lines[top])]
    rows: list[list[list[str]]] = []
    for line in lines[head + 1 : bottom]:
        cells = [
            line[start : end if k < len(spans) - 1 else None].strip()
            for k, (start, end) in enumerate(spans)
        ]
        if cells[0]:
            rows.append([[c] if c else [] for c in cells])
        else:
            for k, cell in enumerate(cells):
                if cell:
                    rows[-1][k].append(cell)
    return rows


def test_the_module_doc_table_is_kinds() -> None:
    """Each row's kind, classification and fills (``—``: none), in the order of KINDS."""
    assert classify.__doc__ is not None
    rows = simple_table(classify.__doc__)
    documented = [
        (kind, classification, tuple(f for f in fills if f != "—"))
        for [kind], [classification], fills, _why in rows
    ]
    assert documented == [(k, r.classification, r.fills) for k, r in KINDS.items()]


def test_the_user_docs_table_agrees_with_kinds() -> None:
    """docs/schema-evolution.md's table: the same kinds and classifications (``ambiguous
    (held)`` counts as ``ambiguous``), and a fill exactly where KINDS has one."""
    text = DOCS.read_text()
    table = text[text.index("| kind | classification | when | phase 3 fill |") :]
    rows = []
    for line in table.splitlines()[2:]:  # after the header and its rule
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    documented = {kind.strip("`"): (cls.split()[0], fill != "—") for kind, cls, _when, fill in rows}
    assert documented == {k: (r.classification, bool(r.fills)) for k, r in KINDS.items()}


def test_every_change_kind_has_one_row() -> None:
    """KINDS names every declared kind once; a held or ambiguous kind, and only such a kind,
    has a manual path, which names the change's id for ``--approve``."""
    assert sorted(KINDS) == sorted(CHANGE_KINDS)
    for kind, rule in KINDS.items():
        assert (rule.manual is not None) == (rule.classification in HELD), kind
        if rule.manual is not None:
            assert "{id}" in rule.manual, kind


def test_every_diff_kind_has_a_classifier() -> None:
    assert sorted(BY_DIFF_KIND) == sorted(get_args(DiffKind))
