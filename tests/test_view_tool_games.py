"""`tsmg view` of a tool-using game: tool calls and results shown as such, and the episode's influence graph.

The episodes are real: a random policy over the service game's legal calls (its influence graph has
support and failure edges) and a hosted tool-calling model on loopback (its ``tool_calls`` recorded).
"""

import json
import re

import pytest
from view_helpers import chromium, click_and_wait, open_report, screenshot

import games  # noqa: F401  (registers the catalog)
from backends.openai_compat import OpenAIBackend
from tests.backends.fault_server import FaultServer, tool_call
from tsmg.apps.cli import main
from tsmg.apps.view.records import normalise_episode
from tsmg.episode import write_episodes
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.policies import RandomPolicy
from tsmg.rollout import rollout


def clerk(body):
    """Serves an address change by reading the conversation: ask, ask, look up, update."""
    text = body["messages"][-1]["content"]
    email = re.search(r"My email is (\S+@example\.com)\.", text)
    new = re.search(r"My new address is (.+?)\.\n", text)
    customer = re.search(r"Customer (C\d+)", text)
    if email is None:
        return {"content": None, "tool_calls": [tool_call("ask_user", {"topic": "email"})]}
    if new is None:
        return {"content": None, "tool_calls": [tool_call("ask_user", {"topic": "address"})]}
    if customer is None:
        return {"content": None, "tool_calls": [tool_call("lookup_customer", {"email": email.group(1)})]}
    arguments = {"customer_id": customer.group(1), "address": new.group(1)}
    return {"content": None, "tool_calls": [tool_call("update_address", arguments)]}


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory):
    """A run folder: a random policy's refund episode with failures, and a hosted model's address change."""
    run = tmp_path_factory.mktemp("tools") / "run"
    run.mkdir()
    [random_episode] = rollout("ServiceRefund-v0", RandomPolicy(seed=0), seeds=[4])
    config = LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required"))
    with FaultServer() as server:
        server.reply = clerk
        with OpenAIBackend("fault-model", base_url=server.base_url, api_key="sk-x", timeout_s=5) as model:
            [hosted_episode] = rollout("ServiceAddress-v0", LAP(model, config), seeds=[4])
    episodes = [random_episode, hosted_episode]
    write_episodes(run / "episodes.jsonl", episodes)
    return run, episodes


def expected_used(graph, action_id):
    nodes = {node.id: node for node in graph.nodes}
    return [
        (edge.kind, edge.source, nodes[edge.source].kind, edge.fields)
        for edge in graph.edges
        if edge.target == action_id
    ]


def test_each_step_gets_its_call_its_result_and_what_it_used(tool_run):
    _, episodes = tool_run
    for episode in episodes:
        shown = normalise_episode(json.loads(episode.model_dump_json()), 1)
        graph = episode.influence["exact"]
        assert shown["influence"]["exact"] == graph.model_dump(mode="json")
        actions = {node.step: node for node in graph.actions()}
        for position, (step, record) in enumerate(zip(shown["steps"], episode.steps, strict=True)):
            name, _, arguments = record.action.partition("(")
            assert step["tool_call"]["name"] == name
            for key, value in step["tool_call"]["arguments"].items():
                assert f"{key}={json.dumps(value)}" in arguments  # typed: a string quoted, an integer bare
            used = [
                (edge["kind"], edge["source"], edge["source_kind"], edge["fields"])
                for edge in step["influence"]["used"]
            ]
            assert used == expected_used(graph, actions[record.index].id)
            if position + 1 < len(episode.steps):  # what the game answered is what the next observation added
                result = step["tool_result"]
                after = episode.steps[position + 1].observation
                assert result["text"] and f"Agent: {record.action}\n{result['text']}\n" in after
                assert result["text"].startswith({"tool": "Tool:", "user": "User:"}[result["kind"]])
            else:
                assert step.get("tool_result") is None or step["tool_result"]["text"] is None
    kinds = {edge.kind for edge in episodes[0].influence["exact"].edges}
    assert kinds == {"support", "failure"}


def test_the_viewer_shows_tool_calls_results_and_the_influence_graph(tool_run):
    run, episodes = tool_run
    assert main(["view", str(run)]) == 0
    with chromium() as driver:
        open_report(driver, run / "view" / "index.html", "#browse?size=500")
        links = driver.find_elements("css selector", "tr.episode-row a.open")
        opened = {}
        for position in range(len(links)):
            click_and_wait(driver, driver.find_elements("css selector", "tr.episode-row a.open")[position])
            shown_id = driver.find_element("css selector", ".episode").get_attribute("data-episode")
            episode = next(episode for episode in episodes if episode.episode_id == shown_id)
            graph = episode.influence["exact"]
            rows = driver.find_elements("css selector", "table.influence-graph tbody tr")
            assert [row.get_attribute("data-action") for row in rows] == [node.id for node in graph.actions()]
            for row in rows:
                failures = [edge for edge in graph.edges if edge.target == row.get_attribute("data-action")]
                failures = [edge for edge in failures if edge.kind == "failure"]
                cell = row.find_element("css selector", "td.failure").text
                assert cell == "—" if not failures else all(edge.source in cell for edge in failures)
            cards = driver.find_elements("css selector", "article.step")
            for card, record in zip(cards, episode.steps, strict=True):
                call = card.find_element("css selector", ".tool-call")
                assert (
                    call.find_element("css selector", ".tool-name").get_attribute("textContent")
                    == record.action.split("(")[0]
                )
                for row in call.find_elements("css selector", ".tool-args tr"):
                    key, kind, value = (cell.text for cell in row.find_elements("css selector", "td"))
                    assert f"{key}={value}" in record.action and kind in ("string", "integer")
                action = next(node for node in graph.actions() if node.step == record.index)
                used = card.find_elements("css selector", ".influence-used li.edge")
                assert [item.get_attribute("class").split()[-1] for item in used] == [
                    kind for kind, *_ in expected_used(graph, action.id)
                ]
            results = [card.find_element("css selector", ".tool-result pre").text for card in cards[:-1]]
            for text, record, later in zip(results, episode.steps, episode.steps[1:], strict=False):
                assert f"Agent: {record.action}\n{text}\n" in later.observation
            opened[episode.policies["player"]] = len(cards)
            screenshot(driver, f"view-tool-game-{len(opened)}.png")
            driver.back()
        assert sorted(opened) == ["openai:fault-model", "random"] and all(opened.values())
