"""Every code snippet of the README runs as written, and every tsmg command line in it parses."""

import re
import shlex
from pathlib import Path

import pytest

import tsmg
from tsmg.cli import UsageError, _build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def _block(marker):
    [block] = [block for block in BLOCKS if marker in block]
    return block


# Each Python block, found by a line only it holds, and what its output must show.
EXPECTED_OUTPUT = {
    "class GuessNumber": lambda out: 10 < int(out.split()[0]) < 100,  # 1-of-16 in 8 tries: about 40 %
    "class Nim": lambda out: out.splitlines()[:3]
    == [
        "('first', 'second') ('first',) You are second. 14 stones left, not your turn. Take 1, 2 or 3; the last "
        "stone wins.",
        "first only 2 stones are left ('first',)",  # rejected with the reason, and still that seat's turn
        "{'first': 1.0, 'second': -1.0} True",
    ]
    and int(out.splitlines()[3].split()[0]) >= 190,  # the oracle loses only from 12 stones against good luck
    "run_eval(config": lambda out: "{'W': 0, 'D': 0, 'L': 40}" in out
    and "{'wins': 0, 'draws': 0, 'losses': 80, 'forfeits': 80, 'wins_by_forfeit': 0}" in out
    and "'fixed:5': -1.0" in out,
    "to_pettingzoo_parallel(rps)": lambda out: (
        "goal is tile 47" in out
        and "{'player_0': -1.0, 'player_1': 1.0}" in out
        and "\nplayer_0\n" in out
        and "r n b q k b n r 20 legal moves" in out
    ),
    "policy = LAP(model, config)": lambda out: out.endswith("invalid answers from an untrained model\n"),
    'model = load_model("smollm2")': lambda out: True,  # builds both backends (no server is contacted)
    "GameRollout(": lambda out: out.count("reward ") == 2 and "8 episodes of the last step" in out,
    "register_env()": lambda out: out.startswith("4 0.0 False 5\n") and "That answer was invalid" in out,
    "export_run(": lambda out: " rows; " in out and "with a positive advantage" in out,
    "openspiel:goofspiel(num_cards=4": lambda out: (
        "You are player_0 (2 players).\nCurrent point card: 4" in out
        and "Your legal moves: [P0]Bid: 1, [P0]Bid: 2, [P0]Bid: 3, [P0]Bid: 4." in out
        and "expected one of [P1]Bid: 1, [P1]Bid: 2, [P1]Bid: 3, [P1]Bid: 4; got 'bid 4'" in out
        and "OpenSpiel's leduc_poker [card, 2 players]." in out
        and out.endswith("[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]\n")  # MCTS never loses to random play
    ),
}


# Blocks that play against a running `tsmg serve`: tests/serve/test_serve.py runs them against a
# real server (test_readme_examples_run_against_the_server).
RUN_AGAINST_A_SERVER = ("GenericEnvClient", 'rollout("http://')


def test_every_python_block_is_tested():
    assert len(BLOCKS) == len(EXPECTED_OUTPUT) + len(RUN_AGAINST_A_SERVER)
    for marker in (*EXPECTED_OUTPUT, *RUN_AGAINST_A_SERVER):
        _block(marker)


@pytest.mark.parametrize("marker", list(EXPECTED_OUTPUT))
def test_python_block_runs(marker, tmp_path, monkeypatch, capsys):
    if "chess" in _block(marker):
        pytest.importorskip("chess", reason="PettingZoo's chess needs the classic extra: pip install 'tsmg[classic]'")
    if "openspiel:" in _block(marker):
        pytest.importorskip("pyspiel", reason="OpenSpiel's games need the extra: pip install 'tsmg[openspiel]'")
    monkeypatch.chdir(tmp_path)  # run folders land in the test's own folder
    try:
        exec(compile(_block(marker), "README.md", "exec"), {"__name__": "readme"})
    finally:
        for game_id in ("my/GuessNumber-v0", "my/Nim-v0"):
            tsmg.registry.unregister(game_id)
    out = capsys.readouterr().out
    assert EXPECTED_OUTPUT[marker](out), out


def command_lines():
    """Every ``.venv/bin/tsmg ...`` line of the README's shell blocks that names no placeholder."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(".venv/bin/tsmg ") and "..." not in line and "$" not in line:
                lines.append(line)
    return lines


@pytest.mark.parametrize("line", command_lines())
def test_command_lines_parse(line):
    try:
        _build_parser().parse_args(shlex.split(line)[1:])
    except UsageError as error:
        pytest.fail(f"README command `{line}` does not parse: {error}")
