"""The package as users get it: the wheel, installed with only the base dependencies, runs the CLI.

The wheel is built from a copy of the sources (so the checkout gets no build/ or egg-info), installed
into a fresh virtual environment without system site-packages, and run from a folder outside the
repository with no PYTHONPATH: a module, a data file (games/wordle_words.txt) or a static asset
(tsmg/apps/view/static/*) left out of the wheel shows up here and nowhere else. Dependencies come from
pip's configured index and cache; no extra is installed, so the base install is what is tested.
About 20 s of CPU (most of it pip installing numpy and pydantic); on the shared 2-core machine
(2026-12-02) 37 s of wall time at a load average of about 5, 2 min 53 s at about 10. The wheel is
built without build isolation, with the setuptools of the test environment (the dev extra lists
it).
"""

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["tsmg", "games", "backends", "training"]
STATIC = ROOT / "tsmg" / "apps" / "view" / "static"


def _run(command: list[str], cwd: Path, timeout: float = 300) -> str:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a fresh virtual environment holding the wheel and the base dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(
        [*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(work / "dist"), str(source)],
        work,
    )
    wheels = list((work / "dist").glob("tsmg-*.whl"))
    assert len(wheels) == 1, wheels
    environment = work / "env"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(environment)
    _run([*pip, "--python", str(environment / "bin" / "python"), "install", "--quiet", str(wheels[0])], work)
    return environment / "bin"


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    code = "import tsmg, games, sys; print(tsmg.__file__); print(games.__file__); print('torch' in sys.modules)"
    tsmg_file, games_file, torch_loaded = _run([str(installed / "python"), "-c", code], tmp_path).split()
    site = installed.parent / "lib"
    assert Path(tsmg_file).is_relative_to(site) and Path(games_file).is_relative_to(site)
    assert torch_loaded == "False"


def test_tsmg_games_lists_the_catalog_and_names_missing_extras(installed, tmp_path):
    listing = _run([str(installed / "tsmg"), "games"], tmp_path)
    lines = {line.split()[0]: line for line in listing.splitlines()[1:]}
    assert "FrozenLake-NoSlip-v0" in lines and "TicTacToe-v0" in lines
    # Wordle reads games/wordle_words.txt when it is made: the data file shipped.
    assert "Wordle-v0" in lines and "missing dependency" not in lines["Wordle-v0"]
    # PettingZoo's tic-tac-toe needs pygame (the classic extra): listed, with what to install.
    assert "missing dependency" in lines["TicTacToe-PZ-v0"] and "tsmg[classic]" in lines["TicTacToe-PZ-v0"]


def test_tsmg_demo_without_training_runs(installed, tmp_path):
    output = _run([str(installed / "tsmg"), "demo", "--no-train"], tmp_path)
    rows = [line.split() for line in output.splitlines() if line.startswith("FrozenLake-NoSlip-v0")]
    assert [row[1] for row in rows] == ["random", "oracle"]
    assert rows[1][5] == "100.0%"  # the oracle reaches the goal on every map


def test_tsmg_view_copies_its_static_files(installed, tmp_path):
    _run([str(installed / "tsmg"), "rollout", "FrozenLake-NoSlip-v0", "--episodes", "3", "--out", "run"], tmp_path)
    output = _run([str(installed / "tsmg"), "view", "run", "--out", "report"], tmp_path)
    assert output.startswith("3 episodes in 1 data files")
    # Plots need matplotlib (the eval extra): without it the report says so and is built anyway.
    assert "matplotlib is not installed: no plots" in (tmp_path / "report" / "index.html").read_text()
    for asset in sorted(STATIC.iterdir()):
        assert (tmp_path / "report" / "assets" / asset.name).read_bytes() == asset.read_bytes(), asset.name


def test_the_installed_metadata_fills_the_kernels_registries(installed, tmp_path):
    # No checkout beside the installed package: the registries are filled from the wheel's entry points alone.
    code = (
        "from tsmg import loading, registry, policies\n"
        "for group in ('tsmg.namespaces', 'tsmg.players', 'tsmg.models'):\n"
        "    print(group, *sorted(entry.name for entry in loading.plugin_entries(group)))\n"
        "print(registry.namespace_of('https://host/Game-v0'), policies._registered('hf')[0])\n"
        "from backends.tiny import default_corpus\n"  # the backends' one registry, filled by training
        "print('tsmg.tiny_corpus', len(default_corpus()))\n"
    )
    lines = _run([str(installed / "python"), "-c", code], tmp_path).splitlines()
    assert lines[0] == "tsmg.namespaces http https openspiel textarena ws wss"
    assert lines[1] == "tsmg.players openspiel-br openspiel-cfr openspiel-mcts"
    assert lines[2] == "tsmg.models hf openai smollm2 tiny vllm"
    assert lines[3] == "https: model"
    assert lines[4] == "tsmg.tiny_corpus 285"  # the texts a tiny tokenizer is trained on (training.tiny_corpus)
