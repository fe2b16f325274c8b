"""Game Arena's way of asking: free reasoning, then "Final Answer: MOVE"; the arena preset; majority votes.

The model is a scripted stand-in (what the LAP sends and reads is pinned exactly); the preset's
end-to-end run over HTTP lives in tests/evaluation/test_eval_arena.py.
"""

import pytest

from tests.scripted_models import ScriptedModel
from tsmg.core import Invalid
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.rollout import rollout

FINAL = ActionFormat(kind="final")


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


class CyclingModel(ScriptedModel):
    """Answers with ``answers[n % len(answers)]`` for the n-th request it is sent."""

    def __init__(self, answers):
        self.sent = 0
        super().__init__(self._next, completion_tokens=5)
        self.answers = answers

    def _next(self, messages, request):
        self.sent += 1
        return self.answers[(self.sent - 1) % len(self.answers)]


def _voted(answers, seed=0, **settings):
    model = CyclingModel(answers)
    config = LAPConfig(action_format=FINAL, **settings)
    [episode] = rollout("FrozenLake-v0", LAP(model, config), seeds=[seed], game_options={"max_steps": 1})
    return model, episode


def test_majority_vote_plays_the_move_most_valid_answers_name_and_records_them():
    answers = ["Final Answer: down", "Final Answer: left", "Final Answer: DOWN.", "no move"]
    model, episode = _voted(answers, votes=4)
    [batch] = model.batches  # the k answers are one batched call, each with its own seed
    assert len(batch) == 4 and len({request.seed for request in batch}) == 4
    step = episode.steps[0]
    assert step.valid and step.parsed_action == "down" and step.attempts == 1
    [vote] = step.votes
    assert vote["moves"] == ["down", "left", "down", None] and vote["tally"] == {"down": 2, "left": 1}
    assert vote["played"] == "down" and vote["answers"] == answers and "no line" in vote["reasons"][3]
    assert step.completion_tokens == 4 * 5 and step.prompt_tokens == 4 * 10  # accounting counts all k
    assert episode.completion_tokens == 20


def test_a_tie_is_broken_by_the_decisions_seeded_generator():
    winners = {}
    for seed in range(12):
        _, episode = _voted(["Final Answer: left", "Final Answer: down"], seed=seed, votes=2)
        winners[seed] = episode.steps[0].votes[0]["played"]
        _, again = _voted(["Final Answer: left", "Final Answer: down"], seed=seed, votes=2)
        assert again.steps[0].votes[0]["played"] == winners[seed]  # same seed, same move
    assert set(winners.values()) == {"left", "down"}  # not always the first answer


def test_no_valid_answer_goes_the_reprompt_way_with_the_reason():
    answers = ["I pass.", "Final Answer: fly", "Final Answer: up", "Final Answer: up"]
    model, episode = _voted(answers, votes=2, reprompt=1)
    step = episode.steps[0]
    assert [len(batch) for batch in model.batches] == [2, 2]
    assert step.valid and step.parsed_action == "up" and step.attempts == 2
    assert [vote["played"] for vote in step.votes] == [None, "up"]
    assert 'That answer was invalid: no line "Final Answer: MOVE"' in step.prompt[-1].content
    # every sample's seed differs, across attempts too
    assert len({request.seed for batch in model.batches for request in batch}) == 4


def test_one_vote_records_no_vote_and_keeps_the_seeds_of_a_plain_lap():
    plain, voted = ScriptedModel(lambda m, r: "Final Answer: down"), CyclingModel(["Final Answer: down"])
    rollout("FrozenLake-v0", LAP(plain, LAPConfig(action_format=FINAL)), seeds=[3], game_options={"max_steps": 1})
    [episode] = rollout(
        "FrozenLake-v0", LAP(voted, LAPConfig(action_format=FINAL, votes=1)), seeds=[3], game_options={"max_steps": 1}
    )
    assert episode.steps[0].votes is None
    assert plain.batches[0][0].seed == voted.batches[0][0].seed


def test_legal_moves_none_names_no_move_in_the_prompt():
    model, episode = _voted(["Final Answer: down"], legal_moves="none", reprompt=1)
    text = episode.steps[0].prompt[-1].content
    # The format line names no move (FrozenLake's rules still name its four actions: they are the game's text)
    assert "Final Answer: MOVE" in text and "Valid actions" not in text
    assert "Valid actions: left, down, right, up" in _voted(["Final Answer: down"])[1].steps[0].prompt[-1].content


def test_legal_moves_none_drops_them_from_an_openspiel_view_too():
    from tsmg.apps.cli import _build_parser
    from tsmg.apps.evaluation.cli import config_from_args

    args = [
        "eval",
        "--game",
        "OpenSpiel/tic_tac_toe-v0",
        "--model",
        "random",
        "--lap",
        "arena",
        "--legal-moves",
        "none",
    ]
    config = config_from_args(_build_parser().parse_args(args))
    assert config.lap.legal_moves == "none" and config.game_options["OpenSpiel/tic_tac_toe-v0"]["list_moves"] is False
    model = ScriptedModel(lambda messages, r: "Final Answer: x(1,1)")
    lap = LAP(model, config.lap)
    [episode] = rollout("OpenSpiel/tic_tac_toe-v0", lap, seeds=[0], game_options={"list_moves": False, "max_steps": 1})
    text = episode.steps[0].prompt[-1].content
    assert "x(0,2)" not in text and "Your legal moves are not listed" in text and episode.steps[0].valid
    # A view that lists the moves cannot be played under legal_moves='none': said, not silently kept.
    [failed] = rollout("OpenSpiel/tic_tac_toe-v0", lap, seeds=[0], game_options={"max_steps": 1})
    assert "lists the legal moves in its observation" in failed.error and "list_moves=false" in failed.error


def test_the_arena_preset_and_flags_beside_it():
    from tsmg.apps.cli import _build_parser
    from tsmg.apps.lap_options import lap_config_from_args
    from tsmg.arena import LAP_PRESETS

    parse = _build_parser().parse_args
    arena = lap_config_from_args(parse(["prompt", "--game", "FrozenLake-v0", "--lap", "arena"]))
    settings = LAP_PRESETS["arena"]
    assert arena.action_format.kind == "final" and arena.max_tokens == settings["max_tokens"] == 1024
    assert (arena.reprompt, arena.votes, arena.legal_moves) == (2, 1, "list")
    plain = lap_config_from_args(parse(["prompt", "--game", "FrozenLake-v0"]))
    assert (plain.action_format.kind, plain.max_tokens, plain.reprompt, plain.votes) == ("tag", 64, 0, 1)
    flags = ["--lap", "arena", "--max-tokens", "300", "--reprompt", "0", "--votes", "5", "--action-format", "tag"]
    given = lap_config_from_args(parse(["prompt", "--game", "FrozenLake-v0", *flags]))
    assert (given.action_format.kind, given.max_tokens, given.reprompt, given.votes) == ("tag", 300, 0, 5)


def test_a_conversation_lap_refuses_votes():
    from tsmg.apps.integrations.conversation import ConversationLAP

    with pytest.raises(ValueError, match="votes must be 1, not 3"):
        ConversationLAP(ScriptedModel(lambda m, r: ""), LAPConfig(votes=3))
