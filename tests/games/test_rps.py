import pytest

import tsmg
from games import rps_rules as rules
from games.rps import RockPaperScissors
from tsmg.core import Invalid

R, P, S = rules.ROCK, rules.PAPER, rules.SCISSORS


def test_outcomes():
    assert [rules.outcome(a, b) for a, b in [(P, R), (S, P), (R, S)]] == [1, 1, 1]
    assert [rules.outcome(a, b) for a, b in [(R, P), (P, S), (S, R)]] == [-1, -1, -1]
    assert [rules.outcome(m, m) for m in (R, P, S)] == [0, 0, 0]
    assert rules.outcome(None, R) == -1 and rules.outcome(S, None) == 1 and rules.outcome(None, None) == 0
    assert rules.scores([(P, R), (R, P), (S, S), (R, S)]) == (2, 1)


def test_counter_move():
    assert rules.counter_move([]) == P
    assert rules.counter_move([R, R, S]) == P  # beats rock
    assert rules.counter_move([R, S]) == R  # tie: most recent (scissors) is beaten by rock
    assert rules.counter_move([None, S]) == R


def test_simultaneous_rounds_rewards_and_history():
    game = RockPaperScissors(rounds=3)
    assert game.turn_based is False
    observations, _ = game.reset(seed=0)
    assert game.active_agents == ("player_0", "player_1")
    assert "Round 1 of 3" in observations["player_0"]
    assert game.step({"player_0": "rock", "player_1": "scissors"}).rewards == {"player_0": 1.0, "player_1": -1.0}
    result = game.step({"player_0": "ROCK", "player_1": "paper!"})
    assert result.rewards == {"player_0": -1.0, "player_1": 1.0}
    text = result.observations["player_1"]
    assert "Round 1: you played scissors, opponent played rock (you lost the round)" in text
    assert "Round 2: you played paper, opponent played rock (you won the round)" in text
    assert "Rounds won: you 1, opponent 1." in text
    result = game.step({"player_0": "paper", "player_1": "paper"})
    assert result.done and result.rewards == {"player_0": 0.0, "player_1": 0.0}
    assert "Game over after 3 rounds: a draw." in result.observations["player_0"]
    assert game.is_success("player_0") is False


def test_invalid_answer_forfeits_the_round():
    game = RockPaperScissors(rounds=2)
    game.reset(seed=0)
    result = game.step({"player_0": "lizard", "player_1": "rock"})
    assert result.infos["player_0"]["valid"] is False
    assert result.rewards == {"player_0": -1.0, "player_1": 1.0}
    assert "you gave no valid answer" in result.observations["player_0"]


@pytest.mark.parametrize("text", ["", "rocks", "rock paper", "石", "\x1b[31m", "x" * 5000, "r", "s", "scissor"])
def test_parse_rejects(text):
    parsed = RockPaperScissors().parse("player_0", text)
    assert isinstance(parsed, Invalid) and "rock, paper, scissors" in parsed.reason


def test_counter_opponent_is_exploitable_and_deterministic():
    game = tsmg.make("RockPaperScissors-vsCounter-v0")
    game.reset(seed=3)
    # The counter plays paper first, then beats our most frequent move: always playing what beats that wins.
    total = 0.0
    for _ in range(5):
        history = game.state.inner.history
        seat = game.agents and game.state.learner
        own = [pair[0 if seat == "player_0" else 1] for pair in history]
        their_next = rules.counter_move(own)
        total += game.step({"player": rules.MOVE_NAMES[(their_next + 1) % 3]}).rewards["player"]
    assert total == 5.0 and game.done and game.is_success("player")
