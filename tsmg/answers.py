"""The one answer rule every game follows, and the text helpers that implement it.

**An answer is a move when it names that move** — its canonical text (the text ``legal_actions``
lists), in any case, with surrounding whitespace and punctuation (quotes, markdown emphasis,
brackets, a final full stop) set aside and inner runs of spaces read as one — **or names an
alias the game announces in the prompt** (:meth:`tsmg.core.Game.answer_aliases`) **or spells it
in the game's own notation** where that spelling names no other legal move
(:meth:`tsmg.core.Game.answer_spellings`: chess's ``Bxf7`` for ``Bxf7+``, UCI ``e2e4``). Anything else
is an :class:`~tsmg.core.Invalid` answer with a reason: an unannounced abbreviation (``d`` for
``down``), a synonym (``right`` for ``east``), a prefix (``dow``), two moves (``left or right``),
a sentence around a move. When several moves fit once case is set aside the answer is ambiguous
and invalid, unless it matches one of them exactly.

An evaluation harness that reads a vague answer as a move inflates the scores of models that
cannot play; :func:`tsmg.checker.check_game` holds every game to this rule with a corpus of
hostile answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from tsmg.core import Invalid

MoveT = TypeVar("MoveT")

#: Longer answers are rejected outright: the policy extracts the action before the game parses it.
MAX_ANSWER_CHARS = 200
#: What may surround a move's name: whitespace, quotes, punctuation, markdown emphasis, brackets.
SURROUNDINGS = " \t\r\n\f\v.,;:!?\"'`*_()[]{}<>"


def normalize_answer(text: str) -> str | None:
    """Lower-case ``text``, trim surrounding whitespace and punctuation, collapse inner spaces.

    Returns:
        The normalized text, or None when ``text`` is longer than :data:`MAX_ANSWER_CHARS`.

    Example:
        >>> normalize_answer("  **Top  Left**. ")
        'top left'
        >>> normalize_answer("'reveal 1 2'")
        'reveal 1 2'
    """
    if len(text) > MAX_ANSWER_CHARS:
        return None
    return " ".join(text.strip(SURROUNDINGS).lower().split())


def quote(text: str, limit: int = 40) -> str:
    """``repr`` of ``text`` shortened to about ``limit`` characters, for Invalid reasons.

    Example:
        >>> quote("x" * 50, limit=10)
        "'xxxxxxx...'"
    """
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


class MoveNames(Mapping[str, MoveT]):
    """The names a player may answer with, each naming one move: canonical texts plus announced aliases.

    Lookup follows the answer rule: an exact match first, then a match with case and surrounding
    punctuation set aside; a name that two moves share once case is ignored is ambiguous.

    Example:
        >>> names = MoveNames({"left": 0, "down": 1, "right": 2, "up": 3})
        >>> names.read("**Down.**"), names.read("d").reason
        (1, "expected one of left, down, right, up; got 'd'")
        >>> MoveNames({"Bxc3": 0, "bxc3": 1}).read("BXC3").reason
        "'BXC3' is ambiguous: it could be Bxc3 or bxc3; answer exactly one of them"
    """

    def __init__(self, names: Mapping[str, MoveT], aliases: Mapping[str, str] | None = None) -> None:
        """Index ``names`` (canonical text → move) and ``aliases`` (alias → canonical text)."""
        self._exact: dict[str, MoveT] = dict(names)
        self.canonical: tuple[str, ...] = tuple(names)
        folded: dict[str, list[str]] = {}
        for name in names:
            folded.setdefault(normalize_answer(name) or name.lower(), []).append(name)
        for alias, target in (aliases or {}).items():
            if target not in self._exact:
                raise ValueError(f"alias {alias!r} names {target!r}, which is not one of {list(names)}")
            folded.setdefault(normalize_answer(alias) or alias.lower(), []).append(target)
        self._folded = {key: list(dict.fromkeys(targets)) for key, targets in folded.items()}

    @classmethod
    def indexed(cls, names: Sequence[str]) -> MoveNames[int]:
        """Names standing for their positions: ``MoveNames.indexed(("left", "down"))`` reads ``down`` as 1."""
        return MoveNames({name: index for index, name in enumerate(names)})

    def __getitem__(self, name: str) -> MoveT:
        """The move a canonical name stands for."""
        return self._exact[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        """Canonical names, in order."""
        return iter(self._exact)

    def __len__(self) -> int:
        """Number of moves."""
        return len(self._exact)

    def read(self, text: str, expected: str | None = None) -> MoveT | Invalid:
        """The move ``text`` names, or :class:`Invalid` saying what was expected (``expected`` overrides it)."""
        if text in self._exact:
            return self._exact[text]
        key = normalize_answer(text)
        targets = self._folded.get(key, []) if key is not None else []
        if len(targets) == 1:
            return self._exact[targets[0]]
        if targets:
            choices = " or ".join(targets)
            return Invalid(f"{quote(text)} is ambiguous: it could be {choices}; answer exactly one of them")
        return Invalid(f"{expected or 'expected one of ' + ', '.join(self.canonical)}; got {quote(text)}")


def names_move(answer: str, move_text: str, aliases: Iterable[str] = ()) -> bool:
    """Whether ``answer`` names the move whose canonical text is ``move_text`` (or one of its ``aliases``).

    Example:
        >>> names_move(" 'Left'. ", "left"), names_move("l", "left"), names_move("l", "left", ["l"])
        (True, False, True)
    """
    key = normalize_answer(answer)
    if key is None:
        return False
    return key == normalize_answer(move_text) or any(key == normalize_answer(alias) for alias in aliases)
