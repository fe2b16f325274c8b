"""Training stops at a game's own failure: the failure written, a checkpoint saved, resumable once the game is fixed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tsmg
from games.frozen_lake import FrozenLake
from tests.failing_games import OldSignatureLake, WorkerOnlyFailingLake
from tests.small_lake import SMALL_LAKE, make_config
from training.run_log import METRICS_FILE, read_metrics
from training.trainer import TrainHooks, train
from tsmg import GameCodeError
from tsmg.apps.cli import report_error
from tsmg.rollout import GAME_ERRORS_FILE

GAME_ID = "test/SwitchableLake-v0"
REPO = Path(__file__).resolve().parents[2]


class SwitchableLake(FrozenLake):
    """Frozen Lake whose parse_action the test swaps for the old two-argument one in the middle of a run."""


def test_a_game_failure_stops_training_with_a_checkpoint_and_the_run_resumes_once_the_game_is_fixed(
    tiny_model,
    tmp_path,
    capsys,
):
    out = tmp_path / "run"

    def break_the_game(step, metrics):  # as if play reached the game's buggy code only in update 2
        if step == 1:
            SwitchableLake.parse_action = OldSignatureLake.parse_action

    tsmg.register(GAME_ID, SwitchableLake, max_steps=4)
    config = make_config(out, tiny_model, rollout={"game_id": GAME_ID, "game_options": SMALL_LAKE}, run={"updates": 3})
    try:
        with pytest.raises(GameCodeError) as raised:
            train(config, hooks=TrainHooks(on_update=break_the_game))
        error = raised.value
        assert (error.game_id, error.call) == (GAME_ID, "parse_action") and isinstance(error.seed, int)
        (record,) = [json.loads(line) for line in (out / GAME_ERRORS_FILE).read_text().splitlines()]
        assert record["call"] == "parse_action" and record["exception"].startswith("TypeError")
        assert sorted(path.name for path in (out / "checkpoints").iterdir()) == ["step-1"]  # the update that finished
        capsys.readouterr()  # the model loading's progress bars
        assert report_error(error) == 1
        (line,) = capsys.readouterr().err.splitlines()  # what `tsmg train` prints: one sentence
        assert f"the game {GAME_ID} raised in parse_action" in line and "step-1" in line and "--resume" in line

        del SwitchableLake.parse_action  # the game fixed
        resumed = train(config, resume=True)
        assert resumed.resumed_from == 1 and resumed.steps == 3 and resumed.stop_reason == "updates"
        assert [row["step"] for row in read_metrics(out / METRICS_FILE)] == [1, 2, 3]
    finally:
        SwitchableLake.parse_action = FrozenLake.parse_action
        tsmg.registry.unregister(GAME_ID)


def test_a_game_that_raises_from_the_start_is_refused_before_the_model_loads_its_traceback_in_the_run_folder(tmp_path):
    tsmg.register(GAME_ID, OldSignatureLake, max_steps=4)
    try:
        config = make_config(
            tmp_path / "run", tmp_path / "no-model", rollout={"game_id": GAME_ID, "game_options": SMALL_LAKE}
        )
        with pytest.raises(GameCodeError, match="raised in parse_action") as raised:
            train(config)
        assert raised.value.written_to == str(tmp_path / "run" / GAME_ERRORS_FILE)
        assert [path.name for path in (tmp_path / "run").iterdir()] == [GAME_ERRORS_FILE]  # no config, no model
        (record,) = [json.loads(line) for line in (tmp_path / "run" / GAME_ERRORS_FILE).read_text().splitlines()]
        assert record["call"] == "parse_action" and record["traceback"].startswith("Traceback")
    finally:
        tsmg.registry.unregister(GAME_ID)


def test_tsmg_train_of_a_game_that_fails_its_check_says_where_the_traceback_is(tmp_path):
    """What docs/concepts.md promises: one sentence naming the game, the call and the file with the traceback.

    Was: no run folder, and "(set TSMG_DEBUG=1 to see the traceback)".
    """
    out = tmp_path / "run"
    failing_games = str(REPO / "tests" / "register_failing_games.py")
    arguments = ["train", "--game", "test/OldSignatureLake-v0", "--model", "tiny", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "--import", failing_games, *arguments],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()  # one sentence, no traceback
    assert line.startswith("error: the game test/OldSignatureLake-v0 raised in parse_action (seed 0): TypeError")
    assert line.endswith(f"; its traceback is in {out / GAME_ERRORS_FILE}") and "TSMG_DEBUG" not in line
    (record,) = [json.loads(text) for text in (out / GAME_ERRORS_FILE).read_text().splitlines()]
    assert record["game_id"] == "test/OldSignatureLake-v0" and record["call"] == "parse_action"
    assert "TypeError" in record["traceback"] and not (out / "config.yaml").exists()


def test_an_async_workers_game_failure_is_recorded_and_checkpointed_like_a_synchronous_one(
    tiny_model,
    tmp_path,
):
    out = tmp_path / "run"
    tsmg.register(GAME_ID, WorkerOnlyFailingLake, max_steps=4)
    config = make_config(
        out,
        tiny_model,
        rollout={"game_id": GAME_ID, "game_options": SMALL_LAKE},
        run={"updates": 2},
        loop={"mode": "async", "max_staleness": 1},
    )
    try:
        with pytest.raises(GameCodeError) as raised:  # not the worker's RuntimeError with a traceback's text
            train(config)
        error = raised.value
        assert (error.game_id, error.call, type(error.error)) == (GAME_ID, "parse_action", ValueError)
        (record,) = [json.loads(line) for line in (out / GAME_ERRORS_FILE).read_text().splitlines()]
        assert record["exception"] == "ValueError: this lake breaks in the rollout worker"
        assert "failing_games.py" in record["traceback"]  # the worker's own traceback, the game's line included
        assert (out / "checkpoints" / "step-0").is_dir() and "--resume" in error.note
    finally:
        tsmg.registry.unregister(GAME_ID)
