"""PettingZoo interop: PettingZoo envs played as text games, and tsmg games exported as PettingZoo envs."""

import warnings

import numpy as np
import pettingzoo
import pytest
from two_agent_games import MatchingPennies, Stones

import tsmg
from tsmg import GameCodeError, GameError, Invalid
from tsmg.adapters import (
    PettingZooGame,
    TextObservation,
    to_pettingzoo_aec,
    to_pettingzoo_parallel,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # pettingzoo.test imports its own envs the old way
    from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

def tictactoe_env():
    return pettingzoo.make("aec", "classic/tictactoe-v3")


def rps_env(max_cycles=150):
    return pettingzoo.make("parallel", "classic/rps-v2", max_cycles=max_cycles)


CONFIGS = [{}, {"on_invalid": "default_action"}, {"max_steps": 4, "invalid_penalty": 0.5}]
GAMES = [Stones, MatchingPennies]


# ---------------------------------------------------------------------------------------- export
@pytest.mark.filterwarnings("ignore")  # the API tests' advice (use Box/Discrete spaces, NumPy observations)
@pytest.mark.parametrize("options", CONFIGS)
@pytest.mark.parametrize("game_class", GAMES)
def test_exports_pass_the_pettingzoo_api_and_seed_tests(game_class, options):
    api_test(to_pettingzoo_aec(game_class(**options)), num_cycles=60)
    parallel_api_test(to_pettingzoo_parallel(game_class(**options)), num_cycles=60)
    seed_test(lambda: to_pettingzoo_aec(game_class(**options)), num_cycles=60)
    parallel_seed_test(lambda: to_pettingzoo_parallel(game_class(**options)), num_cycles=60)


def test_aec_export_plays_a_turn_based_game_to_the_end():
    env = to_pettingzoo_aec(Stones())
    env.reset(seed=3)
    pile = env.game.state.pile
    first_player_should_win = pile % 4 != 0  # with perfect play
    observation, reward, terminated, truncated, info = env.last()
    assert isinstance(observation, TextObservation) and observation in env.observation_space("player_0")
    assert f"Stones: {pile} left" in observation and info["legal_actions"] == ["1", "2", "3"]
    final = {}
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            final[agent] = reward
            env.step(None)
        else:
            env.step(env.game.oracle_action(agent))
    winner, loser = ("player_0", "player_1") if first_player_should_win else ("player_1", "player_0")
    assert final == {winner: 1.0, loser: -1.0} or final == {loser: -1.0, winner: 1.0}
    assert env.agents == [] and env.game.is_success(winner)


def test_aec_export_of_a_simultaneous_game_steps_once_both_have_answered():
    env = to_pettingzoo_aec(MatchingPennies(rounds=2))
    env.reset()
    assert env.agent_selection == "player_0"
    env.step("heads")
    assert env.agent_selection == "player_1" and env.rewards == {"player_0": 0.0, "player_1": 0.0}
    assert env.game.state.round == 0  # nothing happened yet
    env.step("tails")
    assert env.rewards == {"player_0": -1.0, "player_1": 1.0} and env.game.state.round == 1
    assert "player_0 showed heads, player_1 showed tails" in env.observe("player_0")
    env.step(None)  # a live agent without an answer: invalid, the round is void under "penalize"
    env.step("tails")
    assert env.infos["player_0"]["valid"] is False and env.infos["player_0"]["reason"] == "no action given"
    assert env.terminations == {"player_0": True, "player_1": True}


def test_parallel_export_of_a_turn_based_game_ignores_agents_out_of_turn():
    env = to_pettingzoo_parallel(Stones())
    observations, infos = env.reset(seed=4)
    pile = env.game.state.pile
    assert infos["player_0"]["legal_actions"] == ["1", "2", "3"] and infos["player_1"]["legal_actions"] == []
    observations, rewards, terminations, truncations, infos = env.step({"player_0": "2", "player_1": "3"})
    assert env.game.state.pile == pile - 2
    assert infos["player_0"]["action"] == "2" and "action" not in infos["player_1"]
    assert set(observations) == set(rewards) == {"player_0", "player_1"}
    assert f"Stones: {pile - 2} left" in observations["player_1"]
    env.step({"player_0": "3"})  # player_1's turn, but it sent nothing: an invalid answer, turn used
    assert env.game.state.pile == pile - 2 and env.game.rounds == 2


def test_parallel_export_removes_agents_when_the_game_ends():
    env = to_pettingzoo_parallel(MatchingPennies(rounds=1))
    env.reset()
    _, rewards, terminations, truncations, _ = env.step({"player_0": "tails", "player_1": "tails"})
    assert rewards == {"player_0": 1.0, "player_1": -1.0} and all(terminations.values())
    assert env.agents == []
    truncated_env = to_pettingzoo_parallel(Stones(max_steps=1))
    truncated_env.reset(seed=0)
    _, _, terminations, truncations, _ = truncated_env.step({"player_0": "1", "player_1": "1"})
    assert truncations == {"player_0": True, "player_1": True} and not any(terminations.values())


def test_exports_render_in_ansi_mode():
    env = to_pettingzoo_aec(Stones(), render_mode="ansi")
    env.reset(seed=0)
    assert env.render().startswith("[player_0]\nStones:")
    assert to_pettingzoo_parallel(Stones()).render() is None
    with pytest.raises(ValueError, match="render_mode"):
        to_pettingzoo_parallel(Stones(), render_mode="human")


# ---------------------------------------------------------------------------------------- wrap
def board_text(observation, agent, env):
    planes = observation["observation"]  # PettingZoo indexes [column, row, (own, other)]
    own, other = ("X", "O") if agent == "player_1" else ("O", "X")
    cells = [
        own if planes[col, row, 0] else other if planes[col, row, 1] else str(3 * row + col + 1)
        for row in range(3)
        for col in range(3)
    ]
    return "\n".join(" ".join(cells[3 * row : 3 * row + 3]) for row in range(3))


def parse_cell(agent, text):
    cleaned = text.strip()
    if cleaned.isdigit() and 1 <= int(cleaned) <= 9:
        row, col = divmod(int(cleaned) - 1, 3)
        return 3 * col + row  # PettingZoo numbers its cells column by column
    return Invalid("answer with a cell number from 1 to 9")


def cell_text(agent, action):
    col, row = divmod(int(action), 3)
    return str(3 * row + col + 1)


def tictactoe(**options):
    return PettingZooGame(tictactoe_env, render=board_text, parse=parse_cell, action_text=cell_text, **options)


def test_tictactoe_is_wrapped_as_a_turn_based_text_game():
    game = tictactoe()
    assert isinstance(game, PettingZooGame) and game.turn_based
    observations, _ = game.reset(seed=0)
    assert observations["player_1"] == "1 2 3\n4 5 6\n7 8 9"
    assert game.active_agents == ("player_1",)
    assert sorted(game.legal_actions("player_1"), key=int) == [str(cell) for cell in range(1, 10)]
    assert game.legal_actions("player_2") == []
    result = game.step({"player_1": "5"})
    assert result.observations == {"player_1": "1 2 3\n4 X 6\n7 8 9", "player_2": "1 2 3\n4 X 6\n7 8 9"}
    assert result.infos["player_1"]["action"] == "5" and game.active_agents == ("player_2",)
    result = game.step({"player_2": "1"})
    assert result.observations["player_2"] == "O 2 3\n4 X 6\n7 8 9"
    assert result.observations["player_1"] == "O 2 3\n4 X 6\n7 8 9"
    with pytest.raises(GameError, match="whose turn it is not"):
        game.step({"player_2": "3"})


def test_occupied_cell_is_an_invalid_answer_not_an_illegal_move():
    game = tictactoe(invalid_penalty=1.0)
    game.reset(seed=0)
    game.step({"player_1": "5"})
    result = game.step({"player_2": "5"})
    info = result.infos["player_2"]
    assert info["valid"] is False and "5 is not a legal move" in info["reason"]
    assert result.rewards == {"player_1": 0.0, "player_2": -1.0} and not game.done
    assert game.active_agents == ("player_2",)  # the env was not stepped: still its move
    assert isinstance(game.parse("player_2", "ten"), Invalid)


def test_tictactoe_rewards_and_endings_match_the_raw_env():
    rng = np.random.default_rng(0)
    for seed in range(6):
        raw = tictactoe_env()
        raw.reset(seed=seed)
        game = tictactoe()
        game.reset(seed=seed)
        totals = dict.fromkeys(game.agents, 0.0)
        while not game.done:
            (agent,) = game.active_agents
            assert raw.agent_selection == agent
            legal = game.legal_actions(agent)
            cell = legal[int(rng.integers(len(legal)))]
            raw.step(parse_cell(agent, cell))
            raw_rewards = dict(raw.rewards)
            result = game.step({agent: cell})
            assert result.rewards == {name: float(raw_rewards[name]) for name in game.agents}
            assert result.terminated == {name: raw.terminations[name] for name in game.agents}
            for name, reward in result.rewards.items():
                totals[name] += reward
        assert game.episode_returns() == totals and sorted(totals.values()) in ([-1.0, 1.0], [0.0, 0.0])
        assert game.env.agents == []  # finished agents were stepped out with None
        assert game.active_agents == () and game.legal_actions("player_1") == []
        with pytest.raises(GameError, match="over"):
            game.step({"player_1": "1"})


def test_default_render_of_dict_observations_lists_legal_actions():
    game = PettingZooGame(tictactoe_env())
    observations, _ = game.reset()
    assert observations["player_1"].startswith("You are player_1.\nObservation:\n[[[0, 0],")
    assert observations["player_1"].endswith("Legal actions: 0, 1, 2, 3, 4, 5, 6, 7, 8")
    assert observations["player_2"].endswith("Legal actions: none now.")
    assert game.parse("player_1", "4") == 4 and isinstance(game.parse("player_1", "nine"), Invalid)


def test_rock_paper_scissors_is_a_simultaneous_game_matching_the_raw_env():
    game = PettingZooGame(lambda: rps_env(max_cycles=4), action_names=["rock", "paper", "scissors"])
    assert not game.turn_based
    raw = rps_env(max_cycles=4)
    raw.reset(seed=0)
    game.reset(seed=0)
    plays = [("rock", "paper"), ("scissors", "paper"), ("rock", "rock"), ("paper", "rock")]
    for index, (first, second) in enumerate(plays):
        assert game.active_agents == ("player_0", "player_1")
        names = ["rock", "paper", "scissors"]
        raw_actions = {"player_0": names.index(first), "player_1": names.index(second)}
        _, raw_rewards, _, raw_truncated, _ = raw.step(raw_actions)
        result = game.step({"player_0": first, "player_1": second})
        assert result.rewards == {agent: float(reward) for agent, reward in raw_rewards.items()}
        assert result.truncated == raw_truncated and result.truncated["player_0"] == (index == 3)
    assert game.done and game.episode_returns() == {"player_0": 1.0, "player_1": -1.0}


def test_invalid_answers_in_a_parallel_env():
    names = ["rock", "paper", "scissors"]
    void = PettingZooGame(rps_env, action_names=names, invalid_penalty=0.5)
    void.reset(seed=0)
    result = void.step({"player_0": "lizard", "player_1": "paper"})
    assert result.rewards == {"player_0": -0.5, "player_1": 0.0}  # the env was not stepped
    assert result.infos["player_1"]["round_void"] and result.infos["player_0"]["valid"] is False

    noop = PettingZooGame(rps_env, action_names=names, noop_action=0)
    noop.reset(seed=0)
    assert noop.step({"player_0": "lizard", "player_1": "paper"}).rewards == {"player_0": -1.0, "player_1": 1.0}

    default = PettingZooGame(rps_env, action_names=names, on_invalid="default_action")
    default.reset(seed=0)
    result = default.step({"player_0": "spock", "player_1": "scissors"})
    assert result.infos["player_0"]["action"] == "rock" and result.rewards["player_0"] == 1.0


def test_an_action_outside_the_agents_space_is_an_invalid_answer_and_a_raising_parser_a_game_error():
    def parse(agent, text):  # a custom parser that reads any number, in the space or not
        return int(text) if text.isdigit() else Invalid("a number")

    game = PettingZooGame(rps_env, parse=parse, action_text=lambda agent, action: str(action))
    game.reset(seed=0)
    result = game.step({"player_0": "9", "player_1": "1"})  # PettingZoo's out-of-bounds test refuses 9
    assert result.infos["player_0"]["valid"] is False
    assert result.infos["player_0"]["reason"] == "9 is not an action of the space Discrete(3)"

    crashing = PettingZooGame(rps_env, parse=lambda agent, text: {}[text], action_text=lambda agent, action: "")
    crashing.reset(seed=0)
    with pytest.raises(GameCodeError, match="raised in parse_text"):
        crashing.step({"player_0": "rock", "player_1": "rock"})


def test_constructor_checks():
    calls = []

    def factory():
        calls.append(1)
        return tictactoe_env()

    PettingZooGame(factory)
    assert len(calls) == 1  # the factory is called once
    with pytest.raises(TypeError, match="PettingZoo"):
        PettingZooGame(object())
    with pytest.raises(ValueError, match="action_names"):
        PettingZooGame(rps_env, action_names=["rock", "paper"])
    with pytest.raises(Exception, match="max_step"):
        PettingZooGame(rps_env, max_step=3)


# ---------------------------------------------------------------------------------------- round trips
def assert_same_step(got, expected):
    assert got.observations == expected.observations
    assert got.rewards == expected.rewards
    assert got.terminated == expected.terminated and got.truncated == expected.truncated
    for agent, info in expected.infos.items():
        assert {key: got.infos[agent].get(key) for key in info} == info


def test_round_trip_through_aec_plays_like_the_original():
    answers = ["2", "seven", "1", "3", "3", "2", "1", "1", "3", "2", "1", "1"]
    for seed in (0, 1, 2):
        original = Stones(invalid_penalty=0.5)
        round_trip = PettingZooGame(to_pettingzoo_aec(Stones(invalid_penalty=0.5)))
        assert round_trip.turn_based
        assert round_trip.reset(seed=seed)[0] == original.reset(seed=seed)[0]
        for answer in answers:
            (agent,) = original.active_agents
            assert round_trip.active_agents == (agent,)
            assert round_trip.legal_actions(agent) == original.legal_actions(agent)
            assert_same_step(round_trip.step({agent: answer}), original.step({agent: answer}))
            if original.done:
                break
        assert round_trip.done == original.done


def test_round_trip_through_parallel_plays_like_the_original():
    rounds = [("heads", "tails"), ("tails", "coin"), ("tails", "tails"), ("heads", "heads")]
    original = MatchingPennies(rounds=3)
    round_trip = PettingZooGame(to_pettingzoo_parallel(MatchingPennies(rounds=3)))
    assert not round_trip.turn_based
    assert round_trip.reset(seed=0)[0] == original.reset(seed=0)[0]
    for first, second in rounds:
        answers = {"player_0": first, "player_1": second}
        assert round_trip.active_agents == original.active_agents
        assert_same_step(round_trip.step(answers), original.step(answers))
        if original.done:
            break
    assert round_trip.done and original.done


def test_seeded_episodes_repeat_through_the_wrapper():
    def first_observation(seed):
        return PettingZooGame(to_pettingzoo_aec(Stones())).reset(seed=seed)[0]["player_0"]

    assert first_observation(5) == first_observation(5)
    assert len({first_observation(seed) for seed in range(8)}) > 1


# ---------------------------------------------------------------------------------------- issue-15 checks
def test_exports_take_registered_ids_like_to_gymnasium():
    parallel = to_pettingzoo_parallel("RockPaperScissors-v0", max_steps=4)
    observations, _ = parallel.reset(seed=0)
    assert sorted(observations) == ["player_0", "player_1"] and parallel.game.config.max_steps == 4
    aec = to_pettingzoo_aec("TicTacToe-v0")
    aec.reset(seed=0)
    aec.step("5")
    assert aec.infos["player_0"]["action"] == "5" and aec.agent_selection == "player_1"
    with pytest.raises(TypeError, match="game_options only apply"):
        to_pettingzoo_aec(Stones(), max_steps=3)
    with pytest.raises(tsmg.UnknownGameError, match="Did you mean: TicTacToe-v0"):
        to_pettingzoo_parallel("TicTacToe-v9")


def test_array_observations_ask_for_a_render_function():
    pytest.importorskip("chess", reason="PettingZoo's chess needs the classic extra: pip install 'tsmg[classic]'")
    chess_env = lambda: pettingzoo.make("aec", "classic/chess-v6")  # noqa: E731
    with pytest.raises(ValueError, match=r"7104 numbers .* pass render="):
        PettingZooGame(chess_env)
    game = PettingZooGame(chess_env, render=lambda observation, agent, env: str(env.unwrapped.board))
    observations, _ = game.reset(seed=0)
    assert observations["player_0"].splitlines()[0] == "r n b q k b n r"
    move = game.legal_actions("player_0")[0]
    assert game.step({"player_0": move}).infos["player_0"]["valid"] and game.active_agents == ("player_1",)


def test_a_seat_that_keeps_answering_nonsense_forfeits():
    game = tictactoe()
    game.reset(seed=0)
    results = [game.step({"player_1": "the middle one"}) for _ in range(3)]
    assert [result.infos["player_1"].get("forfeit", False) for result in results] == [False, False, True]
    assert game.active_agents == () and results[-1].terminated == {"player_1": True, "player_2": True}
    assert game.episode_returns() == {"player_1": -1.0, "player_2": 0.0} and game.is_success("player_1") is False
