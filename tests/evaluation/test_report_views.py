"""`tsmg report` refuses to put side by side runs that played one game under different text views."""

import json

import pytest

from tsmg.apps.cli import main
from tsmg.apps.evaluation import EvalConfig, run_eval
from tsmg.apps.evaluation.report import check_one_view_per_game, played_views


def _run(folder, view):
    options = {"OpenSpiel/kuhn_poker-v0": {"view": view}} if view else {}
    config = EvalConfig(games=["OpenSpiel/kuhn_poker-v0"], models=["random"], episodes=2, game_options=options)
    assert run_eval(config, folder, progress=False).ok
    return folder


def test_runs_of_two_views_are_not_pooled(tmp_path, capsys):
    full, raw, default = _run(tmp_path / "full", "full"), _run(tmp_path / "raw", "raw"), _run(tmp_path / "d", None)
    assert played_views(full) == played_views(default) == {"OpenSpiel/kuhn_poker-v0": "full"}  # recorded at its default
    assert played_views(raw) == {"OpenSpiel/kuhn_poker-v0": "raw"}
    check_one_view_per_game([full, default])
    with pytest.raises(ValueError, match=r"different text views \(full in full, raw in raw\)"):
        check_one_view_per_game([full, raw])
    assert main(["report", str(full), str(raw)]) != 0
    assert "report the runs of each view separately" in capsys.readouterr().err
    assert main(["report", str(full), str(default), "--json"]) == 0


def test_an_episode_recorded_before_views_read_the_raw_text(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    lines = [{"game_id": "OpenSpiel/kuhn_poker-v0", "game_options": {}}, {"game_id": "KuhnPoker-v0"}]
    (folder / "episodes.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert played_views(folder) == {"OpenSpiel/kuhn_poker-v0": "raw", "KuhnPoker-v0": "full"}
