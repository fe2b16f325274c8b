"""The LAP with today's models: thinking kept out of the answer, moves as tool calls, history fitted to a context.

The model is a scripted stand-in that answers as a reasoning or tool-calling model would; the
same behaviours over real HTTP are in tests/backends/test_openai_reasoning.py.
"""

import json

from tsmg.lap import LAP, ActionFormat, LAPConfig, PromptTemplate
from tsmg.lm import Completion, ToolCall
from tsmg.rollout import rollout

ONE_STEP = {"max_steps": 1}


class Scripted:
    """Answers every request with ``answer(request)`` (a Completion); records the requests."""

    name = "scripted"

    def __init__(self, answer):
        self.answer = answer
        self.requests = []

    def generate(self, requests, sampling):
        self.requests.extend(requests)
        return [self.answer(request) for request in requests]


def first_step(model, config=None, **options):
    [episode] = rollout("FrozenLake-v0", LAP(model, config or LAPConfig()), seeds=[0], game_options=ONE_STEP, **options)
    assert episode.error is None, episode.error
    return episode, episode.steps[0]


def test_an_action_inside_inline_thinking_is_not_the_answer():
    text = "<think>maybe <action>left</action>? no, a hole is there</think><action>down</action>"
    episode, step = first_step(Scripted(lambda r: Completion(text=text, completion_tokens=20, reasoning_tokens=12)))
    assert step.valid and step.action == "down"
    assert step.reasoning == "maybe <action>left</action>? no, a hole is there"
    assert step.completion == text  # the transcript keeps what was written, thinking included
    assert step.reasoning_tokens == 12 and episode.reasoning_tokens == 12 and episode.completion_tokens == 20


def test_an_action_only_inside_the_thinking_is_invalid_with_the_reason():
    text = "<think>I will play <action>down</action></think>Let me see."
    _, step = first_step(Scripted(lambda r: Completion(text=text)))
    assert not step.valid and step.parsed_action is None
    assert "no <action>" in step.reason and "only inside the thinking" in step.reason
    # The same when the thinking arrives in its own field.
    field = Completion(text="Let me see.", reasoning="I will play <action>down</action>")
    _, step = first_step(Scripted(lambda r: field))
    assert not step.valid and "only inside the thinking" in step.reason
    assert step.reasoning == "I will play <action>down</action>"


def test_an_empty_answer_after_thinking_is_invalid_and_says_whether_the_budget_ran_out():
    _, step = first_step(Scripted(lambda r: Completion(text="", reasoning="the goal is far", reasoning_tokens=5)))
    assert not step.valid and step.reason == "an empty answer after the thinking"
    _, step = first_step(Scripted(lambda r: Completion(text="<think>the goal is far and", finish_reason="length")))
    assert not step.valid and "token budget ran out while the model was thinking" in step.reason
    assert step.reasoning == "the goal is far and"


def test_thinking_tokens_add_up_over_reprompts_and_thinking_is_not_shown_again():
    answers = iter(
        [
            Completion(text="<think>hmm</think>down", reasoning_tokens=4, completion_tokens=8),
            Completion(text="<think>ah</think><action>down</action>", reasoning_tokens=3, completion_tokens=9),
        ]
    )
    model = Scripted(lambda r: next(answers))
    _, step = first_step(model, LAPConfig(reprompt=1))
    assert step.valid and step.attempts == 2 and step.reasoning_tokens == 7 and step.completion_tokens == 17
    assert step.reasoning == "ah"  # the thinking of the answer that was played
    reprompt = model.requests[1].messages
    assert reprompt[-2] == {"role": "assistant", "content": "<think>hmm</think>down"}
    # In later turns' history the thinking is dropped, as chat templates drop it.
    model = Scripted(lambda r: Completion(text="<think>long thoughts</think><action>right</action>"))
    config = LAPConfig(template=PromptTemplate(history="full"))
    rollout("FrozenLake-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 3})
    history = [m["content"] for m in model.requests[-1].messages if m["role"] == "assistant"]
    assert history == ["<action>right</action>", "<action>right</action>"]


def tool(name="make_move", **arguments):
    return ToolCall(name, json.dumps(arguments), id="call_1")


def test_tool_format_offers_the_legal_moves_as_an_enum_and_reads_the_call():
    model = Scripted(lambda r: Completion(text="", tool_calls=[tool(move="right")]))
    _, step = first_step(model, LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required")))
    assert step.valid and step.action == "right" and step.parsed_action == "right"
    assert step.tool_calls == [{"name": "make_move", "arguments": '{"move": "right"}', "id": "call_1"}]
    [request] = model.requests
    assert request.tool_choice == "required" and request.choices is None
    [schema] = request.tools
    move = schema["function"]["parameters"]["properties"]["move"]
    assert schema["function"]["name"] == "make_move" and move["enum"] == ["left", "down", "right", "up"]
    assert "Call the make_move function" in request.messages[-1]["content"]


def test_tool_format_missing_wrong_or_malformed_calls_are_invalid_with_the_reason():
    cases = {
        "text only": (Completion(text="I go right"), "no function call in the answer"),
        "other function": (Completion(text="", tool_calls=[tool("look")]), "called look instead of make_move"),
        "not JSON": (Completion(text="", tool_calls=[ToolCall("make_move", '{"move": right}')]), "not JSON"),
        "no move": (Completion(text="", tool_calls=[tool(direction="right")]), "no text argument 'move'"),
        "two moves": (Completion(text="", tool_calls=[tool(move="up"), tool(move="down")]), "several different"),
        "illegal": (Completion(text="", tool_calls=[tool(move="jump")]), ""),
        "budget": (Completion(text="<think>so", finish_reason="length"), "budget ran out while the model was thinking"),
        "cut call": (Completion(text='<tool_call>{"name": "ma', finish_reason="length"), "ended inside a <tool_call>"),
        "in thinking": (
            Completion(text='<think><tool_call>{"name": "make_move", "arguments": {"move": "up"}}</tool_call></think>'),
            "only inside the thinking",
        ),
    }
    config = LAPConfig(action_format=ActionFormat(kind="tool"))
    for case, (completion, reason) in cases.items():
        _, step = first_step(Scripted(lambda r, c=completion: c), config)
        assert not step.valid and reason in step.reason, (case, step.reason)


def test_tool_calls_written_as_text_are_read_the_hermes_way():
    # A local chat template (Qwen2.5, Qwen3) has the model write its call inside <tool_call> tags.
    call = '{"name": "make_move", "arguments": {"move": "down"}}'
    text = f"<think>down is safe</think>\n<tool_call>\n{call}\n</tool_call>"
    _, step = first_step(Scripted(lambda r: Completion(text=text)), LAPConfig(action_format=ActionFormat(kind="tool")))
    assert step.valid and step.action == "down" and step.reasoning == "down is safe"
    broken = "<tool_call>{'name': 'make_move'}</tool_call>"
    config = LAPConfig(action_format=ActionFormat(kind="tool"))
    _, step = first_step(Scripted(lambda r: Completion(text=broken)), config)
    assert not step.valid and "<tool_call> block is not JSON" in step.reason


class WindowedModel(Scripted):
    """A model with a context window that counts a prompt's tokens as its characters / 4."""

    def __init__(self, window):
        super().__init__(lambda r: Completion(text="<action>right</action>"))
        self.context_window = window

    def count_prompt_tokens(self, request):
        return sum(len(message["content"]) for message in request.messages) // 4


def test_history_is_trimmed_oldest_first_to_fit_the_context_and_recorded():
    config = LAPConfig(template=PromptTemplate(history="full"), max_tokens=16)
    model = WindowedModel(window=300)
    [episode] = rollout("FrozenLake-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 8})
    trimmed = [step.history_trimmed for step in episode.steps]
    assert trimmed[0] == 0 and max(trimmed) > 0 and trimmed == sorted(trimmed)
    for request, step in zip(model.requests, episode.steps, strict=True):
        assert model.count_prompt_tokens(request) <= 300 - 16
        kept = sum(1 for message in request.messages if message["role"] == "assistant")
        assert kept == step.index - step.history_trimmed  # every earlier turn, minus those trimmed
    # The most recent turns are the ones kept.
    last = model.requests[-1].messages
    assert last[-1]["content"].startswith(episode.steps[-1].observation[:40])
    assert last[-3]["content"].startswith(episode.steps[-2].observation[:40])

    untrimmed = WindowedModel(window=300)
    config = LAPConfig(template=PromptTemplate(history="full", trim="none"), max_tokens=16)
    [episode] = rollout("FrozenLake-v0", LAP(untrimmed, config), seeds=[0], game_options={"max_steps": 8})
    assert all(step.history_trimmed == 0 for step in episode.steps)
    assert max(untrimmed.count_prompt_tokens(r) for r in untrimmed.requests) > 300 - 16
