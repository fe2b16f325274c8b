"""The README's example code runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_define_and_register_example_runs(capsys):
    block = next(b for b in python_blocks() if "GuessNumber" in b)
    import tsmg

    try:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    finally:
        tsmg.registry.unregister("my/GuessNumber-v0")
    found = int(capsys.readouterr().out.split()[0])
    assert 10 < found < 100  # random guessing finds 1-of-16 within 8 tries about 40% of the time


def test_adapter_examples_run(capsys):
    block = next(b for b in python_blocks() if "to_pettingzoo_parallel" in b)
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "goal is tile 47" in out and "{'player_0': -1.0, 'player_1': 1.0}" in out
