"""`tsmg view` shows a majority vote: each sampled answer beside the move it names, the tally, the move played.

The run is a real ``tsmg eval --lap arena --votes 3`` against the loopback fault server, whose
answers reason and then name a move ("Final Answer: MOVE"): at the start square no legal move,
elsewhere one sample in four no legal move and the others one of two legal moves (votes split). A
re-prompt (which carries the reason) is answered with a legal move, so some steps hold two votes.
Mutations that make these tests fail: dropping ``votes`` from the display record
(records.normalise_step), pairing each answer with the previous answer's move, sorting the tally
least-first, and drawing no vote box (view.js ``voteBox`` returning null).
"""

from __future__ import annotations

from typing import Any

import pytest
from view_helpers import chromium, click_and_wait, open_report, screenshot

from tests.backends.fault_server import FaultServer
from tsmg.apps.cli import main
from tsmg.apps.view.records import normalise_step
from tsmg.episode import read_episodes

SPEC = "openai:vote-model"


def _reply(body: dict[str, Any]) -> str:
    if "That answer was invalid" in body["messages"][-1]["content"]:
        return "I see: the lake is below me.\nFinal Answer: down"
    if "You are at (0, 3)" in body["messages"][-1]["content"]:  # the start: every sample is invalid
        return "Up is the sky.\nFinal Answer: fly"
    move = ("fly", "down", "right", "down")[body["seed"] % 4]
    return f"Holes lie around; the goal is at the bottom right.\nFinal Answer: {move}"


@pytest.fixture(scope="module")
def vote_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("votes") / "run"
    with FaultServer() as server:
        server.reply = _reply
        command = [
            "eval", "--game", "FrozenLake-v0", "--model", SPEC, "--episodes", "3", "--no-progress", "--out", str(out),
            "--model-option", f"{SPEC}:base_url={server.base_url}", "--model-option", f"{SPEC}:api_key=sk-votes",
            "--lap", "arena", "--votes", "3", "-o", "max_steps=4",
        ]  # fmt: skip
        assert main(command) == 0
    episodes = list(read_episodes(out / "episodes.jsonl"))
    votes = [vote for episode in episodes for step in episode.steps for vote in step.votes or []]
    assert any(len(step.votes or []) > 1 for episode in episodes for step in episode.steps)  # a re-prompt voted again
    assert any(len(vote["tally"]) > 1 and len(set(vote["tally"].values())) > 1 for vote in votes)  # a split vote
    return out, episodes


def test_the_display_record_pairs_each_answer_with_its_move_and_sorts_the_tally(vote_run):
    _, episodes = vote_run
    for episode in episodes:
        for position, step in enumerate(episode.steps):
            issues: list[str] = []
            shown = normalise_step(step.model_dump(mode="json"), position, issues)
            assert issues == [] and len(shown["votes"]) == len(step.votes)
            # The whole observation was in the prompt, a re-prompt after it: not a compact view.
            assert shown["model_observation"] is None
            for attempt, vote in zip(shown["votes"], step.votes, strict=True):
                assert [ballot["answer"] for ballot in attempt["ballots"]] == vote["answers"]
                assert [ballot["move"] for ballot in attempt["ballots"]] == vote["moves"]
                assert [ballot["reason"] for ballot in attempt["ballots"]] == vote["reasons"]
                counts = [count for _, count in attempt["tally"]]
                assert counts == sorted(counts, reverse=True) and dict(attempt["tally"]) == vote["tally"]
                assert attempt["played"] == vote["played"]


def test_a_step_without_a_vote_shows_none_and_a_malformed_one_is_noted():
    issues: list[str] = []
    assert normalise_step({"index": 0, "agent": "player", "action": "down"}, 0, issues)["votes"] is None
    shown = normalise_step({"index": 0, "agent": "player", "votes": [{"answers": "x"}, {"answers": ["a"]}]}, 0, issues)
    assert len(shown["votes"]) == 1 and shown["votes"][0]["ballots"] == [{"answer": "a", "move": None, "reason": None}]
    assert issues == ["step 0: votes attempt 1 has no list of answers: ignored"]


def test_the_viewer_shows_every_ballot_the_tally_and_the_move_played(vote_run):
    run, episodes = vote_run
    assert main(["view", str(run)]) == 0
    by_id = {episode.episode_id: episode for episode in episodes}
    with chromium() as driver:
        open_report(driver, run / "view" / "index.html", "#browse?size=500")
        click_and_wait(driver, driver.find_element("css selector", "tr.episode-row a.open"))
        episode = by_id[driver.find_element("css selector", ".episode").get_attribute("data-episode")]
        cards = driver.find_elements("css selector", "article.step")
        for card, step in zip(cards, episode.steps, strict=True):
            votes = card.find_elements("css selector", ".votes details.vote")
            assert len(votes) == len(step.votes)
            for box, vote in zip(votes, step.votes, strict=True):
                summary = box.find_element("css selector", "summary").text
                assert f"Vote of {len(vote['answers'])} answers" in summary
                assert all(f"{move} ×{count}" in summary for move, count in vote["tally"].items())
                assert (f"played {vote['played']}" if vote["played"] else "every answer was invalid") in summary
                ballots = box.find_elements("css selector", "li.ballot")
                marks = [ballot.text.splitlines()[0] for ballot in ballots]
                assert marks == [
                    f"→ {move}" if move is not None else f"✗ {reason}"
                    for move, reason in zip(vote["moves"], vote["reasons"], strict=True)
                ]
        screenshot(driver, "view-votes.png")
