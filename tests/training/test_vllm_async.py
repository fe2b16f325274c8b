"""Asynchronous training with rollouts on a real vLLM engine (``loop.mode: async``, ``model.spec: vllm:PATH``).

One script runs with ``.venv-vllm/bin/python``: it trains the tiny vLLM test model for three
updates with eta = 1, full fine-tuning, a checkpoint after every update. The worker process owns
the vLLM engine and pushes each policy version into it from its own copy of the weights. The
episodes record the engine's log-probabilities of every sampled token (free-text answers, so the
raw distribution); the script compares those of update 3 (played by version 3 - 1 - 1 = 1) with
the HF model of the checkpoint of update 1 and with the final model.
Skipped when ``.venv-vllm`` is missing, unless ``TSMG_REQUIRE_VLLM=1``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from vllm_env import require_vllm_python, run_in_vllm_env, vllm_model_dir  # noqa: E402

SAME = 2e-3  # vLLM and transformers log-probabilities of the same tokens (see test_vllm_rollouts.py)

SCRIPT = r"""
import json
import sys
from pathlib import Path


def main():
    from backends.hf import HFBackend
    from training.config import TrainConfig
    from training.trainer import train
    from tsmg.episode import read_episodes

    model_dir, out = sys.argv[1], Path(sys.argv[2])
    config = TrainConfig.model_validate(
        {
            "rollout": {
                "game_id": "FrozenLake-v0",
                "game_options": {"desc": ["SF", "FG"], "max_steps": 4},
                "group_size": 4,
                "groups_per_update": 4,
                "observation_lines": "[_OPG]+",
                # Free text: vLLM reports its raw distribution, which the HF model computes alike.
                "lap": {
                    "template": {"system": None, "user": "{observation}"},
                    "action_format": {"kind": "raw"},
                    "max_tokens": 4,
                },
            },
            "loss": {"entropy_coef": 0.1, "entropy_scope": "rollout"},  # the weights move with or without a signal
            "model": {
                "spec": f"vllm:{model_dir}",
                "finetune": "full",
                "vllm_options": {"enforce_eager": True, "max_model_len": 512},
            },
            "optim": {"lr": 1e-2, "micro_batch_size": 16, "grad_accumulation": 1},
            "loop": {"mode": "async", "max_staleness": 1},
            "run": {
                "out_dir": str(out), "updates": 3, "threads": 1, "tensorboard": False,
                "checkpoint_every": 1, "keep_last": 5, "episodes_every": 1,
            },
        }
    )
    result = train(config)
    found = {}
    keys = ("step", "async/staleness", "async/stale_samples", "async/masked_token_fraction", "loss/skipped")
    found["metrics"] = [{key: row.get(key) for key in keys} for row in result.metrics]
    episodes = list(read_episodes(out / "episodes.jsonl"))
    found["versions"] = sorted({(e.episode_id.split("/")[0], e.policy_version) for e in episodes})
    steps = [step for e in episodes if e.episode_id.startswith("u3/") for step in e.steps]
    found["engine"] = [value for step in steps for value in step.logprobs]
    for name, folder in (("version_1", out / "checkpoints" / "step-1" / "model"), ("final", result.final_model)):
        backend = HFBackend(folder, threads=1)
        prompts, tokens = [s.prompt_token_ids for s in steps], [s.token_ids for s in steps]
        scored = backend.sequence_logprobs(prompts, tokens)
        found[name] = [value for row in scored for value in row.tolist()]
    print("RESULT " + json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = require_vllm_python()
    out = tmp_path_factory.mktemp("vllm-async") / "run"
    run = run_in_vllm_env(python, SCRIPT, str(vllm_model_dir()), str(out), timeout_s=600)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, f"the vLLM async script failed ({run.returncode}):\n{run.stdout[-8000:]}"
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def test_every_update_trains_on_rollouts_one_version_old(trained: dict[str, Any]) -> None:
    rows = [row for row in trained["metrics"] if row["step"]]
    assert [row["step"] for row in rows] == [1, 2, 3] and all(row["loss/skipped"] == 0 for row in rows)
    assert [row["async/staleness"] for row in rows] == [0.0, 1.0, 1.0]
    assert rows[1]["async/stale_samples"] > 0
    # Stale tokens were compared with the version that played them (the trainer kept its weights):
    # one update apart at lr 1e-2, most stay within the trust range.
    assert 0.0 <= rows[1]["async/masked_token_fraction"] < 0.5
    assert trained["versions"] == [["u1", 0], ["u2", 0], ["u3", 1]]


def test_the_engine_played_with_the_version_it_was_given(trained: dict[str, Any]) -> None:
    def gap(first: list[float], second: list[float]) -> float:
        return max(abs(a - b) for a, b in zip(first, second, strict=True))

    engine = trained["engine"]
    assert engine and gap(engine, trained["version_1"]) < SAME  # the pushed version, exactly
    assert gap(engine, trained["final"]) > 20 * SAME  # not the trainer's newer weights
