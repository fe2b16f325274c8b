"""The model annotator over real HTTP: a loopback OpenAI-compatible server answering like a good annotator.

The server (tests/backends/fault_server.py) answers each question with the exact record's edges
written in the annotator's answer form, so the whole path (prompt, HTTP, parse, graph) must give
back the exact graph's edges: precision and recall 1. One answer is malformed and one request
fails, to see what the record says then.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_server import FaultServer, request_key

import games  # noqa: F401  (registers the catalog)
from backends.openai_compat import OpenAIBackend
from training.model_annotator import ModelAnnotator, edge_agreement, question, transcript
from tsmg.episode import Episode
from tsmg.influence import InfluenceNode
from tsmg.policies import OraclePolicy, RandomPolicy
from tsmg.rollout import rollout


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def good_answer(episode: Episode) -> str:
    """The exact record's edges as a good annotator would write them."""
    graph = episode.influence["exact"]
    return "\n".join(f"{edge.target} <- {edge.source} {edge.kind} {','.join(edge.fields)}" for edge in graph.edges)


def _place(node: InfluenceNode) -> tuple:
    """A node without its label (the exact record names messages by their cause, the transcript by their role)."""
    return node.id, node.kind, node.step, node.produced_by


def test_a_good_annotator_over_http_gives_the_exact_edges_in_one_batch(server: FaultServer) -> None:
    episodes = rollout("ServiceRefund-v0", OraclePolicy(), seeds=range(3))
    episodes += rollout("ServiceAddress-v0", RandomPolicy(seed=1), seeds=range(3))
    episodes += rollout("ServiceRefund-v0", RandomPolicy(seed=4), seeds=range(10, 12))
    answers = {question(transcript(episode))[-1]["content"]: good_answer(episode) for episode in episodes}
    malformed, failing = episodes[1], episodes[2]
    answers[question(transcript(malformed))[-1]["content"]] = (
        "Here you go:\na1 <- m1 support order_id\na9 <- m0 support"
    )
    failing_key = question(transcript(failing))[-1]["content"]
    server.plan = lambda key, attempt: "500" if key == failing_key else "ok"
    server.reply = lambda body: answers[request_key(body)]
    with OpenAIBackend("annotator", base_url=server.base_url, api_key="sk-x", timeout_s=5, max_retries=0) as model:
        ModelAnnotator(model)(episodes)
    asked = [episode for episode in episodes if any(step.valid for step in episode.steps)]
    assert len(server.bodies) == len(asked)  # one request per episode with an action, all in one batched call
    assert all(body["temperature"] == 0.0 for body in server.bodies)
    for episode in asked:
        exact, model_graph = episode.influence["exact"], episode.influence["model"]
        report = episode.annotations["model"]
        if episode is failing:
            assert "error" in report and model_graph.edges == []
            assert [_place(node) for node in model_graph.nodes] == [_place(node) for node in exact.nodes]
        elif episode is malformed:
            assert report["dropped"] == [
                {"line": "Here you go:", "reason": "not a dependency line (ACTION <- ITEM support|failure)"},
                {"line": "a9 <- m0 support", "reason": "names 'a9', not an item of the transcript"},
            ]
            assert edge_agreement(exact, model_graph) == {"tp": 1, "fp": 0, "fn": len(exact.edges) - 1}
        else:
            assert report == {
                "answer": good_answer(episode),
                "edges": len(exact.edges),
                "dropped": [],
                "dropped_count": 0,
            }
            assert edge_agreement(exact, model_graph) == {"tp": len(exact.edges), "fp": 0, "fn": 0}
            assert model_graph.edges == exact.edges  # fields included
