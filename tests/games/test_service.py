"""The tool-using service games: the user reveals facts when asked, success needs the right final call, exact graphs."""

from __future__ import annotations

import json

import pytest

import games  # noqa: F401  (registers the catalog)
from games.service import ServiceGame
from tsmg import make
from tsmg.policies import CallablePolicy, OraclePolicy, RandomPolicy
from tsmg.rollout import rollout
from tsmg.tools import ToolParam, ToolSpec, call_from_json, format_call, parse_call


def _script(answers):
    """A policy answering ``answers`` in order (one per decision)."""
    queue = list(answers)
    return CallablePolicy(lambda request: queue.pop(0), name="script")


SERVICE_GAMES = ("ServiceRefund-v0", "ServiceRefund-Easy-v0", "ServiceAddress-v0")


@pytest.mark.parametrize("game_id", SERVICE_GAMES)
def test_oracle_always_succeeds_random_tools_sometimes_and_every_record_has_its_exact_graph(game_id):
    oracle = rollout(game_id, OraclePolicy(), seeds=range(40))
    assert all(episode.success["player"] for episode in oracle)
    randomly = rollout(game_id, RandomPolicy(seed=0), seeds=range(60))
    rate = sum(bool(episode.success["player"]) for episode in randomly) / len(randomly)
    assert 0.05 < rate < 0.7, rate
    for episode in oracle + randomly:
        graph = episode.influence["exact"]
        graph.check_steps(len(episode.steps))
        assert [node.step for node in graph.actions()] == [step.index for step in episode.steps if step.valid]


def test_the_user_reveals_facts_only_when_asked_and_the_world_follows_the_seed():
    game = make("ServiceAddress-v0")
    first = game.reset(seed=5)[0]["player"]
    email = dict(game.state.right)["email"]
    assert email not in first and "My email" not in first
    observation = game.step({"player": 'ask_user(topic="email")'}).observations["player"]
    assert f"My email is {email}." in observation
    assert make("ServiceAddress-v0").reset(seed=5)[0]["player"] == first
    assert make("ServiceAddress-v0").reset(seed=6)[0]["player"] != first
    refund = make("ServiceRefund-v0")
    opening = refund.reset(seed=2)[0]["player"]
    target = dict(refund.state.right)["order_id"]
    assert "It's order" not in opening and target in opening  # listed among the account's orders, not singled out
    assert f"It's order {target}." in refund.step({"player": 'ask_user(topic="order")'}).observations["player"]


def test_success_needs_the_right_final_call_with_the_right_arguments():
    game = make("ServiceRefund-v0")
    game.reset(seed=11)
    right = dict(game.state.right)
    other = next(
        move
        for move in game.legal_actions("player")
        if move.startswith("lookup_order") and right["order_id"] not in move
    )
    game.step({"player": other})
    wrong_id = other.split('"')[1]
    result = game.step({"player": f'deny_refund(order_id="{wrong_id}")'})
    assert result.terminated["player"] and result.rewards["player"] == 0.0 and game.is_success("player") is False
    # Arguments must be values the conversation showed: an amount never shown is refused with the reason.
    game.reset(seed=11)
    invalid = game.parse("player", f'issue_refund(order_id="{right["order_id"]}", amount="1.00")')
    assert "has not shown" in invalid.reason
    assert "unknown tool 'refund'" in game.parse("player", 'refund(order_id="A1")').reason
    shouted = f'LOOKUP_ORDER(order_id="{right["order_id"].lower()}")'
    assert game.parse("player", shouted) == (f'lookup_order(order_id="{right["order_id"]}")')


def test_exact_graph_of_an_address_change_that_uses_the_old_address():
    # Ask the email, look the customer up (it shows the old address), ask the new one, an invalid
    # answer, then update with the OLD address: a wrong fact, so a failure edge.
    game = make("ServiceAddress-v0")
    game.reset(seed=3)
    right = dict(game.state.right)
    old = next(value for name, value in game.state.answers[0][1].facts if name == "address")
    answers = [
        'ask_user(topic="email")',
        f'lookup_customer(email="{right["email"]}")',
        'ask_user(topic="address")',
        "update my address please",
        f'update_address(customer_id="{right["customer_id"]}", address="{old}")',
    ]
    [episode] = rollout("ServiceAddress-v0", _script(answers), seeds=[3])
    assert [step.valid for step in episode.steps] == [True, True, True, False, True]
    assert episode.success["player"] is False
    graph = episode.influence["exact"]
    assert [(node.id, node.kind, node.step, node.produced_by) for node in graph.nodes] == [
        ("m0", "user", 0, None),
        ("a0", "action", 0, None),
        ("m1", "user", 1, "a0"),
        ("a1", "action", 1, None),
        ("m2", "tool", 2, "a1"),
        ("a2", "action", 2, None),
        ("m3", "user", 3, "a2"),
        ("a4", "action", 4, None),
    ]
    assert [(edge.source, edge.target, edge.kind, edge.fields) for edge in graph.edges] == [
        ("m1", "a1", "support", ["email"]),
        ("m2", "a4", "support", ["customer_id"]),
        ("m2", "a4", "failure", ["address"]),
    ]
    assert graph.downstream_actions("a1", "failure") == ["a4"] and graph.downstream_actions("a2", "support") == []


def test_a_refund_decided_on_the_policy_routes_credit_to_the_lookups():
    [episode] = rollout("ServiceRefund-v0", OraclePolicy(), seeds=[1])
    graph = episode.influence["exact"]
    edges = {(edge.source, edge.target, tuple(edge.fields)) for edge in graph.edges}
    final = f"a{len(episode.steps) - 1}"
    assert ("m3", final, ("window",)) in edges  # the policy check's answer decided the final call
    assert graph.downstream_actions("a0", "support") == ["a1", "a2", "a3"]  # asking led to everything after


def test_a_truncated_episode_keeps_its_graph_within_its_steps():
    game = make("ServiceRefund-v0")
    game.reset(seed=0)
    lookups = [move for move in game.legal_actions("player") if move.startswith("lookup_order")]
    [episode] = rollout("ServiceRefund-v0", _script([*lookups * 4]), seeds=[0])
    assert episode.truncated and len(episode.steps) == 8
    graph = episode.influence["exact"]
    graph.check_steps(8)  # the last look-up's result was never shown: no node for it
    assert graph.nodes[-1].id == "a7" and len(graph.actions()) == 8


def test_tool_schemas_and_the_text_form():
    tool = ToolSpec(
        name="issue_refund",
        description="Refund.",
        parameters=[ToolParam(name="order_id"), ToolParam(name="days", type="integer")],
    )
    schema = tool.openai_schema()["function"]
    assert schema["parameters"]["properties"]["days"]["type"] == "integer"
    assert schema["parameters"]["required"] == ["order_id", "days"]
    text = format_call(tool, {"days": 3, "order_id": 'A"1'})
    assert text == 'issue_refund(order_id="A\\"1", days=3)'
    assert parse_call(text, [tool]) == ("issue_refund", {"order_id": 'A"1', "days": 3})
    assert "is an integer" in parse_call('issue_refund(order_id="A", days="x")', [tool])
    assert "takes order_id, days; got order_id" in parse_call('issue_refund(order_id="A")', [tool])
    assert "pairs separated by commas" in parse_call("issue_refund(A, 3)", [tool])
    assert call_from_json("issue_refund", json.dumps({"order_id": "A", "days": 2}), [tool]) == (
        'issue_refund(order_id="A", days=2)'
    )
    assert call_from_json("issue_refund", "{not json", [tool]) == "issue_refund({not json)"
    game = ServiceGame(task="refund")
    assert [spec.name for spec in game.tool_specs()] == [
        "ask_user",
        "lookup_order",
        "check_policy",
        "issue_refund",
        "deny_refund",
    ]


def test_the_service_members_form_their_own_protocol_and_other_games_answer_none():
    """``ToolGame`` holds tools and influence graphs, not ``Game``; the readers answer for any game.

    Mutations that fail it: ``game_tools`` returning ``game.tool_specs()`` without the protocol check (a
    Frozen Lake has no such member), ``exact_influence`` ignoring ``provides_influence``, the members put
    back on ``Game``.
    """
    from tsmg.core import Game
    from tsmg.tools import ToolGame, exact_influence, game_tools, provides_influence

    assert not {"tool_specs", "influence_graph", "provides_influence"} & set(dir(Game))
    # docs/layout.md ("The game interface") gives these counts: 7 abstract members, 23 in all.
    members = {name for name in [*vars(Game), *Game.__annotations__] if not name.startswith("_")}
    assert (len(Game.__abstractmethods__), len(members)) == (7, 23), sorted(members)
    service, lake = ServiceGame(task="address", distractors=0), make("FrozenLake-v0")
    assert isinstance(service, ToolGame) and not isinstance(lake, ToolGame)
    assert game_tools(service) == service.tool_specs() and game_tools(lake) is None
    assert provides_influence(service) and not provides_influence(lake)
    service.reset(seed=3)
    lake.reset(seed=3)
    while not service.done:
        service.step({"player": service.oracle_action("player")})
    assert exact_influence(service) == service.influence_graph() and exact_influence(lake) is None

    class Quiet(ServiceGame):  # the members, but no graph promised: none is read
        provides_influence = False

    quiet = Quiet(task="address", distractors=0)
    assert game_tools(quiet) == quiet.tool_specs() and exact_influence(quiet) is None
