"""The command line as a user runs it (a real subprocess for the console script)."""

import json
import subprocess
import sys

import tsmg
from tsmg.apps.cli import main


def run_cli(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_games_json_lists_ids_and_agents(capsys):
    assert main(["games", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    frozen = next(item for item in items if item["id"] == "FrozenLake-NoSlip-v0")
    assert frozen["num_agents"] == 1 and frozen["turn_based"] is True and frozen["description"]
    assert all({"id", "num_agents", "turn_based", "description"} <= set(item) for item in items)


def test_check_all_passes(capsys, monkeypatch):
    # The adapters' ids are checked by their own tests: TextArena's 178 in tests/test_adapters_textarena.py
    # on fewer rounds (each answer there is tried on a copy of the environment: the default settings
    # would take minutes), OpenSpiel's in tests/test_adapters_openspiel.py (here they took 40 of this
    # test's 45 s).
    every, elsewhere = tsmg.specs, ("TextArena/", "OpenSpiel/")
    monkeypatch.setattr(tsmg, "specs", lambda: (spec for spec in every() if not spec.id.startswith(elsewhere)))
    assert main(["check", "--all", "--nonsense-seeds", "10"]) == 0  # tests/test_catalog.py checks with 100
    assert "FAIL" not in capsys.readouterr().out


def test_check_unknown_game_is_a_clear_error(capsys):
    assert main(["check", "FrozenLak-v0"]) == 2
    assert "Did you mean: FrozenLake-v0" in capsys.readouterr().err


def test_rollout_writes_episodes_and_summary(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(["rollout", "FrozenLake-NoSlip-v0", "--policy", "oracle", "--episodes", "20", "--out", str(out), "--json"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 20
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 20
    assert json.loads((out / "summary.json").read_text())["episodes"] == 20


def test_bad_option_is_reported_with_the_field(capsys):
    assert main(["rollout", "FrozenLake-v0", "-o", "map_name=3x3"]) == 2
    assert "map_name" in capsys.readouterr().err


def test_play_in_the_terminal():
    result = run_cli("play", "FrozenLake-v0", stdin="fly\ndown\ndown\nright\nright\ndown\nright\n")
    assert result.returncode == 0, result.stderr
    assert "INVALID (expected one of left, down, right, up; got 'fly')" in result.stdout
    assert "player: return +1" in result.stdout and "success" in result.stdout


def test_demo_prints_random_and_oracle():
    result = run_cli("demo", "--no-train", "--episodes", "50")
    assert result.returncode == 0, result.stderr
    assert "random" in result.stdout and "oracle" in result.stdout and "success 100.0%" in result.stdout
