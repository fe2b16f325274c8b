"""Bad input on every command: one line on stderr, a non-zero exit, no traceback, nothing half-done."""

import os
import subprocess
import sys
import textwrap

import pytest

from tsmg.apps.cli import main

# (command line, what is wrong). Every command that takes a game gets an unknown one, every command
# that takes a model a bad spec and a model whose API key is missing, and every command a bad option.
CASES = [
    ("games --bogus", "bad option"),
    ("check Nope-v0", "unknown game"),
    ("check FrozenLake-v0 --bogus", "bad option"),
    ("play Nope-v0", "unknown game"),
    ("play FrozenLake-v0 --model gpt5", "bad model spec"),
    ("play FrozenLake-v0 --model openai:gpt-4o", "missing key"),
    ("play FrozenLake-v0 -o map_name=3x3", "bad option"),
    ("play FrozenLake-v0 --opponent smollm2", "bad model spec"),
    ("rollout Nope-v0", "unknown game"),
    ("rollout FrozenLake-v0 --policy gpt5", "bad model spec"),
    ("rollout FrozenLake-v0 --episodes many", "bad option"),
    ("rollout FrozenLake-v0 -o max_steps", "bad option"),
    ("rollout --game FrozenLake-v0 --model random --episodes -3", "no episodes"),
    ("rollout --game FrozenLake-v0 --model random --episodes 2 --out {tmp}/a-file/run", "--out under a file"),
    ("eval --game FrozenLake-v0 --model random --episodes 0", "no episodes"),
    ("eval --game FrozenLake-v0 --model random --episodes 2 --out {tmp}/a-file/run", "--out under a file"),
    # the same with --game ID and --model SPEC (above: the deprecated positional game and --policy)
    ("check --game Nope-v0", "unknown game"),
    ("play --game Nope-v0", "unknown game"),
    ("rollout --game Nope-v0", "unknown game"),
    ("rollout --game FrozenLake-v0 --model gpt5", "bad model spec"),
    ("rollout", "bad option"),
    ("serve --game Nope-v0 --port 0", "unknown game"),
    ("demo --no-train --game Nope-v0", "unknown game"),
    ("demo --bogus", "bad option"),
    ("eval --game Nope-v0 --model random", "unknown game"),
    ("eval --game FrozenLake-v0 --model gpt5", "bad model spec"),
    ("eval --game FrozenLake-v0 --model openai:gpt-4o --episodes 2", "missing key"),
    ("eval --game FrozenLake-v0 --model random -o on_invalid=shrug", "bad option"),
    ("eval --game FrozenLake-v0 --model random --model-option threads=1", "bad option"),
    ("eval --game FrozenLake-v0 --model random --price random=free", "bad option"),
    ("report {tmp}/no-such-run", "missing run folder"),
    ("report", "bad option"),
    ("train --game Nope-v0 --model tiny", "unknown game"),
    ("train --game FrozenLake-v0 --model gpt5", "bad model spec"),
    ("train --game FrozenLake-v0 --model openai:gpt-4o", "missing key"),
    ("train --game FrozenLake-v0 --model tiny --set optim.lr", "bad option"),
    ("algos --bogus", "bad option"),
    ("sft --episodes {tmp}/none.jsonl --model gpt5", "bad model spec"),
    ("sft --episodes {tmp}/none.jsonl --model smollm2", "missing episodes file"),
    ("sft --episodes {tmp}/none.jsonl --model smollm2 --lr fast", "bad option"),
    ("view {tmp}/no-such-run", "missing run folder"),
    ("view --bogus", "bad option"),
    ("serve Nope-v0 --port 0", "unknown game"),
    ("serve FrozenLake-v0 --max-sessions none", "bad option"),
    ("export {tmp}/no-such-run", "missing run folder"),
    ("export {tmp} --format parquet", "bad option"),
    ("--import no_such_module_of_games games", "bad option"),
    # issue 43: flags that named nothing in the run were ignored, an option no backend takes raised a TypeError
    ("eval --game FrozenLake-v0 --model hf:X --model-option hf:X:thread=1", "option the model does not take"),
    ("eval --game FrozenLake-v0 --model random --model-option random:threads=1", "option the model does not take"),
    ("eval --game FrozenLake-v0 --model random --model-option randm:threads=1", "model not in the run"),
    ("eval --game FrozenLake-v0 --model random --price gpt-9=1,2", "model not in the run"),
    ("exploitability --model random --model-option oracle:x=1", "model not in the run"),
    ("train --game FrozenLake-v0 --model tiniest", "bad model spec"),
    ("train --resume --out {tmp}/missing", "no run to resume"),
    ("train --resume", "no run to resume"),
    ("sft --resume --out {tmp}/missing", "no run to resume"),
]


@pytest.mark.parametrize(("command", "problem"), CASES, ids=[command for command, _ in CASES])
def test_bad_input_is_one_clean_line(command, problem, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # run folders, if any were made, land here
    (tmp_path / "a-file").write_text("")
    code = main(command.format(tmp=tmp_path).split())
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code != 0, problem
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err and "unexpected" not in captured.err
    if "eval" in command:
        assert not (tmp_path / "runs").exists()  # nothing written for a run that cannot start


def test_messages_say_what_to_do(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    expected = {
        "eval --game FrozenLake-v0 --model gpt5": "unknown model spec 'gpt5': use random, oracle, fixed:TEXT",
        "eval --game FrozenLake-v0 --model openai:gpt-4o": "set OPENAI_API_KEY",
        "eval --game my/Nim-v0": "--import MODULE",
        "check FrozenLak-v0": "Did you mean: FrozenLake-v0?",
        "rollout FrozenLake-v0 --bogus": "unrecognized arguments: --bogus (see: tsmg rollout --help)",
        "rollout --game FrozenLake-v0 --model random --episodes -3": "argument --episodes: must be at least 1, got -3",
        "eval --game FrozenLake-v0 --model randon": "(did you mean random?)",
        "rollout --game FrozenLake-v0 --model random --out /dev/null/run": (
            "cannot make the folder /dev/null/run: a file stands on its path; choose another --out"
        ),
        "eval --game FrozenLake-v0 --model random --out /dev/null/run": (
            "cannot make the folder /dev/null/run: a file stands on its path; choose another --out"
        ),
        "eval --game FrozenLake-v0 --model hf:X --model-option hf:X:thread=1": (
            "error: --model-option hf:X:thread=1: hf:X has no option 'thread'; its options are adapter, chat, device, "
            "dtype, max_batch_size, max_context, name, threads\n"
        ),
        "eval --game FrozenLake-v0 --model random --model-option random:threads=1": "random has no option 'threads'; "
        "it takes none",
        "eval --game FrozenLake-v0 --model random --model oracle --model-option randm:threads=1": (
            "error: --model-option randm:threads=1 names randm, which is not in this run: "
            "its models are random, oracle\n"
        ),
        "eval --game FrozenLake-v0 --model random --price gpt-9=1,2": (
            "error: --price gpt-9=1,2 names gpt-9, which is not in this run: its models are random\n"
        ),
        "train --game FrozenLake-v0 --model tiniest": "vllm:PATH or tiny (training only) (did you mean tiny?)",
        "eval --game FrozenLake-v0 --model tinny": "(did you mean tiny?)",
        "train --resume --out missing": (
            "error: --resume: no run is at missing (no config.yaml there); give the --out folder of the run to "
            "continue, or drop --resume to start a new one\n"
        ),
        "train --resume": "--resume continues the run in --out RUN_FOLDER: add --out",
        # a configuration's problems as "field: problem", without pydantic's own framing
        "train --game FrozenLake-v0 --model tiny --set rollout.group_size=1": (
            "error: invalid training configuration: credit assigner 'ms-grpo' compares the episodes of a group"
        ),
        "train --game FrozenLake-v0 --model tiny --set loop.max_staleness=-1 --set loop.mode=async": (
            "invalid training configuration: loop.max_staleness: loop.max_staleness (eta) is -1"
        ),
    }
    for command, message in expected.items():
        assert main(command.split()) == 2, command
        error = capsys.readouterr().err
        assert message in error and "validation error" not in error and "Value error" not in error, command
    main(["eval", "--game", "my/Nim-v0"])
    assert "Did you mean" not in capsys.readouterr().err  # only close names are suggested


def test_a_refused_command_line_writes_nothing(tmp_path, monkeypatch, capsys):
    """Issue 43's bad flags stop with exit 2 before any folder is made, with or without --out."""
    monkeypatch.chdir(tmp_path)
    refused = [
        "eval --game FrozenLake-v0 --model hf:X --model-option hf:X:thread=1 --episodes 2 --out run",
        "eval --game FrozenLake-v0 --model random --model-option randm:threads=1 --episodes 2",
        "eval --game FrozenLake-v0 --model random --price gpt-9=1,2 --episodes 2 --out run",
        "eval --game FrozenLake-v0 --model random --price gpt-9=1,2 --episodes 2 --dry-run",
        "rollout --game FrozenLake-v0 --model random --episodes -3 --out run",
        "eval --game FrozenLake-v0 --model randon --episodes 2 --out run",
        "train --game FrozenLake-v0 --model tiniest --updates 1 --out run",
        "train --resume --out run",
    ]
    for command in refused:
        assert main(command.split()) == 2, command
        assert capsys.readouterr().out == "", command
        assert list(tmp_path.iterdir()) == [], command
    # the same flags naming a model of the run are taken (the run is played)
    command = "eval --game FrozenLake-v0 --model random --model-option random:x=1 --episodes 2 --out run"
    assert main(command.split()) == 2 and not (tmp_path / "run").exists()
    capsys.readouterr()
    command = "eval --game FrozenLake-v0 --model random --price random=1,2 --episodes 2 --out run --no-progress"
    assert main(command.split()) == 0 and (tmp_path / "run" / "episodes.jsonl").is_file()


def test_model_option_names_are_the_constructors():
    """The options listed for a model kind are those its constructor or bot takes (no list kept by hand)."""
    import dataclasses

    from backends.openai_compat import OpenAIOptions
    from tsmg.apps.model_flags import option_names

    assert option_names("openai:m") == tuple(sorted(field.name for field in dataclasses.fields(OpenAIOptions)))
    assert "threads" in option_names("smollm2") and "dtype" in option_names("hf:X") and option_names("vllm:X") is None
    assert option_names("random") == option_names("fixed:x") == ()
    bots = pytest.importorskip("tsmg.adapters.openspiel_bots")
    assert option_names("openspiel-mcts") == tuple(sorted(bots.MCTSPolicy.DEFAULTS))
    assert option_names("openspiel-br") == tuple(sorted(bots.BestResponsePolicy.DEFAULTS))


def test_an_unexpected_error_is_one_line_too(capsys, monkeypatch):
    def broken(args):
        raise RuntimeError("boom\nsecond line")

    import tsmg.apps.cli

    monkeypatch.setattr(tsmg.apps.cli, "_cmd_games", broken)
    assert main(["games"]) == 1
    expected = "error: unexpected RuntimeError: boom second line (set TSMG_DEBUG=1 to see the traceback)\n"
    assert capsys.readouterr().err == expected


NIM = textwrap.dedent(
    """
    import tsmg
    from tsmg.answers import MoveNames
    from tsmg import RulesGame


    class Nim(RulesGame):
        AGENTS = ("player_0", "player_1")

        def initial_state(self, rng, options):
            return (7, 0)

        def transition(self, state, actions, rng):
            pile, turn = state
            pile -= actions[self.AGENTS[turn]]
            rewards = {self.AGENTS[turn]: 1.0, self.AGENTS[1 - turn]: -1.0} if pile == 0 else {}
            return (pile, 1 - turn), rewards

        def is_terminal(self, state):
            return state[0] == 0

        def current_agents(self, state):
            return () if state[0] == 0 else (self.AGENTS[state[1]],)

        def legal_moves(self, state, agent):
            return [take for take in (1, 2) if take <= state[0]]

        def render(self, state, agent):
            return f"{state[0]} stones left. Take 1 or 2."

        def parse_action(self, agent, text, state):
            return MoveNames({"1": 1, "2": 2}).read(text)

        def action_text(self, agent, action):
            return str(action)


    tsmg.register("my/Nim-v0", Nim, max_steps=20)
    """
)


def test_a_game_registered_in_a_script_reaches_every_command(tmp_path):
    (tmp_path / "my_games.py").write_text(NIM)

    def tsmg_cli(*args, env=None):
        command = [sys.executable, "-m", "tsmg.apps.cli", *args]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)

    result = tsmg_cli("rollout", "my/Nim-v0", "--episodes", "5", "--import", "my_games")
    assert result.returncode == 0 and "my/Nim-v0" in result.stdout, result.stderr
    result = tsmg_cli("--import=my_games.py", "check", "my/Nim-v0")
    assert result.returncode == 0 and result.stdout.startswith("ok   my/Nim-v0"), result.stdout + result.stderr
    result = tsmg_cli("eval", "--game", "my/Nim-v0", "--model", "random", "--episodes", "3", "--no-progress",
                      env={**os.environ, "TSMG_IMPORT": "my_games"})  # fmt: skip
    assert result.returncode == 0 and "3/3 episodes completed" in result.stdout  # self-play: one matchup, result.stderr
    result = tsmg_cli("eval", "--game", "my/Nim-v0")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--import MODULE" in result.stderr
    # docs/define-a-game.md's commands: options, training and serving a script's game (OMP: one thread, 2 cores)
    result = tsmg_cli("--import", "my_games.py", "games", "--options", "my/Nim-v0")
    assert result.returncode == 0 and "  max_steps: int | None = 20  (>= 1)" in result.stdout, result.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = tsmg_cli("--import", "my_games.py", "train", "--game", "my/Nim-v0", "--model", "tiny", "--updates", "1",
                      "--out", "runs/nim-train", env=env)  # fmt: skip
    assert result.returncode == 0 and (tmp_path / "runs" / "nim-train" / "final").is_dir(), result.stderr[-2000:]
    command = [sys.executable, "-m", "tsmg.apps.cli", "--import", "my_games.py", "serve", "--game", "my/Nim-v0"]
    with subprocess.Popen([*command, "--port", "0"], cwd=tmp_path, stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            assert server.stdout.readline().startswith("tsmg serve: 1 game(s) on http://127.0.0.1:")
            assert server.stdout.readline().rstrip().endswith("/my/Nim-v0")
        finally:
            server.terminate()


def test_a_reader_that_stops_early_gets_no_error_message(tmp_path):
    """`tsmg games --json | head -c 100`: the closed pipe ends the command quietly (exit 141, as Unix tools)."""
    command = [sys.executable, "-m", "tsmg.apps.cli", "games", "--json"]  # ~90 KB: more than a pipe's buffer
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.read(100).startswith(b"[")
        process.stdout.close()
        stderr = process.stderr.read().decode()
    assert process.returncode == 141 and stderr == ""
