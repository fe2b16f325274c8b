import numpy as np
import pytest

import tsmg
from games import tictactoe_rules as rules
from games.tictactoe import TicTacToe, TicTacToeVsMinimax
from tsmg.core import Invalid

X, N, E = rules.CROSS, rules.NOUGHT, rules.EMPTY  # N: nought (O)


@pytest.mark.parametrize("line", rules.LINES)
@pytest.mark.parametrize("mark", [X, N])
def test_every_line_wins(line, mark):
    board = tuple(mark if i in line else E for i in range(9))
    assert rules.winner(board) == mark
    assert rules.is_over(board)
    assert rules.legal_cells(board) == ()


def test_draw_and_open_positions():
    draw = (X, N, X, X, N, N, N, X, X)
    assert rules.winner(draw) == E and rules.is_full(draw) and rules.is_over(draw)
    assert not rules.is_over(rules.EMPTY_BOARD)
    assert rules.mark_to_move(rules.EMPTY_BOARD) == X
    assert rules.mark_to_move(rules.play(rules.EMPTY_BOARD, 4, X)) == N


def test_minimax_values():
    assert rules.value(rules.EMPTY_BOARD) == 0  # perfect play draws
    # X to move can win at once in cell 2 (top row), and minimax takes the immediate win.
    board = (X, X, E, N, N, E, E, E, E)
    assert rules.best_move(board) == 2
    # O to move must block X's row.
    board = (X, X, E, E, N, E, E, E, E)
    assert rules.best_move(board) == 2


def test_rewards_and_terminal_text():
    game = TicTacToe()
    game.reset(seed=0)
    for cell in ("1", "4", "2", "5"):
        result = game.step({game.active_agents[0]: cell})
        assert result.rewards == {"player_0": 0.0, "player_1": 0.0}
    result = game.step({"player_0": "3"})
    assert result.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert result.done and game.is_success("player_0") and not game.is_success("player_1")
    assert "Game over: you won." in result.observations["player_0"]
    assert "Game over: player_0 (X) won." in result.observations["player_1"]


def test_draw_gives_zero():
    game = TicTacToe()
    game.reset(seed=0)
    total = {"player_0": 0.0, "player_1": 0.0}
    for cell in (1, 2, 3, 5, 4, 6, 8, 7, 9):  # X O X / X O O / O X X
        result = game.step({game.active_agents[0]: str(cell)})
        for agent, reward in result.rewards.items():
            total[agent] += reward
    assert result.done and total == {"player_0": 0.0, "player_1": 0.0}
    assert "draw" in result.observations["player_0"]


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("5", 4),
        (" 5 ", 4),
        ("5.", 4),
        ("'9'", 8),
        ("**7**", 6),
    ],
)
def test_parse_variants(text, cell):
    assert TicTacToe().parse("player_0", text) == cell


@pytest.mark.parametrize(
    "text",
    ["", "0", "10", "55", "a" * 100_000, "\x00", "５", "4 4", "cell 5", "#9", "center", "top left", "right", "(2, 3)"],
)
def test_parse_rejects_with_reason(text):
    parsed = TicTacToe().parse("player_0", text)
    assert isinstance(parsed, Invalid) and "1-9" in parsed.reason


def test_parse_checks_the_state():
    game = TicTacToe()
    game.reset(seed=0)
    game.step({"player_0": "5"})
    taken = game.parse("player_1", "5")
    assert isinstance(taken, Invalid) and "taken" in taken.reason
    assert isinstance(game.parse("player_0", "1"), Invalid)  # not player_0's turn
    result = game.step({"player_1": "center"})  # invalid answer: the turn is used up, nothing changes
    assert result.infos["player_1"]["valid"] is False and game.active_agents == ("player_1",)


def _play(game, policies, rng):
    game.reset(seed=int(rng.integers(1 << 30)))
    while not game.done:
        agent = game.active_agents[0]
        game.step({agent: policies[agent](game, agent, rng)})
    return game.episode_returns()


def _random(game, agent, rng):
    legal = game.legal_actions(agent)
    return legal[int(rng.integers(len(legal)))]


def _oracle(game, agent, rng):
    return game.oracle_action(agent)


def test_minimax_never_loses_to_random_and_draws_itself():
    rng = np.random.default_rng(0)
    game = TicTacToe()
    wins = 0
    for episode in range(100):
        seat = "player_0" if episode % 2 == 0 else "player_1"
        other = "player_1" if seat == "player_0" else "player_0"
        returns = _play(game, {seat: _oracle, other: _random}, rng)
        assert returns[seat] >= 0
        wins += returns[seat] > 0
    assert wins >= 80
    returns = _play(game, {"player_0": _oracle, "player_1": _oracle}, rng)
    assert returns == {"player_0": 0.0, "player_1": 0.0}


def test_vs_minimax_variant():
    game = tsmg.make("TicTacToe-vsMinimax-v0")
    seats = set()
    for seed in range(8):
        observations, _ = game.reset(seed=seed)
        seats.add(game.state.learner)
        if game.state.learner == "player_1":  # minimax (X) has opened already
            assert game.state.inner.board.count(X) == 1
        while not game.done:
            game.step({"player": game.oracle_action("player")})
        assert game.episode_returns() == {"player": 0.0}
    assert seats == {"player_0", "player_1"}
    observation = TicTacToeVsMinimax(learner_seat="player_0").reset(seed=0)[0]["player"]
    assert "You are player_0 and play X" in observation and "It is your turn" in observation


#: The observation lines bench/selfplay.py and the configs kept before the compact view was a game option.
TICTACTOE_LINES = r"( [XO1-9] \| [XO1-9] \| [XO1-9])|(It is your turn .*)"


def test_the_compact_view_shows_the_board_and_whose_turn_it_is():
    game = tsmg.make("TicTacToe-v0", view="compact")
    game.reset(seed=0)
    observations = game.step({"player_0": "5"}).observations
    assert observations["player_1"] == (
        " 1 | 2 | 3\n 4 | X | 6\n 7 | 8 | 9\nIt is your turn (O). Answer with the number of an empty cell: "
        "1, 2, 3, 4, 6, 7, 8, 9."
    )
    assert (
        observations["player_0"]
        == " 1 | 2 | 3\n 4 | X | 6\n 7 | 8 | 9\nIt is the turn of player_1 (O); wait for your turn."
    )
    for move in ("player_1", "1"), ("player_0", "2"), ("player_1", "4"), ("player_0", "8"):
        observations = game.step(dict([move])).observations
    assert observations["player_1"] == " O | X | 3\n O | X | 6\n 7 | X | 9\nGame over: player_0 (X) won."
    single = tsmg.make("TicTacToe-vsMinimax-v0", view="compact", learner_seat="player_0")
    assert single.reset(seed=0)[0]["player"].startswith(" 1 | 2 | 3\n")  # no line naming the opponent


def test_the_compact_view_is_the_observation_lines_the_bench_kept_at_every_decision():
    from tsmg.policies import compact_observation

    rng = np.random.default_rng(0)
    for episode in range(20):
        full, compact = tsmg.make("TicTacToe-v0"), tsmg.make("TicTacToe-v0", view="compact")
        full.reset(seed=episode)
        compact.reset(seed=episode)
        while full.active_agents:
            agent = full.active_agents[0]
            assert compact.observe(agent) == compact_observation(full.observe(agent), TICTACTOE_LINES)
            move = str(rng.choice(full.legal_actions(agent)))
            full.step({agent: move})
            compact.step({agent: move})
