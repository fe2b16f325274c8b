"""The model-based influence annotator: its transcript, prompt and parser, and a real local model answering."""

from __future__ import annotations

import random

import pytest

import games  # noqa: F401  (registers the catalog)
from training.annotators import ANNOTATORS, annotate
from training.config import TrainConfig
from training.model_annotator import ModelAnnotator, edge_agreement, parse_answer, question, transcript
from tsmg.influence import InfluenceGraph
from tsmg.policies import OraclePolicy, RandomPolicy
from tsmg.rollout import rollout


def _refund() -> list:
    """An oracle refund episode (seed 3): ask, look up, check the policy, decline."""
    return rollout("ServiceRefund-v0", OraclePolicy(), seeds=[3])


def test_the_transcript_has_the_exact_records_nodes_with_their_texts():
    """Ids, kinds, steps and produced_by as the game's own record has them; texts from the observations."""
    [episode] = _refund()
    items = transcript(episode)
    assert [item.node.id for item in items] == ["m0", "a0", "m1", "a1", "m2", "a2", "m3", "a3"]
    assert [item.node for item in items if item.node.kind == "action"] == episode.influence["exact"].actions()
    assert items[4].node.kind == "tool" and items[4].node.produced_by == "a1"
    assert items[4].text.startswith("Tool: Order B49: headphones") and items[3].text == 'lookup_order(order_id="B49")'
    assert items[0].node.produced_by is None and items[0].text.startswith("User: Hi, this is Jun.")
    # Every service episode, oracle or random (invalid answers included): the same nodes as the exact record.
    for game_id in ("ServiceRefund-v0", "ServiceAddress-v0"):
        for episode in rollout(game_id, RandomPolicy(seed=2), seeds=range(12)):
            ours = {(item.node.kind == "action", item.node.step, item.node.produced_by) for item in transcript(episode)}
            exact = {(node.kind == "action", node.step, node.produced_by) for node in episode.influence["exact"].nodes}
            assert ours == exact


def test_the_question_numbers_every_item_and_asks_for_typed_lines():
    [episode] = _refund()
    system, user = question(transcript(episode))
    assert system["role"] == "system" and user["role"] == "user"
    body = user["content"]
    assert "[m2] Tool: Order B49: headphones, category electronics, amount 71.43" in body
    assert '[a3] Agent: deny_refund(order_id="B49")' in body
    assert "Actions to annotate: a0, a1, a2, a3." in body
    assert "ACTION <- ITEM support FIELDS" in body and "failure" in body


def test_the_parser_keeps_typed_dependencies_and_says_why_it_dropped_each_other_line():
    [episode] = _refund()
    items = transcript(episode)
    answer = "\n".join(
        [
            "a1 <- m1 support order_id",
            "- [a3] <- [m2] support order_id, amount.",
            "a2: m2 failure",
            "",
            "Sure! Here are the dependencies:",  # chatter
            "a1 <- m9 support",  # unknown item
            "m2 <- a1 support",  # ends at a message
            "a1 <- m2 support",  # points forwards in time
            "a1 <- a1 support",  # itself
            "a3 <- m3 maybe",  # unknown kind
            "a3 <- m3",  # no kind
            "a1 <- m1 support",  # repeated
        ]
    )
    edges, dropped = parse_answer(answer, items)
    assert [(edge.target, edge.source, edge.kind, edge.fields) for edge in edges] == [
        ("a1", "m1", "support", ["order_id"]),
        ("a3", "m2", "support", ["order_id", "amount"]),
        ("a2", "m2", "failure", []),
    ]
    reasons = [entry["reason"] for entry in dropped]
    assert len(dropped) == 8
    assert reasons[0].startswith("not a dependency line")
    assert "'m9', not an item of the transcript" in reasons[1]
    assert "'m2' is a message; dependencies end at actions" in reasons[2]
    assert "'m2' does not come before 'a1'" in reasons[3] and "'a1' does not come before 'a1'" in reasons[4]
    assert "kind 'maybe'" in reasons[5] and "kind 'missing'" in reasons[6]
    assert reasons[7] == "repeats the dependency a1 <- m1 support"
    # The kept edges make a valid graph over the transcript's nodes.
    InfluenceGraph(nodes=[item.node for item in items], edges=edges).check_steps(len(episode.steps))


def test_the_parser_never_raises_on_garbage():
    [episode] = _refund()
    items = transcript(episode)
    rng = random.Random(0)
    alphabet = "am0123<-:[] \n supportfailure,.\u2190\x00"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        edges, dropped = parse_answer(text, items)
        InfluenceGraph(nodes=[item.node for item in items], edges=edges)
        assert len(edges) + len(dropped) == len([line for line in text.splitlines() if line.strip()])


def test_edge_agreement_matches_edges_by_endpoints_and_type():
    [episode] = _refund()
    exact = episode.influence["exact"]
    assert edge_agreement(exact, exact) == {"tp": len(exact.edges), "fp": 0, "fn": 0}
    items = transcript(episode)
    edges, _ = parse_answer("a1 <- m1 support\na3 <- m2 failure\na2 <- a1 support", items)
    guess = InfluenceGraph(nodes=[item.node for item in items], edges=edges)
    assert edge_agreement(exact, guess) == {"tp": 1, "fp": 2, "fn": 3}
    assert edge_agreement(exact, guess, typed=False) == {"tp": 2, "fp": 1, "fn": 2}


def test_a_real_local_model_annotates_every_episode_in_one_batch_and_records_what_it_dropped(tmp_path):
    """The tiny model answers nonsense: every episode still gets a valid graph and a report, nothing raises."""
    pytest.importorskip("torch")
    from backends.hf import HFBackend
    from backends.tiny import build_tiny_model

    backend = HFBackend(str(build_tiny_model(tmp_path / "tiny")), threads=1)
    calls = []
    generate = backend.generate

    def counted(requests, sampling):
        calls.append(len(requests))
        return generate(requests, sampling)

    backend.generate = counted  # type: ignore[method-assign]
    episodes = rollout("ServiceRefund-Easy-v0", RandomPolicy(seed=0), seeds=range(3))
    ModelAnnotator(backend, max_tokens=24)(episodes)
    assert calls == [3]  # one batched call for the rollout's three questions
    for episode in episodes:
        graph = episode.influence["model"]
        graph.check_steps(len(episode.steps))
        report = episode.annotations["model"]
        assert report["edges"] == len(graph.edges)
        assert report["dropped_count"] >= len(report["dropped"]) and len(report["dropped"]) <= 20
        assert all(set(entry) == {"line", "reason"} for entry in report["dropped"])


def test_the_model_annotator_is_registered_and_iapo_can_route_along_its_graph():
    assert isinstance(ANNOTATORS["model"], ModelAnnotator)
    config = TrainConfig(
        rollout={"game_id": "ServiceRefund-Easy-v0", "annotators": ["model"]},
        model={"spec": "tiny"},
        credit={"name": "iapo", "params": {"graph": "model"}},
    )
    assert config.rollout.annotators == ["model"]
    annotate([], [])  # nothing listed, nothing asked
