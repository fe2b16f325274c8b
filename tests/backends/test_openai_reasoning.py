"""Hosted models as they are today, over real HTTP on loopback: reasoning models, tool calls, budgets.

The fault server (tests/backends/fault_server.py) plays a reasoning model: thinking in a separate
``reasoning_content`` field or inline as ``<think>``, ``usage.completion_tokens_details.reasoning_tokens``,
and a 400 for ``max_tokens`` or a temperature, as OpenAI's o-series answers. The OpenAI backend
talks to it through the ``openai`` SDK, and ``tsmg eval`` runs end to end against it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer, ReasoningModel, request_key, tool_call

from backends.base import GenerationRequest, SamplingParams
from backends.openai_compat import OpenAIBackend
from tsmg.apps.cli import main
from tsmg.episode import read_episodes
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.rollout import rollout

SECRET = "sk-reasoning-test-0099"
THOUGHT = "The hole is left of me; the goal is below."


def chat(text: str) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}])


def backend(server: FaultServer, model: str = "fault-model", **options: Any) -> OpenAIBackend:
    return OpenAIBackend(model, base_url=server.base_url, api_key=SECRET, timeout_s=5, max_retries=1, **options)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


def test_a_separate_reasoning_field_and_its_token_count_are_kept_apart_from_the_answer(server: FaultServer) -> None:
    server.reasoning = ReasoningModel(thinking="field", rejects=(), think=lambda body: THOUGHT)
    with backend(server) as model:
        [completion] = model.generate([chat("go")], SamplingParams(max_tokens=50))
    assert completion.text == "echo go" and completion.reasoning == THOUGHT
    assert completion.reasoning_tokens == len(THOUGHT)
    assert completion.completion_tokens == len("echo go") + len(THOUGHT)  # thinking is billed output
    assert model.usage.reasoning_tokens == len(THOUGHT)
    # vLLM >= 0.10 names the field "reasoning".
    server.reasoning = ReasoningModel(thinking="field", field="reasoning", rejects=(), think=lambda body: THOUGHT)
    with backend(server) as model:
        [completion] = model.generate([chat("go")], SamplingParams(max_tokens=50))
    assert completion.reasoning == THOUGHT and completion.text == "echo go"


def test_inline_thinking_is_stored_but_never_read_as_the_answer(server: FaultServer) -> None:
    server.reasoning = ReasoningModel(thinking="inline", rejects=(), think=lambda body: "<action>left</action>? no.")
    server.reply = lambda body: "<action>down</action>"
    with backend(server) as model:
        episodes = rollout("FrozenLake-v0", LAP(model), seeds=[0, 1], game_options={"max_steps": 2})
    steps = [step for episode in episodes for step in episode.steps]
    assert all(step.valid and step.action == "down" for step in steps)
    assert all(step.reasoning == "<action>left</action>? no." for step in steps)
    assert all(step.completion.startswith("<think>") for step in steps)  # the transcript keeps it all
    assert all(step.reasoning_tokens == len("<action>left</action>? no.") for step in steps)
    assert episodes[0].reasoning_tokens == sum(step.reasoning_tokens for step in episodes[0].steps)


def test_an_answer_only_in_the_thinking_or_an_empty_answer_is_invalid_with_the_reason(server: FaultServer) -> None:
    answers = {
        "hidden": {"content": "I am not sure.", "reasoning_content": "I would say <action>down</action>."},
        "empty": {"content": "", "reasoning_content": "Thinking hard about the lake."},
    }
    for case, message in answers.items():
        server.reply = lambda body, message=message: message
        with backend(server) as model:
            [episode] = rollout("FrozenLake-v0", LAP(model), seeds=[0], game_options={"max_steps": 1})
        step = episode.steps[0]
        assert episode.error is None and not step.valid and step.reasoning == message["reasoning_content"], case
        expected = "only inside the thinking" if case == "hidden" else "an empty answer after the thinking"
        assert expected in str(step.reason), (case, step.reason)


def test_a_reasoning_model_gets_max_completion_tokens_and_no_temperature(server: FaultServer) -> None:
    server.reasoning = ReasoningModel(rejects=("max_tokens", "temperature", "top_p"))
    sampling = SamplingParams(temperature=0.7, max_tokens=40)
    # Detected by name: OpenAI's o-series and gpt-5.
    with backend(server, "o4-mini", reasoning_effort="low") as model:
        [completion] = model.generate([chat("detected")], sampling)
    body = server.bodies[-1]
    assert completion.error is None and completion.reasoning is not None
    assert body["max_completion_tokens"] == 40 and body["reasoning_effort"] == "low"
    assert not {"max_tokens", "temperature", "top_p"} & set(body)
    # A name that gives nothing away: the server's 400 comes back with its message and what to do.
    with backend(server, "my-reasoner") as model:
        [refused] = model.generate([chat("undetected")], sampling)
    assert refused.finish_reason == "error" and "HTTP 400" in str(refused.error)
    assert "Unsupported parameter: 'max_tokens'" in str(refused.error)
    assert "--model-option openai:my-reasoner:reasoning_model=true" in str(refused.error)
    assert server.attempts["undetected"] == 1  # a 400 is not retried
    # The documented switch, and a per-model budget for the thinking.
    with backend(server, "my-reasoner", reasoning_model=True, max_completion_tokens=2000) as model:
        [completion] = model.generate([chat("switched")], sampling)
    assert completion.error is None and server.bodies[-1]["max_completion_tokens"] == 2000


def test_a_temperature_refused_by_the_server_is_a_failed_request_with_its_message(server: FaultServer) -> None:
    server.reasoning = ReasoningModel(rejects=("temperature",))
    with backend(server, "my-reasoner") as model:
        [refused] = model.generate([chat("t")], SamplingParams(temperature=0.0))
    assert "Unsupported value: 'temperature' does not support 0.0" in str(refused.error)
    assert "reasoning_model=true" in str(refused.error)


def tool_reply(body: dict[str, Any]) -> str | dict[str, Any]:
    """Plays the first move the schema offers; other behaviours by the prompt's round."""
    [schema] = body["tools"]
    moves = schema["function"]["parameters"]["properties"]["move"]["enum"]
    return {"content": None, "tool_calls": [tool_call(schema["function"]["name"], {"move": moves[1]})]}


def test_tool_calls_over_http_are_the_answer_and_the_schema_lists_the_legal_moves(server: FaultServer) -> None:
    server.reply = tool_reply
    config = LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required"))
    with backend(server) as model:
        [episode] = rollout("FrozenLake-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 3})
    body = server.bodies[0]
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False  # one move per answer
    assert body["tools"][0]["function"]["strict"] is True
    assert body["tools"][0]["function"]["parameters"]["properties"]["move"]["enum"] == ["left", "down", "right", "up"]
    assert all(step.valid and step.action == "down" for step in episode.steps)
    assert episode.steps[0].tool_calls == [{"name": "make_move", "arguments": '{"move": "down"}', "id": "call_0"}]


def test_ignored_or_malformed_tool_calls_over_http_are_invalid_answers(server: FaultServer) -> None:
    replies = {
        "ignored schema": (lambda body: "I move down.", "no function call"),
        "malformed": (lambda body: {"tool_calls": [tool_call("make_move", '{"move": "down"')]}, "not JSON"),
        "wrong move": (lambda body: {"tool_calls": [tool_call("make_move", {"move": "fly"})]}, ""),
    }
    config = LAPConfig(action_format=ActionFormat(kind="tool"))
    for case, (reply, reason) in replies.items():
        server.reply = reply
        with backend(server) as model:
            [episode] = rollout("FrozenLake-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 1})
        step = episode.steps[0]
        assert episode.error is None and not step.valid and reason in str(step.reason), (case, step.reason)


def test_history_is_trimmed_to_a_context_limit_given_for_the_model(server: FaultServer) -> None:
    from tsmg.lap import PromptTemplate

    server.reply = lambda body: "<action>right</action>"
    config = LAPConfig(template=PromptTemplate(history="full"), max_tokens=32)
    with backend(server, max_context=700) as model:
        [episode] = rollout("FrozenLake-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 8})
        # The prompt estimate learnt the server's count: the fault server counts 4 characters a token.
        assert model.count_prompt_tokens(chat("x" * 400)) < 0.3 * (400 + 12)
    assert episode.error is None and max(step.history_trimmed for step in episode.steps) > 0
    assert all(step.prompt_tokens + 32 <= 700 for step in episode.steps)  # what the server counted


# ---------------------------------------------------------------- tsmg eval end to end


def eval_args(server: FaultServer, model: str, out: Path, *extra: str, episodes: int = 4) -> list[str]:
    spec = f"openai:{model}"
    return [
        "eval", "--game", "FrozenLake-v0", "--model", spec, "--episodes", str(episodes), "--no-progress",
        "--out", str(out), "--model-option", f"{spec}:base_url={server.base_url}",
        "--model-option", f"{spec}:api_key={SECRET}", "--model-option", f"{spec}:max_retries=1", *extra,
    ]  # fmt: skip


def test_eval_of_a_model_that_refuses_a_parameter_fails_with_the_servers_message(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reasoning = ReasoningModel(rejects=("max_tokens",))
    out = tmp_path / "refused"
    assert main(eval_args(server, "my-reasoner", out)) == 1
    err = capsys.readouterr().err
    assert "failed: 4 episodes:" in err and "Unsupported parameter: 'max_tokens'" in err
    assert "reasoning_model=true" in err and "Traceback" not in err
    assert not list(read_episodes(out / "episodes.jsonl"))  # no episode passed for a terrible model
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert failures and all("HTTP 400" in failure["error"] for failure in failures)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 0 and summary["failed"] == 4


def test_eval_of_a_reasoning_model_reports_thinking_tokens_and_their_cost(server: FaultServer, tmp_path: Path) -> None:
    server.reasoning = ReasoningModel(rejects=("max_tokens", "temperature"), think=lambda body: THOUGHT)
    server.reply = lambda body: "<action>down</action>"
    out = tmp_path / "reasoner"
    spec = "openai:my-reasoner"
    args = eval_args(server, "my-reasoner", out, "--model-option", f"{spec}:reasoning_model=true")
    args += ["--model-option", f"{spec}:max_completion_tokens=4000", "--price", f"{spec}=1.0,4.0"]
    assert main(args) == 0
    episodes = list(read_episodes(out / "episodes.jsonl"))
    assert len(episodes) == 4 and all(e.reasoning_tokens == len(THOUGHT) * len(e.steps) for e in episodes)
    [row] = json.loads((out / "summary.json").read_text())["games"][0]["rows"]
    steps = [step for episode in episodes for step in episode.steps]
    assert row["reasoning_tokens_per_episode"] == pytest.approx(len(THOUGHT) * len(steps) / 4)
    tokens_in = sum(step.prompt_tokens for step in steps)
    tokens_out = sum(step.completion_tokens for step in steps)  # thinking included
    assert tokens_out > len(THOUGHT) * len(steps)
    assert row["cost_usd"] == pytest.approx((tokens_in * 1.0 + tokens_out * 4.0) / 1e6)
    thinking = len(THOUGHT) * len(steps)
    assert row["reasoning_cost_usd"] == pytest.approx(thinking * 4.0 / 1e6)  # thinking at the output price
    assert f"{row['cost_usd']:.4f} ({row['reasoning_cost_usd']:.4f} thinking)" in (out / "report.md").read_text()
    report = (out / "report.md").read_text()
    assert f"(thinking {row['reasoning_tokens_per_episode']:.0f})" in report and "billed as output" in report
    assert all(body["max_completion_tokens"] == 4000 and "temperature" not in body for body in server.bodies)


def test_a_budget_stops_the_eval_cleanly_and_a_larger_one_resumes_it(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "budget"
    spec = "openai:fault-model"
    server.reply = lambda body: "<action>down</action>"  # three moves into the hole: short episodes
    common = ["--price", f"{spec}=10,10", "--concurrency", "2", "--seed", "3"]
    assert main(eval_args(server, "fault-model", out, *common, "--max-cost", "0.02", episodes=12)) == 3
    err = capsys.readouterr().err
    assert "stopped at its budget" in err and "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert "stopped at its budget" in summary["stopped"] and 0 < summary["completed"] < 12
    assert summary["failed"] == 0 and not (out / "failures.jsonl").exists()  # cut short is not failed
    kept = list(read_episodes(out / "episodes.jsonl"))
    assert all(episode.error is None and episode.terminated or episode.truncated for episode in kept)
    assert "Stopped early" in (out / "report.md").read_text()
    requests_before = len(server.bodies)

    # The same command with a larger budget plays the rest, and only the rest.
    assert main(eval_args(server, "fault-model", out, *common, "--max-cost", "100", episodes=12)) == 0
    ids = [episode.episode_id for episode in read_episodes(out / "episodes.jsonl")]
    assert len(ids) == len(set(ids)) == 12
    assert "stopped" not in json.loads((out / "summary.json").read_text())
    assert len(server.bodies) - requests_before < 12 * 16  # not everything again

    # A token budget works the same way; a cost budget without a price is refused before anything runs.
    tokens = tmp_path / "tokens"
    assert main(eval_args(server, "fault-model", tokens, "--max-tokens-total", "1200", "--concurrency", "1")) == 3
    assert 0 < json.loads((tokens / "summary.json").read_text())["completed"] < 4
    assert main(eval_args(server, "fault-model", tmp_path / "unpriced", "--max-cost", "1")) == 2
    assert "--max-cost needs the price of every model" in capsys.readouterr().err


def test_dry_run_samples_episodes_to_estimate_thinking_and_cost(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.reasoning = ReasoningModel(rejects=(), think=lambda body: THOUGHT)
    server.reply = lambda body: "<action>down</action>"
    spec = "openai:fault-model"
    args = eval_args(server, "fault-model", tmp_path / "dry", "--price", f"{spec}=1,4", episodes=20)
    assert main([*args, "--dry-run"]) == 0
    upper = capsys.readouterr().out
    assert "estimated cost at most: $" in upper and not (tmp_path / "dry").exists()
    assert main([*args, "--dry-run", "--sample", "2"]) == 0
    text = capsys.readouterr().out
    assert "estimated from sampled episodes" in text and "(thinking" in text and "estimated cost of the run: $" in text
    assert len({request_key(body) for body in server.bodies}) >= 1 and not (tmp_path / "dry").exists()


def test_a_suites_dry_run_measures_the_time_a_hosted_models_turn_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each sampled turn takes the server at least ``slow_s``: the time projected to the suite's plan counts it."""
    import re

    with FaultServer(plan=lambda key, attempt: "slow", slow_s=0.02, reply=lambda body: "<action>x</action>") as slow:
        spec = "openai:fault-model"
        args = eval_args(slow, "fault-model", tmp_path / "dry", "--price", f"{spec}=1,4", "--dry-run", "--sample", "1")
        args = [word for word in args if word not in ("--game", "FrozenLake-v0", "--episodes", "4")]
        assert main([*args, "--suite", "openspiel-small-v1", "--concurrency", "8"]) == 0
    text = capsys.readouterr().out
    found = re.search(
        r"estimated time of the run: ([\d.]+) (s|min|h) of model time one decision at a time; about", text
    )
    assert found is not None, text
    seconds = float(found[1]) * {"s": 1, "min": 60, "h": 3600}[found[2]]
    assert seconds >= 0.02 * 600  # 600 planned seats of the model, each of one turn at least
    assert "with 8 episodes live at once" in text and not (tmp_path / "dry").exists()
