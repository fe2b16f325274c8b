"""The checker catches broken games and says what to fix."""

import random

import pytest

import tsmg
from games.frozen_lake import FrozenLake
from tsmg.checker import GameCheckError, check_game


class GlobalRandomLake(FrozenLake):
    """Draws from the global random module: not reproducible."""

    def transition(self, state, actions, rng):
        return super().transition(state, {"player": random.randrange(4)}, rng)


class LossyParser(FrozenLake):
    """Writes action texts its own parser rejects."""

    def action_text(self, agent, action):
        return "move " + super().action_text(agent, action)


class CrashingParser(FrozenLake):
    def parse_action(self, agent, text, state):
        return {"left": 0}[text]


class FixedButClaimsRandom(FrozenLake):
    @property
    def has_random_start(self):
        return True


def test_registered_frozen_lake_passes():
    report = check_game("FrozenLake-NoSlip-v0")
    assert report.episodes == 10 and report.legal_actions_checked > 0


def test_global_randomness_is_caught():
    with pytest.raises(GameCheckError, match="global random"):
        check_game(GlobalRandomLake(map_name="8x8", max_steps=50))


def test_unparseable_legal_action_is_caught():
    with pytest.raises(GameCheckError, match="does not parse back"):
        check_game(LossyParser(map_name="4x4"))


def test_parser_exceptions_are_turned_into_invalid_answers():
    game = CrashingParser(map_name="4x4")
    game.reset(seed=0)
    assert "parser error" in game.parse("player", "up").reason
    with pytest.raises(GameCheckError, match="does not parse back"):
        check_game(game)


def test_claimed_random_start_is_checked():
    with pytest.raises(GameCheckError, match="has_random_start"):
        check_game(FixedButClaimsRandom(map_name="4x4"))


def test_check_accepts_ids():
    assert check_game(tsmg.make("FrozenLake-v0")).game_id == "FrozenLake-v0"
