"""Every ``tsmg`` command explains itself: description, examples that parse, each option's default.

The tests walk the real parser (every sub-command the packages register), so a command or option
added without its help fails here. The deprecated spellings (the positional game, ``rollout
--policy``) parse to the same namespace as ``--game ID`` and ``--model SPEC``.
"""

import argparse
import json
import shlex

import pytest

from tsmg.apps.cli import _build_parser, _take_imports, main
from tsmg.apps.cli_parser import UsageError, states_default

PARSER = _build_parser()
COMMANDS: dict[str, argparse.ArgumentParser] = next(
    action.choices for action in PARSER._actions if isinstance(action, argparse._SubParsersAction)
)
# Options whose help need not state a default: argparse's own (help, version) print and exit.
NO_DEFAULT = {"-h", "--help", "--version"}


def parse(line: str) -> argparse.Namespace:
    """A ``tsmg …`` line parsed by the real parser as ``tsmg.apps.cli.main`` parses it (no unknown words)."""
    words, _ = _take_imports(shlex.split(line, comments=True)[1:])
    args, unknown = _build_parser().parse_known_args(words)
    assert not unknown, f"{line}: unrecognized {unknown}"
    return args


def test_every_registered_command_is_walked():
    expected = {"games", "check", "play", "rollout", "eval", "exploitability", "report", "serve", "view"}
    expected |= {"prompt"}
    expected |= {"train", "algos", "sft", "demo", "export"}
    assert set(COMMANDS) == expected


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_has_a_description_and_examples_that_parse(name):
    command = COMMANDS[name]
    assert command.description and len(command.description) > 20, f"tsmg {name}: no description"
    lines = [line.strip() for line in (command.epilog or "").splitlines()]
    examples = [line for line in lines if line.startswith("tsmg ")]
    own = [line for line in examples if parse(line).handler is command.get_default("handler")]
    assert own, f"tsmg {name} --help shows no example of tsmg {name}"
    assert f"tsmg {name}" in command.format_help() and "examples:" in command.format_help()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_says_its_default_or_what_it_switches(name):
    command = COMMANDS[name]
    formatter = command._get_formatter()
    for action in command._actions:
        label = f"tsmg {name} {'/'.join(action.option_strings) or action.metavar or action.dest}"
        assert action.help, f"{label}: no help text"
        if not action.option_strings or set(action.option_strings) & NO_DEFAULT:
            continue
        text = formatter._expand_help(action)  # the help as --help prints it, default added
        assert "default: None" not in text, f"{label}: 'None' says nothing: write what happens without it"
        switch = action.nargs == 0  # store_true and friends: the help says what it switches
        required = action.required or text.endswith(("(required)", "; required)"))
        assert switch or required or states_default(text), f"{label}: the help does not state the default: {text!r}"


def test_the_top_level_help_lists_every_command_with_a_line():
    text = PARSER.format_help()
    for name in COMMANDS:
        assert f"    {name} " in text
    helps = {
        choice.dest: choice.help
        for action in PARSER._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
    }
    assert set(helps) == set(COMMANDS) and all(helps.values())


ALIASES = [
    ("rollout FrozenLake-v0 --policy oracle --episodes 3", "rollout --game FrozenLake-v0 --model oracle --episodes 3"),
    ("rollout FrozenLake-v0", "rollout --game FrozenLake-v0"),
    ("play KuhnPoker-v0 --agent player_0", "play --game KuhnPoker-v0 --agent player_0"),
    ("check FrozenLake-v0 KuhnPoker-v0", "check --game FrozenLake-v0 --game KuhnPoker-v0"),
    ("serve FrozenLake-v0 KuhnPoker-v0 --port 0", "serve --game FrozenLake-v0 --game KuhnPoker-v0 --port 0"),
]


@pytest.mark.parametrize(("old", "new"), ALIASES)
def test_deprecated_spellings_parse_to_the_same_namespace(old, new):
    assert parse(f"tsmg {old}") == parse(f"tsmg {new}")
    assert not hasattr(parse(f"tsmg {old}"), "deprecated_game")


def test_the_resolved_values():
    assert parse("tsmg rollout --game FrozenLake-v0").model == "random"  # --model's default
    assert parse("tsmg rollout FrozenLake-v0 --policy fixed:down").model == "fixed:down"
    assert parse("tsmg check --all").game == []
    assert parse("tsmg serve --game FrozenLake-v0").game == ["FrozenLake-v0"]


@pytest.mark.parametrize(
    ("name", "deprecated"),
    [("rollout", "--policy"), ("rollout", "GAME"), ("play", "GAME"), ("check", "GAME"), ("serve", "GAME")],
)
def test_deprecated_spellings_are_marked_in_help(name, deprecated):
    action = next(
        action for action in COMMANDS[name]._actions if deprecated in (*action.option_strings, action.metavar)
    )
    assert action.help.startswith("deprecated"), action.help


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("rollout FrozenLake-v0 --game FrozenLake-v0", "--game and the deprecated positional GAME"),
        ("rollout --game FrozenLake-v0 --policy oracle --model random", "--model and the deprecated --policy"),
        ("serve FrozenLake-v0 --game KuhnPoker-v0", "give only --game"),
        ("rollout --episodes 3", "the following arguments are required: --game"),
        ("play", "the following arguments are required: --game"),
        ("serve --port 0", "the following arguments are required: --game"),
    ],
)
def test_both_forms_or_neither_is_one_usage_sentence(command, message, capsys):
    with pytest.raises(UsageError, match="see: tsmg "):
        _build_parser().parse_known_args(command.split())
    assert main(command.split()) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_the_new_forms_run(capsys):
    assert main(["rollout", "--game", "FrozenLake-NoSlip-v0", "--model", "oracle", "--episodes", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["policy"] == "oracle" and summary["success_rate"] == 1.0
    assert main(["check", "--game", "FrozenLake-v0", "--nonsense-seeds", "5", "--json"]) == 0
    assert [result["id"] for result in json.loads(capsys.readouterr().out)] == ["FrozenLake-v0"]
