"""Catalog games played through the adapters: Taxi, Cliff Walking, Blackjack (Gymnasium), Tic-Tac-Toe (PettingZoo)."""

import warnings
from collections import deque

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import tsmg
from games.gym_ports import basic_strategy
from tsmg import GameOptionsError, Invalid
from tsmg.adapters import to_gymnasium, to_pettingzoo_aec
from tsmg.policies import OraclePolicy, RandomPolicy
from tsmg.rollout import rollout

ADAPTED = ["Taxi-v0", "CliffWalking-v0", "Blackjack-v0", "TicTacToe-PZ-v0"]


def play_oracle(game, seed):
    game.reset(seed=seed)
    steps = 0
    while not game.done:
        game.step({agent: game.oracle_action(agent) for agent in game.active_agents})
        steps += 1
    return steps


@pytest.mark.parametrize("game_id", ADAPTED)
def test_registered_with_description_and_validated_options(game_id):
    spec = tsmg.spec(game_id)
    assert spec.description and spec.entry_point.startswith("games.gym_ports:")
    with pytest.raises(GameOptionsError, match="unknown option.*max_steps"):
        tsmg.make(game_id, max_stepz=3)
    with pytest.raises(GameOptionsError, match="on_invalid"):
        tsmg.make(game_id, on_invalid="shrug")


@pytest.mark.parametrize("game_id", ADAPTED)
def test_random_and_oracle_play_finish_without_errors(game_id):
    for policy in (RandomPolicy(seed=1), OraclePolicy()):
        episodes = rollout(game_id, policy, seeds=[0, 1, 2])
        assert all(episode.error is None and (episode.terminated or episode.truncated) for episode in episodes)
        assert all(step.valid for episode in episodes for step in episode.steps)


# ---------------------------------------------------------------------------------------- Taxi
STANDS = {0: ("R", 0, 0), 1: ("G", 0, 4), 2: ("Y", 4, 0), 3: ("B", 4, 3)}


def test_taxi_text_spells_out_the_decoded_state():
    game = tsmg.make("Taxi-v0")
    for seed in range(10):
        observations, _ = game.reset(seed=seed)
        text = observations["player"]
        row, col, passenger, destination = game.env.unwrapped.decode(game.observation)
        grid = text.splitlines()[2:9]
        assert grid[0] == "+---------+" and grid[1 + row][1 + 2 * col] == "T"
        assert f"The taxi is at row {row}, column {col}." in text
        name, p_row, p_col = STANDS[passenger]
        assert f"The passenger is waiting at stand {name} (row {p_row}, column {p_col})." in text
        name, d_row, d_col = STANDS[destination]
        assert f"The destination is stand {name} (row {d_row}, column {d_col})." in text
        assert "Actions: south, north, east, west, pickup, dropoff" in text


def test_taxi_accepts_action_names_only():
    game = tsmg.make("Taxi-v0")
    expected = {"south": 0, "North": 1, " east.": 2, "WEST": 3, "pickup": 4, "**dropoff**": 5}
    assert {text: game.parse("player", text) for text in expected} == expected
    for text in ("fly", "4", "pick", "", "up", "right", "pick up", "drop off"):  # unannounced synonyms
        assert isinstance(game.parse("player", text), Invalid)


def test_blackjack_accepts_the_alias_its_prompt_announces():
    game = tsmg.make("Blackjack-v0")
    observations, _ = game.reset(seed=0)
    assert game.answer_aliases("player") == {"stand": "stick"} and "stick (or stand" in observations["player"]
    assert game.parse("player", "Stand.") == game.parse("player", "stick") == 0
    assert isinstance(game.parse("player", "stay"), Invalid)


def fewest_steps(transitions, start):
    """Forward breadth-first search to a delivery (independent of the oracle's backward search)."""
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        state, depth = queue.popleft()
        for outcomes in transitions[state].values():
            _, following, _, terminated = outcomes[0]
            if terminated:
                return depth + 1
            if following not in seen:
                seen.add(following)
                queue.append((following, depth + 1))
    return None


def test_taxi_oracle_delivers_by_a_shortest_route():
    game = tsmg.make("Taxi-v0")
    for seed in range(25):
        game.reset(seed=seed)
        shortest = fewest_steps(game.env.unwrapped.P, int(game.observation))
        steps = play_oracle(game, seed)
        assert steps == shortest
        assert game.is_success("player") and game.episode_returns()["player"] == 20 - (steps - 1)
        assert "The passenger has been delivered." in game.observe("player")


def test_taxi_same_seed_same_start_and_seeds_differ():
    game = tsmg.make("Taxi-v0")
    starts = [game.reset(seed=seed)[0]["player"] for seed in (3, 3, 4, 5, 6)]
    assert starts[0] == starts[1] and len(set(starts)) > 2 and game.has_random_start


def test_taxi_step_limit_truncates_and_is_no_success():
    game = tsmg.make("Taxi-v0", max_steps=3)
    game.reset(seed=0)
    results = [game.step({"player": "north"}) for _ in range(3)]
    assert results[-1].truncated["player"] and not results[-1].terminated["player"]
    assert game.is_success("player") is False


# ---------------------------------------------------------------------------------------- Cliff Walking
def test_cliff_walking_text_and_the_cliff():
    game = tsmg.make("CliffWalking-v0")
    observations, _ = game.reset(seed=0)
    text = observations["player"]
    assert "You are at row 3, column 0. The goal is at row 3, column 11." in text
    assert text.splitlines()[7] == "PCCCCCCCCCCG"
    result = game.step({"player": "right"})  # onto the cliff: -100 and back to the start
    assert result.rewards["player"] == -100 and not result.terminated["player"] and game.observation == 36
    assert not game.has_random_start


def test_cliff_walking_oracle_takes_the_shortest_safe_path():
    game = tsmg.make("CliffWalking-v0")
    assert play_oracle(game, 0) == 13
    assert game.episode_returns() == {"player": -13.0} and game.is_success("player")
    assert "You reached the goal." in game.observe("player")


# ---------------------------------------------------------------------------------------- Blackjack
def test_blackjack_text_shows_hand_and_dealer_card():
    game = tsmg.make("Blackjack-v0")
    observations, _ = game.reset(seed=1)
    player_sum, dealer_card, usable_ace = game.observation
    text = observations["player"]
    cards = ", ".join("A" if card == 1 else str(card) for card in game.env.unwrapped.player)
    assert f"Your cards: {cards} (sum {player_sum}, " in text
    assert ("a usable ace" in text) == bool(usable_ace)
    assert f"The dealer shows {'A' if dealer_card == 1 else dealer_card}." in text
    result = game.step({"player": "stand"})  # alias of stick: the hand is over
    assert result.terminated["player"] and "Hand over. The dealer's cards:" in result.observations["player"]
    assert game.is_success("player") == (result.rewards["player"] > 0)


def test_blackjack_basic_strategy_beats_simple_play():
    assert [basic_strategy(12, 3, False), basic_strategy(12, 4, False), basic_strategy(17, 1, False)] == [1, 0, 0]
    assert [basic_strategy(17, 7, True), basic_strategy(18, 2, True), basic_strategy(18, 10, True)] == [1, 0, 1]

    def mean_return(choose):
        game = tsmg.make("Blackjack-v0")
        total = 0.0
        for seed in range(400):
            game.reset(seed=seed)
            while not game.done:
                total += game.step({"player": choose(game)}).rewards["player"]
        return total / 400

    oracle = mean_return(lambda game: game.oracle_action("player"))
    always_stick = mean_return(lambda game: "stick")
    hit_below_20 = mean_return(lambda game: "hit" if game.observation[0] < 20 else "stick")
    assert oracle > always_stick + 0.05 and oracle > hit_below_20 + 0.05 and oracle > -0.15


def test_blackjack_rules_options_reach_the_env():
    game = tsmg.make("Blackjack-v0", natural=True, sab=False)
    assert game.env.unwrapped.natural and not game.env.unwrapped.sab
    with pytest.raises(GameOptionsError, match="sab"):
        tsmg.make("Blackjack-v0", sab="sometimes")


# ---------------------------------------------------------------------------------------- Tic-Tac-Toe
def test_tictactoe_board_text_and_cell_numbers():
    game = tsmg.make("TicTacToe-PZ-v0")
    observations, _ = game.reset(seed=0)
    assert "1 | 2 | 3\n--+---+--\n4 | 5 | 6" in observations["player_1"]
    assert game.legal_actions("player_1") == [str(cell) for cell in range(1, 10)]
    assert isinstance(game.parse("player_1", "cell 3"), Invalid)  # not the move's name
    result = game.step({"player_1": "3."})
    assert result.infos["player_1"]["action"] == "3"
    seen_by_o = result.observations["player_2"]
    assert "1 | 2 | X" in seen_by_o and "You are player_2 and play O." in seen_by_o
    info = game.step({"player_2": "3"}).infos["player_2"]
    assert info["valid"] is False and "not a legal move" in info["reason"]


def test_tictactoe_oracle_never_loses():
    game = tsmg.make("TicTacToe-PZ-v0")
    play_oracle(game, 0)
    assert game.episode_returns() == {"player_1": 0.0, "player_2": 0.0}  # perfect play draws
    rng = np.random.default_rng(0)
    for seed in range(10):
        game.reset(seed=seed)
        while not game.done:
            (agent,) = game.active_agents
            if agent == "player_2":
                answer = game.oracle_action(agent)
            else:
                legal = game.legal_actions(agent)
                answer = legal[int(rng.integers(len(legal)))]
            game.step({agent: answer})
        assert game.episode_returns()["player_2"] >= 0
        assert game.is_success("player_1") is False
        assert game.is_success("player_2") == (game.episode_returns()["player_2"] > 0)


# ---------------------------------------------------------------------------------------- exports
def test_adapted_games_export_again():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(to_gymnasium("Taxi-v0"))
    assert [str(warning.message) for warning in caught] == []
    env = to_pettingzoo_aec(tsmg.make("TicTacToe-PZ-v0"))
    env.reset(seed=0)
    for cell in ("5", "1", "2", "3", "8"):  # X takes the middle column
        env.step(cell)
    assert env.terminations == {"player_1": True, "player_2": True}
    assert env.rewards == {"player_1": 1.0, "player_2": -1.0}
