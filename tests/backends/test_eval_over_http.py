"""`tsmg eval` end to end through the OpenAI-compatible backend, against real loopback servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_server import FaultServer, random_faults
from vllm_env import VLLMServer, require_vllm_python, vllm_model_dir

from tsmg.apps.cli import main
from tsmg.episode import read_episodes

SECRET = "sk-eval-test-NotForLogs-77"


def eval_args(name: str, base_url: str, out: Path, episodes: int) -> list[str]:
    spec = f"openai:{name}"
    return [
        "eval", "--game", "FrozenLake-v0", "--model", spec, "--model", "random", "--episodes", str(episodes),
        "--action-format", "choice", "--max-tokens", "8", "--no-progress", "--out", str(out),
        "--model-option", f"{spec}:base_url={base_url}", "--model-option", f"{spec}:api_key={SECRET}",
        "--model-option", f"{spec}:timeout_s=2",
    ]  # fmt: skip


def test_eval_through_a_faulty_server_completes_every_episode(tmp_path: Path, capsys) -> None:
    with FaultServer(random_faults(p429=0.2, p500=0.2, faulty_attempts=2, seed=5), stall_s=0.5) as server:
        assert main(eval_args("fault-model", server.base_url, tmp_path / "run", episodes=6)) == 0
    episodes = list(read_episodes(tmp_path / "run" / "episodes.jsonl"))
    assert len(episodes) == 12 and all(e.error is None for e in episodes)
    model_steps = [s for e in episodes if e.policies["player"] == "openai:fault-model" for s in e.steps]
    assert model_steps and all(s.valid and s.prompt for s in model_steps)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [row["model"] for row in summary["games"][0]["rows"]] == ["openai:fault-model", "random"]
    for name in ("config.json", "summary.json", "report.md", "episodes.jsonl"):
        assert SECRET not in (tmp_path / "run" / name).read_text(), name
    assert SECRET not in capsys.readouterr().err


@pytest.fixture(scope="module")
def vllm_server() -> Iterator[VLLMServer]:
    python = require_vllm_python()
    server = VLLMServer(vllm_model_dir(), api_key=SECRET)
    try:
        yield server.start(python)
    finally:
        server.stop()


def test_eval_through_vllms_own_server(vllm_server: VLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(eval_args(vllm_server.name, vllm_server.base_url, out, episodes=4)) == 0
    episodes = list(read_episodes(out / "episodes.jsonl"))
    model_episodes = [e for e in episodes if e.policies["player"].startswith("openai:")]
    assert len(model_episodes) == 4 and all(e.error is None for e in model_episodes)
    steps = [s for e in model_episodes for s in e.steps]
    assert all(s.valid and s.parsed_action in ("left", "down", "right", "up") for s in steps)
    assert all(s.prompt_tokens and s.completion_tokens for s in steps)
    assert "openai:" in (out / "report.md").read_text()
    # Rerunning the same command plays nothing new.
    assert main(eval_args(vllm_server.name, vllm_server.base_url, out, episodes=4)) == 0
    assert len(list(read_episodes(out / "episodes.jsonl"))) == len(episodes)


def test_eval_with_tools_on_a_server_that_refuses_them_fails_with_its_message(
    vllm_server: VLLMServer, tmp_path: Path, capsys
) -> None:
    # This server runs without --tool-call-parser: vLLM answers 400 to any tool_choice. That is a
    # failed request, not the model's invalid answer: the episodes fail and the exit code says so.
    out = tmp_path / "tools"
    args = eval_args(vllm_server.name, vllm_server.base_url, out, episodes=2)
    args[args.index("choice")] = "tool"
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "failed: 2 episodes:" in err and "requires --enable-auto-tool-choice" in err
    assert "Traceback" not in err and SECRET not in err
    model_episodes = [e for e in read_episodes(out / "episodes.jsonl") if e.policies["player"].startswith("openai:")]
    assert not model_episodes and "HTTP 400" in (out / "failures.jsonl").read_text()
