"""How OpenSpiel games read answers written the way the field writes their moves.

The one home for game-specific answer reading of :mod:`tsmg.adapters.openspiel`. A move's
canonical text is OpenSpiel's ``action_to_string``; beyond it (and the answer rule of
:mod:`tsmg.answers`: any case, surrounding punctuation aside) a decision declares the other
**spellings** of each legal move in the game's own notation, and an answer is read as a move only
when it is one of those spellings and no other legal move has it:

* **chess** (python-chess, imported only when a chess decision is read): SAN without its ``+`` or
  ``#`` (``Bxf7`` for ``Bxf7+``); castling with zeros (``0-0``, ``0-0-0``); UCI (``e2e4``,
  ``e7e8q``); long algebraic (``Ng1-f3``, ``Ng1f3``, ``Bc4xf7``); a promotion without its ``=``
  (``e8Q``); any of these after the move number of the move to play, ``8. Bxf7`` for White and
  ``8... Nxe4`` for Black (``1. e5`` for Black, or another move's number, is refused).
* **coordinate games** whose every move is one colour letter shared by all moves and a board
  coordinate (go's and phantom go's ``B a1`` ... ``B PASS``): the bare coordinate, ``a1``, ``A1``, ``pass``. Hex,
  Othello and Havannah already name their moves ``a1``; the answer rule reads ``A1`` as ``a1``.

The spellings are a finite table per decision (:meth:`Notation.spellings`) rather than a lenient
parser, so "accepted" means exactly "it names one legal move": an answer that two legal moves
spell (``Bxc3`` when ``Bxc3+`` and ``bxc3`` are both legal and case is set aside) is ambiguous and
invalid, and a two-move answer (``e4 e5``, ``[e2e4] [d2d4]``) is no spelling of any move. The
game announces the table as :meth:`tsmg.core.Game.answer_spellings`, and
:func:`tsmg.checker.check_game` holds the reading to it: no hostile answer is read as a move it
does not spell. The record keeps the canonical text of the move an answer is taken as.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tsmg.answers import MAX_ANSWER_CHARS, SURROUNDINGS, MoveNames, normalize_answer, quote
from tsmg.core import Invalid

__all__ = ["ChessNotation", "CoordinateNotation", "Notation", "Spellings", "notation_for"]

#: A board coordinate (``a1``, ``J19``) or a pass, the second word of a go move (``B a1``, ``W PASS``).
_COORDINATE = re.compile(r"[a-z]{1,2}[0-9]{1,2}|pass", re.IGNORECASE)
#: A chess move number before a move: ``12.`` (White's) or ``12...`` (Black's).
_NUMBERED = re.compile(r"([0-9]+)\s*(\.\.\.|\.)(?!\.)")


class Spellings:
    """One decision's spellings: spelling → canonical text, read exactly first and then with case set aside.

    Example:
        >>> moves = MoveNames({"Bxc3+": 0, "bxc3": 1, "e4": 2})
        >>> table = Spellings(moves, {"Bxc3+": ["Bxc3", "b2c3"], "e4": ["e2e4"]})
        >>> table.read("Bxc3"), table.read("bxc3"), table.read("E2E4"), table.read("BXC3").reason
        (0, 1, 2, "'BXC3' is ambiguous: it could be bxc3 or Bxc3+; answer exactly one of them")
        >>> table.read("e4 e5").reason
        "expected one of Bxc3+, bxc3, e4; got 'e4 e5'"
    """

    def __init__(self, moves: MoveNames[int], spellings: Mapping[str, Sequence[str]]) -> None:
        """Index ``spellings`` (canonical text → its other spellings) of the legal ``moves``."""
        self.moves = moves
        exact: dict[str, list[str]] = {}
        for canonical, others in spellings.items():
            for spelling in others:
                if spelling != canonical:
                    exact.setdefault(" ".join(spelling.split()), []).append(canonical)
        owners = {spelling: list(dict.fromkeys(targets)) for spelling, targets in exact.items()}
        #: spelling → the canonical text of the one move it names (a spelling two moves share is left out).
        self.exact: dict[str, str] = {spelling: targets[0] for spelling, targets in owners.items() if len(targets) == 1}
        folded: dict[str, list[str]] = {}
        for name in moves.canonical:
            folded.setdefault(normalize_answer(name) or name.lower(), []).append(name)
        for spelling, targets in owners.items():
            folded.setdefault(normalize_answer(spelling) or spelling.lower(), []).extend(targets)
        self._folded = {key: list(dict.fromkeys(targets)) for key, targets in folded.items()}

    def by_move(self) -> dict[str, str]:
        """Every spelling that names one move, with that move's canonical text (what the checker reads)."""
        return dict(self.exact)

    def read(self, text: str, expected: str | None = None) -> int | Invalid:
        """The legal move ``text`` names: exactly first, then with case and surrounding punctuation set aside.

        Order: a canonical text exactly; a spelling exactly (``Bxc3`` is the bishop's ``Bxc3+``, not
        the pawn's ``bxc3``); then a canonical text or a spelling in any case, ambiguous (invalid)
        when it is the name of several moves (``BXC3`` there).
        """
        moves = self.moves
        if text in moves:
            return moves[text]
        if len(text) <= MAX_ANSWER_CHARS:
            spelled = self.exact.get(" ".join(text.strip(SURROUNDINGS).split()))
            if spelled is not None:
                return moves[spelled]
        key = normalize_answer(text)
        targets = self._folded.get(key, []) if key is not None else []
        if len(targets) == 1:
            return moves[targets[0]]
        if targets:
            choices = " or ".join(targets)
            return Invalid(f"{quote(text)} is ambiguous: it could be {choices}; answer exactly one of them")
        return moves.read(text, expected)  # no move has this name: the answer rule's reason (too long, expected)


class Notation:
    """A game's notation: the spellings of a decision's legal moves (none beyond the canonical texts here).

    The table of the last decision read is kept, so that the many answers a checker tries on one
    decision build it once.
    """

    #: Said after "expected one of ...": the forms this notation reads besides the canonical texts.
    forms = ""

    def __init__(self) -> None:
        """An empty cache."""
        self._last: tuple[Any, Spellings] | None = None

    def spellings(self, state: Any, player: int, moves: MoveNames[int]) -> Spellings:
        """The spellings of ``player``'s legal ``moves`` in ``state`` (cached for the decision)."""
        key = (player, tuple(state.history()), moves.canonical)
        last = self._last  # one read of the attribute: forks in other threads may share this notation
        if last is None or last[0] != key:
            last = self._last = (key, Spellings(moves, self._spell(state, player, moves)))
        return last[1]

    def read(self, state: Any, player: int, moves: MoveNames[int], text: str, expected: str | None) -> int | Invalid:
        """The action number of the legal move ``text`` names, or :class:`Invalid` with the reason."""
        if self.forms and expected is None:
            expected = f"expected one of {', '.join(moves.canonical)}"
        return self.spellings(state, player, moves).read(text, expected + self.forms if expected else None)

    def _spell(self, state: Any, player: int, moves: MoveNames[int]) -> Mapping[str, Sequence[str]]:
        return {}


class CoordinateNotation(Notation):
    """Moves that are a colour letter and a board coordinate (go's ``B a1``, ``B PASS``) read as the bare coordinate."""

    def _spell(self, state: Any, player: int, moves: MoveNames[int]) -> Mapping[str, Sequence[str]]:
        words = [name.split(" ") for name in moves.canonical]
        if not words or any(len(pair) != 2 or not _COORDINATE.fullmatch(pair[1]) for pair in words):
            return {}
        markers = {marker for marker, _ in words}
        if len(markers) != 1 or len(next(iter(markers))) != 1:
            return {}  # a marker that tells moves apart, or a word (rbc's "Sense a1"): not a colour to drop
        return {name: [pair[1]] for name, pair in zip(moves.canonical, words, strict=True)}


class ChessNotation(Notation):
    """SAN without ``+``/``#``, castling with zeros, UCI, and a move-number prefix, from python-chess.

    Each OpenSpiel move is matched to python-chess's move whose SAN is the same text in the
    position of the state's FEN (``str(state)``); a move python-chess writes differently gets no
    spellings, so a rule the two libraries disagree on never makes an answer a move.
    """

    forms = " (or the same move as SAN without +/#, 0-0, UCI like e2e4, LAN like Ng1-f3, or after its number: 1. e4)"

    def __init__(self, chess960: bool = False) -> None:
        """Read positions as Chess960 ones when the game is."""
        super().__init__()
        self.chess960 = chess960

    def read(self, state: Any, player: int, moves: MoveNames[int], text: str, expected: str | None) -> int | Invalid:
        """As :meth:`Notation.read`; an answer numbered as another move than this one is told which number it is."""
        move = super().read(state, player, moves, text, expected)
        numbered = _NUMBERED.match(text.lstrip(SURROUNDINGS)) if isinstance(move, Invalid) else None
        fields = str(state).split()
        if numbered is None or len(fields) != 6:
            return move
        white = fields[1] == "w"
        prefix = f"{fields[5]}{'.' if white else '...'}"
        if f"{numbered.group(1)}{numbered.group(2)}" == prefix:
            return move
        return Invalid(
            f"{quote(text)} is numbered {numbered.group(1)}{numbered.group(2)} but the move to play is "
            f"{'White' if white else 'Black'}'s {prefix}: answer the move alone or as {prefix} followed by it"
        )

    def _spell(self, state: Any, player: int, moves: MoveNames[int]) -> Mapping[str, Sequence[str]]:
        import chess  # python-chess, the openspiel extra: imported only when a chess answer is read

        try:
            board = chess.Board(str(state), chess960=self.chess960)
        except ValueError:
            return {}
        by_san = {board.san(move): move for move in board.legal_moves}
        if board.turn == chess.WHITE:
            prefixes = [f"{board.fullmove_number}.", f"{board.fullmove_number}. "]
        else:
            prefixes = [f"{board.fullmove_number}...", f"{board.fullmove_number}... "]
        spelled: dict[str, list[str]] = {}
        for name in moves.canonical:
            move = by_san.get(name)
            if move is None:
                continue
            lan = board.lan(move)  # long algebraic: Ng1-f3, e4xd5, b7-b8=Q+
            forms = [move.uci(), name, name.rstrip("+#"), lan, lan.rstrip("+#")]
            if name.startswith("O-O"):
                forms += [form.replace("O", "0") for form in forms[1:]]
            else:  # LAN without its hyphen (Ng1f3), and promotions without "=" (b8Q), as python-chess reads them
                forms += [lan.replace("-", "", 1), lan.rstrip("+#").replace("-", "", 1)]
                forms += [form.replace("=", "") for form in forms if "=" in form]
            forms = list(dict.fromkeys(forms))
            spelled[name] = forms + [prefix + form for prefix in prefixes for form in forms]
        return spelled


def notation_for(game: Any) -> Notation:
    """The notation of a pyspiel ``game``: chess's, or the coordinate one every other game gets."""
    if game.get_type().short_name == "chess":
        return ChessNotation(chess960=bool(game.get_parameters().get("chess960", False)))
    return CoordinateNotation()
