"""Snake: rules on hand-built boards, the text layer, determinism, the arena, and the baseline."""

from __future__ import annotations

import numpy as np
import pytest

import tsmg
from games import snake_rules as rules
from games.snake import Snake, SnakeArena
from games.snake_rules import DOWN, LEFT, RIGHT, UP, Board
from games.snake_rules import Snake as S
from tsmg.core import Invalid


def board(*snakes: S, apples: tuple[tuple[int, int], ...] = ((9, 9),), size: int = 10) -> Board:
    return Board(size=size, snakes=snakes, apples=apples)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------------------- rules
def test_eating_grows_and_respawns() -> None:
    start = board(S(((2, 2),), UP), S(((7, 7),), UP), apples=((2, 3), (5, 5)))
    after, fates = rules.step(start, {0: UP, 1: DOWN}, rng())
    assert fates[0] == rules.Fate(ate=True)
    assert after.snakes[0].body == ((2, 3), (2, 2))
    assert after.snakes[0].apples == 1
    assert len(after.apples) == 2 and (5, 5) in after.apples and (2, 3) not in after.apples
    assert not set(after.apples) & rules.occupied(after)
    assert rules.reward(fates[0], death_penalty=1.0) == 1.0


def test_moving_without_apple_keeps_length() -> None:
    start = board(S(((2, 2), (2, 1), (2, 0)), UP), S(((7, 7),), UP))
    after, fates = rules.step(start, {0: RIGHT, 1: DOWN}, rng())
    assert after.snakes[0].body == ((3, 2), (2, 2), (2, 1))
    assert fates[0] == rules.Fate()


@pytest.mark.parametrize(("head", "move"), [((0, 4), LEFT), ((9, 4), RIGHT), ((4, 0), DOWN), ((4, 9), UP)])
def test_wall_kills(head: tuple[int, int], move: int) -> None:
    after, fates = rules.step(board(S((head,), move), S(((5, 5),), UP)), {0: move, 1: UP}, rng())
    assert fates[0].death == "wall" and not after.snakes[0].alive
    assert rules.reward(fates[0], death_penalty=1.0) == -2.0
    assert rules.reward(fates[0], death_penalty=0.0) == -1.0


def test_own_body_kills_but_own_tail_does_not() -> None:
    curled = S(((2, 2), (2, 1), (1, 1), (1, 2)), UP)  # tail at (1, 2), left of the head
    _, fates = rules.step(board(curled, S(((7, 7),), UP)), {0: LEFT, 1: UP}, rng())
    assert fates[0].death is None  # the tail moves away this round
    _, fates = rules.step(board(curled, S(((7, 7),), UP)), {0: DOWN, 1: UP}, rng())
    assert fates[0].death == "body"


def test_other_body_kills_and_an_eating_tail_stays() -> None:
    other = S(((5, 3), (5, 2), (4, 2)), UP)  # its tail is (4, 2)
    me = S(((3, 2),), RIGHT)
    _, fates = rules.step(board(me, other), {0: RIGHT, 1: UP}, rng())
    assert fates[0].death is None  # the other's tail left
    _, fates = rules.step(board(me, other, apples=((5, 4),)), {0: RIGHT, 1: UP}, rng())
    assert fates[0].death == "body" and fates[1].ate  # it ate, so its tail stayed


def test_head_on_kills_both_same_cell_and_swap() -> None:
    _, fates = rules.step(board(S(((2, 2),), RIGHT), S(((4, 2),), LEFT)), {0: RIGHT, 1: LEFT}, rng())
    assert fates[0].death == fates[1].death == "head-on"
    _, fates = rules.step(board(S(((2, 2),), RIGHT), S(((3, 2),), LEFT)), {0: RIGHT, 1: LEFT}, rng())
    assert fates[0].death == fates[1].death == "head-on"


def test_missing_move_keeps_direction() -> None:
    after, _ = rules.step(board(S(((2, 2),), RIGHT), S(((7, 7),), DOWN)), {0: UP}, rng())
    assert after.snakes[0].head == (2, 3) and after.snakes[1].head == (7, 6)


def _random_boards(count: int) -> list[Board]:
    """Boards reached by random play (snakes of various lengths, all positions legal)."""
    boards = []
    generator = rng(7)
    for _ in range(count):
        state = rules.spawn(generator, 6, 2, 8)
        for _ in range(int(generator.integers(0, 12))):
            moves = {i: rules.random_safe_move(state, i, generator) for i in (0, 1)}
            following, _ = rules.step(state, moves, generator)
            if rules.alive_count(following) < 2:
                break
            state = following
        boards.append(state)
    return boards


def test_safe_moves_never_die_by_wall_or_body_whatever_the_other_does() -> None:
    for state in _random_boards(150):
        for move in rules.safe_moves(state, 1):
            for other in rules.MOVES:
                _, fates = rules.step(state, {0: other, 1: move}, rng())
                assert fates[1].death in (None, "head-on"), (state, move, other)


def test_enemy_never_picks_an_unsafe_move_when_a_safe_one_exists() -> None:
    cornered = board(S(((5, 5),), UP), S(((0, 0),), DOWN), apples=((1, 0),))
    assert rules.safe_moves(cornered, 1) == (UP, RIGHT)
    boxed = board(S(((1, 0), (1, 1), (0, 1)), UP), S(((0, 0),), DOWN))
    assert rules.safe_moves(boxed, 1) == ()
    generator = rng(3)
    for state in [cornered, boxed, *_random_boards(100)]:
        safe = rules.safe_moves(state, 1)
        for _ in range(20):
            move = rules.random_safe_move(state, 1, generator)
            assert move in (safe or rules.MOVES)
    draws = {rules.random_safe_move(cornered, 1, generator) for _ in range(50)}
    assert draws == {UP, RIGHT}  # uniform among the safe moves, so both appear


def test_greedy_goes_for_the_apple_and_avoids_death() -> None:
    assert rules.greedy_move(board(S(((5, 5),), UP), S(((0, 9),), UP), apples=((8, 5),)), 0) == RIGHT
    # The apple lies beyond the wall of its own body; the greedy move must not run into it.
    state = board(S(((5, 5), (6, 5), (6, 4)), LEFT), S(((0, 9),), UP), apples=((9, 5),))
    assert rules.greedy_move(state, 0) in rules.safe_moves(state, 0)


def test_spawn_is_deterministic_and_legal() -> None:
    first = rules.spawn(rng(11), 10, 4, 5)
    assert first == rules.spawn(rng(11), 10, 4, 5)
    heads = [s.head for s in first.snakes]
    assert len(set(heads)) == 4 and len(set(first.apples)) == 5 and not set(heads) & set(first.apples)


# ------------------------------------------------------------------------------------- game
def test_parse_action_variants_and_garbage() -> None:
    game = Snake()
    for text, move in [("up", UP), (" LEFT. ", LEFT), ("'Right'", RIGHT), ("[down]", DOWN), ("**up**", UP)]:
        assert game.parse(game.agents[0], text) == move
    for text in ["", "   ", "north", "x" * 100_000, "\x00\x1b[31m", "🙂 ünïcödé", "<action></action>"]:
        parsed = game.parse("player", text)
        assert isinstance(parsed, Invalid) and "up, down, left, right" in parsed.reason


def test_legal_actions_are_all_four_moves() -> None:
    game = Snake()
    game.reset(seed=0)
    assert game.legal_actions("player") == ["up", "down", "left", "right"]


def test_text_shows_convention_coordinates_and_grid() -> None:
    game = Snake()
    start = board(S(((0, 0), (1, 0)), LEFT), S(((9, 9),), UP), apples=((0, 9),))
    observations, _ = game.reset(options={"board": start})
    text = observations["player"]
    assert "(0, 0) is the bottom-left corner" in text
    assert "Apples at (0, 9)." in text and "head at (0, 0), body at (1, 0)" in text
    lines = text.splitlines()
    top = lines.index(next(line for line in lines if line.startswith("Grid"))) + 1
    assert lines[top] == "A________2" and lines[top + 9] == "1T________"
    assert lines[-1] == "Actions: up, down, left, right."


def test_death_terminates_with_minus_two_and_cap_truncates() -> None:
    game = Snake(max_steps=8)
    game.reset(options={"board": board(S(((0, 4),), LEFT), S(((6, 6),), UP))})
    result = game.step({"player": "left"})
    assert result.rewards["player"] == -2.0 and result.terminated["player"] and not result.truncated["player"]
    assert game.is_success("player") is False
    game = Snake(max_steps=3)
    game.reset(options={"board": board(S(((5, 5),), UP), S(((0, 0),), UP), apples=((5, 6), (9, 9)))})
    total = 0.0
    for _ in range(3):
        result = game.step({"player": game.oracle_action("player") or "up"})
        total += result.rewards["player"]
    assert result.truncated["player"] and not result.terminated["player"]
    assert total == game.episode_returns()["player"] >= 1.0 and game.is_success("player")


def test_enemy_death_ends_the_episode() -> None:
    game = Snake(max_steps=8)
    # The enemy is boxed in by the player's body: every move kills it.
    walled_in = S(((2, 0), (1, 0), (1, 1), (0, 1), (0, 2)), UP)  # (1, 0) and (0, 1) stay put: not the tail
    game.reset(options={"board": board(walled_in, S(((0, 0),), DOWN))})
    result = game.step({"player": "up"})
    assert result.terminated["player"] and result.rewards["player"] == 0.0
    assert not game.state.snakes[1].alive and game.is_success("player") is False  # no apple eaten


def _play(game: tsmg.Game, seed: int, policy: str) -> tuple[list[str], float]:
    observations, _ = game.reset(seed=seed)
    chooser = np.random.default_rng(seed + 1)
    seen = [observations[game.agents[0]]]
    total = 0.0
    while not game.done:
        actions: dict[str, str] = {}
        for agent in game.active_agents:
            legal = game.legal_actions(agent) or []
            actions[agent] = (
                (game.oracle_action(agent) or "up") if policy == "oracle" else legal[int(chooser.integers(4))]
            )
        result = game.step(actions)
        seen.append(result.observations[game.agents[0]])
        total += sum(result.rewards.values())
    return seen, total


@pytest.mark.parametrize("game_id", ["Snake-v0", "SnakeArena-4p-v0"])
def test_same_seed_same_episode(game_id: str) -> None:
    game = tsmg.make(game_id)
    assert _play(game, 5, "random") == _play(game, 5, "random")
    assert _play(game, 5, "random")[0][0] != _play(game, 6, "random")[0][0]


def test_heuristic_beats_random() -> None:
    game = tsmg.make("Snake-20Step-v0")
    oracle = [_play(game, seed, "oracle")[1] for seed in range(100)]
    random = [_play(game, seed, "random")[1] for seed in range(100)]
    assert np.mean(oracle) > np.mean(random) + 3.0  # measured: about 5.5 against -0.9


def test_registered_variants() -> None:
    caps = {"Snake-v0": 8, "Snake-20Step-v0": 20, "Snake-100Step-v0": 100}
    for game_id, cap in caps.items():
        assert tsmg.make(game_id).config.max_steps == cap  # type: ignore[attr-defined]
    assert tsmg.make("SnakeArena-4p-v0").agents == ("snake_0", "snake_1", "snake_2", "snake_3")


# ------------------------------------------------------------------------------------ arena
def test_arena_perspective_and_dead_snakes_leave() -> None:
    game = SnakeArena(num_snakes=3, max_steps=50)
    start = board(S(((0, 5),), LEFT), S(((5, 5),), UP), S(((8, 8),), UP), apples=((3, 3),))
    observations, _ = game.reset(options={"board": start})
    assert "Your snake (snake_1): head at (5, 5)" in observations["snake_1"]
    grid = [line for line in observations["snake_1"].splitlines() if len(line) == 10 and set(line) <= set("_123A")]
    assert grid[4][5] == "1" and grid[4][0] == "2" and grid[1][8] == "3"
    result = game.step({"snake_0": "left", "snake_1": "up", "snake_2": "down"})
    assert result.rewards["snake_0"] == -2.0 and not result.terminated["snake_1"]
    assert game.active_agents == ("snake_1", "snake_2")
    assert "snake_0 is dead." in result.observations["snake_1"]


def test_arena_invalid_answer_keeps_direction_and_last_alive_ends() -> None:
    game = SnakeArena(num_snakes=2, on_invalid="penalize", invalid_penalty=0.5)
    game.reset(options={"board": board(S(((4, 4),), RIGHT), S(((0, 8),), LEFT))})
    result = game.step({"snake_0": "jump", "snake_1": "up"})
    assert game.state.snakes[0].head == (5, 4) and result.infos["snake_0"]["valid"] is False
    assert result.rewards["snake_0"] == -0.5
    result = game.step({"snake_0": "up", "snake_1": "left"})  # snake_1 leaves the board
    assert result.terminated["snake_0"] and game.is_success("snake_0") and not game.is_success("snake_1")
    default = SnakeArena(num_snakes=2, on_invalid="default_action")
    default.reset(options={"board": board(S(((4, 4),), DOWN), S(((0, 8),), LEFT))})
    assert default.step({"snake_0": "?", "snake_1": "right"}).infos["snake_0"]["action"] == "down"
