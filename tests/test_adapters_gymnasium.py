"""Gymnasium interop: Gymnasium envs played as text games, and tsmg games exported as Gymnasium envs."""

import warnings

import gymnasium
import numpy as np
import pydantic
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import tsmg
from tsmg import GameCodeError, GameError, Invalid
from tsmg.adapters import GymnasiumGame, TextGameEnv, to_gymnasium

MOVES = ["left", "down", "right", "up"]
NOT_SLIPPERY = {"is_slippery": False}


def slippery_lake():
    return gymnasium.make("FrozenLake-v1", is_slippery=True)


def test_rewards_and_endings_match_the_raw_env_step_for_step():
    rng = np.random.default_rng(0)
    for seed in range(8):
        raw = slippery_lake()
        game = GymnasiumGame(slippery_lake(), action_names=MOVES)
        raw_obs, _ = raw.reset(seed=seed)
        observations, _ = game.reset(seed=seed)
        assert observations["player"].startswith(f"Observation: {raw_obs}\n")
        while not game.done:
            action = int(rng.integers(4))
            raw_obs, raw_reward, raw_terminated, raw_truncated, _ = raw.step(action)
            result = game.step({"player": MOVES[action]})
            assert game.observation == raw_obs
            assert result.rewards["player"] == raw_reward
            assert result.terminated["player"] == raw_terminated
            assert result.truncated["player"] == raw_truncated
            assert result.infos["player"]["action"] == MOVES[action] and result.infos["player"]["valid"]
            assert game.done == (raw_terminated or raw_truncated)


def play(game, seed, answers):
    observations, _ = game.reset(seed=seed)
    trace = [observations["player"]]
    for answer in answers:
        if game.done:
            break
        result = game.step({"player": answer})
        trace.append((result.observations["player"], result.rewards["player"], result.infos["player"]["valid"]))
    return trace


def test_same_seed_and_answers_give_the_same_episode():
    answers = ["down", "right", "oops", "down", "right", "down", "right"] * 3
    first = play(GymnasiumGame(slippery_lake(), action_names=MOVES), 7, answers)
    again = play(GymnasiumGame(slippery_lake(), action_names=MOVES), 7, answers)
    assert first == again
    other_seeds = {str(play(GymnasiumGame(slippery_lake(), action_names=MOVES), seed, answers)) for seed in range(6)}
    assert len(other_seeds) > 1  # the ice really is random: seeds matter


def test_default_parser_reads_names_or_integers_and_never_raises():
    named = GymnasiumGame("FrozenLake-v1", action_names=MOVES)
    numbered = GymnasiumGame("FrozenLake-v1")
    assert named.parse("player", " Down. ") == 1 and named.parse("player", "UP") == 3
    assert isinstance(named.parse("player", "1"), Invalid)  # with names, only names
    assert numbered.parse("player", "2") == 2 and numbered.parse("player", " 3 ") == 3
    weird = ["", " ", "4", "-1", "1.0", "two", "\x00", "0x1", "9" * 400, "left right", "é"]
    rng = np.random.default_rng(1)
    weird += ["".join(chr(int(c)) for c in rng.integers(0, 0x2FFF, size=12)) for _ in range(50)]
    for text in weird:
        for game in (named, numbered):
            parsed = game.parse("player", text)
            assert isinstance(parsed, Invalid) and parsed.reason, text
    assert isinstance(named.parse("player", 3), Invalid)  # not text at all
    assert named.action_to_text(2) == "right" and numbered.action_to_text(2) == "2"


def test_user_render_and_parse_functions_are_used():
    def render(observation, env):
        row, col = divmod(int(observation), 4)
        return f"row {row} col {col}"

    def parse(text):
        return {"l": 0, "d": 1, "r": 2, "u": 3}.get(text, Invalid("use l/d/r/u"))

    game = GymnasiumGame(
        "FrozenLake-v1", render=render, parse=parse, action_text=lambda a: "ldru"[a], make_kwargs=NOT_SLIPPERY
    )
    observations, _ = game.reset(seed=0)
    assert observations["player"] == "row 0 col 0"
    result = game.step({"player": "d"})
    assert result.observations["player"] == "row 1 col 0" and result.infos["player"]["action"] == "d"
    assert game.legal_actions("player") == ["l", "d", "r", "u"]
    assert game.step({"player": "down"}).infos["player"]["reason"] == "use l/d/r/u"


def test_a_parser_that_raises_is_a_game_error_naming_the_call():
    game = GymnasiumGame("FrozenLake-v1", parse=lambda text: 1 // 0, action_text=str)
    game.reset(seed=0)
    with pytest.raises(GameCodeError, match="raised in parse_text") as raised:  # a bug, never the answer's fault
        game.step({"player": "down"})
    assert isinstance(raised.value.__cause__, ZeroDivisionError)


def test_an_action_outside_the_env_space_is_an_invalid_answer():
    game = GymnasiumGame("FrozenLake-v1", parse=lambda text: int(text) if text.isdigit() else Invalid("a number"))
    game.reset(seed=0)
    info = game.step({"player": "7"}).infos["player"]  # gymnasium's own test, action_space.contains, refuses it
    assert info["valid"] is False and info["reason"] == "7 is not an action of the space Discrete(4)"
    assert game.step({"player": "1"}).infos["player"]["valid"] is True


def test_invalid_answer_modes():
    def lake(**options):
        game = GymnasiumGame("FrozenLake-v1", action_names=MOVES, make_kwargs=NOT_SLIPPERY, **options)
        game.reset(seed=0)
        game.step({"player": "down"})
        return game

    penalized = lake(invalid_penalty=0.5)
    before = penalized.observe("player")
    result = penalized.step({"player": "fly"})
    assert result.rewards["player"] == -0.5 and result.observations["player"] == before
    assert result.infos["player"] == {"action": None, "valid": False, "reason": result.infos["player"]["reason"]}
    assert penalized.observation == 4 and penalized.rounds == 2 and not penalized.done

    defaulted = lake(on_invalid="default_action", invalid_penalty=1.0)
    result = defaulted.step({"player": Invalid("no action tag")})
    assert result.infos["player"]["action"] == "left" and result.infos["player"]["reason"] == "no action tag"
    assert result.rewards["player"] == -1.0 and defaulted.observation == 4  # left from the left edge

    chosen = lake(on_invalid="default_action", default_action=2)
    chosen.step({"player": "??"})
    assert chosen.observation == 5  # moved right

    ended = lake(on_invalid="terminate", invalid_penalty=2.0)
    result = ended.step({"player": "fly"})
    # The penalty plus the forfeit reward (-1 by default): a forfeit is a loss.
    assert result.terminated["player"] and not result.truncated["player"] and result.rewards["player"] == -3.0
    assert result.infos["player"]["forfeit"] is True
    assert ended.done and ended.active_agents == () and ended.is_success("player") is False
    with pytest.raises(GameError, match="over"):
        ended.step({"player": "down"})


def test_step_limits_truncate_both_ours_and_gymnasiums():
    ours = GymnasiumGame("FrozenLake-v1", action_names=MOVES, max_steps=3, make_kwargs=NOT_SLIPPERY)
    ours.reset(seed=0)
    results = [ours.step({"player": "left"}) for _ in range(3)]
    assert [r.truncated["player"] for r in results] == [False, False, True]
    assert not results[-1].terminated["player"] and ours.done

    theirs = GymnasiumGame("FrozenLake-v1", action_names=MOVES, make_kwargs={**NOT_SLIPPERY, "max_episode_steps": 2})
    theirs.reset(seed=0)
    results = [theirs.step({"player": "up"}) for _ in range(2)]
    assert results[-1].truncated["player"] and not results[-1].terminated["player"] and theirs.done


def test_contract_errors():
    game = GymnasiumGame("FrozenLake-v1", action_names=MOVES)
    with pytest.raises(GameError, match="reset"):
        game.step({"player": "down"})
    game.reset(seed=0)
    with pytest.raises(GameError, match="whose turn it is not"):
        game.step({"player": "down", "ghost": "up"})
    with pytest.raises(GameError, match="no answer"):
        game.step({})
    with pytest.raises(pydantic.ValidationError, match="max_step"):
        GymnasiumGame("FrozenLake-v1", max_step=3)
    with pytest.raises(ValueError, match="action_names"):
        GymnasiumGame("FrozenLake-v1", action_names=["a", "b"])
    with pytest.raises(ValueError, match="parse="):
        GymnasiumGame(_TupleActionEnv())


class _TupleActionEnv(gymnasium.Env):
    """An env whose action space no default parser covers."""

    observation_space = spaces.Discrete(2)
    action_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 1, float(sum(action)), True, False, {}


class _MaskedEnv(gymnasium.Env):
    """Discrete(4) actions; the info's action mask allows only even actions; action 2 ends it."""

    observation_space = spaces.Discrete(3)
    action_space = spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {"action_mask": np.array([1, 0, 1, 0], dtype=np.int8)}

    def step(self, action):
        return 1, float(action), action == 2, False, {"action_mask": np.array([1, 0, 1, 0], dtype=np.int8)}


def test_action_mask_narrows_legal_actions_and_can_be_enforced():
    lenient = GymnasiumGame(_MaskedEnv())
    lenient.reset(seed=0)
    assert lenient.legal_actions("player") == ["0", "2"]
    assert lenient.step({"player": "1"}).infos["player"]["valid"]  # the mask is only a hint here

    strict = GymnasiumGame(_MaskedEnv(), enforce_action_mask=True)
    strict.reset(seed=0)
    info = strict.step({"player": "3"}).infos["player"]
    assert info["valid"] is False and "legal: 0, 2" in info["reason"]
    result = strict.step({"player": "2"})
    assert result.terminated["player"] and result.rewards["player"] == 2.0


def test_numeric_actions_for_box_spaces():
    game = GymnasiumGame("Pendulum-v1")
    game.reset(seed=0)
    assert game.legal_actions("player") is None
    result = game.step({"player": "[0.5]"})
    assert result.infos["player"]["valid"] and result.infos["player"]["action"] == "0.5"
    for text in ("3", "0.1 0.2", "torque", ""):
        assert isinstance(game.parse("player", text), Invalid), text


def test_success_and_oracle_hooks():
    path = {(0, 0): 1, (1, 0): 1, (2, 0): 2, (2, 1): 2, (2, 2): 1, (3, 2): 2}  # around the holes

    def oracle(game):
        return path[divmod(int(game.observation), 4)]

    game = GymnasiumGame(
        "FrozenLake-v1",
        action_names=MOVES,
        make_kwargs=NOT_SLIPPERY,
        is_success=lambda g: g.env_terminated and g.last_reward > 0,
        oracle=oracle,
    )
    game.reset(seed=0)
    while not game.done:
        game.step({"player": game.oracle_action("player")})
    assert game.is_success("player") is True and game.episode_returns() == {"player": 1.0}
    assert game.oracle_action("player") is None


def test_runs_under_the_rollout_engine():
    from tsmg.policies import RandomPolicy
    from tsmg.rollout import rollout

    def factory():
        return GymnasiumGame(slippery_lake(), action_names=MOVES, max_steps=10)

    episodes = rollout(factory, RandomPolicy(seed=0), seeds=[0, 1, 2])
    again = rollout(factory, RandomPolicy(seed=0), seeds=[0, 1, 2])
    assert all(e.error is None for e in episodes)
    assert [[s.completion for s in e.steps] for e in episodes] == [[s.completion for s in e.steps] for e in again]


# ---------------------------------------------------------------------------------------- export
def checked(env):
    """Run Gymnasium's checker; its warnings are advice, its assertions are the API."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    return [str(warning.message) for warning in caught]


def test_exported_frozen_lake_passes_the_gymnasium_checker():
    # Without a spec the checker can only warn that it cannot rebuild the env; nothing else.
    assert all("spec" in message for message in checked(to_gymnasium(tsmg.make("FrozenLake-v0"))))
    # Made from its id, the env has a spec, so the checker also rebuilds it and tests rendering.
    env = to_gymnasium("FrozenLake-NoSlip-v0", render_mode="ansi")
    assert env.spec.id == "tsmg/FrozenLake-NoSlip-v0"
    assert checked(env) == []
    assert "Frozen Lake" in env.render()
    assert gymnasium.make(env.spec).unwrapped.game.game_id == "FrozenLake-NoSlip-v0"


def test_exported_env_replays_the_games_episodes():
    env = to_gymnasium("FrozenLake-NoSlip-v0")
    game = tsmg.make("FrozenLake-NoSlip-v0")
    answers = ["right", "down", "jump!", "down", "right", "down", "right", "down"]
    for seed in (0, 5):
        observation, info = env.reset(seed=seed)
        observations, _ = game.reset(seed=seed)
        assert observation == observations["player"] and info["legal_actions"] == MOVES
        for answer in answers:
            result = game.step({"player": answer})
            observation, reward, terminated, truncated, info = env.step(answer)
            assert observation == result.observations["player"] and reward == result.rewards["player"]
            assert (terminated, truncated) == (result.terminated["player"], result.truncated["player"])
            assert {key: info[key] for key in ("action", "valid", "reason")} == result.infos["player"]
            if terminated or truncated:
                break


def test_sampled_text_actions_never_crash_the_exported_env():
    env = to_gymnasium(tsmg.make("FrozenLake-v0", on_invalid="default_action", forfeit_after=None, max_steps=5))
    env.action_space.seed(0)
    observation, _ = env.reset(seed=0)
    endings = 0
    for _ in range(300):
        observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert observation in env.observation_space and isinstance(reward, float)
        assert info["valid"] is False and info["action"] == "left"  # random text is never a move
        if terminated or truncated:
            endings += 1
            env.reset()
    assert endings == 60
    assert env.step(7)[-1]["valid"] is False  # not text at all


def test_export_keeps_observations_inside_the_text_space():
    game = GymnasiumGame("FrozenLake-v1", render=lambda obs, env: "☃ snowman at " + str(obs) * 50)
    env = to_gymnasium(game, observation_max_length=40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        observation, _ = env.reset(seed=0)
        env.reset(seed=0)  # one warning per kind of problem, not one per observation
    assert [("charset" in str(w.message), "max_length=40" in str(w.message)) for w in caught] == [
        (True, False),
        (False, True),
    ]
    assert observation.startswith("? snowman at 0000") and len(observation) == 40
    assert observation in env.observation_space


def test_export_rejects_multi_agent_games_and_stray_options():
    from two_agent_games import Stones

    with pytest.raises(ValueError, match="single-agent"):
        to_gymnasium(Stones())
    with pytest.raises(TypeError, match="game_options"):
        TextGameEnv(tsmg.make("FrozenLake-v0"), max_steps=3)
    with pytest.raises(ValueError, match="render_mode"):
        to_gymnasium("FrozenLake-v0", render_mode="human")


def test_wrapped_gymnasium_env_exported_again_passes_the_checker():
    game = GymnasiumGame(slippery_lake(), action_names=MOVES, max_steps=20)
    assert all("spec" in message for message in checked(to_gymnasium(game)))


def test_round_trip_wrap_export_wrap_plays_like_the_original():
    original = tsmg.make("FrozenLake-NoSlip-v0", invalid_penalty=0.25)
    round_trip = GymnasiumGame(to_gymnasium(tsmg.make("FrozenLake-NoSlip-v0", invalid_penalty=0.25)))
    answers = ["right", "hop", "down", "down", "right", "down", "right", "right", "down"]
    for seed in (1, 2, 3):
        observations, _ = original.reset(seed=seed)
        assert round_trip.reset(seed=seed)[0] == observations
        assert round_trip.legal_actions("player") == original.legal_actions("player") == MOVES
        for answer in answers:
            expected = original.step({"player": answer})
            got = round_trip.step({"player": answer})
            assert got.observations == expected.observations and got.rewards == expected.rewards
            assert got.terminated == expected.terminated and got.truncated == expected.truncated
            info = got.infos["player"]
            assert (info["action"], info["valid"], info["reason"]) == tuple(
                expected.infos["player"][key] for key in ("action", "valid", "reason")
            )
            if original.done:
                break
        assert round_trip.done == original.done
