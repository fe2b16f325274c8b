"""tsmg games as SkyRL-gym BaseTextEnv: episodes played through skyrl_gym.make, by a real model and by scripts."""

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the SkyRL-gym integration needs: pip install 'tsmg[skyrl]'")

from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

from tsmg.apps.integrations.skyrl import ENV_ID, GameTextEnv, register_env  # noqa: E402
from tsmg.lm import GenerationRequest, SamplingParams  # noqa: E402
from tsmg.policies import OraclePolicy, RandomPolicy  # noqa: E402
from tsmg.rollout import rollout  # noqa: E402


def _make(**config):
    register_env()
    extras = {"seed": config.pop("seed")} if "seed" in config else {}
    return skyrl_gym.make(ENV_ID, env_config=config, extras=extras)


def _play(env, answer, max_turns=50):
    """Drive the env as SkyRL's generator does: the conversation grows by each answer and the env's messages."""
    conversation, _ = env.init([])
    outputs = []
    for _ in range(max_turns):
        text = answer(conversation)
        output = env.step(text)
        outputs.append(output)
        conversation = conversation + [{"role": "assistant", "content": text}] + output["observations"]
        if output["done"]:
            break
    return conversation, outputs


def test_a_real_local_model_plays_an_episode(tiny_model_dir):
    from backends.hf import HFBackend

    model = HFBackend(tiny_model_dir)
    env = _make(game_id="FrozenLake-v0", seed=3)
    assert isinstance(env, BaseTextEnv)
    seeds = iter(range(100))

    def answer(conversation):
        request = GenerationRequest(messages=conversation, seed=next(seeds))
        return model.generate([request], SamplingParams(max_tokens=12))[0].text

    conversation, outputs = _play(env, answer)
    # An untrained model writes no <action> tag: each answer is refused with the reason, and the third in a
    # row forfeits (FrozenLake-v0's forfeit_after=3), scoring the game's forfeit reward.
    assert outputs[-1]["done"] and len(outputs) == 3
    assert all(output["metadata"]["valid"] is False for output in outputs)
    assert "That answer was invalid: no <action>...</action> in the answer." in conversation[3]["content"]
    assert sum(output["reward"] for output in outputs) == outputs[-1]["metadata"]["episode_return"] == -1.0
    assert env.get_metrics() == {"turns": 3, "episode_return": -1.0, "success": 0.0}


def test_an_episode_through_the_env_equals_the_same_episode_in_process():
    seed = 11
    env = _make(game_id="FrozenLake-NoSlip-v0", seed=seed)
    oracle = OraclePolicy()

    def answer(conversation):  # the oracle's move, written as a model would
        return f"<think>shortest path</think><action>{oracle.act([env.seat.request()])[0].action}</action>"

    _, outputs = _play(env, answer)
    [episode] = rollout("FrozenLake-NoSlip-v0", oracle, seeds=[seed])
    assert [output["metadata"]["action"] for output in outputs] == [step.parsed_action for step in episode.steps]
    assert sum(output["reward"] for output in outputs) == episode.returns["player"] == 1.0
    assert outputs[-1]["metadata"]["success"] is True


def test_a_two_player_game_the_other_seat_played_by_the_opponent_is_reproducible():
    def play(seed):
        env = _make(game_id="TicTacToe-v0", seed=seed, agent="player_1", opponent="random")
        first, info = env.init([])
        assert info == {"game_id": "TicTacToe-v0", "seed": seed, "agent": "player_1"}
        mover = RandomPolicy(seed=5)
        conversation, outputs = _play(env, lambda _: f"<action>{mover.act([env.seat.request()])[0].action}</action>")
        return first, conversation, [output["reward"] for output in outputs]

    first, conversation, rewards = play(4)
    assert "X" in first[-1]["content"]  # the opponent (X) moved before our first turn
    assert play(4) == (first, conversation, rewards)  # same seed, same answers: the same episode
    assert sum(rewards) in (-1.0, 0.0, 1.0)


def test_bad_settings_are_refused_in_one_sentence():
    with pytest.raises(ValueError, match="name the game"):
        GameTextEnv({}, {})
    with pytest.raises(ValueError, match="needs tsmg's own sampler"):
        GameTextEnv({"game_id": "FrozenLake-v0", "action_format": "choice"})
    with pytest.raises(ValueError, match="has no seat 'nobody'"):
        GameTextEnv({"game_id": "TicTacToe-v0", "agent": "nobody"})


def test_max_turns_is_the_games_step_limit():
    import tsmg

    assert GameTextEnv({"game_id": "FrozenLake-v0", "game_options": {"max_steps": 7}}).max_turns == 7
    registered = tsmg.make("Sokoban-v0").config.max_steps  # the registry's default options
    assert registered not in (None, 1_000)
    assert GameTextEnv({"game_id": "Sokoban-v0"}).max_turns == registered


def test_a_tool_using_service_game_is_played_in_the_text_form_of_its_calls():
    import games  # noqa: F401  (registers the catalog)

    env = _make(game_id="ServiceRefund-v0", seed=7)
    oracle = OraclePolicy()
    answers = []

    def answer(conversation):  # the oracle's call in its text form, inside the action tag
        answers.append(oracle.act([env.seat.request()])[0].action)
        return f"<action>{answers[-1]}</action>"

    _, outputs = _play(env, answer)
    assert answers[0] == 'ask_user(topic="order")' and answers[-1].startswith(("issue_refund(", "deny_refund("))
    assert [output["metadata"]["action"] for output in outputs] == answers
    assert outputs[-1]["metadata"]["success"] is True and sum(output["reward"] for output in outputs) == 1.0
