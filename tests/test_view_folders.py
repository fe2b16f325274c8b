"""`tsmg view runs/`: a folder of run folders is each of its runs, as if they had been named one by one."""

from pathlib import Path

from tsmg.apps.cli import main
from tsmg.apps.view.runs import expand_run_paths


def make_runs(root: Path) -> list[Path]:
    """Two eval runs and a rollout folder under ``root``, plus a folder that is no run."""
    first, second, episodes = root / "eval-fl", root / "eval-ttt", root / "rollout"
    assert main(["eval", "--game", "FrozenLake-v0", "--model", "random", "--episodes", "3", "--out", str(first),
                 "--no-progress"]) == 0  # fmt: skip
    assert main(["eval", "--game", "TicTacToe-v0", "--model", "random", "--episodes", "2", "--out", str(second),
                 "--no-progress"]) == 0  # fmt: skip
    assert main(["rollout", "FrozenLake-v0", "--episodes", "2", "--out", str(episodes)]) == 0
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("not a run")
    return [first, second, episodes]


def test_a_folder_of_runs_is_its_runs(tmp_path, capsys):
    runs = make_runs(tmp_path / "runs")
    assert expand_run_paths([tmp_path / "runs"]) == sorted(runs)
    assert expand_run_paths([runs[0]]) == [runs[0]]  # a run folder is itself

    capsys.readouterr()
    assert main(["view", str(tmp_path / "runs"), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"3 runs: {', '.join(str(run) for run in sorted(runs))}"
    assert "7 episodes" in printed  # 3 + 2 + 2: every run's transcripts
    alone = tmp_path / "named"
    assert main(["view", *map(str, sorted(runs)), "--out", str(alone), "--no-plots"]) == 0
    together, named = tmp_path / "runs" / "view" / "index.html", alone / "index.html"
    # The same report as naming the runs one by one (apart from where it was written).
    assert together.read_text().replace(str(tmp_path / "runs" / "view"), "X") == named.read_text().replace(
        str(alone), "X"
    )

    # Built again: the report folder inside runs/ is passed over, not taken for a run.
    capsys.readouterr()
    assert main(["view", str(tmp_path / "runs"), "--no-plots"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("3 runs: ")


def test_a_folder_without_runs_is_refused_in_one_sentence(tmp_path, capsys):
    (tmp_path / "empty" / "inside").mkdir(parents=True)
    assert main(["view", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nor a run folder that does" in err and "or a folder of them" in err
