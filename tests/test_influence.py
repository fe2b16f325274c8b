"""The typed influence graph: validation, time order, downstream actions, JSON round trip, the episode field."""

from __future__ import annotations

import pytest

from tsmg.episode import Episode
from tsmg.influence import InfluenceEdge, InfluenceGraph, InfluenceNode


def _service_graph() -> InfluenceGraph:
    """User asks; the agent looks up (a0), checks policy with the order's fields (a1), refunds (a2)."""
    return InfluenceGraph(
        nodes=[
            InfluenceNode(id="u0", kind="user", step=0, label="request"),
            InfluenceNode(id="a0", kind="action", step=0, label="lookup_order"),
            InfluenceNode(id="t0", kind="tool", step=1, produced_by="a0"),
            InfluenceNode(id="a1", kind="action", step=1, label="check_policy"),
            InfluenceNode(id="t1", kind="tool", step=2, produced_by="a1"),
            InfluenceNode(id="a2", kind="action", step=2, label="issue_refund"),
        ],
        edges=[
            InfluenceEdge(source="u0", target="a0", kind="support", fields=["order_id"]),
            InfluenceEdge(source="t0", target="a1", kind="support", fields=["category"]),
            InfluenceEdge(source="t0", target="a2", kind="support", fields=["order_id", "amount"]),
            InfluenceEdge(source="t1", target="a2", kind="support", fields=["eligible"]),
        ],
    )


def test_downstream_actions_follow_outputs_transitively_and_by_kind():
    graph = _service_graph()
    assert graph.downstream_actions("a0", "support") == ["a1", "a2"]
    assert graph.downstream_actions("a1", "support") == ["a2"]
    assert graph.downstream_actions("a2", "support") == []
    assert graph.downstream_actions("a0", "failure") == []
    assert graph.outputs("a0") == {"a0", "t0"}
    assert [node.id for node in graph.actions()] == ["a0", "a1", "a2"]
    # Transitive through an action's own output: a2 used a1 directly, a1 used a0's tool result.
    chain = InfluenceGraph(
        nodes=[InfluenceNode(id=f"a{i}", kind="action", step=i) for i in range(3)],
        edges=[
            InfluenceEdge(source="a0", target="a1", kind="failure"),
            InfluenceEdge(source="a1", target="a2", kind="failure"),
        ],
    )
    assert chain.downstream_actions("a0", "failure") == ["a1", "a2"]
    assert chain.downstream_actions("a0", "support") == []


def test_json_round_trip_keeps_every_field():
    graph = _service_graph()
    again = InfluenceGraph.from_json(graph.to_json())
    assert again == graph
    assert again.edges[2].fields == ["order_id", "amount"] and again.node("t0").produced_by == "a0"


@pytest.mark.parametrize(
    ("nodes", "edges", "message"),
    [
        ([("a0", "action", 0), ("a0", "user", 0)], [], "two nodes have the id 'a0'"),
        ([("a0", "action", 0), ("a1", "action", 0)], [], "both sit at step 0"),
        ([("a0", "action", 0)], [("a0", "zz", "support")], "'zz', which is not a node"),
        (
            [("u0", "user", 0), ("a0", "action", 0), ("u1", "user", 1)],
            [("a0", "u1", "support")],
            "edges end at actions",
        ),
        ([("a0", "action", 0), ("a1", "action", 1)], [("a1", "a0", "support")], "does not point backwards in time"),
        ([("a0", "action", 0), ("u0", "user", 0)], [("a0", "a0", "support")], "does not point backwards in time"),
        # A message of step 1 is shown after step 0's action: it cannot have influenced it.
        ([("a0", "action", 0), ("u1", "user", 1)], [("u1", "a0", "failure")], "does not point backwards in time"),
    ],
)
def test_bad_graphs_are_refused_with_the_reason(nodes, edges, message):
    with pytest.raises(ValueError, match=message):
        InfluenceGraph(
            nodes=[InfluenceNode(id=i, kind=kind, step=step) for i, kind, step in nodes],
            edges=[InfluenceEdge(source=s, target=t, kind=kind) for s, t, kind in edges],
        )


def test_produced_by_must_name_an_earlier_action_and_steps_fit_the_episode():
    with pytest.raises(ValueError, match="produced_by 'u0'"):
        InfluenceGraph(
            nodes=[
                InfluenceNode(id="u0", kind="user", step=0),
                InfluenceNode(id="t0", kind="tool", step=1, produced_by="u0"),
            ]
        )
    with pytest.raises(ValueError, match="produced_by 'a1'"):
        InfluenceGraph(
            nodes=[
                InfluenceNode(id="t0", kind="tool", step=0, produced_by="a1"),
                InfluenceNode(id="a1", kind="action", step=1),
            ]
        )
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        InfluenceNode(id="a", kind="action", step=-1)
    graph = _service_graph()
    graph.check_steps(3)
    with pytest.raises(ValueError, match=r"\['t1', 'a2'\] name steps beyond the episode's 2 step"):
        graph.check_steps(2)
    # Reading JSON validates too: an edge from the future is refused.
    bad = graph.to_json().replace('"source":"t1"', '"source":"a2"')
    with pytest.raises(ValueError, match="does not point backwards"):
        InfluenceGraph.from_json(bad)


def test_the_graph_is_a_field_of_the_episode_record_keyed_by_its_maker():
    episode = Episode(
        episode_id="e", game_id="g", agents=["player"], policies={}, influence={"exact": _service_graph()}
    )
    loaded = Episode.from_json(episode.to_json())
    assert loaded.influence["exact"] == _service_graph()
    assert Episode.from_json(Episode(episode_id="e", game_id="g", agents=[], policies={}).to_json()).influence == {}
