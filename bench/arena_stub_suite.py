"""``--lap arena --votes 3`` on a whole suite against the loopback stub server: the harness's own cost.

The stub (tests/backends/fault_server.py, a real HTTP server on loopback that the ``openai`` SDK
talks to) plays a model that reasons, then ends with "Final Answer: MOVE": a move the readable
view lists, chosen by the request's seed, except one sample in four, which names no legal move
("resign"); a re-prompt is answered with the first listed move. So votes split, some find no
valid answer and go the re-prompt way, and every figure below is the harness's: requests sent,
votes, re-prompts, invalid steps, and the wall time of the run (no model computes anything).

    python bench/arena_stub_suite.py --out runs/arena-stub [--suite openspiel-small-v2]

Rerunning into a finished ``--out`` plays nothing and reads the records again (as ``tsmg eval``
resumes). The last line is a JSON object of the headline figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "backends"))

from fault_server import FaultServer  # noqa: E402

from tsmg.apps.cli import main as tsmg_main  # noqa: E402

HEADING = "Your legal moves, one per line (answer with one, as written):\n"
SPEC = "openai:arena-stub"


def legal_moves(prompt: str) -> list[str]:
    """The moves a readable OpenSpiel view lists, one per line, under its heading."""
    listed = prompt.split(HEADING, 1)[1].split("\n\n", 1)[0] if HEADING in prompt else ""
    return [line for line in listed.splitlines() if line.strip()]


def stub_player(body: dict[str, Any]) -> str:
    if "That answer was invalid" in body["messages"][-1]["content"]:
        first = next(message["content"] for message in body["messages"] if message["role"] == "user")
        return f"I see.\nFinal Answer: {legal_moves(first)[0]}"
    moves = legal_moves(body["messages"][-1]["content"])
    if body["seed"] % 4 == 0 or not moves:
        return "Hard to say.\nFinal Answer: resign"
    return f"Weighing the position.\nFinal Answer: {moves[body['seed'] % len(moves)]}"


def vote_figures(episodes_file: Path) -> dict[str, int]:
    """Counts over every model step of the run's records."""
    attempts: Counter[int] = Counter()
    figures = {"episodes": 0, "decisions": 0, "split_votes": 0, "votes_without_a_valid_answer": 0, "invalid_steps": 0}
    for line in episodes_file.read_text().splitlines():
        episode = json.loads(line)
        figures["episodes"] += 1
        for step in episode["steps"]:
            if not step.get("votes"):
                continue
            figures["decisions"] += 1
            attempts[len(step["votes"])] += 1
            figures["split_votes"] += sum(len(vote["tally"]) > 1 for vote in step["votes"])
            figures["votes_without_a_valid_answer"] += sum(vote["played"] is None for vote in step["votes"])
            figures["invalid_steps"] += not step["valid"]
    figures["decisions_reprompted"] = sum(count for number, count in attempts.items() if number > 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the run folder (resumed if present)")
    parser.add_argument("--suite", default="openspiel-small-v2")
    parser.add_argument("--votes", type=int, default=3)
    args = parser.parse_args(argv)
    with FaultServer() as server:
        server.reply = stub_player
        started = time.perf_counter()
        code = tsmg_main(
            ["eval", "--suite", args.suite, "--model", SPEC, "--no-progress", "--out", str(args.out),
             "--model-option", f"{SPEC}:base_url={server.base_url}", "--model-option", f"{SPEC}:api_key=sk-stub",
             "--lap", "arena", "--votes", str(args.votes)]
        )  # fmt: skip
        seconds = time.perf_counter() - started
        requests = len(server.bodies)
    if code != 0:
        return code
    figures = {"suite": args.suite, "votes": args.votes, "requests": requests, "seconds": round(seconds, 1)}
    print(json.dumps(figures | vote_figures(args.out / "episodes.jsonl")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
