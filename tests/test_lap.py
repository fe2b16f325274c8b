"""The Language-Agent Policy: prompts, action formats, re-prompts, batching.

The model here is a small scripted stand-in (the backends' own tests run real models); it lets
these tests pin down exactly what the LAP sends and how it reads the answers.
"""

import pytest
from pydantic import ValidationError

from tests.scripted_models import ScriptedModel
from tsmg.lap import LAP, ActionFormat, LAPConfig, PromptTemplate
from tsmg.lm import Completion
from tsmg.rollout import rollout


def test_tag_format_and_one_model_call_per_round():
    model = ScriptedModel(lambda messages, r: "<think>hmm</think><action>right</action>")
    episodes = rollout("FrozenLake-v0", LAP(model), seeds=range(8))
    assert len(model.batches[0]) == 8
    assert all(e.steps[0].parsed_action == "right" for e in episodes)
    first = episodes[0].steps[0]
    assert first.completion.startswith("<think>") and first.action == "right"
    assert [m.role for m in first.prompt] == ["system", "user"]
    assert "<action>MOVE</action>" in first.prompt[1].content
    assert episodes[0].completion_tokens == 3 * len(episodes[0].steps)


def test_missing_tag_is_invalid_with_reason_and_reprompt_fixes_it():
    def answer(messages, request):
        # First attempt forgets the tag; the re-prompt (which carries the reason) gets it right.
        return "<action>down</action>" if "invalid" in messages[-1]["content"] else "down"

    model = ScriptedModel(answer)
    [no_retry] = rollout("FrozenLake-v0", LAP(model), seeds=[0], game_options={"max_steps": 1})
    assert not no_retry.steps[0].valid and "no <action>" in no_retry.steps[0].reason

    model = ScriptedModel(answer)
    [episode] = rollout("FrozenLake-v0", LAP(model, LAPConfig(reprompt=2)), seeds=[0], game_options={"max_steps": 1})
    step = episode.steps[0]
    assert step.valid and step.attempts == 2 and step.parsed_action == "down"
    assert "That answer was invalid: no <action>" in step.prompt[-1].content
    assert step.completion_tokens == 6


def test_reprompts_are_batched_and_bounded():
    model = ScriptedModel(lambda messages, r: "nonsense")
    rollout("FrozenLake-v0", LAP(model, LAPConfig(reprompt=3)), seeds=range(5), game_options={"max_steps": 1})
    assert [len(batch) for batch in model.batches] == [5, 5, 5, 5]


def test_game_rejects_well_formed_but_unknown_action():
    model = ScriptedModel(lambda messages, r: "<action>jump</action>")
    [episode] = rollout("FrozenLake-v0", LAP(model), seeds=[0], game_options={"max_steps": 1})
    assert not episode.steps[0].valid and "expected one of" in episode.steps[0].reason


def test_choice_format_sends_legal_actions_as_choices():
    model = ScriptedModel(lambda messages, r: r.choices[1])
    [episode] = rollout("FrozenLake-v0", LAP(model, LAPConfig(action_format=ActionFormat(kind="choice"))), seeds=[0])
    assert model.batches[0][0].choices == ["left", "down", "right", "up"]
    assert episode.steps[0].parsed_action == "down"


def test_regex_format():
    fmt = ActionFormat(kind="regex", pattern=r"MOVE:\s*(\w+)")
    assert fmt.extract("I think... MOVE: up") == "up"
    assert not fmt.extract("no move here")


@pytest.mark.parametrize(("history", "expected_user_turns"), [("none", 1), ("last_k", 3), ("full", 4)])
def test_history_windows(history, expected_user_turns):
    model = ScriptedModel(lambda messages, r: "<action>left</action>")
    config = LAPConfig(template=PromptTemplate(history=history, history_k=2))
    [episode] = rollout("FrozenLake-v0", LAP(model, config), seeds=[0], game_options={"max_steps": 4})
    last_prompt = episode.steps[3].prompt
    assert sum(m.role == "user" for m in last_prompt) == expected_user_turns
    if history != "none":
        assert last_prompt[-2].role == "assistant" and last_prompt[-2].content == "<action>left</action>"


def test_sampling_seeds_depend_on_position_not_batching():
    seen = {}

    def answer(messages, request):
        seen.setdefault(request.seed, 0)
        seen[request.seed] += 1
        return "<action>up</action>"

    rollout("FrozenLake-v0", LAP(ScriptedModel(answer)), seeds=range(4), game_options={"max_steps": 2})
    assert len(seen) == 8  # 4 episodes x 2 rounds, all distinct


def test_bad_lap_config_fails_early_with_the_field_name():
    with pytest.raises(ValidationError, match="history"):
        PromptTemplate(history="some")
    with pytest.raises(ValidationError, match="observation"):
        PromptTemplate(user="no placeholder")
    with pytest.raises(ValidationError, match="pattern does not compile"):
        ActionFormat(kind="regex", pattern="(")
    with pytest.raises(ValidationError, match="reprompt"):
        LAPConfig(reprompt=-1)


def test_a_failed_model_call_fails_its_episode_not_a_scored_invalid_answer():
    class HalfDown:
        """Refuses every other request of its first batch, as a server refusing a parameter would."""

        name = "half-down"
        calls = 0

        def generate(self, requests, sampling):
            self.calls += 1
            return [
                Completion(text="", finish_reason="error", error="HTTP 400: unsupported parameter 'max_tokens'")
                if self.calls == 1 and index % 2 == 0
                else Completion(text="<action>down</action>")
                for index, _ in enumerate(requests)
            ]

    episodes = rollout("FrozenLake-v0", LAP(HalfDown(), LAPConfig(reprompt=2)), seeds=range(16))
    failed = [episode for episode in episodes if episode.error]
    assert [episode.seed for episode in failed] == list(range(0, 16, 2))  # per episode, not the whole batch
    assert all("the model call failed: HTTP 400: unsupported parameter" in e.error for e in failed)
    assert all(step.valid for episode in episodes for step in episode.steps)  # no invalid answer was scored


def test_observation_last_moves_the_observation_after_the_instructions_and_lengthens_the_shared_prefix():
    import os

    prompts = {}
    for last in (False, True):
        model = ScriptedModel(lambda messages, r: "<action>down</action>")
        config = LAPConfig(template=PromptTemplate(observation_last=last))
        episodes = rollout("FrozenLake-NoSlip-v0", LAP(model, config), seeds=[1, 2], game_options={"max_steps": 1})
        prompts[last] = [episode.steps[0].prompt[-1].content for episode in episodes]
    as_written, moved = prompts[False], prompts[True]
    for before, after in zip(as_written, moved, strict=True):
        observation, instructions = before.split("\n\n")
        assert after == f"{instructions}\n\n{observation}"  # the same texts, the observation last
    assert len(os.path.commonprefix(moved)) > len(os.path.commonprefix(as_written)) + len(instructions)
    template = PromptTemplate(user="Legal: {legal_actions}\n\n{observation}\n\nGo.", observation_last=True)
    assert template.user_layout() == "Legal: {legal_actions}\n\nGo.\n\n{observation}"
