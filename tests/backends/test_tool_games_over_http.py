"""A tool-using game played by a hosted tool-calling model, over real HTTP on loopback.

The fault server (tests/backends/fault_server.py) answers with ``tool_calls``: here it reads the
conversation it is sent and calls the service game's own tools (one function schema per tool,
typed arguments), as a hosted model under ``ActionFormat(kind="tool")`` would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_server import FaultServer, address_clerk, tool_call

import games  # noqa: F401  (registers the catalog)
from backends.openai_compat import OpenAIBackend
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.rollout import rollout


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def test_a_hosted_model_calls_the_games_typed_tools_and_solves_the_task(server: FaultServer) -> None:
    server.reply = address_clerk
    config = LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required"))
    with OpenAIBackend("fault-model", base_url=server.base_url, api_key="sk-x", timeout_s=5, max_retries=1) as model:
        [episode] = rollout("ServiceAddress-v0", LAP(model, config), seeds=[4])
    body = server.bodies[0]
    functions = {tool["function"]["name"]: tool["function"] for tool in body["tools"]}
    assert list(functions) == ["ask_user", "lookup_customer", "update_address"]
    assert functions["update_address"]["parameters"]["required"] == ["customer_id", "address"]
    assert functions["lookup_customer"]["parameters"]["properties"]["email"]["type"] == "string"
    assert "Call one of the functions ask_user, lookup_customer, update_address" in body["messages"][-1]["content"]
    assert episode.success["player"] is True and all(step.valid for step in episode.steps)
    assert [step.action.split("(")[0] for step in episode.steps] == [
        "ask_user",
        "ask_user",
        "lookup_customer",
        "update_address",
    ]
    assert episode.steps[0].tool_calls == [{"name": "ask_user", "arguments": '{"topic": "email"}', "id": "call_0"}]
    # The conversation (the observation) shows the earlier calls in their text form; the graph is the game's own.
    assert 'Agent: ask_user(topic="email")' in server.bodies[-1]["messages"][-1]["content"]
    assert len(episode.influence["exact"].actions()) == 4


def test_bad_calls_of_the_games_tools_are_invalid_with_the_reason(server: FaultServer) -> None:
    replies = {
        "unknown tool": ({"tool_calls": [tool_call("make_move", {"move": "up"})]}, "unknown tool 'make_move'"),
        "missing argument": ({"tool_calls": [tool_call("lookup_customer", {})]}, "takes email"),
        "two calls": (
            {
                "tool_calls": [
                    tool_call("ask_user", {"topic": "email"}),
                    tool_call("ask_user", {"topic": "address"}, "call_1"),
                ]
            },
            "several different calls",
        ),
        "no call": ("I will ask for the email.", "no function call in the answer: call one of ask_user"),
    }
    config = LAPConfig(action_format=ActionFormat(kind="tool"))
    for case, (reply, reason) in replies.items():
        server.reply = lambda body, reply=reply: reply
        with OpenAIBackend(
            "fault-model", base_url=server.base_url, api_key="sk-x", timeout_s=5, max_retries=1
        ) as model:
            [episode] = rollout("ServiceAddress-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 1})
        step = episode.steps[0]
        assert not step.valid and reason in str(step.reason), (case, step.reason)
