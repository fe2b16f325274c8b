"""Answers in the notation the field writes OpenSpiel's games in (tsmg.adapters.openspiel_answers), still strictly."""

from __future__ import annotations

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")
pytest.importorskip("chess")

import tsmg  # noqa: E402
from tsmg.checker import CheckReport, _check_answer_rule, check_game  # noqa: E402
from tsmg.core import Invalid  # noqa: E402

#: 1. e4 e5 2. Bc4 Nc6 3. Nf3 Nf6 4. d3 d6 5. Bg5 Be7 6. Nc3 Bg4 7. Qd2 Qd7: White's 8th move,
#: Bxf7+ legal (OpenSpiel writes the check), castling legal on both sides for both colours.
ITALIAN = "r3k2r/pppqbppp/2np1n2/4p1B1/2B1P1b1/2NP1N2/PPPQ1PPP/R3K2R w KQkq - 6 8"
#: White promotes on b8: b8=Q+, b8=R+, b8=B, b8=N.
PROMOTION = "4k3/1P6/8/8/8/8/8/4K3 w - - 0 1"
#: Bxc3+ (the bishop) and bxc3 (the pawn): one letter's case apart.
BISHOP_OR_PAWN = "8/8/8/k7/8/2n5/1P6/4B2K w - - 0 1"
#: Bxc3+ and bxc3+: both give check, so "BXC3" spells both.
BOTH_CHECK = "8/8/8/8/3k4/2n5/1P6/4B2K w - - 0 1"
#: White has two knights that reach d2 (Nbd2, Nfd2).
TWO_KNIGHTS = "4k3/8/8/8/8/5N2/8/1N2K3 w - - 0 1"
CHESS_IDS = ["OpenSpiel/chess-v0", "OpenSpiel/go-v0", "OpenSpiel/hex-v0", "OpenSpiel/othello-v0"]


def _chess(fen: str):
    game = tsmg.make("openspiel:chess")
    game.reset_to(game.pyspiel_game.new_initial_state(fen))
    [agent] = game.active_agents
    return game, agent


def _reads(game, agent, answer: str) -> str | Invalid:
    """The canonical text of the move ``answer`` is read as, or the Invalid."""
    move = game.parse(agent, answer)
    return move if isinstance(move, Invalid) else game.move_name(agent, move)


@pytest.mark.parametrize(
    ("answer", "move"),
    [
        ("Bxf7+", "Bxf7+"), ("Bxf7", "Bxf7+"), ("bxf7+", "Bxf7+"), ("c4f7", "Bxf7+"), ("C4F7", "Bxf7+"),
        ("8. Bxf7", "Bxf7+"), ("8.Bxf7+", "Bxf7+"), ("**8. c4f7**", "Bxf7+"), (" 'Bxf7'. ", "Bxf7+"),
        ("O-O", "O-O"), ("0-0", "O-O"), ("o-o", "O-O"), ("e1g1", "O-O"), ("8. 0-0", "O-O"),
        ("O-O-O", "O-O-O"), ("0-0-0", "O-O-O"), ("e1c1", "O-O-O"), ("8. O-O-O", "O-O-O"),
        ("Nxe5", "Nxe5"), ("f3e5", "Nxe5"), ("a4", "a4"), ("a2a4", "a4"), ("8. a4", "a4"),
        ("Bc4xf7+", "Bxf7+"), ("Bc4xf7", "Bxf7+"), ("Bc4xf7+", "Bxf7+"), ("Nf3xe5", "Nxe5"), ("a2-a4", "a4"),
        ("8. Nf3xe5", "Nxe5"), ("Nf3-h4", "Nh4"), ("Nf3h4", "Nh4"),
    ],
)  # fmt: skip
def test_chess_reads_san_without_its_check_castling_with_zeros_uci_and_the_move_number(answer, move):
    game, agent = _chess(ITALIAN)
    assert _reads(game, agent, answer) == move


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Bxf7#", "expected one of"),  # the wrong suffix: no legal move is written so
        ("Qh5", "expected one of"), ("d1h5", "expected one of"), ("e1e3", "expected one of"),  # illegal
        ("9. Bxf7", "the move to play is White's 8."), ("8... Bxf7", "the move to play is White's 8."),
        ("Bxf7 Nxe5", "expected one of"), ("[c4f7] [f3e5]", "expected one of"), ("8. Bxf7 Nxd7", "expected one of"),
        ("Bxf7+ O-O", "expected one of"), ("0-0 0-0-0", "expected one of"), ("00", "expected one of"),
        ("--", "expected one of"), ("0000", "expected one of"), ("Pa4", "expected one of"), ("B", "expected one of"),
        ("Nf3-e5", "expected one of"), ("Ng1-f3", "expected one of"), ("a2-a5", "expected one of"),  # wrong LAN
        ("Bc4-f7", "expected one of"),  # LAN says a capture with x, not -
    ],
)  # fmt: skip
def test_chess_refuses_wrong_illegal_and_two_move_answers_with_a_reason(answer, why):
    game, agent = _chess(ITALIAN)
    refused = game.parse(agent, answer)
    assert isinstance(refused, Invalid) and why in refused.reason, refused


def test_black_castles_both_ways_after_its_own_move_number():
    game, white = _chess(ITALIAN)
    game.step({white: "0-0"})
    [black] = game.active_agents
    assert _reads(game, black, "8... 0-0") == _reads(game, black, "e8g8") == "O-O"
    assert _reads(game, black, "8...O-O-O") == _reads(game, black, "0-0-0") == "O-O-O"
    assert "Black's 8..." in _reads(game, black, "8. O-O").reason  # type: ignore[union-attr]
    assert "Black's 8..." in _reads(game, black, "9... O-O").reason  # type: ignore[union-attr]


def test_promotions_read_in_uci_and_san_and_need_their_piece():
    game, agent = _chess(PROMOTION)
    for answer, move in [
        ("b7b8q", "b8=Q+"),
        ("B7B8Q", "b8=Q+"),
        ("b8=Q", "b8=Q+"),
        ("b7b8n", "b8=N"),
        ("b8=R", "b8=R+"),
        ("b8Q", "b8=Q+"),
        ("b8N", "b8=N"),
        ("b7-b8=Q", "b8=Q+"),
        ("b7b8=Q+", "b8=Q+"),
    ]:
        assert _reads(game, agent, answer) == move, answer
    for answer in ("b7b8", "b8", "b8K", "b7b8k", "b7b8q b7b8r", "b8=Q#"):
        assert isinstance(game.parse(agent, answer), Invalid), answer


def test_an_exact_spelling_beats_a_name_with_case_set_aside():
    """``Bxc3`` is the bishop's Bxc3+ in SAN, not the pawn's bxc3; in capitals it could be either."""
    game, agent = _chess(BISHOP_OR_PAWN)
    assert {"Bxc3+", "bxc3"} <= set(game.legal_actions(agent))
    assert _reads(game, agent, "Bxc3") == "Bxc3+"
    assert _reads(game, agent, "bxc3") == "bxc3"
    refused = game.parse(agent, "BXC3")
    assert isinstance(refused, Invalid) and "ambiguous: it could be bxc3 or Bxc3+" in refused.reason


def test_an_answer_two_moves_spell_is_ambiguous():
    game, agent = _chess(BOTH_CHECK)
    assert {"Bxc3+", "bxc3+"} <= set(game.legal_actions(agent))
    assert _reads(game, agent, "Bxc3") == "Bxc3+" and _reads(game, agent, "bxc3") == "bxc3+"
    refused = game.parse(agent, "BXC3")
    assert isinstance(refused, Invalid) and "ambiguous: it could be bxc3+ or Bxc3+" in refused.reason
    game, agent = _chess(TWO_KNIGHTS)
    assert {"Nbd2", "Nfd2"} <= set(game.legal_actions(agent))
    assert isinstance(game.parse(agent, "Nd2"), Invalid)  # names two moves: OpenSpiel's own SAN disambiguates
    assert _reads(game, agent, "b1d2") == "Nbd2" and _reads(game, agent, "Nfd2") == "Nfd2"


def test_the_record_holds_the_move_an_answer_is_taken_as():
    game, agent = _chess(ITALIAN)
    result = game.step({agent: "8. c4f7"})
    assert (result.infos[agent]["valid"], result.infos[agent]["action"]) == (True, "Bxf7+")
    assert str(game.state).startswith("r3k2r/pppqbBpp/")  # the bishop took on f7


def test_go_reads_the_bare_coordinate_and_pass_in_any_case():
    game = tsmg.make("openspiel:go(board_size=9)")
    game.reset(seed=0)
    assert _reads(game, "player_0", "d4") == _reads(game, "player_0", "D4") == "B d4"
    assert _reads(game, "player_0", "pass") == _reads(game, "player_0", "PASS") == "B PASS"
    for answer in ("W d4", "i4", "d4 e5", "[d4] [e5]", "z9", "d"):
        assert isinstance(game.parse("player_0", answer), Invalid), answer
    game.step({"player_0": "E5"})
    assert game.state.history() and _reads(game, "player_1", "e5") != "W e5"  # taken: not a legal move now
    assert _reads(game, "player_1", "c3") == "W c3"


@pytest.mark.parametrize(
    ("game_id", "answer", "move"), [("openspiel:hex", "A1", "a1"), ("openspiel:othello", "D3", "d3")]
)
def test_hex_and_othello_coordinates_read_in_any_case(game_id, answer, move):
    game = tsmg.make(game_id)
    game.reset(seed=0)
    [agent] = game.active_agents
    assert _reads(game, agent, answer) == move and game.answer_spellings(agent) == {}
    assert isinstance(game.parse(agent, f"{answer} {answer}"), Invalid)


@pytest.mark.parametrize("fen", [ITALIAN, PROMOTION, BISHOP_OR_PAWN, BOTH_CHECK, TWO_KNIGHTS])
def test_the_checkers_hostile_answers_pass_on_chess_positions_with_checks_castling_and_promotions(fen):
    game, agent = _chess(fen)
    report = CheckReport(game.game_id)
    for seed in range(3):
        _check_answer_rule(
            game, agent, game.legal_actions(agent), game.observe(agent), np.random.default_rng(seed), report
        )
    assert report.hostile_answers_checked > 300


@pytest.mark.parametrize("game_id", CHESS_IDS)
def test_the_checker_passes_on_chess_go_hex_and_othello(game_id):
    """Hostile answers at rounds 0, 1, 25 and 50 of two random games (the suite-wide test stops at 20 rounds)."""
    report = check_game(game_id, max_rounds=60, seeds=(0, 1), nonsense_seeds=4)
    assert report.hostile_answers_checked > 1000
