"""A served tool-using game (games/service.py) forwards its typed tools and its influence graph over the wire."""

import re

import httpx
import pytest
from conftest import serve_process
from test_serve import comparable

import tsmg
from backends.openai_compat import OpenAIBackend
from tests.backends.fault_server import FaultServer, tool_call
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


def clerk(body):
    """Serves an address change by reading the conversation: ask, ask, look up, update."""
    text = body["messages"][-1]["content"]
    email = re.search(r"My email is (\S+@example\.com)\.", text)
    new = re.search(r"My new address is (.+?)\.\n", text)
    customer = re.search(r"Customer (C\d+)", text)
    if email is None:
        call = tool_call("ask_user", {"topic": "email"})
    elif new is None:
        call = tool_call("ask_user", {"topic": "address"})
    elif customer is None:
        call = tool_call("lookup_customer", {"email": email.group(1)})
    else:
        call = tool_call("update_address", {"customer_id": customer.group(1), "address": new.group(1)})
    return {"content": None, "tool_calls": [call]}


def test_a_hosted_model_calls_a_served_games_typed_tools(service_server):
    """The LAP of a remote client offers the served game's own tools (not make_move) and solves the task."""
    config = LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required"))
    with FaultServer() as model_server:
        model_server.reply = clerk
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
