"""The dry run's token bound holds on real runs: SmolLM2 and the tiny model (with and without a chat template).

Each model plays Kuhn poker for real (``tsmg eval``, every earlier turn shown, one re-prompt, a
small token budget, so invalid answers, re-prompts and a growing history all happen), and the
tokens its steps report are checked against the dry run of the same command:

- the counter (the model's tokenizer and chat template) gives exactly the prompt tokens the model
  was fed, on each step's last prompt;
- every decision's prompt tokens stay within its own bound (its prompt, the earlier turns shown,
  the re-prompts it took);
- the whole run's tokens in and out (its ``episodes.jsonl``; for the tiny models also the figures
  ``--dry-run --sample 1`` measures: SmolLM2's sampled episode is the run's one episode played
  again, left out to keep the test near a minute) stay within the totals the dry run prints.

Mutations seen failing (each breaks at least one test here):
- drop the chat template in ``prompt_counter`` (count the messages' contents only): the counter
  test fails (SmolLM2's template adds a default system message and role tokens);
- drop the history growth (no earlier turn's size in ``measure_prompts``, none added in
  ``seat_prompt_tokens``): the per-decision test fails at a seat's second decision, and the
  history test;
- drop the re-prompt term (``repeats = 0`` and no re-prompt size): the per-decision test fails on a
  re-prompted step.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tsmg.apps.cli import main
from tsmg.apps.evaluation.config import EvalConfig
from tsmg.apps.evaluation.estimate import seat_bounds
from tsmg.apps.evaluation.token_bound import prompt_counter
from tsmg.episode import read_episodes
from tsmg.lap import LAPConfig, PromptTemplate
from tsmg.lm import GenerationRequest

GAME = "KuhnPoker-v0"
#: Every earlier turn shown, one re-prompt and a small budget: the bound's every part is exercised, quickly.
FLAGS = ["--history", "full", "--reprompt", "1", "--max-tokens", "12", "--episodes", "1", "--seed", "3"]
LAP = LAPConfig(template=PromptTemplate(history="full"), reprompt=1, max_tokens=12, seed=3)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from backends.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("tiny")
    return {
        "chat": f"hf:{build_tiny_model(root / 'chat', seed=1)}",
        "plain": f"hf:{build_tiny_model(root / 'plain', seed=1, chat_template=False)}",
    }


def _spec(name: str, tiny_models: dict[str, str]) -> str:
    return "smollm2" if name == "smollm2" else tiny_models[name]


def _totals(printed: str) -> tuple[int, int]:
    found = re.search(r"estimated tokens at most: ([\d,]+) in, ([\d,]+) out", printed)
    assert found, printed
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


@pytest.fixture(scope="module", params=["smollm2", "chat", "plain"])
def played(request: pytest.FixtureRequest, tiny_models: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    """A real one-episode run of the model, and its dry run with ``--sample 1`` (the same episode, measured)."""
    spec = _spec(request.param, tiny_models)
    out = tmp_path_factory.mktemp("run") / request.param
    command = ["eval", "--game", GAME, "--model", spec, *FLAGS, "--temperature", "1"]
    assert main([*command, "--out", str(out), "--no-progress"]) == 0
    return spec, out, command


def _dry_run(command: list[str], capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    assert main([*command, "--dry-run", *extra]) == 0
    return capsys.readouterr().out


def test_the_counter_counts_what_the_model_was_fed(played) -> None:
    """Each attempt's prompt, counted, adds up to the step's prompt tokens (the model's own count)."""
    spec, out, _ = played
    counter = prompt_counter(spec)
    assert counter.exact
    steps = [step for episode in read_episodes(out / "episodes.jsonl") for step in episode.steps]
    assert steps
    for step in steps:
        messages = [{"role": message.role, "content": message.content} for message in step.prompt]
        # the step keeps its last attempt's prompt; each re-prompt added an answer and the reason to the one before
        attempts = [messages[: len(messages) - 2 * later] for later in range(step.attempts)]
        assert sum(counter.count(GenerationRequest(messages=sent)) for sent in attempts) == step.prompt_tokens


def test_every_decision_stays_within_its_own_bound(played) -> None:
    spec, out, _ = played
    [bound] = seat_bounds(EvalConfig(games=[GAME], models=[spec], episodes=1, seed=3, lap=LAP))
    sizes, budget = bound.prompts, bound.budget
    episodes = list(read_episodes(out / "episodes.jsonl"))
    checked = grown = reprompted = 0
    for episode in episodes:
        for agent in episode.agents:
            for shown, step in enumerate(episode.steps_of(agent)):
                prompt = sizes.decision + shown * (sizes.history_turn + budget)
                limit = sum(prompt + attempt * (sizes.reprompt + budget) for attempt in range(step.attempts))
                assert step.prompt_tokens <= limit, (agent, shown, step.attempts, step.prompt_tokens, limit, sizes)
                assert step.completion_tokens <= step.attempts * budget
                checked, grown, reprompted = checked + 1, grown + (shown > 0), reprompted + (step.attempts > 1)
    assert checked and grown, "the run never showed an earlier turn: the history part went unchecked"


def test_the_whole_run_stays_within_the_dry_runs_totals(played, capsys) -> None:
    """The run's tokens within the dry run's totals; the tiny models' ``--sample 1`` figures too.

    (SmolLM2's sampled episode is the run's one episode, played again: left out to keep the test short.)
    """
    spec, out, command = played
    sample = () if spec == "smollm2" else ("--sample", "1")
    printed = _dry_run(command, capsys, *sample)
    bound_in, bound_out = _totals(printed)
    episodes = list(read_episodes(out / "episodes.jsonl"))
    used_in = sum(step.prompt_tokens or 0 for episode in episodes for step in episode.steps)
    used_out = sum(step.completion_tokens or 0 for episode in episodes for step in episode.steps)
    assert 0 < used_in <= bound_in and 0 < used_out <= bound_out, (used_in, bound_in, used_out, bound_out)
    if sample:
        sampled = re.search(r"per episode over \d+ sampled -> \d+ planned: ([\d,]+) in, ([\d,]+) out", printed)
        assert sampled, printed
        assert int(sampled[1].replace(",", "")) <= bound_in and int(sampled[2].replace(",", "")) <= bound_out
    assert f"{spec}'s tokenizer" in printed and "a prompt of" in printed  # what the bound is made of


def test_a_hosted_model_is_counted_by_the_stated_rule(capsys) -> None:
    assert main(["eval", "--game", GAME, "--model", "openai:gpt-4o-mini", "--episodes", "2", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "UTF-8 bytes / 2 + 8 a message + 8 (an estimate by rule: no tokenizer for this model here)" in printed


def test_the_history_makes_the_bound_grow_with_the_step_limit() -> None:
    """With every earlier turn shown, a seat's prompts grow each decision: quadratic in the step limit."""
    base = EvalConfig(games=[GAME], models=["openai:gpt-4o-mini"], episodes=1)
    flat = seat_bounds(base)[0]
    grown = seat_bounds(base.model_copy(update={"lap": LAPConfig(template=PromptTemplate(history="full"))}))[0]
    turns, step = grown.turns, grown.prompts.history_turn + grown.budget
    assert flat.tokens_in == flat.seats * turns * flat.prompts.decision
    assert grown.tokens_in == grown.seats * (turns * grown.prompts.decision + step * turns * (turns - 1) // 2)


def test_a_folder_without_a_tokenizer_is_counted_by_the_rule(tmp_path: Path) -> None:
    assert not prompt_counter(f"hf:{tmp_path}").exact
    assert not prompt_counter(f"hf:{tmp_path / 'missing'}").exact


def test_the_dry_run_docs_evaluate_md_quotes_is_what_it_prints(capsys) -> None:
    """docs/evaluate.md quotes the dry run of a SmolLM2 command: the lines are the ones it prints today."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "evaluate.md").read_text()
    command = "eval --game FrozenLake-NoSlip-v0 --model smollm2 --episodes 3 --dry-run"
    assert f".venv/bin/tsmg {command}\n" in docs
    assert main(command.split()) == 0
    printed = capsys.readouterr().out.splitlines()
    quoted = docs.split("estimated tokens at most: 5,472", 1)[1].split("```", 1)[0]
    for line in ("estimated tokens at most: 5,472" + quoted).strip().splitlines():
        assert line in printed, f"docs/evaluate.md quotes {line!r}; the dry run prints:\n" + "\n".join(printed)
