"""Forking: every game in the catalog, forked at random points, continues exactly as the unforked episode.

For each registered game and several seeds, a reference episode is played from the seed with a
fixed stream of answers (legal moves, some nonsense to exercise the invalid-answer rule). Then the
same episode is played again, forked at a random round, and *both* the fork and the original are
played on to the end with the same answers: each must reproduce the reference's continuation
(observations, rewards, endings, infos, legal moves, success), and stepping one must never change
the other. The game's chance is part of the fork (Snake's apples, 2048's tiles, Kuhn Poker's
deal, Minesweeper's mines), so a fork that shared or reset the random generator would diverge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tsmg
from tsmg.core import Game, GameError, RefereedGame

# OpenSpiel's ids fork by cloning the OpenSpiel state, TextArena's by sharing an environment no move
# changes in place: tests/test_adapters_openspiel.py and tests/test_adapters_textarena.py cover them.
GAME_IDS = [spec.id for spec in tsmg.specs() if not spec.id.startswith(("OpenSpiel/", "TextArena/"))]
SEEDS = (0, 1, 2, 3)
MAX_ROUNDS = 60
OBSERVABLE = 6  # the fields of view() that do not come from a step's result


def answers_for(game: Game, rng: np.random.Generator) -> dict[str, str]:
    """Mostly legal moves, sometimes nonsense (the invalid-answer rule and forfeits are part of the state)."""
    answers = {}
    for agent in game.active_agents:
        legal = game.legal_actions(agent)
        if not legal or rng.random() < 0.1:
            answers[agent] = "no such move"
        else:
            answers[agent] = legal[int(rng.integers(len(legal)))]
    return answers


def view(game: Game, result: Any = None) -> tuple[Any, ...]:
    """Everything observable about the game now (and the last step's result)."""
    agents = game.agents
    observable = (
        game.done,
        tuple(game.active_agents),
        tuple(game.observe(agent) for agent in agents),
        tuple(tuple(game.legal_actions(agent) or ()) for agent in agents),
        tuple(game.is_success(agent) for agent in agents),
        game.episode_returns() if isinstance(game, RefereedGame) else None,
    )
    if result is None:
        return observable
    return (*observable, result.rewards, result.terminated, result.truncated, repr(result.infos))


def play_on(game: Game, answers: list[dict[str, str]]) -> list[tuple[Any, ...]]:
    return [view(game, game.step(round_answers)) for round_answers in answers]


def reference(game_id: str, seed: int) -> tuple[list[dict[str, str]], list[tuple[Any, ...]]]:
    """The answers of a whole episode and what the game showed after each round."""
    game = tsmg.make(game_id, max_steps=MAX_ROUNDS)
    game.reset(seed=seed)
    rng = np.random.default_rng(seed + 100)
    answers, views = [], [view(game)]
    while not game.done:
        answers.append(answers_for(game, rng))
        views.append(view(game, game.step(answers[-1])))
    return answers, views


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_a_fork_continues_exactly_as_the_unforked_episode(game_id):
    forked_at = []
    for seed in SEEDS:
        answers, views = reference(game_id, seed)
        # Any round before the end, the start only when the episode is one round long.
        fork_round = int(np.random.default_rng(seed).integers(min(1, len(answers) - 1), len(answers)))
        forked_at.append((fork_round, len(answers)))
        game = tsmg.make(game_id, max_steps=MAX_ROUNDS)
        game.reset(seed=seed)
        assert game.fork_mode != "none", f"{game_id} cannot fork"
        play_on(game, answers[:fork_round])
        twin = game.fork()
        assert twin is not game and view(twin) == view(game) == views[fork_round][:OBSERVABLE]
        # The fork first, to the end: the original must not move meanwhile.
        assert play_on(twin, answers[fork_round:]) == views[fork_round + 1 :], f"{game_id} seed {seed}: the fork"
        assert view(game) == views[fork_round][:OBSERVABLE], f"{game_id} seed {seed}: the fork moved the original"
        assert play_on(game, answers[fork_round:]) == views[fork_round + 1 :], f"{game_id} seed {seed}: the original"
    assert all(at > 0 or length == 1 for at, length in forked_at), forked_at


@pytest.mark.parametrize("game_id", ["FrozenLake-v0", "Snake-v0", "Taxi-v0"])
def test_a_fork_of_a_fork_and_forks_at_every_round(game_id):
    answers, views = reference(game_id, 5)
    game = tsmg.make(game_id, max_steps=MAX_ROUNDS)
    game.reset(seed=5)
    forks = []
    for index, round_answers in enumerate(answers):
        forks.append((index, game.fork().fork()))
        game.step(round_answers)
    for index, twin in forks:
        assert play_on(twin, answers[index:]) == views[index + 1 :]


def test_the_catalog_declares_how_each_game_forks():
    modes = {game_id: tsmg.make(game_id).fork_mode for game_id in GAME_IDS}
    assert set(modes.values()) <= {"snapshot", "replay"}, modes
    assert modes["FrozenLake-v0"] == "snapshot" and modes["Taxi-v0"] == "replay", modes


def test_a_replay_fork_needs_a_seed_and_a_game_without_a_factory_cannot_fork():
    game = tsmg.make("Taxi-v0")
    game.reset()  # no seed: the env's chance cannot be replayed
    with pytest.raises(GameError, match="without one"):
        game.fork()
    from games.gym_ports import Taxi

    built_by_hand = Taxi()
    assert built_by_hand.fork_mode == "none"
    built_by_hand.reset(seed=0)
    with pytest.raises(GameError, match="cannot fork"):
        built_by_hand.fork()
    with pytest.raises(GameError, match="no episode"):
        tsmg.make("FrozenLake-v0").fork()
