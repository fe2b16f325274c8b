"""A service game through SkyRL-gym's env: text-form calls in, the game's influence graph out at the end."""

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the SkyRL-gym integration needs: pip install 'tsmg[skyrl]'")

import tsmg  # noqa: E402
from tsmg.apps.integrations.skyrl import ENV_ID, register_env  # noqa: E402
from tsmg.influence import InfluenceGraph  # noqa: E402
from tsmg.policies import OraclePolicy, RandomPolicy  # noqa: E402
from tsmg.rollout import rollout  # noqa: E402


@pytest.mark.parametrize("game_id", ["ServiceRefund-v0", "ServiceAddress-v0"])
@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_the_last_step_carries_the_same_influence_graph_as_a_tsmg_rollout(game_id, policy):
    register_env()
    for seed in range(3):
        [episode] = rollout(game_id, OraclePolicy() if policy == "oracle" else RandomPolicy(seed=seed), seeds=[seed])
        env = skyrl_gym.make(ENV_ID, env_config={"game_id": game_id}, extras={"seed": seed})
        env.init([])
        outputs = [env.step(f"<action>{step.action}</action>") for step in episode.steps]
        assert [output["done"] for output in outputs] == [False] * (len(outputs) - 1) + [True]
        assert all(output["metadata"]["valid"] for output in outputs)
        assert all("influence" not in output["metadata"] for output in outputs[:-1])
        graph = InfluenceGraph.model_validate(outputs[-1]["metadata"]["influence"])
        assert graph == episode.influence["exact"]
        assert outputs[-1]["metadata"]["success"] == episode.success["player"]


def test_a_game_without_an_influence_record_adds_none():
    register_env()
    env = skyrl_gym.make(ENV_ID, env_config={"game_id": "FrozenLake-NoSlip-v0"}, extras={"seed": 0})
    env.init([])
    game = tsmg.make("FrozenLake-NoSlip-v0")
    game.reset(seed=0)
    output = None
    while not game.done:
        move = game.oracle_action("player")
        game.step({"player": move})
        output = env.step(f"<action>{move}</action>")
    assert output["done"] and "influence" not in output["metadata"]
