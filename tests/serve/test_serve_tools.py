"""A served tool-using game (games/service.py) forwards its typed tools and its influence graph over the wire."""

import httpx
import pytest
from conftest import serve_process
from test_serve import comparable

import tsmg
from backends.openai_compat import OpenAIBackend
from tests.backends.fault_server import FaultServer, address_clerk
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.policies import OraclePolicy, RandomPolicy
from tsmg.rollout import rollout

REFUND, ADDRESS = "ServiceRefund-Easy-v0", "ServiceAddress-v0"


@pytest.fixture(scope="module")
def service_server(tmp_path_factory):
    """One server with two service games and a game without tools."""
    with serve_process(tmp_path_factory.mktemp("service"), REFUND, ADDRESS, "FrozenLake-NoSlip-v0") as server:
        yield server


def test_the_info_carries_the_games_typed_tools(service_server):
    info = httpx.get(f"{service_server.url(ADDRESS)}/info", timeout=10).json()
    assert [tool["name"] for tool in info["tools"]] == ["ask_user", "lookup_customer", "update_address"]
    assert info["provides_influence"] is True
    remote = tsmg.make(service_server.url(ADDRESS))
    assert list(remote.tool_specs()) == list(tsmg.make(ADDRESS).tool_specs())
    assert remote.provides_influence
    remote.close()
    plain = tsmg.make(service_server.url("FrozenLake-NoSlip-v0"))
    assert plain.tool_specs() is None and not plain.provides_influence
    plain.close()


@pytest.mark.parametrize("game_id", [REFUND, ADDRESS])
def test_a_remote_rollout_records_the_exact_influence_graph_as_a_local_one(service_server, game_id):
    for make_policy in (OraclePolicy, lambda: RandomPolicy(seed=1)):
        remote = rollout(service_server.url(game_id), make_policy(), seeds=range(3))
        local = rollout(game_id, make_policy(), seeds=range(3))
        assert not any(episode.error for episode in remote)
        assert all(episode.influence["exact"].actions() for episode in remote)
        assert [comparable(e) for e in remote] == [comparable(e) for e in local]  # the graphs included
    assert all(episode.success["player"] for episode in rollout(service_server.url(game_id), OraclePolicy(), [0, 1]))


def test_a_hosted_model_calls_a_served_games_typed_tools(service_server):
    """The LAP of a remote client offers the served game's own tools (not make_move) and solves the task."""
    config = LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required"))
    with FaultServer() as model_server:
        model_server.reply = address_clerk
        with OpenAIBackend("fault-model", base_url=model_server.base_url, api_key="sk-x", timeout_s=5) as model:
            [episode] = rollout(service_server.url(ADDRESS), LAP(model, config), seeds=[4])
        tools = model_server.bodies[0]["tools"]
    assert [tool["function"]["name"] for tool in tools] == ["ask_user", "lookup_customer", "update_address"]
    assert tools[2]["function"]["parameters"]["required"] == ["customer_id", "address"]
    assert episode.success["player"] is True and len(episode.steps) == 4
    assert [node.label for node in episode.influence["exact"].actions()] == [
        "ask_user",
        "ask_user",
        "lookup_customer",
        "update_address",
    ]


def test_vllms_own_server_calls_a_served_games_tools(service_server, tmp_path):
    """vLLM's CPU build, asked for tool calls (``required``), is offered the served game's own tools.

    The tiny model's weights are random: vLLM constrains the function's name to the offered tools, so
    every name is one of the game's (never ``make_move``); its arguments are whatever the model wrote,
    and the game refuses the bad ones with its reason. One episode of two steps (vLLM starts in ~50 s).
    """
    from tests.backends.vllm_env import VLLMServer, require_vllm_python, vllm_model_dir
    from tsmg.apps.cli import main
    from tsmg.episode import read_episodes

    python = require_vllm_python()
    server = VLLMServer(
        vllm_model_dir(),
        max_model_len=1024,
        extra_args=("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),  # `required` needs a parser
    )
    spec, out = "openai:tiny-vllm", tmp_path / "run"
    try:
        server.start(python)
        arguments = [
            "eval", "--game", service_server.url(REFUND), "--model", spec, "--episodes", "1",
            "--action-format", "tool", "--tool-choice", "required", "--max-tokens", "160", "--option", "max_steps=2",
            "--no-progress", "--out", str(out), "--model-option", f"{spec}:base_url={server.base_url}",
            "--model-option", f"{spec}:api_key=none", "--model-option", f"{spec}:timeout_s=120",
        ]  # fmt: skip
        assert main(arguments) == 0, server.log_tail()
    finally:
        server.stop()
    [episode] = read_episodes(out / "episodes.jsonl")
    names = {tool.name for tool in tsmg.make(REFUND).tool_specs()}
    assert episode.error is None and len(episode.steps) == 2
    for step in episode.steps:
        assert step.tool_calls and {call["name"] for call in step.tool_calls} <= names
        assert step.valid or "no function call" not in str(step.reason)  # a call of the game's tool, judged by it
    assert "exact" in episode.influence  # the served game's graph came back with the last step
