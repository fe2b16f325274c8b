"""Asynchronous training with rollouts on a real vLLM engine (``loop.mode: async``, ``model.spec: vllm:PATH``).

One script runs with ``.venv-vllm/bin/python``: it trains the tiny vLLM test model for three
updates with eta = 1, full fine-tuning, a checkpoint after every update. The worker thread owns
the vLLM engine and pushes each policy version into it from its own copy of the weights; after
the last update the script asks that engine for a greedy answer to a probe prompt, and compares
its log-probabilities with the HF model of the version the worker last loaded (the checkpoint of
update 1: update 3 is played by version 3 - 1 - 1) and with the final model. Skipped when
``.venv-vllm`` is missing, unless ``TSMG_REQUIRE_VLLM=1``.
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
    import training.trainer as trainer_module
    from backends.base import GenerationRequest, SamplingParams
    from backends.hf import HFBackend
    from training.config import TrainConfig
    from training.engines import build_engine
    from training.trainer import TrainHooks, train
    from tsmg.episode import read_episodes

    model_dir, out = sys.argv[1], Path(sys.argv[2])
    probe = GenerationRequest(messages=[{"role": "user", "content": "P_\n_G"}], max_tokens=8)
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    engines, found = [], {}

    def build_and_keep(config, backend, run_dir, model_seats, opponent, **options):
        options.setdefault("vllm_options", {"enforce_eager": True, "max_model_len": 512})
        engine = build_engine(config, backend, run_dir, model_seats, opponent, **options)
        engines.append(engine)
        return engine

    def on_update(step, metrics):
        if step == 3:  # the worker has played its last rollout: its engine holds the version it loaded last
            completion = engines[-1].backend.generate([probe], greedy)[0]
            found["probe"] = {"token_ids": completion.token_ids, "logprobs": completion.logprobs}

    trainer_module.build_engine = build_and_keep
    config = TrainConfig.model_validate(
        {
            "rollout": {
                "game_id": "FrozenLake-v0",
                "game_options": {"desc": ["SF", "FG"], "max_steps": 4},
                "group_size": 4,
                "groups_per_update": 4,
                "observation_lines": "[_OPG]+",
                "lap": {"template": {"system": None, "user": "{observation}"}, "action_format": {"kind": "choice"}},
            },
            "model": {"spec": f"vllm:{model_dir}", "finetune": "full"},
            "optim": {"lr": 1e-2, "micro_batch_size": 16, "grad_accumulation": 1},
            "loop": {"mode": "async", "max_staleness": 1},
            "run": {
                "out_dir": str(out), "updates": 3, "threads": 1, "tensorboard": False,
                "checkpoint_every": 1, "keep_last": 5, "episodes_every": 1,
            },
        }
    )
    result = train(config, hooks=TrainHooks(on_update=on_update))
    found["engines"] = [type(engine).__name__ for engine in engines]
    keys = ("step", "async/staleness", "loss/skipped", "optim/steps")
    found["metrics"] = [{key: row.get(key) for key in keys} for row in result.metrics]
    episodes = read_episodes(out / "episodes.jsonl")
    found["versions"] = sorted({(e.episode_id.split("/")[0], e.policy_version) for e in episodes})
    tokens = found["probe"]["token_ids"]
    for name, folder in (("version_1", out / "checkpoints" / "step-1" / "model"), ("final", result.final_model)):
        backend = HFBackend(folder, threads=1)
        found[name] = backend.sequence_logprobs(backend.encode_prompts([probe]), [tokens])[0].tolist()
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


def test_the_worker_plays_on_vllm_and_evaluations_on_the_trainers_model(trained: dict[str, Any]) -> None:
    assert trained["engines"] == ["HFRolloutEngine", "VLLMRolloutEngine"]
    rows = [row for row in trained["metrics"] if row["step"]]
    assert [row["step"] for row in rows] == [1, 2, 3] and all(row["loss/skipped"] == 0 for row in rows)
    assert [row["async/staleness"] for row in rows] == [0.0, 1.0, 1.0]
    assert trained["versions"] == [["u1", 0], ["u2", 0], ["u3", 1]]


def test_the_engine_holds_the_version_it_was_given(trained: dict[str, Any]) -> None:
    def gap(first: list[float], second: list[float]) -> float:
        return max(abs(a - b) for a, b in zip(first, second, strict=True))

    probe = trained["probe"]["logprobs"]
    assert gap(probe, trained["version_1"]) < SAME  # the pushed version, exactly
    assert gap(probe, trained["final"]) > 20 * SAME  # not the trainer's newer weights
