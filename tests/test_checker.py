"""The checker catches broken games and says what to fix."""

import random
import re

import pytest

import tsmg
from games.frozen_lake import FrozenLake
from games.frozen_lake_rules import MOVE_NAMES
from tsmg.answers import normalize_answer
from tsmg.apps.cli import main
from tsmg.checker import GameCheckError, check_game
from tsmg.core import GameCodeError, Invalid


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


class AbbreviatingLake(FrozenLake):
    """Reads 'd' as down, an abbreviation its prompt never announces (as 2048 once did)."""

    def parse_action(self, agent, text, state):
        return super().parse_action(agent, "down" if text.strip() == "d" else text, state)


class CaseSensitiveLake(FrozenLake):
    """Rejects 'LEFT': an answer names a move whatever its case."""

    def parse_action(self, agent, text, state):
        return super().parse_action(agent, text, state) if text == text.lower() else Invalid("lower case only")


class SecretAliasLake(FrozenLake):
    """Declares an alias its observation never mentions."""

    def answer_aliases(self, agent):
        return {"south": "down"}

    def parse_action(self, agent, text, state):
        return super().parse_action(agent, "down" if text.strip().lower() == "south" else text, state)


class AnnouncedAliasLake(SecretAliasLake):
    """The same alias, announced in the prompt: allowed."""

    def render(self, state, agent):
        return super().render(state, agent) + "\n(You may also answer south for down.)"


class CostlyWalk(FrozenLake):
    """Every move costs 1, standing still nothing: without a forfeit, nonsense beats random play."""

    def transition(self, state, actions, rng):
        state, rewards = super().transition(state, actions, rng)
        return state, {"player": rewards.get("player", 0.0) - 1.0}


class CostlyWalkWithForfeit(CostlyWalk):
    """A forfeit scores the worst the step limit allows: nonsense cannot win."""

    def forfeit(self, state, agent):
        return {agent: -float(self.config.max_steps)}


class FixedButClaimsRandom(FrozenLake):
    @property
    def has_random_start(self):
        return True


def test_registered_frozen_lake_passes():
    report = check_game("FrozenLake-NoSlip-v0")
    assert report.episodes == 10 + 2 * 100 and report.legal_actions_checked > 0  # random play, then nonsense
    assert report.hostile_answers_checked > 500
    figures = report.nonsense["player"]
    assert figures["success"]["invalid"] == 0.0 and figures["return"]["invalid"] <= figures["return"]["random"]


def test_global_randomness_is_caught():
    with pytest.raises(GameCheckError, match="global random"):
        check_game(GlobalRandomLake(map_name="8x8", max_steps=50))


def test_unparseable_legal_action_is_caught():
    with pytest.raises(GameCheckError, match="does not parse back"):
        check_game(LossyParser(map_name="4x4"))


def test_a_parser_that_raises_is_a_game_error_naming_the_call():
    game = CrashingParser(map_name="4x4")
    game.reset(seed=0)
    with pytest.raises(GameCodeError, match="raised in parse_action"):
        game.parse("player", "up")  # a bug of the game, never an invalid answer
    with pytest.raises(GameCheckError, match="parse_action raised KeyError"):
        check_game(game)


def test_claimed_random_start_is_checked():
    with pytest.raises(GameCheckError, match="has_random_start"):
        check_game(FixedButClaimsRandom(map_name="4x4"))


def test_has_random_start_must_say_what_the_seeds_show_in_either_direction():
    """A dice race whose opening roll shows in its first observation, declared fixed; a fixed start declared random."""
    from tests.serve.race_games import DiceRace, FixedStartRace

    with pytest.raises(GameCheckError, match="has_random_start is False but the first observation changes with"):
        check_game(DiceRace(max_steps=40), nonsense_seeds=0)
    with pytest.raises(GameCheckError, match="has_random_start is True but seeds"):
        check_game(FixedStartRace(max_steps=40), nonsense_seeds=0)

    class DeclaredRace(DiceRace):
        has_random_start = True

    check_game(DeclaredRace(max_steps=40), nonsense_seeds=0)  # the declaration now says what the seeds show


def test_a_move_read_from_an_answer_that_does_not_name_it_is_caught():
    with pytest.raises(GameCheckError, match="the answer 'd' was read as the move 'down', which it does not name"):
        check_game(AbbreviatingLake(map_name="4x4"), nonsense_seeds=0)


def test_case_and_surrounding_punctuation_do_not_matter():
    with pytest.raises(GameCheckError, match="was not read as the move"):
        check_game(CaseSensitiveLake(map_name="4x4"), nonsense_seeds=0)


def test_aliases_must_be_announced_in_the_prompt():
    with pytest.raises(GameCheckError, match="alias 'south' .* is not announced"):
        check_game(SecretAliasLake(map_name="4x4"), nonsense_seeds=0)
    check_game(AnnouncedAliasLake(map_name="4x4"), nonsense_seeds=0)


def test_every_registered_game_follows_the_answer_rule_for_hostile_answers():
    for spec in tsmg.specs():
        if spec.id.startswith(("OpenSpiel/", "TextArena/")):
            continue  # checked in tests/test_adapters_openspiel.py and tests/test_adapters_textarena.py
        report = check_game(spec.id, seeds=(0,), max_rounds=3, nonsense_seeds=0)
        assert report.hostile_answers_checked > 100, spec.id


def test_an_episode_of_invalid_answers_must_end():
    endless = FrozenLake(map_name="4x4", max_steps=None, forfeit_after=None)
    with pytest.raises(GameCheckError, match="every answer is invalid had not ended after 500 rounds"):
        check_game(endless, end_within=500, nonsense_seeds=0)
    check_game(FrozenLake(map_name="4x4", max_steps=None), nonsense_seeds=0)  # forfeits end it


def test_nonsense_must_not_beat_random_play():
    standing_still = CostlyWalk(map_name="8x8", max_steps=30, forfeit_after=None)
    with pytest.raises(GameCheckError, match="nonsense in seat 'player' beats random play on return"):
        check_game(standing_still, nonsense_seeds=50)
    with pytest.raises(GameCheckError, match="beats random play on return"):
        check_game(CostlyWalk(map_name="8x8", max_steps=30), nonsense_seeds=50)  # a forfeit of -1 is not enough
    report = check_game(CostlyWalkWithForfeit(map_name="8x8", max_steps=30), nonsense_seeds=50)
    assert report.nonsense["player"]["return"]["invalid"] < report.nonsense["player"]["return"]["random"]


def test_check_accepts_ids():
    assert check_game(tsmg.make("FrozenLake-v0")).game_id == "FrozenLake-v0"


class SeveralMovesLake(FrozenLake):
    """Reads ``left right`` (or ``left or right``...) as a move, and plays the first one: TextArena's 2048 on main.

    Each answer is the tuple of the moves it names, so ``left right`` is read as a move of its own,
    equal to no legal move's reading, and the checker before issue 38 let it pass.
    """

    def parse_action(self, agent, text, state):
        folded = normalize_answer(text) or ""
        words = [word for word in re.split(r"[\s,;/]+|\b(?:or|and|then)\b", folded) if word]
        if words and all(word in MOVE_NAMES for word in words) and (len(words) == 1 or len(set(words)) > 1):
            return tuple(MOVE_NAMES.index(word) for word in words)
        return Invalid(f"expected one of {', '.join(MOVE_NAMES)}")

    def action_text(self, agent, action):
        return MOVE_NAMES[action[0] if isinstance(action, tuple) else action]

    def transition(self, state, actions, rng):
        return super().transition(state, {"player": actions["player"][0]}, rng)

    def oracle(self, state, agent):
        return (super().oracle(state, agent),)


class WanderingOracleLake(FrozenLake):
    """Its oracle answers 'north', which is no move of Frozen Lake (eval --model oracle: 100 % invalid, exit 0)."""

    def oracle_action(self, agent):
        return "north" if agent in self.active_agents else None


def test_an_answer_naming_two_moves_is_no_move():
    """Fails on main's checker (the answer was read as a move that is no legal move's reading, and let pass)."""
    with pytest.raises(GameCheckError, match=r"the answer '\w+ \w+' names two moves, '\w+' and '\w+', and was read"):
        check_game(SeveralMovesLake(map_name="4x4"), nonsense_seeds=0)


def test_the_oracles_moves_must_be_legal_and_the_message_says_what_to_fix():
    """Fails on main's checker, which never asked the oracle; the CLI says the same, exit 1."""
    with pytest.raises(GameCheckError, match=r"the oracle's move 'north' for 'player' is not a valid answer") as caught:
        check_game(WanderingOracleLake(map_name="4x4"), nonsense_seeds=0)
    assert "make oracle_action return the text of a legal move (one of legal_actions)" in str(caught.value)
    tsmg.register("test/WanderingOracleLake-v0", WanderingOracleLake, map_name="4x4", max_steps=16)
    try:
        assert main(["check", "--game", "test/WanderingOracleLake-v0", "--nonsense-seeds", "0"]) == 1
    finally:
        tsmg.registry.unregister("test/WanderingOracleLake-v0")


def _readme_game(*edits):
    """The README's CoinGuess block (the game a newcomer copies), with ``(old, new)`` text edits applied."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    code = next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "class CoinGuess" in block)
    code = code.split("\ntsmg.register(", 1)[0]  # the class, not its registration or its demo
    for old, new in edits:
        assert old in code, old
        code = code.replace(old, new)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace["CoinGuess"]


def test_the_readme_game_copied_with_a_fixed_start_and_return_false_passes():
    """Issue 43: README's has_random_start lacked @property, so `return False` on a fixed start failed with a wrong
    message. A copy that keeps @property passes; one without it is told to add @property, not to return False."""
    fixed = ('coin=str(rng.choice(["heads", "tails"]))', 'coin="heads"')
    says_fixed = ("        return True\n\n    def transition", "        return False\n\n    def transition")
    check_game(_readme_game(fixed, says_fixed)(max_steps=1), nonsense_seeds=20)
    check_game(_readme_game()(max_steps=1), nonsense_seeds=20)  # the README's own: a random coin, said True
    no_property = ("    @property\n    def has_random_start", "    def has_random_start")
    with pytest.raises(GameCheckError, match=r"has_random_start is a method, so it reads as True whatever it returns; "
                       r"put @property on the line above 'def has_random_start\(self\)'"):  # fmt: skip
        check_game(_readme_game(fixed, says_fixed, no_property)(max_steps=1), nonsense_seeds=20)
