"""The trainer tests' small run: a 2x2 Frozen Lake, the demo's tiny model, a few quick updates.

One home for what the training tests, the vLLM scripts (separate processes, where a pytest fixture
cannot reach: they import this module, ``PYTHONPATH`` being the checkout) and ``bench/fsdp_memory.py``
train on. On the 2x2 lake random play reaches the goal about half the time, so every update
carries signal; the observation is the grid alone and the answer one of the four moves
(``choice``), so the tiny model's vocabulary covers every prompt.

The ``tiny_model`` fixture (``tests/conftest.py``) builds :func:`build_lake_model` once a session.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The checkout: the working folder of the training subprocesses.
REPO = Path(__file__).resolve().parents[1]

#: A 2x2 lake: random play reaches the goal about half the time, so every update carries signal.
SMALL_LAKE: dict[str, Any] = {"desc": ["SF", "FG"], "max_steps": 4}

#: The prompt is the observation alone; the answer is one of the legal moves, read whole.
CHOICE_LAP: dict[str, Any] = {
    "template": {"system": None, "user": "{observation}"},
    "action_format": {"kind": "choice"},
}

_BASE: dict[str, dict[str, Any]] = {
    "rollout": {
        "game_id": "FrozenLake-v0",
        "game_options": SMALL_LAKE,
        "group_size": 4,
        "groups_per_update": 4,
        "observation_lines": "[_OPG]+",
        "lap": CHOICE_LAP,
    },
    "model": {"finetune": "full"},
    "optim": {"lr": 1e-3, "micro_batch_size": 16, "grad_accumulation": 1},
    "run": {"updates": 4, "threads": 1, "tensorboard": False},
}


def small_lake_data(out_dir: str | Path, model_dir: str | Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """The small run's training configuration as a plain mapping (for YAML files and other processes).

    ``model_dir`` is loaded as ``hf:model_dir`` (a section ``model={"spec": "vllm:..."}`` says
    otherwise); each keyword names a section whose fields replace the defaults' one by one
    (``rollout={"game_options": {}}``: the standard 4x4 map).
    """
    data = copy.deepcopy(_BASE)
    data["model"]["spec"] = f"hf:{model_dir}"
    data["run"]["out_dir"] = str(out_dir)
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return data


def make_config(out_dir: str | Path, model_dir: str | Path, **sections: dict[str, Any]) -> Any:
    """The small run as a validated :class:`~training.config.TrainConfig` (see :func:`small_lake_data`)."""
    from training.config import TrainConfig

    return TrainConfig.model_validate(small_lake_data(out_dir, model_dir, **sections))


def build_lake_model(folder: Path, **tiny: Any) -> str:
    """The demo's tiny model (one token per grid cell, a prose tokenizer) saved in ``folder``; its path.

    ``tiny`` adds to the model's ``tiny`` section (``preset="4m"``).
    """
    from training.config import TrainConfig
    from training.trainer import base_model_source

    config = TrainConfig(
        rollout={"game_id": "FrozenLake-v0"}, model={"spec": "tiny", "tiny": {"tokenizer_corpus": "prose", **tiny}}
    )
    return base_model_source(config.model, folder, seed=config.run.seed)


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metrics rows without their timings (``time/...``), which differ from run to run."""
    return [{key: value for key, value in row.items() if not key.startswith("time/")} for row in rows]


def killed_after_a_checkpoint(config: Any, tmp_path: Path) -> int:
    """Train ``config`` through the CLI in a subprocess, ``kill -9`` it once a checkpoint exists and update 3 is
    logged; the step of the last complete checkpoint."""
    from training.checkpoint import latest_checkpoint
    from training.run_log import METRICS_FILE, read_metrics

    out = Path(config.run.out_dir)
    config_file = tmp_path / "config.yaml"
    config.to_yaml(config_file)
    command = [sys.executable, "-m", "tsmg.apps.cli", "train", "--config", str(config_file), "--quiet"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None:
            steps = [row["step"] for row in read_metrics(out / METRICS_FILE)]
            if latest_checkpoint(out / "checkpoints") is not None and steps and steps[-1] >= 3:
                break
            time.sleep(0.02)
        assert process.poll() is None, process.stderr.read().decode()  # type: ignore[union-attr]
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    checkpoint = latest_checkpoint(out / "checkpoints")
    assert checkpoint is not None
    return int(checkpoint.name.split("-")[1])
