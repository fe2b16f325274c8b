"""Checkpoints (atomic, keep-last-k, RNG and optimizer round trips) and the metrics log's resume truncation."""

import json
import random

import numpy as np
import pytest
import torch

from training.checkpoint import (
    capture_rng_state,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from training.run_log import METRICS_FILE, RunLog, plot_learning_curve, read_metrics


def test_keep_last_k_and_latest(tmp_path):
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, state={"step_note": step}, keep_last=2)
    assert [step for step, _ in list_checkpoints(tmp_path)] == [4, 5]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-5"
    assert load_checkpoint(tmp_path / "step-5").state == {"step_note": 5}


def test_half_written_checkpoints_are_ignored_then_cleaned(tmp_path):
    save_checkpoint(tmp_path, 3, state={})
    # What a kill -9 can leave: a temporary folder (never renamed) ...
    torn = tmp_path / ".tmp-step-4-99999"
    torn.mkdir()
    (torn / "optimizer.pt").write_bytes(b"partial")
    # ... and (written by hand, never by save_checkpoint) a step folder without its state file.
    (tmp_path / "step-9").mkdir()
    assert latest_checkpoint(tmp_path) == tmp_path / "step-3"
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "step-9")
    save_checkpoint(tmp_path, 4, state={})
    assert not torn.exists()
    assert latest_checkpoint(tmp_path) == tmp_path / "step-4"


def test_resaving_a_step_replaces_it(tmp_path):
    save_checkpoint(tmp_path, 2, state={"version": 1})
    save_checkpoint(tmp_path, 2, state={"version": 2})
    assert load_checkpoint(latest_checkpoint(tmp_path)).state == {"version": 2}
    assert [path.name for path in tmp_path.iterdir()] == ["step-2"]


def test_optimizer_scheduler_and_rng_round_trip(tmp_path):
    layer = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    layer(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    scheduler.step()

    def weights_saver(folder):
        torch.save(layer.state_dict(), folder / "weights.pt")

    save_checkpoint(tmp_path, 1, save_weights=weights_saver, optimizer=optimizer, scheduler=scheduler)
    draws = (random.random(), np.random.random(), torch.rand(1).item())
    checkpoint = load_checkpoint(tmp_path / "step-1")
    restore_rng_state(checkpoint.rng)
    assert (random.random(), np.random.random(), torch.rand(1).item()) == draws
    fresh = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=0.1)
    fresh.load_state_dict(checkpoint.optimizer)
    assert fresh.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]
    assert checkpoint.scheduler["last_epoch"] == 1
    assert (checkpoint.path / "weights.pt").is_file()


def test_rng_state_is_json_and_tensor_safe():
    state = capture_rng_state()
    json.dumps({"python": state["python"], "numpy": state["numpy"]})
    assert isinstance(state["torch"], torch.Tensor)


def test_run_log_resume_drops_later_and_torn_lines(tmp_path):
    with RunLog(tmp_path, tensorboard=False) as log:
        for step in range(6):
            log.write(step, {"rollout/success_rate": step / 10, "loss/total": float("nan")})
    with open(tmp_path / METRICS_FILE, "a") as handle:
        handle.write('{"step": 6, "rollout/succ')  # a torn line, as a kill -9 leaves it
    with RunLog(tmp_path, resume_step=3, tensorboard=False) as log:
        log.write(4, {"rollout/success_rate": 0.9})
    rows = read_metrics(tmp_path / METRICS_FILE)
    assert [row["step"] for row in rows] == [0, 1, 2, 3, 4]
    assert rows[1]["loss/total"] is None  # NaN is written as null: the file stays valid JSON
    assert rows[-1]["rollout/success_rate"] == 0.9


def test_tensorboard_events_and_learning_curve(tmp_path):
    pytest.importorskip("tensorboard")
    with RunLog(tmp_path) as log:
        log.write(1, {"rollout/success_rate": 0.5, "eval/success_rate": 0.25})
        log.write(2, {"rollout/success_rate": 0.75})
    assert any((tmp_path / "tensorboard").iterdir())
    pytest.importorskip("matplotlib")
    curve = plot_learning_curve(read_metrics(tmp_path / METRICS_FILE), tmp_path / "curve.png", title="t")
    assert curve is not None and curve.stat().st_size > 1000
