"""``tsmg serve`` of a TextArena game, one session driven by OpenEnv's own client (no tsmg code on its side)."""

import random

import pytest
from conftest import serve_process
from openenv.core.generic_client import GenericEnvClient

import tsmg

pytest.importorskip("textarena", reason="TextArena's games need the extra: pip install 'tsmg[textarena]'")

KUHN = "TextArena/KuhnPoker-v0"


def test_openenv_generic_client_plays_the_in_process_textarena_episode(tmp_path):
    """Both seats of Kuhn poker played over the wire give the in-process episode of the same seed."""
    with serve_process(tmp_path, "--game", KUHN) as server:
        for seed in (0, 5):
            game = tsmg.make(KUHN)
            observations, _ = game.reset(seed=seed)
            rng = random.Random(seed)
            with GenericEnvClient(base_url=server.url(KUHN)).sync() as env:
                result = env.reset(seed=seed)
                [agent] = game.active_agents
                assert result.observation["agent"] == agent and result.observation["text"] == observations[agent]
                assert result.observation["legal_actions"] == game.legal_actions(agent)
                while not game.done:
                    [agent] = game.active_agents
                    move = rng.choice(game.legal_actions(agent))
                    step = game.step({agent: move})
                    result = env.step({"text": move, "agent": agent})
                    # The observation describes the seat that just answered: its text, reward and answer.
                    assert result.observation["text"] == step.observations[agent]
                    assert result.observation["info"] == step.infos[agent] and result.reward == step.rewards[agent]
                assert result.done and result.observation["returns"] == game.episode_returns()
