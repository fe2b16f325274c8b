import time

import numpy as np
import pytest

import tsmg
from games import connect_four_rules as rules
from games.connect_four import ConnectFour
from tsmg.core import Invalid

X, N, E = rules.CROSS, rules.NOUGHT, rules.EMPTY  # N: nought (O)


def _board(moves):
    """Play the columns in order, alternating X and O."""
    columns = rules.EMPTY_BOARD
    for col in moves:
        columns = rules.drop(columns, col, rules.mark_to_move(columns))
    return columns


@pytest.mark.parametrize(
    ("moves", "winner"),
    [
        ([0, 0, 1, 1, 2, 2, 3], X),  # bottom row
        ([3, 4, 3, 4, 3, 4, 3], X),  # column
        ([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3], X),  # diagonal rising to the right
        ([6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3], X),  # diagonal rising to the left
        ([6, 0, 6, 1, 6, 2, 5, 3], N),  # O's bottom row
    ],
)
def test_four_in_a_line(moves, winner):
    board = _board(moves)
    assert rules.winner(board) == winner and rules.is_over(board)
    assert rules.winner(_board(moves[:-1])) == E


def test_no_wrap_around_and_draw():
    # X on the top cells of column 0 and the bottom of column 1 are adjacent bits but not a line.
    columns = ((N, N, X, X, X, X),) + ((),) * 6
    assert rules.winner(columns) == X  # the vertical four is real
    columns = ((N, N, N, X, X, X), (X,)) + ((),) * 5
    assert rules.winner(columns) == E
    pattern = ((X, X, N, N, X, X), (N, N, X, X, N, N))
    full = tuple(pattern[choice] for choice in (0, 0, 0, 1, 0, 0, 0))
    assert rules.is_full(full) and rules.winner(full) == E and rules.is_over(full)


def test_full_column_is_invalid_with_reason():
    game = ConnectFour()
    game.reset(seed=0)
    for _ in range(6):
        game.step({game.active_agents[0]: "1"})
    parsed = game.parse(game.active_agents[0], "1")
    assert isinstance(parsed, Invalid) and "full" in parsed.reason and "2, 3, 4, 5, 6, 7" in parsed.reason
    assert "1" not in game.legal_actions(game.active_agents[0])


@pytest.mark.parametrize(("text", "col"), [("4", 3), ("**7**.", 6), (" 2 ", 1)])
def test_parse_variants(text, col):
    assert ConnectFour().parse("player_0", text) == col


@pytest.mark.parametrize("text", ["", "0", "8", "44", "four", "\n" * 1000, "٣", "column 4", "c1", "col 7"])
def test_parse_rejects(text):
    parsed = ConnectFour().parse("player_0", text)
    assert isinstance(parsed, Invalid) and "1-7" in parsed.reason


def test_oracle_wins_now_and_blocks():
    assert rules.best_move(_board([0, 6, 1, 6, 2, 5])) == 3  # X completes the bottom row
    assert rules.best_move(_board([0, 0, 1, 1, 2])) == 3  # O must block X's three
    assert rules.best_move(_board([3, 0, 3, 0, 3])) == 3  # O must block the column


def test_rewards():
    game = ConnectFour()
    game.reset(seed=0)
    for col in (1, 1, 2, 2, 3, 3):
        assert sum(game.step({game.active_agents[0]: str(col)}).rewards.values()) == 0
    result = game.step({"player_0": "4"})
    assert result.rewards == {"player_0": 1.0, "player_1": -1.0} and result.done
    assert game.is_success("player_0") and not game.is_success("player_1")


def test_alpha_beta_beats_random_and_is_fast():
    rng = np.random.default_rng(1)
    game = ConnectFour()
    wins, oracle_seconds, oracle_moves = 0, 0.0, 0
    games = 20
    for episode in range(games):
        seat = game.agents[episode % 2]
        game.reset(seed=episode)
        while not game.done:
            agent = game.active_agents[0]
            if agent == seat:
                start = time.perf_counter()
                answer = game.oracle_action(agent)
                oracle_seconds += time.perf_counter() - start
                oracle_moves += 1
            else:
                legal = game.legal_actions(agent)
                answer = legal[int(rng.integers(len(legal)))]
            game.step({agent: answer})
        wins += game.episode_returns()[seat] > 0
    assert wins >= 0.95 * games
    assert oracle_seconds / oracle_moves < 0.2  # generous bound: bench figures are ~10 ms


def test_vs_minimax_plays_a_whole_game():
    game = tsmg.make("ConnectFour-vsMinimax-v0", learner_seat="player_1", oracle_depth=2)
    observations, _ = game.reset(seed=0)
    assert "You are player_1" in observations["player"] and "last played column" in observations["player"]
    while not game.done:
        game.step({"player": game.legal_actions("player")[0]})
    assert game.episode_returns()["player"] in (-1.0, 0.0, 1.0)
