"""Run folders written before issue 25 stay readable by view, export and report.

``tests/data/run-before-records`` was written by main at bb20da2 (episode schema version 3):

* ``train``: two updates of the demo's configuration (seed 3, groups of 2, one group per update,
  ``run.episodes_every: 1``): ``config.yaml``, ``metrics.jsonl``, ``episodes.jsonl`` (the model
  folders and the learning curve left out to keep it small);
* ``eval``: ``tsmg eval --game FrozenLake-v0 --model random --episodes 3 --seed 5`` (plots left out).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tsmg.apps.cli import main
from tsmg.episode import read_episodes

OLD = Path(__file__).resolve().parent / "data" / "run-before-records"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    shutil.copytree(OLD, folder)
    return folder


def test_old_records_are_read_as_version_3():
    """The checked-in records are what today's code read before the bump (and still reads)."""
    for run, count in (("train", 4), ("eval", 3)):
        episodes = list(read_episodes(OLD / run / "episodes.jsonl"))
        assert len(episodes) == count
        assert {episode.schema_version for episode in episodes} == {3}


def test_view_reads_an_old_training_and_eval_folder(tmp_path, capsys):
    runs = _copy(tmp_path)
    out = tmp_path / "view"
    assert main(["view", str(runs / "train"), str(runs / "eval"), "--out", str(out), "--no-plots"]) == 0
    assert "7 episodes" in capsys.readouterr().out
    data = "".join(path.read_text(encoding="utf-8") for path in (out / "data").glob("*.js"))
    for episode_id in ("u1/s737083/g0", "u2/s683297/g1", "FrozenLake-v0|random|2"):
        assert episode_id in data


def test_export_reads_an_old_training_folder(tmp_path, capsys):
    runs = _copy(tmp_path)
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(runs / "train"), "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["episodes"] == 4 and written["rows"] == 32 and written["skipped_failed"] == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    first = rows[0]
    assert first["episode_id"] == "u1/s737083/g0" and first["choices"] == ["left", "down", "right", "up"]
    assert first["completion_ids"] == [326] and first["logprobs"] == [-1.5622867345809937]


def test_report_reads_an_old_eval_folder(capsys):
    assert main(["report", str(OLD / "eval"), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    (row,) = merged["rows"]
    assert merged["pooled_rating"] == []  # one single-seat game: no pairwise result to rate
    assert (row["game"], row["model"], row["episodes"], row["success_rate"]) == ("FrozenLake-v0", "random", 3, 0.0)
