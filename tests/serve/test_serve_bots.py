"""OpenSpiel's bots as opponents on ``tsmg serve``: only where the operator enables them, within its limits,
driven by OpenEnv's own client."""

import httpx
import numpy as np
import pytest
from conftest import serve_process
from openenv.core.generic_client import GenericEnvClient

from tsmg.apps.serve.environment import GameEnvironment, NotOfferedError, ServeSettings
from tsmg.policies import RandomPolicy
from tsmg.rollout import rollout

pytest.importorskip("pyspiel")

TICTACTOE = "OpenSpiel/tic_tac_toe-v0"
OFFER = "random, fixed:TEXT, openspiel-mcts"  # OpenSpiel's games have no oracle to offer


def test_an_enabled_openspiel_bot_plays_a_session_driven_by_openenvs_client(tmp_path):
    """``--opponent-model openspiel-mcts`` offers MCTS as the other seat and as vs=mcts (its simulations
    bounded by the served game's value); the best response, not enabled, is refused with the offer."""
    with serve_process(tmp_path, TICTACTOE, "--opponent-model", "openspiel-mcts") as server:
        url = server.url(TICTACTOE)
        info = httpx.get(f"{url}/info").json()
        assert info["opponents"] == OFFER.split(", ")
        returns = []
        with GenericEnvClient(base_url=url).sync() as env:
            for seed in range(3):  # the session plays O; the server's MCTS plays X
                rng = np.random.default_rng(seed)
                result = env.reset(seed=seed, agent="player_1", opponent="openspiel-mcts")
                assert len(result.observation["legal_actions"]) == 8  # the bot has opened: 8 cells left
                while not result.done:
                    legal = result.observation["legal_actions"]
                    result = env.step({"text": legal[int(rng.integers(len(legal)))]})
                returns.append(result.observation["returns"]["player_1"])
            assert min(returns) < 0 and max(returns) <= 0  # 100 simulations never lose to random play here
            # vs=mcts: the game itself is single-agent; the same seed gives the in-process episode.
            options = {"vs": "mcts", "simulations": 20}
            [expected] = rollout(TICTACTOE, RandomPolicy(4), seeds=[4], game_options=options)
            result = env.reset(seed=4, game_options=options)
            assert (
                result.observation["agent"] == "player" and result.observation["text"] == expected.steps[0].observation
            )
            for step in expected.steps:
                result = env.step({"text": step.action})
            assert result.done and result.observation["returns"]["player"] == expected.returns["player"]
            for asked, words in (
                ({"opponent": "openspiel-br", "agent": "player_1"}, f"choose one of: {OFFER}"),
                ({"game_options": {"vs": "br"}}, "game_options.vs: 'br' is not offered by this server"),
                (
                    {"game_options": {"vs": "mcts", "simulations": 5000}},
                    "simulations: 5000 is over this server's limit",
                ),
            ):
                with pytest.raises(RuntimeError, match=words):
                    env.reset(seed=0, **asked)
        response = httpx.post(f"{url}/reset", json={"seed": 0, "game_options": {"vs": "br"}})
        assert response.status_code == 422 and "openspiel-br" in response.json()["detail"]


def test_without_the_operator_a_client_gets_no_bot():
    """The server's own session (in-process): no bot unless enabled; random play as vs stays open to every client."""
    session = GameEnvironment(TICTACTOE, {}, ServeSettings())
    for asked in ({"agent": "player_1", "opponent": "openspiel-mcts"}, {"game_options": {"vs": "mcts"}}):
        with pytest.raises(NotOfferedError, match="not offered by this server"):
            session.reset(seed=0, **asked)
    observation = session.reset(seed=0, game_options={"vs": "random"})
    assert observation.agent == "player" and "played by a bot playing uniformly random legal moves" in observation.text
