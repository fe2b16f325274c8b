"""Sokoban: push rules, rewards, the generator (solvable by construction), the solver and oracle, text."""

from __future__ import annotations

import numpy as np
import pytest

import tsmg
from games import sokoban_rules as rules
from games.sokoban import Sokoban
from games.sokoban_levels import CLASSIC_LEVELS
from games.sokoban_rules import DOWN, LEFT, RIGHT, UP
from tsmg.core import Invalid

CORRIDOR = (
    "#######",
    "#@$ $.#",
    "#   . #",
    "#######",
)


def state_of(rows: tuple[str, ...]) -> rules.SokobanState:
    return rules.parse_level(rows, "test")


def cell(state: rules.SokobanState, x: int, y: int) -> int:
    """Flat index of (x, y) with (0, 0) bottom-left, as the text shows it."""
    level = state.level
    return (level.height - 1 - y) * level.width + x


# ------------------------------------------------------------------------------------- rules
def test_push_moves_one_box_one_cell() -> None:
    start = state_of(CORRIDOR)
    after, push = rules.move(start, RIGHT)
    assert push == (cell(start, 2, 2), cell(start, 3, 2))
    assert after.player == cell(start, 2, 2) and cell(start, 3, 2) in after.boxes


def test_cannot_push_two_boxes_or_into_a_wall() -> None:
    start = state_of(CORRIDOR)
    two_in_a_row, _ = rules.move(start, RIGHT)
    blocked, push = rules.move(two_in_a_row, RIGHT)  # box at (3, 2) then box at (4, 2)
    assert push is None and blocked == two_in_a_row
    against_wall = state_of(("#####", "#@$##", "#  .#", "#####"))
    unchanged, push = rules.move(against_wall, RIGHT)
    assert push is None and unchanged == against_wall
    into_wall, push = rules.move(start, UP)
    assert push is None and into_wall == start


def test_push_rewards() -> None:
    level = state_of(("######", "#@$. #", "#  * #", "######")).level
    goal, floor = cell_at(level, 3, 2), cell_at(level, 4, 2)
    assert rules.push_reward(level, (cell_at(level, 2, 2), goal)) == 1.0
    assert rules.push_reward(level, (goal, floor)) == -1.0
    assert rules.push_reward(level, (cell_at(level, 1, 1), cell_at(level, 2, 1))) == 0.0
    assert rules.push_reward(level, None) == 0.0


def cell_at(level: rules.Level, x: int, y: int) -> int:
    return (level.height - 1 - y) * level.width + x


def test_parse_level_rejects_bad_levels() -> None:
    with pytest.raises(ValueError, match="enclosed"):
        rules.parse_level(("#####", "#@$ .", "#####"), "open")
    with pytest.raises(ValueError, match="as many boxes as goals"):
        rules.parse_level(("#####", "#@$$.#", "######"), "uneven")


def test_solver_is_optimal_and_knows_when_to_give_up() -> None:
    assert rules.solve(state_of(("######", "#@$ .#", "######"))) == [RIGHT, RIGHT]
    assert rules.solve(state_of(("#####", "#@ .#", "#  $#", "#####"))) is None  # box stuck in a corner
    hard = rules.parse_level(CLASSIC_LEVELS["microban-5"], "microban-5")
    assert rules.solve(hard, max_states=1_000) is None
    assert rules.solve(state_of(("#####", "#@*##", "#####"))) == []


@pytest.mark.parametrize(("name", "moves"), [("microban-1", 33), ("microban-2", 16), ("microban-4", 23)])
def test_solver_lengths_on_classic_levels(name: str, moves: int) -> None:
    start = rules.parse_level(CLASSIC_LEVELS[name], name)
    solution = rules.solve(start)
    assert solution is not None and len(solution) == moves
    for action in solution:
        start, _ = rules.move(start, action)
    assert rules.solved(start)


def test_generated_levels_are_solvable_within_the_walk() -> None:
    for seed in range(50):
        generator = np.random.default_rng(seed)
        level = rules.generate(generator, 6, 1 + seed % 2, walk_steps=30)
        assert len(level.boxes) == len(level.level.goals) == 1 + seed % 2
        assert not rules.solved(level)
        walls = level.level.walls
        border = [i for i in range(36) if i < 6 or i >= 30 or i % 6 in (0, 5)]
        assert all(walls[i] for i in border)
        solution = rules.solve(level)
        assert solution is not None and 3 <= len(solution) <= 30


def test_generation_is_deterministic() -> None:
    first = rules.generate(np.random.default_rng(3), 8, 3, 50)
    assert first == rules.generate(np.random.default_rng(3), 8, 3, 50)


# ------------------------------------------------------------------------------------- game
def play(game: Sokoban, seed: int, policy: str) -> tuple[list[str], float]:
    observations, _ = game.reset(seed=seed)
    chooser = np.random.default_rng(seed + 1)
    seen = [observations["player"]]
    while not game.done:
        action = (
            game.oracle_action("player")
            if policy == "oracle"
            else ("up", "down", "left", "right")[int(chooser.integers(4))]
        )
        seen.append(game.step({"player": action or "up"}).observations["player"])
    return seen, game.episode_returns()["player"]


def test_oracle_solves_generated_levels_within_the_cap() -> None:
    game = tsmg.make("Sokoban-v0")
    assert isinstance(game, Sokoban)
    for seed in range(50):
        _, total = play(game, seed, "oracle")
        assert game.is_success("player"), seed
        assert game.rounds <= 30 and total >= 11.0  # +1 per box onto a goal, +10 solved


@pytest.mark.parametrize("name", sorted(CLASSIC_LEVELS))
def test_oracle_solves_classic_levels(name: str) -> None:
    game = Sokoban(level=name, max_steps=60)
    play(game, 0, "oracle")
    assert game.is_success("player") and game.rounds <= 60


def test_rewards_termination_and_truncation() -> None:
    game = Sokoban(max_steps=5)
    game.reset(options={"rows": ("#######", "#@$. .#", "#  $  #", "#######")})
    first = game.step({"player": "right"})
    assert first.rewards["player"] == 1.0 and not first.terminated["player"]
    off = game.step({"player": "right"})
    assert off.rewards["player"] == -1.0
    for _ in range(3):
        last = game.step({"player": "up"})  # into the wall: nothing happens
    assert last.truncated["player"] and not last.terminated["player"] and not game.is_success("player")
    game = Sokoban(step_penalty=0.1)
    game.reset(options={"rows": ("######", "#@$ .#", "######")})
    game.step({"player": "right"})
    solved = game.step({"player": "right"})
    assert solved.terminated["player"] and solved.rewards["player"] == pytest.approx(10.9)
    assert game.episode_returns()["player"] == pytest.approx(10.8) and game.is_success("player")


def test_same_seed_same_episode_and_seeds_differ() -> None:
    game = tsmg.make("Sokoban-v0")
    assert isinstance(game, Sokoban)
    assert play(game, 4, "random") == play(game, 4, "random")
    starts = {play(game, seed, "random")[0][0] for seed in range(10)}
    assert len(starts) == 10


def test_oracle_beats_random() -> None:
    game = tsmg.make("Sokoban-v0")
    assert isinstance(game, Sokoban)
    oracle = [play(game, seed, "oracle")[1] for seed in range(100)]
    random = [play(game, seed, "random")[1] for seed in range(100)]
    assert np.mean(oracle) > np.mean(random) + 5.0  # measured: about 11.3 against 0.8


def test_text_layer() -> None:
    game = Sokoban(level="microban-2")
    observations, _ = game.reset(seed=0)
    text = observations["player"]
    assert "(0, 0) is the bottom-left corner" in text
    assert "You are at (3, 4). Boxes at (2, 3), (3, 2) on a goal, (3, 3) on a goal." in text
    assert "#_#P_#" in text and "#_B*_#" in text and "#_.*_#" in text
    assert text.endswith("Actions: up, down, left, right.")
    for answer, move in [("UP", UP), (" down. ", DOWN), ("'left'", LEFT), ("[right]", RIGHT)]:
        assert game.parse("player", answer) == move
    for answer in ["", "   ", "push", "x" * 100_000, "\x00\x1b", "🙂", "<action></action>"]:
        parsed = game.parse("player", answer)
        assert isinstance(parsed, Invalid) and "up, down, left, right" in parsed.reason
    assert game.legal_actions("player") == ["up", "down", "left", "right"]


def test_bad_options_fail_with_the_field_name() -> None:
    with pytest.raises(tsmg.GameOptionsError, match="level"):
        tsmg.make("Sokoban-v0", level="nope")
    with pytest.raises(tsmg.GameOptionsError, match="min_boxes"):
        tsmg.make("Sokoban-v0", min_boxes=3, max_boxes=2)
