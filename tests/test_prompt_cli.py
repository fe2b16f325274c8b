"""``tsmg prompt`` shows what a language model is sent, and it is what ``tsmg eval`` sends and records.

The command runs through the CLI's own ``main`` (in-process, as a user's shell would run it);
the comparison with an evaluation plays a tiny local model with the same LAP flags and reads
its ``episodes.jsonl``. Mutations these tests catch (each tried): random moves drawn with another
seed than ``tsmg rollout --model random``'s (the step-K observations differ), the first seat picked
by its place in ``agents`` instead of by turn; and by construction a LAP flag that eval reads
apart from ``tsmg prompt`` (the configs, or the recorded prompts, differ).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from tsmg.apps.cli import _build_parser, main
from tsmg.apps.evaluation.cli import config_from_args
from tsmg.apps.lap_options import lap_config_from_args
from tsmg.apps.prompt import PromptError, prompt_at
from tsmg.episode import read_episodes
from tsmg.lap import DEFAULT_SYSTEM, ActionFormat, LAPConfig, PromptTemplate


def run(capsys, *words: str) -> tuple[int, str, str]:
    """``tsmg WORDS`` through the CLI's main: exit code, stdout, stderr."""
    code = main(list(words))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_of_the_first_decision_of_tictactoe(capsys):
    code, out, err = run(capsys, "prompt", "--game", "TicTacToe-v0", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert {key: shown[key] for key in ("game", "seed", "agent", "step", "tools")} == {
        "game": "TicTacToe-v0", "seed": 0, "agent": "player_0", "step": 0, "tools": None,
    }  # fmt: skip
    system, user = shown["messages"]
    assert system == {"role": "system", "content": DEFAULT_SYSTEM}
    assert user["role"] == "user" and "You are player_0 and play X" in user["content"]
    assert user["content"].endswith(
        "Write your move inside <action></action> tags, e.g. <action>MOVE</action>. "
        "Valid actions: 1, 2, 3, 4, 5, 6, 7, 8, 9."
    )


def test_text_output_names_the_decision_and_each_role(capsys):
    code, out, _ = run(capsys, "prompt", "--game", "FrozenLake-v0", "--seed", "3", "--step", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "FrozenLake-v0, seed 3: what player is sent at step 2"
    assert lines[2] == "=== system ===" and lines[5] == "=== user ==="


@pytest.mark.parametrize(
    ("game", "seed"), [("TicTacToe-v0", 5), ("FrozenLake-v0", 3), ("KuhnPoker-v0", 1), ("RockPaperScissors-v0", 2)]
)
def test_step_k_is_reached_by_the_moves_tsmg_rollout_random_plays(tmp_path, capsys, game, seed):
    code, _, err = run(
        capsys, "rollout", "--game", game, "--seed", str(seed), "--episodes", "1", "--out", str(tmp_path)
    )
    assert code in (0, 1), err
    [episode] = read_episodes(tmp_path / "episodes.jsonl")
    assert len(episode.steps) >= 2
    for step in episode.steps:
        shown = prompt_at(game, seed=seed, step=step.round, agent=step.agent)
        assert (shown.agent, shown.step) == (step.agent, step.round)
        assert shown.messages[-1]["content"].startswith(step.observation + "\n\n")


def test_defaults_pick_the_first_seat_to_act_and_an_agents_first_decision():
    assert (prompt_at("KuhnPoker-v0").agent, prompt_at("KuhnPoker-v0").step) == ("player_0", 0)
    second = prompt_at("KuhnPoker-v0", agent="player_1")
    assert (second.agent, second.step) == ("player_1", 1)
    assert prompt_at("TicTacToe-v0", step=3).agent == "player_1"


LAP_FLAGS = [
    "--system", "Be brief.", "--history", "last_k", "--history-k", "3", "--observation-last",
    "--action-format", "regex", "--action-regex", "move: (\\w+)", "--reprompt", "2", "--temperature", "0.5",
    "--top-p", "0.9", "--max-tokens", "32", "--tool-choice", "required", "--action-tag", "move",
    "--lap", "arena", "--votes", "3", "--legal-moves", "list",
]  # fmt: skip


def test_eval_and_prompt_take_the_same_lap_flags_and_read_them_alike():
    parser = _build_parser()
    evaluation = config_from_args(parser.parse_args(["eval", "--game", "TicTacToe-v0", "--seed", "7", *LAP_FLAGS]))
    prompt = lap_config_from_args(parser.parse_args(["prompt", "--game", "TicTacToe-v0", *LAP_FLAGS]), seed=7)
    assert evaluation.lap == prompt
    assert prompt.template.system == "Be brief." and prompt.action_format.pattern == "move: (\\w+)"

    assert _lap_flags("eval") == _lap_flags("prompt") and len(_lap_flags("prompt")) == 15


def _lap_flags(command: str) -> dict[str, tuple[object, ...]]:
    """The flags of ``tsmg COMMAND``'s "language-agent policy" help group: spelling, default, choices, help."""
    parser = _build_parser()
    commands = next(action.choices for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return {
        action.dest: (tuple(action.option_strings), action.default, action.choices, action.help)
        for group in commands[command]._action_groups
        if group.title == "language-agent policy"
        for action in group._group_actions
    }


def test_lap_flags_change_the_prompt_as_they_change_evals():
    plain = prompt_at("TicTacToe-v0", step=2)
    briefed = prompt_at("TicTacToe-v0", step=2, lap=LAPConfig(template=PromptTemplate(system="Be brief.")))
    assert briefed.messages[0] == {"role": "system", "content": "Be brief."}
    assert briefed.messages[1:] == plain.messages[1:]
    last = prompt_at("TicTacToe-v0", step=2, lap=LAPConfig(template=PromptTemplate(observation_last=True)))
    assert last.messages[-1]["content"].startswith("Write your move inside <action>")
    history = prompt_at("TicTacToe-v0", step=2, lap=LAPConfig(template=PromptTemplate(history="full")))
    roles = [message["role"] for message in history.messages]
    assert roles == ["system", "user", "assistant", "user"]  # player_0's own first move, answered randomly
    tool = prompt_at("TicTacToe-v0", step=2, lap=LAPConfig(action_format=ActionFormat(kind="tool")))
    assert tool.tools is not None
    [schema] = tool.tools
    assert schema["function"]["parameters"]["properties"]["move"]["enum"] == tool.messages[-1]["content"].split(
        "Valid actions: "
    )[1].rstrip(".").split(", ")
    choice = prompt_at("TicTacToe-v0", lap=LAPConfig(action_format=ActionFormat(kind="choice")))
    assert choice.choices == [str(cell) for cell in range(1, 10)] and choice.tools is None


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--game", "NoSuchGame-v0"], "no game registered as 'NoSuchGame-v0'"),
        (["--game", "TicTacToe-v0", "--agent", "bob"], "TicTacToe-v0 has no seat 'bob'; its seats are player_0"),
        (["--game", "TicTacToe-v0", "--step", "40"], "step 40 is past the end of the episode: TicTacToe-v0 with seed"),
        (["--game", "TicTacToe-v0", "--step", "1", "--agent", "player_0"], "player_0 does not act at step 1"),
        (["--game", "TicTacToe-v0", "--agent", "player_1", "-o", "max_steps=1"], "player_1 never acts in"),
        (["--game", "TicTacToe-v0", "--step", "-1"], "the step must be 0 or more"),
        (["--game", "TicTacToe-v0", "--action-format", "regex", "--action-regex", "("], "does not compile"),
        (["--seed", "1"], "required: --game"),
    ],
)
def test_bad_requests_get_one_sentence_and_exit_2(capsys, words, says):
    code, out, err = run(capsys, "prompt", *words)
    assert code == 2 and not out
    [line] = err.splitlines()
    assert line.startswith("error: ") and says in line, line


def test_a_game_that_lists_no_moves_is_shown_at_its_start_only():
    pytest.importorskip("textarena")
    assert prompt_at("TextArena/Taboo-v0").step == 0
    with pytest.raises(PromptError, match="does not list player_0's moves at step 0, so no random move"):
        prompt_at("TextArena/Taboo-v0", step=1)


@pytest.mark.parametrize(
    ("game", "agent", "step"),
    [
        ("openspiel:kuhn_poker", "player_1", 1),
        ("OpenSpiel/tic_tac_toe-v0", None, 0),
        ("TextArena/ConnectFour-v0", None, 0),
    ],
)
def test_openspiel_and_textarena_ids(game, agent, step):
    pytest.importorskip("pyspiel" if "penSpiel" in game or "openspiel" in game else "textarena")
    shown = prompt_at(game, agent=agent, seed=2)
    assert shown.step == step and [message["role"] for message in shown.messages] == ["system", "user"]
    assert "<action>" in shown.messages[-1]["content"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny Llama-shape chat model saved on the spot (a real local model: transformers reads it)."""
    pytest.importorskip("torch")
    from backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), seed=0)


def test_eval_records_the_prompt_tsmg_prompt_shows(tmp_path, capsys, tiny_model):
    """A tiny local model evaluated with LAP flags: each episode's first recorded prompt is `tsmg prompt`'s."""
    model = tiny_model
    flags = ["--system", "Play well.", "--observation-last", "--max-tokens", "4", "--temperature", "0"]
    for game in ("TicTacToe-v0", "FrozenLake-v0"):
        out = tmp_path / game
        code, _, err = run(
            capsys, "eval", "--game", game, "--model", f"hf:{model}", "--episodes", "2", "--out", str(out),
            "--no-progress", *flags,
        )  # fmt: skip
        assert code == 0, err
        episodes = list(read_episodes(out / "episodes.jsonl"))
        assert len(episodes) >= 2
        for episode in episodes:
            first = episode.steps[0]
            assert first.round == 0 and first.prompt is not None and first.tools is None
            code, printed, err = run(
                capsys, "prompt", "--game", game, "--seed", str(episode.seed), "--agent", first.agent, "--json", *flags
            )
            assert code == 0, err
            shown = json.loads(printed)
            recorded = [message.model_dump() for message in first.prompt]
            assert (shown["messages"], shown["tools"]) == (recorded, None)
            assert recorded[0]["content"] == "Play well." and first.observation in recorded[-1]["content"]


def test_training_rollouts_record_the_prompt_tsmg_prompt_shows(tiny_model, monkeypatch):
    """`tsmg train`'s rollout engine records the LAP's prompt of each model step: at round 0, `tsmg prompt`'s."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from backends.hf import HFBackend
    from training.config import RolloutConfig
    from training.rollout.engines import HFRolloutEngine
    from tsmg.rollout import plan_episodes

    lap = LAPConfig(template=PromptTemplate(system="Play well.", history="full"), max_tokens=4)
    config = RolloutConfig(game_id="TicTacToe-v0", lap=lap, group_size=2, groups_per_update=1)
    engine = HFRolloutEngine(HFBackend(tiny_model, threads=1), config, ["player_0", "player_1"])
    batch = engine.play(plan_episodes("TicTacToe-v0", [11], group_size=2), seed=3)
    for episode in batch.episodes:
        first = episode.steps[0]
        shown = prompt_at("TicTacToe-v0", seed=11, agent=first.agent, step=0, lap=lap)
        assert shown.messages == [message.model_dump() for message in first.prompt or []]
        assert shown.messages[0]["content"] == "Play well."


def test_the_record_keeps_the_tools_tsmg_prompt_shows():
    """Under the tool action format the record (schema 6) keeps the function schemas sent with the messages.

    The tiny model's chat template renders no tools, so a stand-in model that calls ``make_move`` plays here,
    through the same rollout engine and LAP as ``tsmg eval``.
    """
    from tsmg.lap import LAP
    from tsmg.lm import Completion, ToolCall
    from tsmg.rollout import rollout

    class Caller:
        name = "caller"

        def generate(self, requests, sampling):
            return [Completion(text="", tool_calls=[ToolCall("make_move", '{"move": "1"}')]) for _ in requests]

    lap = LAPConfig(action_format=ActionFormat(kind="tool"))
    for game in ("TicTacToe-v0", "FrozenLake-v0"):
        [episode] = rollout(game, LAP(Caller(), lap), seeds=[4])
        first = episode.steps[0]  # later decisions follow the stand-in's moves, not random ones
        shown = prompt_at(game, seed=4, agent=first.agent, step=0, lap=lap)
        assert shown.messages == [message.model_dump() for message in first.prompt or []]
        assert shown.tools == first.tools and first.tools is not None


EVALUATE = Path(__file__).resolve().parent.parent / "docs" / "evaluate.md"


def test_the_docs_quote_what_tsmg_prompt_prints(capsys):
    """Each ``tsmg prompt`` block of docs/evaluate.md's "See the prompt" is followed by its output, as printed."""
    section = EVALUATE.read_text().split("## See the prompt", 1)[1].split("\n## ", 1)[0]
    pairs = re.findall(r"```bash\n\.venv/bin/tsmg (prompt [^\n]*)\n```\n\n```\n(.*?)\n```", section, re.DOTALL)
    assert len(pairs) == 3 and len({shlex.split(command)[2] for command, _ in pairs}) == 3  # three games
    for command, quoted in pairs:
        code, out, err = run(capsys, *shlex.split(command))
        assert code == 0, err
        assert out.rstrip("\n") == quoted, f"docs/evaluate.md quotes another output of `tsmg {command}`"
