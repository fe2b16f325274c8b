"""Every registered game keeps the contract: checker, parse robustness, determinism."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tsmg
from tsmg.checker import check_game
from tsmg.core import Invalid
from tsmg.policies import RandomPolicy
from tsmg.rollout import rollout

# OpenSpiel's 104 ids are checked in tests/test_adapters_openspiel.py and TextArena's 178 in
# tests/test_adapters_textarena.py, on fewer episodes (a time budget).
GAME_IDS = [spec.id for spec in tsmg.specs() if not spec.id.startswith(("OpenSpiel/", "TextArena/"))]


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_checker_passes(game_id):
    """The contract, the answer rule against hostile answers, every game ends, nonsense never beats random."""
    report = check_game(game_id, seeds=(0, 1, 2))  # 100 seeds per seat for nonsense against random
    assert report.hostile_answers_checked > 0 and set(report.nonsense) == set(tsmg.make(game_id).agents)


arbitrary_text = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1000, max_size=5000),
    st.sampled_from(["", " ", "\x00", "\n\n", "<action>", "</action>", "🙂" * 50, "\u202e\u200b"]),
)


@pytest.mark.parametrize("game_id", GAME_IDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=arbitrary_text)
def test_parse_never_raises(game_id, text):
    game = _game(game_id)
    for agent in game.active_agents or game.agents:
        result = game.parse(agent, text)
        if isinstance(result, Invalid):
            assert result.reason


_games = {}


def _game(game_id):
    if game_id not in _games:
        game = tsmg.make(game_id)
        game.reset(seed=0)
        _games[game_id] = game
    return _games[game_id]


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_same_seed_same_episodes(game_id):
    def play():
        episodes = rollout(game_id, RandomPolicy(seed=2), seeds=[0, 1, 2], game_options={"max_steps": 30})
        return [[(s.agent, s.observation, s.parsed_action, s.reward) for s in e.steps] for e in episodes]

    assert play() == play()
