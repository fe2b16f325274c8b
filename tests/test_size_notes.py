"""Size notes: a module past 600 lines says at its top why, and what the note claims is true.

The rule (STYLE, issue 39): a module stays under 600 lines or says at its top why it does not, in
a note ``(Past 600 lines: ...)``. A note outlives the code it describes, so its measurable claims
are checked: a module under the limit carries none, a count ("about 650 lines") is within a tenth
of the file's length, and a share of docstrings ("a third of them docstrings") is within five
points of what the module's docstrings fill.

Mutations that fail these tests: deleting a note from a module past 600 lines (tsmg/lap.py's), writing
"about 650 lines" back into view.js (743 lines), writing "half docstrings" back into tsmg/core.py
(a third is docstrings).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 600
NOTE = "Past 600 lines"
#: Where the rule holds: the packages, the scripts and benches users run, the viewer's page code.
CHECKED = [
    *(
        path
        for folder in ("tsmg", "backends", "games", "training", "scripts", "bench")
        for path in (REPO / folder).rglob("*.py")
    ),
    *(REPO / "tsmg" / "apps" / "view" / "static").glob("*.js"),
]
SHARES = {"half": 1 / 2, "a third": 1 / 3, "a quarter": 1 / 4}


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _top(path: Path) -> str:
    """The module's opening text, where its note belongs (its docstring or first comments), one line."""
    return " ".join(line.strip().lstrip("/# ") for line in _lines(path)[:60])


def docstring_share(source: str) -> float:
    """The share of a Python module's lines that are docstrings (the module's, its classes' and functions')."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return len(lines) / len(source.splitlines())


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_a_note_on_size_stands_exactly_where_the_module_is_past_600_lines() -> None:
    problems = []
    for path in sorted(CHECKED):
        length, noted = len(_lines(path)), NOTE in _top(path)
        if length > LIMIT and not noted:
            problems.append(f"{_name(path)} has {length} lines: say at its top why, '({NOTE}: ...)', or split it")
        if length <= LIMIT and noted:
            problems.append(f"{_name(path)} has {length} lines now: drop its '{NOTE}' note")
    assert not problems, "\n".join(problems)


def test_what_a_size_note_claims_is_what_the_module_measures() -> None:
    problems = []
    for path in sorted(path for path in CHECKED if NOTE in _top(path)):
        top, length = _top(path), len(_lines(path))
        for count in re.findall(r"about ([\d,]+) lines", top):
            claimed = int(count.replace(",", ""))
            if abs(claimed - length) > length / 10:
                problems.append(f"{_name(path)} says about {claimed} lines; it has {length}")
        for words in re.findall(rf"{NOTE}, ({'|'.join(SHARES)}) (?:of them )?docstrings", top):
            share = docstring_share(path.read_text(encoding="utf-8"))
            if abs(share - SHARES[words]) > 0.05:
                problems.append(f"{_name(path)} says {words} of it is docstrings; {share:.0%} is")
    assert not problems, "\n".join(problems)


def test_the_checks_read_notes_and_shares_as_written() -> None:
    # The measures themselves: a module of one docstring line in four; a count and a share found in a note.
    assert docstring_share('"""Doc."""\nA = 1\nB = 2\nC = 3\n') == 0.25
    core = REPO / "tsmg" / "core.py"
    assert re.search(rf"{NOTE}, (a third) of them docstrings", _top(core))
