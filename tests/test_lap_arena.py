"""Game Arena's way of asking: free reasoning, then "Final Answer: MOVE"; the arena preset; majority votes.

The model is a scripted stand-in (what the LAP sends and reads is pinned exactly); the preset's
end-to-end run over HTTP lives in tests/evaluation/test_eval_arena.py.
"""

import pytest

from tsmg.core import Invalid
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.lm import Completion
from tsmg.rollout import rollout

FINAL = ActionFormat(kind="final")


class ScriptedModel:
    """Answers with ``answer(messages, request)``; records every batch."""

    name = "scripted"

    def __init__(self, answer):
        self.answer = answer
        self.batches = []

    def generate(self, requests, sampling):
        self.batches.append(list(requests))
        return [Completion(text=self.answer(r.messages, r), completion_tokens=5, prompt_tokens=10) for r in requests]


@pytest.mark.parametrize(
    ("answer", "move"),
    [
        ("The hole is left, so I go down.\nFinal Answer: down", "down"),
        ("final answer:   DOWN  ", "DOWN"),  # case and whitespace: the game's answer rule reads DOWN as down
        ("**Final Answer:** down", "** down"),  # markdown emphasis: the game's rule sets the asterisks aside
        ("Final Answer: left\nWait, a hole is there.\nFinal Answer: down", "down"),  # the last line wins
        ("Final Answer: left\nOn reflection the left is safe.", "left"),  # text after it does not hide it
    ],
)
def test_final_answer_line_is_read(answer, move):
    assert FINAL.extract(answer) == move


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("I will go down.", 'no line "Final Answer: MOVE"'),
        ("The Final Answer: down, in the middle of a sentence", 'no line "Final Answer: MOVE"'),
        ("Final Answer:", "names no move"),
        ("Final Answer: **", "names no move"),
    ],
)
def test_final_answer_missing_is_invalid_with_reason(answer, reason):
    result = FINAL.extract(answer)
    assert isinstance(result, Invalid) and reason in result.reason


def _one_step(answer, config=None):
    model = ScriptedModel(lambda messages, r: answer)
    lap = LAP(model, config or LAPConfig(action_format=FINAL))
    [episode] = rollout("FrozenLake-v0", lap, seeds=[0], game_options={"max_steps": 1})
    return episode.steps[0]


def test_final_answer_goes_through_the_games_answer_rule():
    step = _one_step("Let me think.\nFinal Answer: Down.")
    assert step.valid and step.parsed_action == "down"
    two = _one_step("Final Answer: left or down")  # two moves on the line: the game refuses it
    assert not two.valid and "left or down" in two.reason


def test_final_answer_only_inside_thinking_is_not_the_answer():
    step = _one_step("<think>Final Answer: down</think>I go down.")
    assert not step.valid and "only inside the thinking" in step.reason


def test_final_format_line_is_written_for_a_model():
    model = ScriptedModel(lambda messages, r: "Final Answer: down")
    [episode] = rollout("FrozenLake-v0", LAP(model, LAPConfig(action_format=FINAL)), seeds=[0])
    text = episode.steps[0].prompt[-1].content
    assert 'end your answer with one line "Final Answer: MOVE"' in text and "Valid actions: left" in text
