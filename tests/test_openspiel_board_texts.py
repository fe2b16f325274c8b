"""The readable texts of OpenSpiel's board games (``tsmg.adapters.openspiel_board_texts``).

What is checked, game by game, over seeded random playouts: the texts are the same for the same
state (and for its clone), they name the seat's role as OpenSpiel seats it (chess's player 1 is
White and moves first), they say whose move it is, and what they state of the position agrees with
OpenSpiel's own state: chess's FEN equals python-chess's board after replaying the history and the
PGN history replays to the same position; go's captures account for every stone placed; hex's board
read from the observation tensor equals OpenSpiel's board string (swap rule included); othello's
disc counts; backgammon's checkers add up to 15 a side. Golden snapshots (``tests/data/
openspiel_board_texts/<game>.txt``) pin the whole text at one position per game, so any change to
what a model reads fails a test; ``TSMG_UPDATE_SNAPSHOTS=1`` rewrites them after a deliberate change.

Mutations that fail here (each tried by hand): player 0 as White in chess; SAN without its ``+``
or ``#``; PGN move numbers off by one; the chess board's ranks numbered upwards; go captures
credited to the side that lost the stones; hex cells read column-major; the backgammon point
numbering not mirrored for X; othello's counts swapped; breakthrough counting the column letters
as pieces.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest

pyspiel = pytest.importorskip("pyspiel")
chess = pytest.importorskip("chess")

from tsmg.adapters.openspiel_board_texts import BOARD_TEXTS, CHESS_WHITE  # noqa: E402

SNAPSHOTS = Path(__file__).parent / "data" / "openspiel_board_texts"
PARTS = ("role", "rules", "private", "state", "history")
#: The game string each short name is played under here (go and hex small, to keep playouts quick).
GAMES = {
    "chess": "chess",
    "go": "go(board_size=9)",
    "hex": "hex(board_size=5)",
    "othello": "othello",
    "breakthrough": "breakthrough",
    "backgammon": "backgammon",
    "connect_four": "connect_four",
    "tic_tac_toe": "tic_tac_toe",
}
#: Who moves first in OpenSpiel and the word the role uses for each seat.
ROLES = {
    "chess": {1: "White", 0: "Black"},
    "go": {0: "Black", 1: "White"},
    "hex": {0: "Black", 1: "White"},
    "othello": {0: "Black", 1: "White"},
    "breakthrough": {0: "Black", 1: "White"},
    "backgammon": {0: "X", 1: "O"},
    "connect_four": {0: "x", 1: "o"},
    "tic_tac_toe": {0: "x", 1: "o"},
}


def playout(game: pyspiel.Game, seed: int, moves: int) -> list[pyspiel.State]:
    """The states of one random playout of at most ``moves`` actions (chance drawn by its odds)."""
    rng = random.Random(seed)
    state = game.new_initial_state()
    states = [state.clone()]
    while not state.is_terminal() and len(states) <= moves:
        if state.is_chance_node():
            outcomes, weights = zip(*state.chance_outcomes(), strict=True)
            state.apply_action(rng.choices(outcomes, weights)[0])
        else:
            state.apply_action(rng.choice(state.legal_actions()))
        states.append(state.clone())
    return states


def test_every_game_has_texts() -> None:
    assert set(BOARD_TEXTS) == set(GAMES)
    for short_name, game_string in GAMES.items():
        assert pyspiel.load_game(game_string).get_type().short_name == short_name


@pytest.mark.parametrize("short_name", sorted(GAMES))
def test_texts_are_deterministic_and_name_the_seat(short_name: str) -> None:
    game = pyspiel.load_game(GAMES[short_name])
    texts = BOARD_TEXTS[short_name]
    first = game.new_initial_state()
    while first.is_chance_node():
        first.apply_action(first.chance_outcomes()[0][0])
    if short_name != "backgammon":  # a roll picks backgammon's first player
        opener = first.current_player()
        assert f"{ROLES[short_name][opener]} moves first" in texts(first, 0)["role"]
    for seed in range(3):
        for state in playout(game, seed, 40 if short_name != "chess" else 60)[::3]:
            for player in (0, 1):
                written = texts(state, player)
                assert set(written) <= set(PARTS)
                assert all(isinstance(text, str) and text.strip() for text in written.values())
                assert texts(state.clone(), player) == written
                assert written["role"].startswith(f"You play {ROLES[short_name][player]}")
                actor = state.current_player()
                if actor >= 0:
                    whose = "(you)" if actor == player else "(your opponent)"
                    assert f"{ROLES[short_name][actor]} to move {whose}" in written["state"]
                elif state.is_terminal():
                    outcome = state.returns()[player]
                    verdict = "you won" if outcome > 0 else "you lost" if outcome < 0 else "it is a draw"
                    assert f"The game is over: {verdict}" in written["state"]


def test_chess_seats_white_as_player_one() -> None:
    state = pyspiel.load_game("chess").new_initial_state()
    assert state.current_player() == CHESS_WHITE == 1
    state.apply_action(state.string_to_action("e4"))
    assert "b KQkq" in str(state) and state.current_player() == 0
    assert BOARD_TEXTS["chess"](state, 0)["role"].startswith("You play Black")


def _fen(text: str) -> str:
    match = re.search(r"^Position \(FEN\): (.+)$", text, re.MULTILINE)
    assert match, text
    return match.group(1)


def _replay_pgn(history: str) -> chess.Board:
    board = chess.Board()
    if history.startswith("No moves"):
        return board
    for word in history.removeprefix("Moves so far (PGN): ").split():
        if not re.fullmatch(r"\d+\.(\.\.)?", word):
            board.push_san(word)
    return board


@pytest.mark.parametrize("seed", range(4))
def test_chess_fen_and_pgn_agree_with_python_chess(seed: int) -> None:
    game = pyspiel.load_game("chess")
    board = chess.Board()
    state = game.new_initial_state()
    pgn: list[str] = []  # the history as python-chess writes it, check and mate marks included
    for action in playout(game, seed, 200)[-1].history():
        move = board.parse_san(state.action_to_string(state.current_player(), action))
        pgn.append(f"{board.fullmove_number}. {board.san(move)}" if board.turn else board.san(move))
        board.push(move)
        state.apply_action(action)
        written = BOARD_TEXTS["chess"](state, len(pgn) % 2)
        fen = _fen(written["state"])
        assert fen == board.fen(en_passant="xfen") == str(state)
        assert written["history"] == "Moves so far (PGN): " + " ".join(pgn)
        assert (f"{'White' if board.turn else 'Black'} is in check." in written["state"]) == (
            board.is_check() and not state.is_terminal()
        )
    assert _replay_pgn(written["history"]).fen(en_passant="xfen") == str(state)


def test_chess_history_numbers_moves_as_pgn() -> None:
    state = pyspiel.load_game("chess").new_initial_state()
    for move in ("e4", "e5", "Nf3", "Nc6", "Bb5"):
        state.apply_action(state.string_to_action(move))
    assert BOARD_TEXTS["chess"](state, 0)["history"] == "Moves so far (PGN): 1. e4 e5 2. Nf3 Nc6 3. Bb5"


def test_chess_marks_check_and_mate() -> None:
    state = pyspiel.load_game("chess").new_initial_state()
    for move in ("f3", "e5", "g4", "Qh4#"):
        state.apply_action(state.string_to_action(move))
    written = BOARD_TEXTS["chess"](state, 1)
    assert written["history"] == "Moves so far (PGN): 1. f3 e5 2. g4 Qh4#"
    assert written["state"].endswith("The game is over: you lost (checkmate).")


@pytest.mark.parametrize("seed", range(3))
def test_go_captures_account_for_every_stone(seed: int) -> None:
    game = pyspiel.load_game("go(board_size=5)")
    for state in playout(game, seed, 120)[-1:]:
        written = BOARD_TEXTS["go"](state, 0)["state"]
        taken = re.search(r"Black has taken (\d+) stones?, White has taken (\d+) stones?", written)
        assert taken, written
        placed = {0: 0, 1: 0}
        replayed = game.new_initial_state()
        for action in state.history():
            if action != 25:
                placed[replayed.current_player()] += 1
            replayed.apply_action(action)
        board = "".join(line for line in written.splitlines() if re.match(r"^\s*\d+ ", line))
        assert placed[0] == board.count("X") + int(taken.group(2))
        assert placed[1] == board.count("O") + int(taken.group(1))


def test_go_counts_a_capture() -> None:
    state = pyspiel.load_game("go(board_size=5)").new_initial_state()
    for move in ("B b3", "W c3", "B a2", "W b2", "B b1", "W d2", "B e5", "W c1", "B c2"):
        state.apply_action(state.string_to_action(move))
    written = BOARD_TEXTS["go"](state, 1)["state"]
    assert "Black has taken 1 stone, White has taken 0 stones." in written
    assert "Last move: B c2." in written


@pytest.mark.parametrize(
    "game_string", ["hex(board_size=5)", "hex(board_size=4,swap=True)", "hex(num_cols=3,num_rows=4)"]
)
def test_hex_board_matches_openspiel(game_string: str) -> None:
    game = pyspiel.load_game(game_string)
    for seed in range(3):
        for state in playout(game, seed, 20):
            written = BOARD_TEXTS["hex"](state, 1)["state"].splitlines()
            ours = [line.split(maxsplit=1)[1].split() for line in written[2:] if re.match(r"^\s*\d+ ", line)]
            theirs = [line.split() for line in str(state).splitlines() if line.strip()]
            assert ours == theirs


def test_hex_names_the_swap_rule_only_when_on() -> None:
    plain = BOARD_TEXTS["hex"](pyspiel.load_game("hex").new_initial_state(), 1)["rules"]
    swap = BOARD_TEXTS["hex"](pyspiel.load_game("hex(swap=True)").new_initial_state(), 1)["rules"]
    assert "There is no swap rule" in plain and "Swap rule:" in swap


def test_othello_counts_discs() -> None:
    game = pyspiel.load_game("othello")
    for state in playout(game, 0, 70)[::7]:
        board = "\n".join(str(state).splitlines()[2:-1])
        written = BOARD_TEXTS["othello"](state, 0)["state"]
        assert f"Discs: Black {board.count('x')}, White {board.count('o')}." in written


def test_backgammon_checkers_add_up() -> None:
    game = pyspiel.load_game("backgammon")
    start = BOARD_TEXTS["backgammon"](game.new_initial_state(), 0)["state"]
    assert "X (you): 24x2, 13x5, 8x3, 6x5; on the bar 0, borne off 0, pip count 167." in start
    assert "O (opponent): 19x5, 17x3, 12x5, 1x2; on the bar 0, borne off 0, pip count 167." in start
    for seed in range(2):
        for state in playout(game, seed, 150)[::10]:
            for player in (0, 1):
                written = BOARD_TEXTS["backgammon"](state, player)["state"]
                for spots, bar, off in re.findall(r"\): (.*); on the bar (\d+), borne off (\d+)", written):
                    on_points = sum(int(n) for n in re.findall(r"\d+x(\d+)", spots))
                    assert on_points + int(bar) + int(off) == 15


# ------------------------------------------------------------------------------------ snapshots

#: One fixed position per game: the moves by name (backgammon's by action, rolls included).
POSITIONS: dict[str, tuple[str, list[str] | list[int], int]] = {
    "chess": ("chess", ["e4", "e5"], 1),
    "go": ("go(board_size=9)", ["B e5", "W c3", "B g7", "W PASS"], 0),
    "hex": ("hex(board_size=5)", ["c3", "b4", "d2"], 1),
    "othello": ("othello", ["d3", "c5", "e6"], 1),
    "breakthrough": ("breakthrough", ["e7e6", "d2d3", "e6e5"], 1),
    "backgammon": ("backgammon", [7, 865, 34, 302, 427, 10], 1),
    "connect_four": ("connect_four", ["x3", "o3", "x4"], 1),
    "tic_tac_toe": ("tic_tac_toe", ["x(1,1)", "o(0,0)", "x(2,2)"], 1),
}


def render(texts: dict[str, str]) -> str:
    """The parts as a snapshot file shows them: ``[part]`` then its text, in the prompt's order."""
    return "\n\n".join(f"[{part}]\n{texts[part]}" for part in PARTS if part in texts) + "\n"


@pytest.mark.parametrize("short_name", sorted(POSITIONS))
def test_snapshot(short_name: str) -> None:
    game_string, moves, player = POSITIONS[short_name]
    state = pyspiel.load_game(game_string).new_initial_state()
    for move in moves:
        state.apply_action(move if isinstance(move, int) else state.string_to_action(move))
    text = render(BOARD_TEXTS[short_name](state, player))
    path = SNAPSHOTS / f"{short_name}.txt"
    if os.environ.get("TSMG_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}: run with TSMG_UPDATE_SNAPSHOTS=1 to write it"
    assert text == path.read_text(), f"the {short_name} text changed; if on purpose, rerun with TSMG_UPDATE_SNAPSHOTS=1"
