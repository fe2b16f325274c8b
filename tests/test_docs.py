"""Every snippet of the README and of docs/ runs as written, every tsmg command line in them parses.

The README is the front door and docs/ the manual (STYLE.md, "The manual"); this module holds them
to what the code does:

* every ```python block runs here (or, when it needs a running ``tsmg serve``, in
  tests/serve/test_serve.py) and its output is checked;
* every command of every ```bash block is either a ``tsmg`` command, parsed by the real argument
  parser and run for real when it is cheap, or another tool on a short allow-list;
* a quoted output that a short deterministic run reproduces is compared with a fresh run;
* every docs/ page is linked from the README's table of contents and every relative link resolves.
"""

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tsmg
from tsmg.apps.cli import UsageError, _build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def fenced_blocks(*languages: str) -> list[tuple[Path, str]]:
    """Every block in one of ``languages`` of the README and docs/ (``""``: without a language), with its page."""
    return [
        (page, textwrap.dedent(block))  # a block inside a list item is indented
        for page in PAGES
        for found, block in re.findall(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```", page.read_text(), re.DOTALL | re.MULTILINE)
        if found in languages
    ]


PYTHON_BLOCKS = fenced_blocks("python")
SHELL_LANGUAGES = ("bash", "sh", "shell")
# Blocks in these languages are shown, not run: configuration files and quoted output.
SHOWN_LANGUAGES = ("yaml", "toml", "")


def test_every_block_is_in_a_language_the_tests_know():
    for page in PAGES:
        languages = re.findall(r"^[ \t]*```(\w*)\n.*?^[ \t]*```", page.read_text(), re.DOTALL | re.MULTILINE)
        unknown = set(languages) - {"python", *SHELL_LANGUAGES, *SHOWN_LANGUAGES}
        assert not unknown, f"{page.name} has blocks in {unknown}: no test runs them (write python or bash)"


def python_block(marker: str) -> tuple[Path, str]:
    """The one Python block holding ``marker``."""
    [found] = [(page, block) for page, block in PYTHON_BLOCKS if marker in block]
    return found


# Each Python block, found by a line only it holds, and what its output must show.
EXPECTED_OUTPUT = {
    "class CoinGuess": lambda out: (
        re.fullmatch(r"RandomPolicy (\d+) of 100\nOraclePolicy 100 of 100\n", out) is not None
        and 25 < int(out.split()[1]) < 75  # a fair coin, guessed blindly
    ),
    "class GuessNumber": lambda out: (
        10 < int(out.split()[0]) < 100  # 1-of-16 in 8 tries: about 40 %
        # an option set, then a value out of its bounds and a typo refused as the page quotes them
        and out.splitlines()[1:] == ["100", *_quoted_output(ROOT / "docs" / "define-a-game.md", "invalid options")]
    ),
    "REQUIRED = {": lambda out: (
        out == "required: action_text, initial_state, is_terminal, parse_action, render, transition\n"
    ),
    "class Nim": lambda out: (
        out.splitlines()[:3]
        == [
            "('first', 'second') ('first',) You are second. 14 stones left, not your turn. Take 1, 2 or 3; the last "
            "stone wins.",
            "first only 2 stones are left ('first',)",  # rejected with the reason, and still that seat's turn
            "{'first': 1.0, 'second': -1.0} True",
        ]
        and int(out.splitlines()[3].split()[0]) >= 190  # the oracle loses only from 12 stones against good luck
    ),
    "run_eval(config": lambda out: (
        "{'W': 0, 'D': 0, 'L': 40}" in out
        and "{'wins': 0, 'draws': 0, 'losses': 80, 'forfeits': 80, 'wins_by_forfeit': 0}" in out
        and "'fixed:5': -1.0" in out
    ),
    "to_pettingzoo_parallel(rps)": lambda out: (
        "goal is tile 47" in out
        and "{'player_0': -1.0, 'player_1': 1.0}" in out
        and "\nplayer_0\n" in out
        and "r n b q k b n r 20 legal moves" in out
    ),
    "class Vault(RulesGame)": lambda out: (
        out.splitlines()[:2]
        == ["['lookup_code(vault=\"main\")', 'open_vault(code=\"8655\")'] True", "[('m1', 'a1', ['code'])]"]
        and 0 < int(out.splitlines()[2].split()[1]) < 60  # random calls: a look-up first, then the right code
    ),
    "policy = LAP(model, config)": lambda out: out.endswith("invalid answers from an untrained model\n"),
    'model = load_model("smollm2")': lambda out: True,  # builds both backends (no server is contacted)
    "GameRollout(": lambda out: out.count("reward ") == 2 and "8 episodes of the last step" in out,
    "load_environment(": lambda out: (
        out.startswith("8 training rows, 4 evaluation rows\n{'seed': 7, 'agent': 'player_1'}\nYou are playing")
        and "Valid actions: " in out
        and out.endswith(
            "\n5 None\n{'episode_return': 1.0, 'success': 0.0, 'invalid_answers': 0.0, 'return_player_0': 0.0, "
            "'return_player_1': 0.0}\n"
        )
    ),
    "register_env()": lambda out: out.startswith("4 0.0 False 5\n") and "That answer was invalid" in out,
    "export_run(": lambda out: " rows; " in out and "with a positive advantage" in out,
    'get_suite("openspiel-small-v1")': lambda out: (
        out == "openspiel-mcts (simulations=100) 10 30 random\n0.0 0.933\n0.536\n"
    ),
    "openspiel:goofspiel(num_cards=4": lambda out: (
        "You are player_0 (P0 in the state below)" in out
        and "Current point card: 4" in out
        and "\n[P0]Bid: 1\n[P0]Bid: 2\n[P0]Bid: 3\n[P0]Bid: 4\n" in out  # the moves once, one per line
        and "expected one of [P1]Bid: 1, [P1]Bid: 2, [P1]Bid: 3, [P1]Bid: 4; got 'bid 4'" in out
        and "OpenSpiel's leduc_poker [card, 2 players]." in out
        and "[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]\n" in out  # MCTS never loses to random play
        and "player_0 | player_1 is played by OpenSpiel's MCTS bot (50 simulations per move)." in out
        and re.search(r"random play against the best response: -0\.(3[6-9]|4\d|5[0-6]) a hand\n$", out) is not None
    ),
    'main(["exploitability", "--game", "my/Pennies-v0"': lambda out: (
        out.splitlines() == _quoted_output(ROOT / "docs" / "define-a-game.md", "| model | temperature | exploitability")
    ),
    'for view in ("raw", "full")': lambda out: (
        [line for line in out.splitlines() if line.strip()]
        == _quoted_output(ROOT / "docs" / "openspiel.md", "--- OpenSpiel/kuhn_poker-v0, view=raw")
    ),
    "check_vllm_settings(": lambda out: (
        out.splitlines()[0] == "colocate awake -> ok"
        and out.splitlines()[1].startswith("server awake -> tsmg's rollout_func generates in the trainer's process")
        and "set vllm_enable_sleep_mode=False" in out.splitlines()[2]
    ),
    "GameTools(": lambda out: (
        "\n8 episodes recorded, seeds [" in out
        and "-> no make_move call in the answer" in out  # an untrained model writes no call: its answer is invalid
    ),
    'tsmg.make("textarena:KuhnPoker-v0")': lambda out: out.splitlines()
    == [
        "[\"[GAME] ### Starting round 1 out of 3 rounds. Your card is: 'K'\", \"[GAME] Your available actions are: "
        "'[check]', '[bet]'\", 'Your legal moves: [bet], [check].']",
        "expected one of [bet], [check]; got 'I check'",
        "{'valid': True, 'reason': None, 'action': '[check]'}",
        "TextArena rejected the move: Player 0 tried to make a trade offer without having the necessary resources.",
        "[1.0, -1.0, -1.0, 0.0, 0.0, -1.0]",
    ],
}

# Blocks that play against a running `tsmg serve`: tests/serve/test_serve.py runs them against a
# real server (test_docs_examples_run_against_the_server).
RUN_AGAINST_A_SERVER = ("GenericEnvClient", 'rollout("http://')

# The game ids the blocks register, unregistered after each block.
REGISTERED_BY_BLOCKS = ("my/GuessNumber-v0", "my/Nim-v0", "my/CoinGuess-v0", "my/Vault-v0", "my/Pennies-v0")


def test_every_python_block_is_tested():
    markers = (*EXPECTED_OUTPUT, *RUN_AGAINST_A_SERVER)
    for page, block in PYTHON_BLOCKS:
        holds = [marker for marker in markers if marker in block]
        assert len(holds) == 1, f"a Python block of {page.name} holds {holds} of the known markers, not one:\n{block}"
    for marker in markers:
        python_block(marker)


@pytest.mark.parametrize("marker", list(EXPECTED_OUTPUT))
def test_python_block_runs(marker, tmp_path, monkeypatch, capsys):
    page, block = python_block(marker)
    if "chess" in block:
        pytest.importorskip("chess", reason="PettingZoo's chess needs the classic extra: pip install 'tsmg[classic]'")
    if "openspiel:" in block:
        pytest.importorskip("pyspiel", reason="OpenSpiel's games need the extra: pip install 'tsmg[openspiel]'")
    if "textarena:" in block:
        pytest.importorskip("textarena", reason="TextArena's games need the extra: pip install 'tsmg[textarena]'")
    monkeypatch.chdir(tmp_path)  # run folders land in the test's own folder
    try:
        exec(compile(block, str(page.relative_to(ROOT)), "exec"), {"__name__": "docs"})
    finally:
        for game_id in REGISTERED_BY_BLOCKS:
            tsmg.registry.unregister(game_id)
    out = capsys.readouterr().out
    assert EXPECTED_OUTPUT[marker](out), out


# ---------------------------------------------------------------------------------------------
# Shell blocks


# What a shell variable that the block does not assign stands for (a loop variable, a function's
# argument, a value the reader fills in): a value the command accepts.
SHELL_PLACEHOLDERS = {
    "1": "smollm2", "2": "1", "3": "eval-run", "T": "1", "NODE_RANK": "0", "HEAD": "10.0.0.1", "seed": "0",
}  # fmt: skip

# Commands other than tsmg that the docs may show, with what makes one a real command here.
OTHER_TOOLS = {
    "make": lambda words: all(re.search(rf"^{re.escape(target)}:", MAKEFILE, re.MULTILINE) for target in words[1:]),
    "pip": lambda words: words[1] == "install",
    "curl": lambda words: any(word.startswith(("localhost:", "http://")) for word in words),
    "chromium": lambda words: "--headless" in words,
    "bash": lambda words: (ROOT / words[1]).is_file(),
    # python -m server.app: an exported OpenEnv project's start (tests/serve/test_export_project.py runs it).
    "python": lambda words: words[1] == "-c" or (ROOT / words[1]).is_file() or words[1:3] == ["-m", "server.app"],
    "cd": lambda words: len(words) == 2,
    # OpenEnv's CLI on an exported project (tests/serve/test_export_project.py runs both forms).
    "openenv": lambda words: words[1] == "validate",
    # verifiers' evaluation entry point on tsmg's environment (tests/integrations/test_verifiers.py).
    "vf-eval": lambda words: words[1] == "tsmg.apps.integrations.verifiers",
    # TensorBoard on a run's events, W&B's upload of an offline run (tests/test_wandb.py runs it with --dry-run).
    "tensorboard": lambda words: words[1] == "--logdir",
    "wandb": lambda words: words[1] == "sync",
    "torchrun": lambda words: False,  # only as a launcher of tsmg.apps.cli (below)
    "accelerate": lambda words: False,  # only as a launcher of tsmg.apps.cli (below)
}
MAKEFILE = (ROOT / "Makefile").read_text()
SHELL_KEYWORDS = {"do", "done", "then", "fi", "{", "}"}
SEPARATORS = {";", "|", "||", "&&", "&", "(", ")"}


def _logical_lines(block: str):
    """The block's lines with continuations joined and comments dropped."""
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split("  #")[0].strip()
        if line and not line.startswith("#"):
            yield line


def _expand(line: str, variables: dict[str, str]) -> str:
    """``line`` with its ``$NAME`` variables replaced (those the block assigned first)."""

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name in variables:
            return variables[name]
        if name in SHELL_PLACEHOLDERS:
            return SHELL_PLACEHOLDERS[name]
        raise AssertionError(
            f"shell variable ${name} in `{line}` is neither assigned in its block nor a known placeholder"
        )

    return re.sub(r"\$\{?(\w+)\}?|\$(\d)", value, line)


# The ``$(...)`` of the docs' commands, by the word that stands for each until a test runs it.
SUBSTITUTIONS: dict[str, str] = {}


def _mark_command_substitutions(line: str) -> str:
    """``line`` with each ``$(...)`` replaced by a word that ``_run_substitutions`` replaces by what it prints."""
    while "$(" in line:
        start = line.index("$(")
        depth, end = 0, start + 1
        for end in range(start + 1, len(line)):
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            if depth == 0:
                break
        word = f"SUBSTITUTION{len(SUBSTITUTIONS)}"
        SUBSTITUTIONS[word] = line[start + 2 : end]
        line = f"{line[:start]}{word}{line[end + 1 :]}"
    return line


def _run_substitutions(arguments: list[str]) -> list[str]:
    """``arguments`` with each ``$(...)`` run (with this checkout's tsmg) and replaced by the words it prints."""
    expanded = []
    for word in arguments:
        if word not in SUBSTITUTIONS:
            expanded.append(word)
            continue
        inner = re.sub(r"\bpython3? ", f"{shlex.quote(sys.executable)} ", SUBSTITUTIONS[word])
        inner = inner.replace(".venv/bin/tsmg", f"{shlex.quote(sys.executable)} -m tsmg.apps.cli")
        printed = subprocess.run(["bash", "-c", inner], capture_output=True, text=True, check=True, cwd=ROOT).stdout
        expanded.extend(printed.split())
    return expanded


def shell_commands() -> list[tuple[str, str, list[str]]]:
    """Every simple command of every ```bash block: (page, the line it is on, its words)."""
    commands = []
    for page, block in fenced_blocks(*SHELL_LANGUAGES):
        variables: dict[str, str] = {}
        functions = set(re.findall(r"^(\w+)\(\) \{", block, re.MULTILINE))
        for line in _logical_lines(block):
            text = re.sub(r"^\w+\(\) \{", "", line)  # a function's body is checked like any line
            text = _mark_command_substitutions(text)
            lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for word in [*lexer, ";"]:
                if word not in SEPARATORS:
                    words.append(word)
                    continue
                while words and words[0] in SHELL_KEYWORDS:
                    words.pop(0)
                while words and words[-1] in SHELL_KEYWORDS:
                    words.pop()
                while words and re.match(r"^[A-Za-z_]\w*=", words[0]):  # NAME=VALUE, alone or before a command
                    name, assigned = words.pop(0).split("=", 1)
                    if assigned != "...":  # OPENAI_API_KEY=...: the reader's own secret
                        variables[name] = _expand(assigned, variables)
                if words and words[0] not in functions and words[0] != "for":
                    if _tsmg_arguments(words) is not None:  # run with the values the variables hold
                        words = shlex.split(_expand(shlex.join(words), variables).replace("'", ""))
                    commands.append((page.name, line, words))
                words = []
    return commands


def _tsmg_arguments(words: list[str]) -> list[str] | None:
    """The arguments a command hands to tsmg's CLI (its own, or through a launcher), or None."""
    if Path(words[0]).name == "tsmg":
        return words[1:]
    if "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["tsmg.apps.cli"]:
        return words[words.index("-m") + 2 :]
    return None


SHELL_COMMANDS = shell_commands()
TSMG_COMMANDS = [(page, arguments) for page, _, words in SHELL_COMMANDS if (arguments := _tsmg_arguments(words))]


def test_the_shell_blocks_hold_tsmg_commands_from_every_part_of_the_docs():
    assert len(TSMG_COMMANDS) > 60
    assert {page for page, _ in TSMG_COMMANDS} >= {"README.md", "evaluate.md", "training.md", "scale.md", "serve.md"}


@pytest.mark.parametrize(
    ("page", "arguments"), TSMG_COMMANDS, ids=lambda value: value if isinstance(value, str) else " ".join(value)[:80]
)
def test_tsmg_command_parses(page, arguments):
    assert "..." not in arguments, f"{page}: `tsmg {' '.join(arguments)}` holds a placeholder: write a whole command"
    arguments = _run_substitutions(arguments)
    try:
        _build_parser().parse_args(arguments)
    except UsageError as error:
        pytest.fail(f"{page}: `tsmg {shlex.join(arguments)}` does not parse: {error}")


def _subcommand(arguments: list[str]) -> str:
    """The subcommand of a command line, past the options that come before it (``--import MODULE``)."""
    while arguments[0] == "--import":
        arguments = arguments[2:]
    return arguments[0]


@pytest.mark.parametrize("subcommand", sorted({_subcommand(arguments) for _, arguments in TSMG_COMMANDS}))
def test_the_help_of_every_subcommand_the_docs_use(subcommand, capsys):
    with pytest.raises(SystemExit) as exit_:
        _build_parser().parse_args([subcommand, "--help"])
    assert exit_.value.code == 0 and f"usage: tsmg {subcommand}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("page", "words"),
    [(page, words) for page, _, words in SHELL_COMMANDS if _tsmg_arguments(words) is None],
    ids=lambda value: value if isinstance(value, str) else " ".join(value)[:80],
)
def test_other_commands_are_on_the_allow_list(page, words):
    tool = Path(words[0]).name
    assert tool in OTHER_TOOLS, f"{page}: `{shlex.join(words)}`: {tool} is not on the docs' allow-list (OTHER_TOOLS)"
    assert OTHER_TOOLS[tool](words), f"{page}: `{shlex.join(words)}` is not a command this repository can run"


def _tsmg(arguments: str, cwd: Path) -> str:
    return subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", *shlex.split(arguments)],
        capture_output=True, text=True, check=True, cwd=cwd, timeout=120,
    ).stdout  # fmt: skip


def _quoted_output(page: Path, first_line_holds: str) -> list[str]:
    """The lines of the plain ``` block of ``page`` that holds ``first_line_holds``."""
    [block] = [block for found, block in fenced_blocks("") if found == page and first_line_holds in block]
    return [line for line in block.splitlines() if line.strip()]


# The commands of the docs that run in seconds: run for real, in the order written, from one folder.
EXECUTED = [
    "games",
    "algos --json",
    "eval --game TicTacToe-v0 --model random --model oracle --episodes 20 --out runs/first-eval",
    "view runs/first-eval",
    "eval --game FrozenLake-NoSlip-v0 --model openai:gpt-4o-mini --episodes 50 --dry-run",
]


def test_the_cheap_commands_run_and_print_what_the_readme_quotes(tmp_path):
    written = [shlex.join(arguments) for _, arguments in TSMG_COMMANDS]
    outputs = {}
    for command in EXECUTED:
        assert command in written, f"`tsmg {command}` is no longer in the docs: update EXECUTED"
        outputs[command] = _tsmg(command, tmp_path)
    assert "FrozenLake-NoSlip-v0" in outputs["games"] and "ms-grpo" in outputs["algos --json"]
    table = outputs[EXECUTED[2]].splitlines()
    for line in _quoted_output(README, "| TicTacToe-v0 | random | 40 |"):
        assert line in table, f"the README quotes `{line}`; a fresh run prints:\n{outputs[EXECUTED[2]]}"
    assert (tmp_path / "runs/first-eval/view/index.html").is_file()
    assert "estimated tokens at most" in outputs[EXECUTED[4]]


POOLED = [
    "eval --game TicTacToe-v0 --model random --model oracle --model fixed:5 --episodes 20 --out runs/pool-ttt",
    "eval --game KuhnPoker-v0 --model random --model oracle --episodes 20 --out runs/pool-kuhn",
    "report runs/pool-ttt runs/pool-kuhn",
]


def test_the_pooled_rating_example_is_what_a_fresh_run_prints(tmp_path):
    """docs/evaluate.md's pooled rating table: seeded episodes and a seeded bootstrap print it again exactly."""
    written = [shlex.join(arguments) for _, arguments in TSMG_COMMANDS]
    for command in POOLED:
        assert command in written, f"`tsmg {command}` is no longer in docs/evaluate.md: update POOLED"
        printed = _tsmg(command + (" --no-progress" if command.startswith("eval") else ""), tmp_path)
    quoted = _quoted_output(ROOT / "docs" / "evaluate.md", "| model | rating | 95% CI |")
    for line in quoted:
        assert line in printed.splitlines(), f"docs/evaluate.md quotes `{line}`; a fresh run prints:\n{printed}"


def test_the_demo_baselines_block_is_what_a_fresh_run_prints(tmp_path):
    printed = [line for line in _tsmg("demo --no-train", tmp_path).splitlines() if line.strip()]
    quoted = _quoted_output(README, "FrozenLake-NoSlip-v0     random   episodes   500")
    start = printed.index(quoted[0]) if quoted[0] in printed else -1
    assert printed[start : start + len(quoted)] == quoted, "\n".join(printed)


# ---------------------------------------------------------------------------------------------
# The table of contents and the links


def test_the_readme_is_a_front_door():
    assert len(README.read_text().splitlines()) <= 300, "the README is the front door: move the details to docs/"


def test_every_docs_page_is_linked_from_the_readme_table_of_contents():
    contents = README.read_text().split("## Documentation", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", contents))
    assert linked == {page.name for page in PAGES[1:]}


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", page.read_text(), flags=re.DOTALL | re.MULTILINE)
    headings = re.findall(r"^#+ (.*)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_and_image_resolves(page):
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", page.read_text(), flags=re.DOTALL | re.MULTILINE)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        assert path.exists(), f"{page.name} links to {target}, which does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{page.name} links to {target}: no heading of {path.name} has that anchor"
