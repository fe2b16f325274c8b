import numpy as np
import pytest

import tsmg
from games import game2048_rules as rules
from games.game2048 import Game2048, Game2048State
from tsmg.core import Invalid


@pytest.mark.parametrize(
    ("line", "slid", "points"),
    [
        ((2, 2, 2, 2), (4, 4, 0, 0), 8),
        ((4, 4, 8, 0), (8, 8, 0, 0), 8),
        ((2, 0, 2, 4), (4, 4, 0, 0), 4),
        ((2, 2, 4, 4), (4, 8, 0, 0), 12),
        ((0, 0, 0, 2), (2, 0, 0, 0), 0),
        ((2, 4, 8, 16), (2, 4, 8, 16), 0),
        ((8, 0, 8, 8), (16, 8, 0, 0), 16),
    ],
)
def test_slide_line(line, slid, points):
    assert rules.slide_line(line) == (slid, points)


def test_moves_in_every_direction():
    board = (
        2, 2, 0, 0,
        0, 0, 0, 0,
        2, 0, 0, 4,
        0, 0, 0, 4,
    )  # fmt: skip
    left, points = rules.move(board, rules.LEFT)
    assert left[:4] == (4, 0, 0, 0) and points == 4
    right, _ = rules.move(board, rules.RIGHT)
    assert right[:4] == (0, 0, 0, 4) and right[8:12] == (0, 0, 2, 4)
    up, points = rules.move(board, rules.UP)
    assert up[:4] == (4, 2, 0, 8) and points == 12
    down, _ = rules.move(board, rules.DOWN)
    assert down[12:] == (4, 2, 0, 8)


def test_spawn_probabilities_and_stuck_board():
    rng = np.random.default_rng(0)
    empty = (0,) * 16
    values = [max(rules.spawn(empty, rng)) for _ in range(4000)]
    assert abs(values.count(4) / len(values) - 0.1) < 0.02 and set(values) == {2, 4}
    stuck = tuple(2 ** (1 + (r + c) % 2) for r in range(4) for c in range(4))
    assert not rules.can_move(stuck)
    assert rules.spawn(stuck, rng) == stuck


def test_no_op_move_uses_the_turn_without_a_tile():
    game = Game2048()
    game.reset(seed=0)
    board = (2, 0, 0, 0) + (0,) * 12
    state = Game2048State(board, 0)
    rng = np.random.default_rng(0)
    assert game.transition(state, {"player": rules.UP}, rng) == (state, {"player": 0.0})
    moved, reward = game.transition(state, {"player": rules.RIGHT}, rng)
    assert moved.board.count(0) == 14 and reward == {"player": 0.0}
    observation = game.render(state, "player")
    assert "would change nothing and just use a turn: up, left" in observation


def test_reward_is_merge_score_and_game_ends_when_stuck():
    game = Game2048()
    state = Game2048State((2, 2, 4, 4) + (0,) * 12, 10)
    next_state, reward = game.transition(state, {"player": rules.LEFT}, np.random.default_rng(0))
    assert reward == {"player": 12.0} and next_state.score == 22
    stuck = tuple(2 ** (1 + (r + c) % 2) for r in range(4) for c in range(4))
    assert game.is_terminal(Game2048State(stuck)) and not game.is_terminal(state)
    assert "Game over" in game.render(Game2048State(stuck), "player")


@pytest.mark.parametrize("text", ["", "north", "upp", "⬆", "left right", "\t" * 300, "d", "u", "l", "r"])
def test_parse_rejects(text):
    parsed = Game2048().parse("player", text)
    assert isinstance(parsed, Invalid) and "up, down, left, right" in parsed.reason


def test_target_must_be_a_power_of_two():
    with pytest.raises(tsmg.GameOptionsError, match="power of two"):
        tsmg.make("2048-v0", target=300)


def test_seeded_determinism_and_oracle_beats_random():
    def play(policy, seed):
        game = tsmg.make("2048-v0")
        game.reset(seed=seed)
        rng = np.random.default_rng(seed)
        boards = []
        while not game.done:
            answer = (
                game.oracle_action("player") if policy == "oracle" else ["up", "down", "left", "right"][rng.integers(4)]
            )
            game.step({"player": answer})
            boards.append(game.state.board)
        return bool(game.is_success("player")), boards

    oracle = [play("oracle", seed) for seed in range(6)]
    assert sum(success for success, _ in oracle) >= 5  # a 256 tile within 200 moves
    assert not any(play("random", seed)[0] for seed in range(6))
    assert play("random", 3) == play("random", 3)
