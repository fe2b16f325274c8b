"""The fixed-opponent wrapper and state-checked parsing, plus contract checks over every classic game."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmg
from games.tictactoe import TicTacToeVsMinimax
from tsmg.answers import normalize_answer
from tsmg.core import Invalid

CLASSIC_IDS = [
    "TicTacToe-v0",
    "TicTacToe-vsMinimax-v0",
    "ConnectFour-v0",
    "ConnectFour-vsMinimax-v0",
    "RockPaperScissors-v0",
    "RockPaperScissors-vsCounter-v0",
    "KuhnPoker-v0",
    "KuhnPoker-vsNash-v0",
    "2048-Short-v0",
    "Minesweeper-v0",
    "Minesweeper-Beginner-v0",
    "Wordle-v0",
]
# Shallow search keeps the many Connect Four oracle calls here fast (the depth is tested elsewhere).
OVERRIDES = {"ConnectFour-v0": {"oracle_depth": 2}, "ConnectFour-vsMinimax-v0": {"oracle_depth": 2}}


def test_normalize_answer():
    assert normalize_answer("  **Reveal   1 2**. ") == "reveal 1 2"
    assert normalize_answer("x" * 201) is None
    assert normalize_answer("") == ""


def _random_episode(game_id, seed, policy="random"):
    """Play seeded random legal actions (or the oracle); check round trips; return a trace."""
    game = tsmg.make(game_id, **OVERRIDES.get(game_id, {}))
    rng = np.random.default_rng(seed)
    observations, _ = game.reset(seed=seed)
    trace = [observations]
    while not game.done:
        actions = {}
        for agent in game.active_agents:
            legal = game.legal_actions(agent)
            assert legal, f"{game_id}: no legal actions for active {agent}"
            for text in legal[:50]:
                parsed = game.parse(agent, text)
                assert not isinstance(parsed, Invalid), (game_id, text, parsed)
                assert game.action_text(agent, parsed) == text
            oracle = game.oracle_action(agent)
            assert oracle is None or oracle in legal, (game_id, oracle)
            actions[agent] = (
                oracle if policy == "oracle" and oracle is not None else legal[int(rng.integers(len(legal)))]
            )
        result = game.step(actions)
        assert all(info["valid"] for agent, info in result.infos.items() if agent in actions)
        trace.append((actions, result.observations, result.rewards))
    return trace, game


@pytest.mark.parametrize("game_id", CLASSIC_IDS)
def test_contract_random_and_oracle_play(game_id):
    for seed in range(3):
        first, game = _random_episode(game_id, seed)
        again, _ = _random_episode(game_id, seed)
        assert first == again, f"{game_id}: seed {seed} did not replay identically"
        assert game.is_success(game.agents[0]) in (True, False, None)
    _random_episode(game_id, 0, policy="oracle")
    starts = {tuple(sorted(_random_episode(game_id, seed)[0][0].items())) for seed in range(6)}
    assert (len(starts) > 1) == tsmg.make(game_id).has_random_start


@pytest.mark.parametrize("game_id", CLASSIC_IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_parse_never_raises(game_id, text):
    # RulesGame.step calls parse_action directly, so it must not raise (before or during an episode).
    game = tsmg.make(game_id, **OVERRIDES.get(game_id, {}))
    parsed = game.parse_action(game.agents[0], text, None)
    assert not isinstance(parsed, Invalid) or parsed.reason
    game.reset(seed=0)
    for agent in game.agents:
        parsed = game.parse_action(agent, text, game.state)
        assert not isinstance(parsed, Invalid) or parsed.reason


def test_wrapper_seats_and_opponent_first_move():
    game = TicTacToeVsMinimax(learner_seat="player_1")
    observations, _ = game.reset(seed=0)
    assert game.state.inner.board.count(1) == 1  # X (the opponent) has moved
    assert "You play against a perfect minimax player (player_0)." in observations["player"]
    learners = set()
    game = tsmg.make("KuhnPoker-vsNash-v0")
    for seed in range(10):
        game.reset(seed=seed)
        learners.add(game.state.learner)
    assert learners == {"player_0", "player_1"}


def test_wrapper_epsilon_opponent_is_seeded():
    def replies(seed):
        game = TicTacToeVsMinimax(learner_seat="player_0", opponent_epsilon=1.0)
        game.reset(seed=seed)
        game.step({"player": "5"})
        return game.state.inner.board

    assert replies(1) == replies(1)
    assert len({replies(seed) for seed in range(10)}) > 1
    assert TicTacToeVsMinimax(opponent_epsilon=0.5).has_random_start


def test_wrapper_rewards_reach_the_learner():
    game = TicTacToeVsMinimax(learner_seat="player_0", opponent_epsilon=1.0)
    game.reset(seed=0)
    total = 0.0
    while not game.done:
        total += game.step({"player": game.oracle_action("player")}).rewards["player"]
    assert total in (0.0, 1.0) and total == game.episode_returns()["player"]
    assert game.is_success("player") == (total == 1.0)
