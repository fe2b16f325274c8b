"""Nothing breaks for existing users: a fixed-seed training run and evaluation write the same records as before.

The reference (``tests/data/identical-runs.json``) was written by ``python scripts/identical_runs.py
--write`` with the code before issue 25's restructuring (main at bb20da2). What is compared: the
sha256 of each run's ``episodes.jsonl`` and ``metrics.jsonl`` after :func:`identical_runs.normalise`
(wall times, the scratch folder's path and the episode schema version left out; nothing else).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("identical_runs", ROOT / "scripts" / "identical_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["identical_runs"] = module
    spec.loader.exec_module(module)
    return module


def test_demo_training_and_eval_write_byte_identical_records(tmp_path, monkeypatch):
    """Five demo updates and a 16-episode eval of their model: every record as the reference has it."""
    pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    script = _load_script()
    reference = json.loads(script.REFERENCE.read_text(encoding="utf-8"))
    found = script.digests(tmp_path)
    assert sorted(found) == sorted(reference)
    for name, expected in reference.items():
        assert found[name]["lines"] == expected["lines"], name
        assert found[name]["first_line"] == expected["first_line"], name
        assert found[name]["sha256"] == expected["sha256"], name


def test_normalise_keeps_everything_but_wall_times_paths_and_the_version(tmp_path):
    """The comparison would see any other change: only the listed fields are left out."""
    script = _load_script()
    episode = {
        "episode_id": f"x|hf:{tmp_path}/m|0",
        "latency_s": 1.5,
        "schema_version": 3,
        "steps": [{"latency_s": 0.1, "logprobs": [-0.5]}],
    }
    text = script.normalise("episodes.jsonl", json.dumps(episode) + "\n", tmp_path)
    assert json.loads(text) == {"episode_id": "x|hf:$RUNS/m|0", "steps": [{"logprobs": [-0.5]}]}
    changed = {**episode, "steps": [{"latency_s": 0.1, "logprobs": [-0.25]}]}
    assert script.normalise("episodes.jsonl", json.dumps(changed) + "\n", tmp_path) != text
    metrics = {"step": 1, "time/update_s": 2.0, "loss/value": 0.125}
    assert json.loads(script.normalise("metrics.jsonl", json.dumps(metrics), tmp_path)) == {
        "step": 1,
        "loss/value": 0.125,
    }
