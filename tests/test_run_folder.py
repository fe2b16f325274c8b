"""The run folder has one home (tsmg.run_folder): its names, resume truncation and readers."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tsmg.episode import Episode, read_episodes, write_episodes
from tsmg.run_folder import (
    EPISODES_FILE,
    METRICS_FILE,
    checkpoint_name,
    checkpoint_step,
    read_metrics,
    repair_jsonl,
    training_run_of,
    truncate_episodes,
    truncate_metrics,
    update_of,
)

ROOT = Path(__file__).resolve().parents[1]
#: The run folder's own file names: no module but tsmg/run_folder.py spells them.
RUN_FOLDER_NAMES = {
    "episodes.jsonl",
    "metrics.jsonl",
    "config.yaml",
    "summary.json",
    "failures.jsonl",
    "game_errors.jsonl",
    "learning_curve.png",
    "checkpoints",
    "base_model",
    "state.json",
    "report.md",
    "tensorboard",
}


def test_no_module_but_the_kernel_names_the_run_folder_files():
    spelled = []
    for package in ("tsmg", "training", "backends", "games"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "tsmg" / "run_folder.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in RUN_FOLDER_NAMES:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert not spelled, "name these through tsmg.run_folder: " + ", ".join(spelled)


def test_the_old_homes_still_export_the_names():
    """Public imports keep working: the training modules re-export the kernel's names."""
    import tsmg.run_folder as home
    from training import checkpoint, run_folder, run_log, setup

    assert run_folder.EPISODES_FILE is home.EPISODES_FILE and run_folder.CONFIG_FILE is home.CONFIG_FILE
    assert run_folder.truncate_episodes is home.truncate_episodes
    assert run_log.METRICS_FILE is home.METRICS_FILE and run_log.read_metrics is home.read_metrics
    assert run_log.truncate_metrics is home.truncate_metrics and run_log.CURVE_FILE is home.CURVE_FILE
    assert checkpoint.FINAL_DIR is home.FINAL_DIR and checkpoint.STATE_FILE is home.STATE_FILE
    assert setup.BASE_MODEL_DIR is home.BASE_MODEL_DIR
    from tsmg.apps.evaluation.runner import repair_jsonl as runner_repair

    assert runner_repair is repair_jsonl


def test_the_run_folder_is_kernel_and_imports_nothing_above_it():
    above = "{'training', 'backends', 'games', 'torch'}"
    code = f"import sys, tsmg.run_folder; print(sorted({{m.split('.')[0] for m in sys.modules}} & {above}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def test_update_of_reads_refill_rounds():
    """Dynamic sampling's refill episodes (``u{N}r{K}/``) belong to update N (main read them as no update)."""
    from tsmg.apps.view.runs import update_of as view_update_of

    assert [update_of(i) for i in ("u3/s1/g0", "u12r2/s5/g1", "u3/s1/spine", "FrozenLake-v0|random|0")] == [
        3,
        12,
        3,
        None,
    ]
    assert view_update_of({}, "u4r1/s9/g0") == 4


def _episode(episode_id: str) -> Episode:
    return Episode(episode_id=episode_id, game_id="FrozenLake-v0", agents=["player"], policies={"player": "random"})


def test_resume_truncation_keeps_the_checkpoints_updates_refills_included(tmp_path):
    """Resuming after update 2 keeps updates 1 and 2 (their refills too) and drops 3 (main raised on a refill id)."""
    path = tmp_path / EPISODES_FILE
    ids = ["u1/s1/g0", "u2/s2/g0", "u2r1/s3/g0", "u3/s4/g0", "u3r1/s5/g0"]
    write_episodes(path, [_episode(i) for i in ids])
    assert truncate_episodes(path, 2) == 2
    assert [episode.episode_id for episode in read_episodes(path)] == ids[:3]
    assert truncate_episodes(path, -1) == 3 and path.read_text() == ""


def test_metrics_truncation_and_torn_lines(tmp_path):
    path = tmp_path / METRICS_FILE
    path.write_text("".join(json.dumps({"step": step, "x": step / 2}) + "\n" for step in range(4)) + '{"step": 4, "x"')
    assert [row["step"] for row in read_metrics(path)] == [0, 1, 2, 3]
    assert truncate_metrics(path, 1) == 2
    assert path.read_text() == '{"step": 0, "x": 0.0}\n{"step": 1, "x": 0.5}\n'
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"a": 1}\n{"a"')
    assert repair_jsonl(torn) == 4 and torn.read_text() == '{"a": 1}\n'
    assert repair_jsonl(torn) == 0 and repair_jsonl(tmp_path / "missing.jsonl") == 0


def test_checkpoint_names_and_the_run_a_model_belongs_to(tmp_path):
    assert checkpoint_name(7) == "step-7" and checkpoint_step("step-7") == 7
    assert checkpoint_step("step-x") is None and checkpoint_step(".tmp-step-7") is None
    run = tmp_path / "run"
    (run / "checkpoints" / "step-3").mkdir(parents=True)
    (run / "final").mkdir()
    assert training_run_of(run / "final") is None  # no config.yaml: not a training run
    (run / "config.yaml").write_text("rollout: {}\n")
    assert training_run_of(run / "final") == run and training_run_of(run / "checkpoints" / "step-3") == run
    assert training_run_of(run / "base_model") == run  # the model it started from: its "before"
    assert training_run_of(run / "checkpoints" / "other") is None and training_run_of(tmp_path / "model") is None
