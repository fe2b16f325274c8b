"""``tsmg eval --lap arena --votes 3`` end to end over real HTTP on loopback.

The fault server (tests/backends/fault_server.py) plays a model that reasons, then writes
"Final Answer: MOVE", each sample drawn by the request's seed (one answer in three names no
legal move); a re-prompt, which carries the reason, is answered with a legal move. The OpenAI
backend talks to it through the ``openai`` SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer

from tsmg.apps.cli import main
from tsmg.episode import read_episodes

SECRET = "sk-arena-test-0042"
SPEC = "openai:arena-model"


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        running.reply = _reasoning_then_final_answer
        yield running


def _reasoning_then_final_answer(body: dict[str, Any]) -> str:
    if "That answer was invalid" in body["messages"][-1]["content"]:
        return "Sorry. The lake is below me.\nFinal Answer: down"
    move = ("fly", "down", "right")[body["seed"] % 3]
    return f"The goal is at the bottom right; holes are around.\nI think {move} is best.\nFinal Answer: {move}"


def _eval(server: FaultServer, out: Path, *extra: str) -> list[str]:
    return [
        "eval", "--game", "FrozenLake-v0", "--model", SPEC, "--episodes", "3", "--no-progress", "--out", str(out),
        "--model-option", f"{SPEC}:base_url={server.base_url}", "--model-option", f"{SPEC}:api_key={SECRET}",
        "--model-option", f"{SPEC}:max_retries=1", "--lap", "arena", *extra,
    ]  # fmt: skip


def test_arena_preset_with_votes_plays_the_majority_and_counts_every_sample(server: FaultServer, tmp_path) -> None:
    out = tmp_path / "arena"
    assert main(_eval(server, out, "--votes", "3", "-o", "max_steps=4")) == 0
    config = json.loads((out / "config.json").read_text())["lap"]
    assert config["action_format"]["kind"] == "final" and (config["votes"], config["reprompt"]) == (3, 2)
    assert all(body["max_tokens"] == 1024 for body in server.bodies)  # the preset's reasoning budget
    episodes = list(read_episodes(out / "episodes.jsonl"))
    steps = [step for episode in episodes for step in episode.steps]
    assert steps and all(step.votes for step in steps)
    answers = 0
    for step in steps:
        for vote in step.votes:
            assert len(vote["answers"]) == 3 and sum(vote["tally"].values()) == 3 - vote["moves"].count(None)
            answers += 3
        last = step.votes[-1]
        assert step.valid and last["played"] == step.parsed_action
        assert last["tally"][step.parsed_action] == max(last["tally"].values())
        assert step.attempts == len(step.votes)
    assert answers == len(server.bodies)  # each decision's k answers were all asked for, and only those
    seeds = [body["seed"] for body in server.bodies]
    assert len(set(seeds)) == len(seeds)  # distinct seeds: k samples, not k copies of one
    assert sum(step.completion_tokens for step in steps) == sum(e.completion_tokens for e in episodes)
    assert sum(e.completion_tokens for e in episodes) >= answers  # every sample's tokens counted

    again = tmp_path / "again"  # same seed, same episodes (the votes' ties and seeds are seeded)
    assert main(_eval(server, again, "--votes", "3", "-o", "max_steps=4")) == 0

    def played(episodes):  # the file's order follows completion, so compare by episode id
        return {(e.episode_id, s.index): (s.parsed_action, s.votes) for e in episodes for s in e.steps}

    assert played(read_episodes(again / "episodes.jsonl")) == played(episodes)


def test_flags_beside_the_preset_override_it(server: FaultServer, tmp_path) -> None:
    out = tmp_path / "short"
    server.reply = lambda body: "Flying is fastest.\nFinal Answer: fly"
    assert main(_eval(server, out, "--max-tokens", "200", "--reprompt", "0", "-o", "max_steps=2")) == 0
    assert all(body["max_tokens"] == 200 for body in server.bodies)
    config = json.loads((out / "config.json").read_text())["lap"]
    assert (config["reprompt"], config["votes"], config["max_tokens"]) == (0, 1, 200)
    steps = [step for episode in read_episodes(out / "episodes.jsonl") for step in episode.steps]
    assert steps and all(not step.valid and "got 'fly'" in step.reason for step in steps)
    assert all(step.attempts == 1 for step in steps) and len(server.bodies) == len(steps)  # no re-prompt
    assert all(step.votes is None for step in steps)


def test_dry_run_bound_counts_votes_reprompts_and_the_budget(capsys) -> None:
    assert main(["eval", "--game", "FrozenLake-v0", "--model", SPEC, "--episodes", "2", "--dry-run"]) == 0
    plain = capsys.readouterr().out
    assert main(["eval", "--game", "FrozenLake-v0", "--model", SPEC, "--episodes", "2", "--dry-run", "--lap", "arena",
                 "--votes", "3"]) == 0  # fmt: skip
    arena = capsys.readouterr().out

    def out_tokens(text: str) -> int:
        line = next(line for line in text.splitlines() if line.startswith("estimated tokens"))
        return int(line.split(" in, ")[1].split(" out")[0].replace(",", ""))

    assert out_tokens(arena) == out_tokens(plain) // 64 * 3 * (1 + 2) * 1024
    assert "at most 9 answer(s): 3 vote(s) x (1 + 2 re-prompt(s)), each of up to 1,024 tokens" in arena


def test_the_preset_plays_every_game_of_the_readable_suite(server: FaultServer, tmp_path, capsys) -> None:
    """``--lap arena --votes 3`` on openspiel-small-v2, one sampled episode per game and matchup (a dry run)."""
    from tests.bench_modules import load_bench
    from tsmg.apps.evaluation.suites import get_suite

    server.reply = load_bench("arena_stub_suite").stub_player  # the bench's player, on a sampled dry run
    command = _eval(server, tmp_path / "suite", "--votes", "3", "--dry-run", "--sample", "1")
    at = command.index("--game")
    command[at : at + 2] = ["--suite", "openspiel-small-v2"]  # a suite fixes its own episodes:
    at = command.index("--episodes")
    del command[at : at + 2]
    assert main(command) == 0
    sampled = [line for line in capsys.readouterr().out.splitlines() if " sampled -> " in line]
    assert [line.split()[0] for line in sampled] == list(get_suite("openspiel-small-v2").games)
    prompts = [body["messages"][-1]["content"] for body in server.bodies]
    assert all("Final Answer: MOVE" in prompt for prompt in prompts if "That answer was invalid" not in prompt)
    assert sum("That answer was invalid" in prompt for prompt in prompts) > 0  # some votes found no legal move
    assert all(body["max_tokens"] == 1024 for body in server.bodies) and len(server.bodies) % 3 == 0
