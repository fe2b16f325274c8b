"""Weights & Biases logging (``run.wandb``): real wandb, offline, read back from the files it wrote.

A 2-update run of the tiny model logs to W&B in offline mode (nothing contacts the network: the
mode is offline and WANDB_MODE says so too); the test reads the offline run's ``.wandb`` file (a
LevelDB-style log of W&B's protobuf records, the file ``wandb sync`` uploads) and checks that every
metrics.jsonl row is there at its step with the same values, and the configuration as W&B's config.

Mutations that make it fail (tried): logging at ``step + 1``; dropping a key from the row W&B gets;
logging the raw values (a NaN or None goes to W&B where metrics.jsonl holds null); not passing the
config; a new W&B run id on resume;
``wandb.init`` without ``dir`` (the files leave the run folder); the CLI's missing-wandb check removed
(the run folder is written before the missing wandb is found).
"""

import json
import math
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.small_lake import small_lake_data
from tsmg.apps.cli import main

pytest.importorskip("wandb")

# The .wandb file: a 7-byte header (":W&B", a magic number, a version), then LevelDB log records in
# 32 KiB blocks: each chunk has a 7-byte header (CRC, length, type); a record may span blocks.
_BLOCK, _CHUNK_HEADER = 32768, 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> list:
    """Every record of an offline W&B run's ``.wandb`` file, as W&B's protobuf ``Record`` messages."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    records, pending, position = [], b"", 7
    while position + _CHUNK_HEADER <= len(data):
        if _BLOCK - position % _BLOCK < _CHUNK_HEADER:  # a block's tail too short for a header is padding
            position += _BLOCK - position % _BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position : position + _CHUNK_HEADER])
        chunk = data[position + _CHUNK_HEADER : position + _CHUNK_HEADER + length]
        position += _CHUNK_HEADER + length
        if kind == _FULL:
            records.append(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            records.append(pending + chunk)
        else:  # zero padding at the end of a block
            assert kind == 0 and length == 0, f"unknown chunk type {kind} at byte {position} of {path}"
    parsed = []
    for raw in records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        parsed.append(record)
    return parsed


def logged_history(records) -> dict[int, dict[str, float]]:
    """W&B's history rows by step, without its own ``_step``/``_runtime``/``_timestamp`` keys."""
    rows: dict[int, dict[str, float]] = {}
    for record in records:
        if record.WhichOneof("record_type") != "history":
            continue
        items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = int(items.pop("_step"))
        assert step not in rows, f"step {step} logged twice"
        rows[step] = {key: value for key, value in items.items() if not key.startswith("_")}
    return rows


def logged_config(records) -> dict:
    """W&B's config of the run: the run record's, then the updates of any later config record."""
    config = {}
    for record in records:
        kind = record.WhichOneof("record_type")
        updates = record.run.config.update if kind == "run" else record.config.update if kind == "config" else []
        for item in updates:
            config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return config


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """W&B kept offline and away from the home folder (its settings and caches go to tmp_path)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def write_config(tmp_path: Path, model_dir: Path, out: Path) -> Path:
    """2 updates on a 2x2 lake, evaluated before and after each (step 0 is the evaluation before training)."""
    config = small_lake_data(
        out,
        model_dir,
        rollout={"groups_per_update": 2},
        optim={"micro_batch_size": 8},
        run={
            "updates": 2,
            "eval_every": 1,
            "eval_episodes": 2,
            "wandb": {"enabled": True, "project": "tsmg-test", "tags": ["test"]},
        },
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_run_logs_every_metrics_row_and_its_config_to_wandb(tiny_model, tmp_path, offline_wandb, capsys):
    out = tmp_path / "run"
    assert main(["train", "--config", str(write_config(tmp_path, tiny_model, out)), "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"W&B (offline): upload with wandb sync {out / 'wandb'}/offline-run-*"

    runs = sorted((out / "wandb").glob("offline-run-*"))  # what the printed command uploads: one run
    assert len(runs) == 1, runs
    wandb_cli = Path(sys.executable).parent / "wandb"
    sync = printed[-1].split("upload with ", 1)[1].replace("wandb sync", f"{wandb_cli} sync --dry-run")
    shown = subprocess.run(["bash", "-c", sync], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "Would sync 1 run(s)" in shown.stdout + shown.stderr, shown
    (run_file,) = runs[0].glob("run-*.wandb")
    assert run_file.name == f"run-{(out / 'wandb' / 'run-id').read_text().strip()}.wandb"
    records = wandb_records(run_file)

    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in metrics] == [0, 1, 2]
    history = logged_history(records)
    assert sorted(history) == [0, 1, 2]
    for row in metrics:
        expected = {
            key: value
            for key, value in row.items()
            if key != "step" and isinstance(value, int | float) and math.isfinite(value)
        }
        assert len(expected) > (3 if row["step"] == 0 else 20), row  # the rows hold what training measures
        assert history[row["step"]] == pytest.approx(expected, rel=1e-12, abs=0), row["step"]

    stored = yaml.safe_load((out / "config.yaml").read_text())
    config = logged_config(records)
    assert {key: config[key] for key in stored} == stored
    assert config["run"]["wandb"]["project"] == "tsmg-test"
    run_record = next(record.run for record in records if record.WhichOneof("record_type") == "run")
    assert (run_record.project, run_record.display_name, list(run_record.tags)) == ("tsmg-test", "run", ["test"])


def test_non_finite_values_stay_out_and_a_resumed_log_continues_the_same_wandb_run(tmp_path, offline_wandb):
    from training.config import WandbConfig
    from training.run_log import RunLog

    settings = WandbConfig(enabled=True, name="direct")
    with RunLog(tmp_path, tensorboard=False, wandb=settings, config={"a": 1}) as log:
        log.write(1, {"loss/policy": float("nan"), "rollout/success_rate": 0.5, "sampler/samples": 3, "x": None})
        log.write(2, {"loss/policy": 0.25})
    time.sleep(1.1)  # W&B names a session's folder by the second it began: two in one second would share one
    with RunLog(tmp_path, resume_step=1, tensorboard=False, wandb=settings, config={"a": 1}) as log:
        log.write(2, {"loss/policy": 0.75})

    first, second = sorted((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"), key=lambda path: path.parent.name)
    assert first.name == second.name  # one W&B run id: `wandb sync` puts both sessions in one run
    assert logged_history(wandb_records(first)) == {
        1: {"rollout/success_rate": 0.5, "sampler/samples": 3},
        2: {"loss/policy": 0.25},
    }
    assert logged_history(wandb_records(second)) == {2: {"loss/policy": 0.75}}
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_enabled_without_wandb_installed_is_one_sentence_and_writes_nothing(tiny_model, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # what importlib sees when wandb is not installed
    out = tmp_path / "run"
    assert main(["train", "--config", str(write_config(tmp_path, tiny_model, out))]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "error: run.wandb.enabled is set but wandb is not installed: pip install 'tsmg[wandb]' "
        "(or set run.wandb.enabled to false)\n"
    )
    assert not out.exists()


def test_importing_tsmg_and_training_does_not_import_wandb():
    code = "import sys, tsmg, training.config, training.run_log, training.trainer; print('wandb' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "False"
