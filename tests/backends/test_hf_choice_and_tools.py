"""HFBackend: whole choices under any token budget, tools through a chat template, history fitted to the context."""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from backends.base import GenerationRequest, SamplingParams
from tsmg.lap import LAP, ActionFormat, LAPConfig, PromptTemplate, tool_calls_in_text
from tsmg.rollout import rollout

CHOICES = ["left", "down", "right", "up", "north-north-west"]

# A ChatML template that renders tools the way Qwen2.5's does (trimmed): a system block listing
# the function signatures and asking for <tool_call>{"name": ..., "arguments": ...}</tool_call>.
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    "{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call><|im_end|>\n"
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for message in messages %}{% if not (loop.first and message.role == 'system') %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tools_backend(tiny_model_dir, tmp_path_factory):
    """The tiny chat model with a chat template that renders tools."""
    from backends.hf import HFBackend

    folder = tmp_path_factory.mktemp("tiny-tools") / "model"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "chat_template.jinja").write_text(TOOLS_TEMPLATE)
    return HFBackend(folder)


def test_constrained_choice_with_a_budget_of_one_token_yields_only_whole_choices(tiny_backend, caplog):
    caplog.set_level(logging.WARNING)
    assert tiny_backend._trie(CHOICES).max_tokens > 1  # some choice needs more than the budget
    requests = [
        GenerationRequest(messages=[{"role": "user", "content": f"Move {index}?"}], choices=CHOICES, seed=index)
        for index in range(240)
    ]
    completions = tiny_backend.generate(requests, SamplingParams(temperature=1.0, max_tokens=1))
    answers = [completion.text for completion in completions]
    assert all(completion.error is None for completion in completions)
    assert set(answers) <= set(CHOICES) and len(set(answers)) > 2
    assert "cannot hold every choice whole" in caplog.text and "north-north-west" in caplog.text


def test_tools_are_rendered_by_a_chat_template_that_supports_them(tools_backend, tiny_backend):
    schema = ActionFormat(kind="tool").tool_schema(["left", "right"])
    request = GenerationRequest(messages=[{"role": "user", "content": "Move?"}], tools=[schema])
    prompt = tools_backend.prompt_text(request)
    assert json.dumps(schema["function"]["parameters"]["properties"]["move"]["enum"]) in prompt
    assert "<tool_call>" in prompt and prompt.endswith("<|im_start|>assistant\n")
    # A template that ignores tools is refused for that request, with what to do.
    [refused] = tiny_backend.generate([request], SamplingParams(max_tokens=4))
    assert refused.finish_reason == "error" and "does not render tools" in str(refused.error)


def test_a_local_model_writes_a_tool_call_that_the_lap_reads(tools_backend):
    # Constrained to well-formed calls, the tiny model's sampled answers are real tool-call text.
    moves = ["left", "down", "right", "up"]
    calls = [json.dumps({"name": "make_move", "arguments": {"move": move}}) for move in moves]
    schema = ActionFormat(kind="tool").tool_schema(moves)
    requests = [
        GenerationRequest(
            messages=[{"role": "user", "content": f"Move {index}?"}],
            tools=[schema],
            choices=[f"<tool_call>\n{call}\n</tool_call>" for call in calls],
            seed=index,
        )
        for index in range(12)
    ]
    completions = tools_backend.generate(requests, SamplingParams(temperature=1.0))
    fmt = ActionFormat(kind="tool")
    moves_played = [fmt.extract_tool_call(tool_calls_in_text(completion.text)) for completion in completions]
    assert set(moves_played) <= set(moves) and len(set(moves_played)) > 1


def test_a_tool_format_rollout_on_a_local_model_scores_missing_calls_as_invalid(tools_backend):
    lap = LAP(tools_backend, LAPConfig(action_format=ActionFormat(kind="tool"), max_tokens=12))
    episodes = rollout("FrozenLake-v0", lap, seeds=[0, 1], game_options={"max_steps": 2})
    steps = [step for episode in episodes for step in episode.steps]
    assert all(episode.error is None for episode in episodes)
    # An untrained model writes no <tool_call>: every answer is invalid, with the reason, nothing crashes.
    assert steps and all(not step.valid and "function call" in step.reason for step in steps)
    for step in steps:  # the tools went into the prompt the model saw, besides the instructions
        messages = [message.model_dump() for message in step.prompt]
        assert "Call the make_move function" in messages[-1]["content"]
        assert step.prompt_tokens > tools_backend.count_prompt_tokens(GenerationRequest(messages=messages)) + 20


def test_history_is_trimmed_to_the_models_own_context_window(tiny_model_dir):
    from backends.hf import HFBackend

    backend = HFBackend(tiny_model_dir, max_context=400)
    config = LAPConfig(template=PromptTemplate(history="full"), max_tokens=8, temperature=0.0)
    [episode] = rollout("FrozenLake-v0", LAP(backend, config), seeds=[0], game_options={"max_steps": 6})
    assert episode.error is None
    assert max(step.history_trimmed for step in episode.steps) > 0
    assert all(step.prompt_tokens + 8 <= 400 for step in episode.steps)
