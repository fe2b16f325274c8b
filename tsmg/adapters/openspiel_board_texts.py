"""Readable texts of OpenSpiel's board games, written for a language model to play from.

OpenSpiel's own strings are for programs: chess's FEN with no move history and a seat called
``player_1`` that, as it happens, plays White; go's ``GoState(komi=7.5, ...)`` banner; hex's
unlabelled rhombus. This module writes, for one seat of one state, the parts of a prompt a player
of that game expects, in the style of Google DeepMind's Game Arena (the position in the game's own
notation, the moves so far, "you are playing White"):

* ``role`` -- the seat in words: its colour or mark, and who moves first;
* ``rules`` -- a short rules card, true to OpenSpiel's implementation and to the game's
  parameters (komi, board size, the swap rule, automatic draws);
* ``state`` -- the position: a board with coordinates, counts the game keeps (captures, discs),
  whose move it is;
* ``history`` -- the moves so far in the game's own names (chess in SAN with move numbers, as
  PGN writes them).

:data:`BOARD_TEXTS` maps an OpenSpiel short name (``state.get_game().get_type().short_name``) to
a pure function ``(state, player) -> {part: text}``; a part left out means the caller uses its
generic one. The legal moves are never listed here: the view that composes the prompt owns that
list. Every function reads the state only (history replayed on a fresh state of the same game),
so the same state gives the same text.

Seats as OpenSpiel numbers them: in chess player 0 is **Black** and player 1 White (White moves
first, so ``player_1`` opens); in go, hex, othello and breakthrough player 0 is Black and moves
first; in connect four and tic-tac-toe player 0 is ``x`` and moves first; in backgammon player 0 is
``x`` and a roll decides who starts.

``pyspiel`` and ``chess`` (python-chess) are imported only inside the functions, so importing
this module costs nothing.

Example:
    >>> import pyspiel
    >>> state = pyspiel.load_game("chess").new_initial_state()
    >>> for move in ("e4", "e5"):
    ...     state.apply_action(state.string_to_action(move))
    >>> texts = BOARD_TEXTS["chess"](state, 1)
    >>> texts["role"]
    'You play White; your opponent plays Black. White moves first.'
    >>> texts["history"]
    'Moves so far (PGN): 1. e4 e5'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyspiel

__all__ = ["BOARD_TEXTS", "BoardTexts", "chess_moves", "replay"]

#: One game's texts: ``(state, player) -> {"role"|"rules"|"private"|"state"|"history": text}``.
BoardTexts = Callable[["pyspiel.State", int], dict[str, str]]

#: OpenSpiel's chess seat of each colour (``ColorToPlayer``: Black is 0, White is 1).
CHESS_WHITE, CHESS_BLACK = 1, 0


def replay(state: pyspiel.State) -> Iterator[tuple[pyspiel.State, int, int]]:
    """Each move of ``state``'s history as ``(state before it, player, action)``, replayed afresh.

    The player is OpenSpiel's (``-1`` for a chance outcome); the state yielded is the replayed
    one, so ``before.action_to_string(player, action)`` names the move as it was played. It is
    advanced after each yield: read from it, do not keep it.
    """
    before = state.get_game().new_initial_state()
    for action in state.history():
        yield before, before.current_player(), action
        before.apply_action(action)


def _to_move(state: pyspiel.State, player: int, names: dict[int, str]) -> str:
    """Whose move it is, with "you" or "your opponent", or that the game is over and how."""
    if state.is_terminal():
        outcome = state.returns()[player]
        verdict = "you won" if outcome > 0 else "you lost" if outcome < 0 else "it is a draw"
        return f"The game is over: {verdict}."
    actor = state.current_player()
    if actor < 0:
        return "Waiting for a chance event."
    return f"{names[actor]} to move ({'you' if actor == player else 'your opponent'})."


# ---------------------------------------------------------------------------------------- chess


def chess_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Chess: your colour, the rules card, the FEN and a labelled board, the moves in PGN."""
    import chess

    chess960 = bool(state.get_game().get_parameters().get("chess960", False))
    colour = "White" if player == CHESS_WHITE else "Black"
    other = "Black" if colour == "White" else "White"
    board = chess.Board(None if state.is_chance_node() else str(state), chess960=chess960)
    moves = chess_moves(state)
    rules = (
        "Standard chess. Checkmate the opponent's king to win. The game is drawn automatically "
        "by stalemate, insufficient material, the same position for the third time, or 50 moves "
        "by each side with no capture or pawn move (no draw offers, claims or resignation). "
        "Moves are written in Standard Algebraic Notation (SAN): e4, Nf3, exd5, O-O, O-O-O, "
        "e8=Q; + marks check and # checkmate."
    )
    if chess960:
        rules += (
            " This is Chess960: the back-rank pieces start shuffled; castling still puts king and "
            "rook on the usual squares (g1/f1 or c1/d1)."
        )
    turn = "White" if board.turn == chess.WHITE else "Black"
    names = {CHESS_WHITE: "White", CHESS_BLACK: "Black"}
    lines = [
        f"Position (FEN): {str(state) if not state.is_chance_node() else 'not dealt yet'}",
        "Board (White's pieces in capitals, Black's in lower case, '.' empty; rank 8 at the top):",
        _chess_board(board),
        f"{_to_move(state, player, names)[:-1]}, move {board.fullmove_number}."
        if not state.is_terminal()
        else f"{_to_move(state, player, names)[:-1]} ({_chess_ending(state, board)}).",
    ]
    if board.is_check() and not state.is_terminal():
        lines.append(f"{turn} is in check.")
    if moves:
        history = f"Moves so far (PGN): {pgn_moves(moves)}"
    else:
        history = "No moves yet: White makes the first move."
    return {
        "role": f"You play {colour}; your opponent plays {other}. White moves first.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": history,
    }


def chess_moves(state: pyspiel.State) -> list[tuple[int, bool, str]]:
    """The moves of ``state`` as ``(move number, white?, SAN)``, numbered by the FEN before each.

    The SAN is OpenSpiel's ``action_to_string``, the names the legal moves are listed under, and
    it is what python-chess writes, ``+`` and ``#`` included (the tests hold it to that); a
    Chess960 start is OpenSpiel's chance outcome, skipped. About 3 ms a call at ply 300.
    """
    moves = []
    for before, actor, action in replay(state):
        if actor >= 0:
            fen = str(before).split()
            moves.append((int(fen[5]), fen[1] == "w", before.action_to_string(actor, action)))
    return moves


def pgn_moves(moves: list[tuple[int, bool, str]]) -> str:
    """Moves as PGN numbers them: ``1. e4 e5 2. Nf3``, and ``1... e5`` when Black opens."""
    words: list[str] = []
    for number, white, san in moves:
        if white:
            words.append(f"{number}. {san}")
        elif not words:
            words.append(f"{number}... {san}")
        else:
            words.append(san)
    return " ".join(words)


def _chess_ending(state: pyspiel.State, board: Any) -> str:
    """Why a finished game ended, in the order OpenSpiel tests the endings."""
    if board.is_insufficient_material():
        return "insufficient material"
    if state.is_repetition_draw():
        return "the same position a third time"
    if board.is_checkmate():
        return "checkmate"
    if board.is_stalemate():
        return "stalemate"
    return "50 moves without a capture or pawn move" if board.halfmove_clock >= 100 else "move limit"


def _chess_board(board: Any) -> str:
    """python-chess's board (rank 8 first, ``.`` for empty) with rank numbers and file letters."""
    rows = [f"{8 - index} {line}" for index, line in enumerate(str(board).splitlines())]
    return "\n".join([*rows, "  a b c d e f g h"])


# ------------------------------------------------------------------------------------------- go

_GO_ROW = re.compile(r"^\s*(\d+) ([+XO]+)$")


def go_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Go: your colour, the rules card with komi, the board with coordinates and captures, the moves."""
    params = state.get_game().get_parameters()
    size = int(params["board_size"])
    komi = float(params["komi"])
    handicap = int(params.get("handicap", 0))
    max_length = int(params.get("max_game_length", 2 * size * size))
    colour = "Black (X)" if player == 0 else "White (O)"
    first = "White moves first (Black's handicap stones are already placed)" if handicap >= 2 else "Black moves first"
    rules = (
        f"Go on a {size}x{size} board. Players take turns placing one stone of their colour on an "
        "empty point, or passing. A group of stones with no empty point next to it (no liberty) "
        "is captured and removed. Suicide (a move that leaves your own group without liberties) "
        "is illegal, and so is retaking a ko at once; a move that repeats an earlier whole-board "
        "position ends the game as a draw. The game ends when both players pass in a row, or "
        f"after {max_length} moves. Area scoring (Tromp-Taylor): your stones plus the empty "
        f"points that reach only your stones; White adds a komi of {komi:g} points. The higher "
        "score wins. A move is a colour and a point, column letter then row number (the letter "
        "I is skipped): B d4, W pass."
    )
    if handicap >= 2:
        rules += f" Black starts with {handicap} handicap stones."
    # A capture is the drop in the opponent's stones over a move (suicide is illegal).
    captures, history = {0: 0, 1: 0}, list[str]()
    for before, actor, action in replay(state):
        history.append(f"{len(history) + 1}. {_go_move(before.action_to_string(actor, action))}")
        stones = _go_counts(_go_rows(before))[1 - actor]
        after = before.clone()
        after.apply_action(action)
        captures[actor] += stones - _go_counts(_go_rows(after))[1 - actor]
    rows = _go_rows(state)
    letters = "ABCDEFGHJKLMNOPQRSTUVWXYZ"[:size]
    header = "   " + " ".join(letters)
    board = [header] + [
        f"{number:>2} {' '.join('.' if c == '+' else c for c in cells)} {number}" for number, cells in rows
    ]
    board.append(header)
    lines = [
        "Board (X = Black, O = White, . = empty; row 1 at the bottom):",
        "\n".join(board),
        f"Captured so far: Black has taken {_stones(captures[0])}, White has taken {_stones(captures[1])}.",
    ]
    if history:
        lines.append(f"Last move: {history[-1].split('. ', 1)[1]}.")
    lines.append(_to_move(state, player, {0: "Black", 1: "White"}))
    return {
        "role": f"You play {colour}; {first}.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": "Moves so far: " + " ".join(history) if history else "No moves yet.",
    }


def _go_rows(state: pyspiel.State) -> list[tuple[int, str]]:
    """The board rows of OpenSpiel's go string, top first, as (row number, cells of ``+XO``)."""
    rows = []
    for line in str(state).splitlines():
        match = _GO_ROW.match(line)
        if match:
            rows.append((int(match.group(1)), match.group(2)))
    return rows


def _go_counts(rows: list[tuple[int, str]]) -> dict[int, int]:
    text = "".join(cells for _, cells in rows)
    return {0: text.count("X"), 1: text.count("O")}


def _go_move(name: str) -> str:
    """OpenSpiel's ``B PASS`` as ``B pass``; placements stay as written (``B d4``)."""
    return name.replace("PASS", "pass")


def _stones(count: int) -> str:
    return f"{count} stone{'' if count == 1 else 's'}"


# ------------------------------------------------------------------------------------------ hex


def hex_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Hex: your colour and edges, the rules card (swap rule when on), the labelled rhombus, the moves."""
    params = state.get_game().get_parameters()
    size = int(params.get("board_size", 11))
    cols = int(params.get("num_cols", size))
    rows = int(params.get("num_rows", size))
    swap = bool(params.get("swap", False))
    last_col = chr(ord("a") + cols - 1)
    colour = "Black (x)" if player == 0 else "White (o)"
    goal = (
        f"join the top edge (row 1) to the bottom edge (row {rows})"
        if player == 0
        else f"join the left edge (column a) to the right edge (column {last_col})"
    )
    rules = (
        f"Hex on a board of {cols} columns by {rows} rows of hexagonal cells. Players take turns "
        "placing a stone of their colour on any empty cell; stones never move or get captured. "
        f"Black (x) wins by a chain of adjacent black stones joining the top edge (row 1) to the "
        f"bottom edge (row {rows}); White (o) wins by a chain joining the left edge (column a) to "
        f"the right edge (column {last_col}). A cell touches six others: left and right in its "
        "row, the same column and the next column to the right in the row above, the same column "
        "and the previous column to the left in the row below. There are no draws. A move is a "
        f"cell, column letter then row number: {chr(ord('a') + cols // 2)}{rows // 2 + 1}."
    )
    if swap:
        rules += (
            " Swap rule: on White's first turn White may answer 'swap' instead of placing a stone; "
            "Black's first stone then becomes White's, mirrored across the long diagonal (b1 "
            "becomes a2), and Black moves next."
        )
    else:
        rules += " There is no swap rule: Black's first move stands."
    cells = _hex_cells(state, cols * rows)
    letters = " ".join(chr(ord("a") + c) for c in range(cols))
    board = [f"    {letters}"]
    for r in range(rows):
        row = " ".join(cells[r * cols : (r + 1) * cols])
        board.append(f"{r + 1:>2} {' ' * r} {row}")
    lines = [
        "Board (x = Black, o = White, . = empty; each row is shifted half a cell right of the one above):",
        "\n".join(board),
        _to_move(state, player, {0: "Black", 1: "White"}),
    ]
    return {
        "role": f"You play {colour}: {goal}. Black moves first.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": _black_white_history(state),
    }


def _hex_cells(state: pyspiel.State, count: int) -> list[str]:
    """Each cell as ``x``, ``o`` or ``.``, row by row, from the observation tensor.

    The tensor (9 planes, one per OpenSpiel cell state from -4 to 4, each cell flat as row times
    columns plus column) is read rather than the board string, which the ``string_rep`` parameter
    changes; negative states are White's, positive Black's.
    """
    values = state.observation_tensor(0)
    cells = []
    for cell in range(count):
        plane = max(range(9), key=lambda p: values[p * count + cell])
        cells.append("." if plane == 4 else "x" if plane > 4 else "o")
    return cells


# -------------------------------------------------------------------------------------- othello


def othello_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Othello: your colour, the rules card, the board with disc counts, the moves."""
    colour = "Black (x)" if player == 0 else "White (o)"
    # OpenSpiel's board minus its "Black (x) to play:" line: coordinates on all four sides.
    board_lines = [line.rstrip() for line in str(state).splitlines()[1:]]
    squares = "".join(board_lines[1:-1])
    black, white = squares.count(" x"), squares.count(" o")
    rules = (
        "Othello on an 8x8 board, starting with four discs in the centre. On your turn place a "
        "disc of your colour on an empty square so that, in at least one line (row, column or "
        "diagonal), it and another of your discs enclose an unbroken run of the opponent's "
        "discs; every enclosed run flips to your colour. If you have no such move you must pass "
        "(your only move is then 'pass'). The game ends when neither player can move; the "
        "player with more discs wins, equal counts draw. A move is a square, column letter then "
        "row number, with a1 at the top left: d3."
    )
    lines = [
        "Board (x = Black, o = White, - = empty; row 1 at the top):",
        "\n".join(board_lines),
        f"Discs: Black {black}, White {white}.",
        _to_move(state, player, {0: "Black", 1: "White"}),
    ]
    return {
        "role": f"You play {colour}. Black moves first.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": _black_white_history(state),
    }


def _black_white_history(state: pyspiel.State) -> str:
    """The moves so far, numbered, each after its colour (player 0 Black, player 1 White): ``1. Black c3``."""
    moves = [
        f"{index}. {'Black' if actor == 0 else 'White'} {before.action_to_string(actor, action)}"
        for index, (before, actor, action) in enumerate(replay(state), 1)
    ]
    return "Moves so far: " + " ".join(moves) if moves else "No moves yet."


# --------------------------------------------------------------------------------- breakthrough

_BREAKTHROUGH_ROW = re.compile(r"^(\d+)([bw.]+)$")


def breakthrough_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Breakthrough: your colour and direction, the rules card, the labelled board, the moves."""
    params = state.get_game().get_parameters()
    rows, cols = int(params.get("rows", 8)), int(params.get("columns", 8))
    colour = "Black (b), moving down towards row 1" if player == 0 else f"White (w), moving up towards row {rows}"
    rules = (
        f"Breakthrough on {cols} columns by {rows} rows. Black (b) starts on the top two rows and "
        "moves down; White (w) starts on the bottom two rows and moves up. On your turn move one "
        "piece one square forward, straight or diagonally, onto an empty square, or capture an "
        "opponent's piece one square diagonally forward (never straight ahead). You win by "
        f"reaching the far row (row 1 for Black, row {rows} for White) or by capturing every "
        "opponent piece. A move is the from-square then the to-square, e7e6; a trailing * marks "
        "a capture: f3e2*."
    )
    board = []
    for line in str(state).splitlines():
        match = _BREAKTHROUGH_ROW.match(line.strip())
        if match:
            board.append(f"{int(match.group(1)):>2} {' '.join(match.group(2))}")
    board.append("   " + " ".join(chr(ord("a") + c) for c in range(cols)))
    pieces = "".join(board[:-1])
    lines = [
        f"Board (b = Black, w = White, . = empty; row {rows} at the top):",
        "\n".join(board),
        f"Pieces: Black {pieces.count(' b')}, White {pieces.count(' w')}.",
        _to_move(state, player, {0: "Black", 1: "White"}),
    ]
    return {
        "role": f"You play {colour}. Black moves first.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": _black_white_history(state),
    }


# ------------------------------------------------------------------- connect four, tic-tac-toe


def connect_four_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Connect Four: your mark, the rules card, the board with column numbers, the moves."""
    params = state.get_game().get_parameters()
    rows, cols, needed = int(params.get("rows", 6)), int(params.get("columns", 7)), int(params.get("x_in_row", 4))
    mark = "x" if player == 0 else "o"
    rules = (
        f"Connect Four on {cols} columns by {rows} rows, standing upright. On your turn drop a "
        "disc of your mark into a column that is not full; it falls to the lowest empty row. "
        f"Get {needed} of your discs in a line (across, up and down, or diagonal) to win; a full "
        f"board with no line is a draw. A move is your mark and a column number from 0 to "
        f"{cols - 1}: {mark}3."
    )
    board = [" ".join(line.strip()) for line in str(state).strip().splitlines()]
    board.append(" ".join(str(c) for c in range(cols)))
    lines = [
        "Board (x and o discs, . = empty; the bottom row is the last one, column numbers under it):",
        "\n".join(board),
        _to_move(state, player, {0: "x", 1: "o"}),
    ]
    return {
        "role": f"You play {mark}. x moves first.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": _mark_history(state),
    }


def tic_tac_toe_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Tic-tac-toe: your mark, the rules card, the board with row and column numbers, the moves."""
    mark = "x" if player == 0 else "o"
    rules = (
        "Tic-tac-toe on a 3x3 grid. Players take turns writing their mark in an empty cell; three "
        "of your marks in a row, column or diagonal win, and a full grid without a line is a "
        f"draw. A move is your mark and the cell as (row,column), both from 0 at the top left: "
        f"{mark}(1,1) is the centre."
    )
    board = ["  0 1 2"] + [f"{r} {' '.join(line.strip())}" for r, line in enumerate(str(state).strip().splitlines())]
    lines = [
        "Board (rows numbered down the side, columns across the top, . = empty):",
        "\n".join(board),
        _to_move(state, player, {0: "x", 1: "o"}),
    ]
    return {
        "role": f"You play {mark}. x moves first.",
        "rules": rules,
        "state": "\n".join(lines),
        "history": _mark_history(state),
    }


def _mark_history(state: pyspiel.State) -> str:
    moves = [before.action_to_string(actor, action) for before, actor, action in replay(state)]
    return "Moves so far: " + " ".join(moves) if moves else "No moves yet."


# ------------------------------------------------------------------------------------ backgammon

_BACKGAMMON_CODE = re.compile(r"^\d+ - ")
_BACKGAMMON_ROLL = re.compile(r"\(roll: (\d)(\d)\)")
_BACKGAMMON_MARKS = {0: "X", 1: "O"}
#: OpenSpiel's position of the bar for ``BackgammonState.board`` (``kBarPos``).
_BACKGAMMON_BAR = 100


def backgammon_texts(state: pyspiel.State, player: int) -> dict[str, str]:
    """Backgammon: your colour, the rules card, checkers by point in your numbering, the rolls and moves."""
    params = state.get_game().get_parameters()
    hyper = bool(params.get("hyper_backgammon", False))
    checkers = 3 if hyper else 15
    turns = int(params.get("max_player_turns", 500))
    scoring = str(params.get("scoring_type", "winloss_scoring"))
    mark, other = _BACKGAMMON_MARKS[player], _BACKGAMMON_MARKS[1 - player]
    if hyper or scoring == "winloss_scoring":
        stakes = "a win counts 1 whatever the margin"
    elif scoring == "enable_gammons":
        stakes = "a win counts 1, or 2 for a gammon (the loser has borne off no checker)"
    else:
        stakes = (
            "a win counts 1, 2 for a gammon (the loser has borne off no checker), or 3 for a "
            "backgammon (a gammon with a losing checker still on the bar or in the winner's home board)"
        )
    start = (
        "each side starts with one checker on each of its points 24, 23 and 22 (Hyper-backgammon)"
        if hyper
        else "each side starts with 2 checkers on its point 24, 5 on 13, 3 on 8 and 5 on 6"
    )
    rules = (
        f"Backgammon without the doubling cube: {checkers} checkers a side; {start}. Each side "
        "numbers the points from its own view, 24 (farthest) down to 1, and moves towards its home "
        "board, points 1 to 6; the two sides move in opposite directions, so your point n is the "
        "opponent's point 25 - n. Each turn the dice are rolled for the player to move, who moves "
        "checkers by the two numbers, one checker per number (one checker may take both); doubles "
        "are played four times, here as two turns of two moves. A checker may not land on a point "
        "held by two or more opposing checkers; landing on a lone opposing checker hits it (*) and "
        "puts it on the bar, and a checker on the bar must re-enter on the opponent's home board "
        "(your points 19 to 24) before any other checker moves. Once all your checkers are in your "
        "home board you may bear them off. Use both numbers if you can (the larger if only one can "
        "be played); with no legal move you pass. The first to bear off every checker wins, and "
        f"{stakes}; a game not over after {turns} turns ends in a draw. A move gives each "
        "checker's from/to point in the mover's own numbering, higher first: 13/8 6/5*, Bar/22, "
        "6/Off, 8/5(2) for the same move twice."
    )
    return {
        "role": f"You play {mark}; your opponent plays {other}. An opening roll decides who starts.",
        "rules": rules,
        "state": _backgammon_state(state, player),
        "history": _backgammon_history(state),
    }


def _backgammon_state(state: pyspiel.State, player: int) -> str:
    """Each side's checkers by point in ``player``'s numbering, bar, borne off, pips and dice."""
    text = str(state)
    scores = re.search(r"Scores, X: (\d+), O: (\d+)", text)
    borne = (int(scores.group(1)), int(scores.group(2))) if scores else (0, 0)
    lines = ["Checkers by point, in your numbering (you move from 24 down to 1, the opponent from 1 up to 24):"]
    for side in (player, 1 - player):
        spots = []
        pips = 0
        for point in range(24, 0, -1):
            count = state.board(side, 24 - point if player == 0 else point - 1)
            if count:
                spots.append(f"{point}x{count}")
                pips += count * (point if side == player else 25 - point)
        on_bar = state.board(side, _BACKGAMMON_BAR)
        pips += 25 * on_bar
        who = "you" if side == player else "opponent"
        lines.append(
            f"{_BACKGAMMON_MARKS[side]} ({who}): {', '.join(spots) or 'none on the board'}; "
            f"on the bar {on_bar}, borne off {borne[side]}, pip count {pips}."
        )
    dice = re.search(r"^Dice: (\d)(\d)", text, re.MULTILINE)
    if dice and not state.is_terminal():
        first, second = dice.groups()
        double = " (doubles: four moves of that number, in two turns)" if first == second else ""
        lines.append(f"Dice: {first} and {second}{double}.")
    lines.append(_to_move(state, player, _BACKGAMMON_MARKS))
    return "\n".join(lines)


def _backgammon_history(state: pyspiel.State) -> str:
    """The rolls and moves, each move in its mover's numbering, without OpenSpiel's action code.

    A roll is told with who rolled it: the player to move once the dice have fallen.
    """
    events: list[str] = []
    for before, actor, action in replay(state):
        name = before.action_to_string(actor, action)
        if actor < 0:
            roll = _BACKGAMMON_ROLL.search(name)
            dice = f"{roll.group(1)}-{roll.group(2)}" if roll else name
            starter = re.search(r"([XO]) starts", name)
            events.append(f"{starter.group(1)} starts with {dice}." if starter else f"rolls {dice}.")
            continue
        if events and events[-1].startswith("rolls "):
            events[-1] = f"{_BACKGAMMON_MARKS[actor]} {events[-1]}"
        events.append(f"{_BACKGAMMON_MARKS[actor]}: {_BACKGAMMON_CODE.sub('', name)}.")
    if events and events[-1].startswith("rolls ") and state.current_player() in _BACKGAMMON_MARKS:
        events[-1] = f"{_BACKGAMMON_MARKS[state.current_player()]} {events[-1]}"
    return "Rolls and moves so far: " + " ".join(events) if events else "No rolls yet."


#: The texts of each OpenSpiel board game that has its own, by short name.
BOARD_TEXTS: dict[str, BoardTexts] = {
    "chess": chess_texts,
    "go": go_texts,
    "hex": hex_texts,
    "othello": othello_texts,
    "breakthrough": breakthrough_texts,
    "backgammon": backgammon_texts,
    "connect_four": connect_four_texts,
    "tic_tac_toe": tic_tac_toe_texts,
}
