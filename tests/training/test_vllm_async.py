"""Asynchronous training with rollouts on a real vLLM engine (``loop.mode: async``, ``model.spec: vllm:PATH``).

One script runs with ``.venv-vllm/bin/python``: it trains the tiny vLLM test model for three
updates with eta = 1, full fine-tuning, a checkpoint after every update. The worker process owns
the vLLM engine and pushes each policy version into it from its own copy of the weights. The
episodes record the engine's log-probabilities of every sampled token; the script compares those
of update 3 (played by version 3 - 1 - 1 = 1) with the HF model of the checkpoint of update 1
and with the final model, as differences between answers to the same prompt (vLLM normalises a
constrained answer over more tokens than the trainer's choice trie; the normalisers cancel).
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
    from tests.small_lake import make_config
    from training.trainer import train
    from tsmg.episode import read_episodes

    model_dir, out = sys.argv[1], Path(sys.argv[2])
    config = make_config(
        out,
        model_dir,
        loss={"entropy_coef": 0.1, "entropy_scope": "rollout"},  # the weights move with or without a signal
        model={"spec": f"vllm:{model_dir}", "vllm_options": {"enforce_eager": True, "max_model_len": 512}},
        optim={"lr": 1e-2},
        loop={"mode": "async", "max_staleness": 1},
        run={"updates": 3, "checkpoint_every": 1, "keep_last": 5, "episodes_every": 1},
    )
    result = train(config)
    found = {}
    keys = ("step", "async/staleness", "async/stale_samples", "async/masked_token_fraction", "loss/skipped")
    keys += ("async/unmasked_stale_samples",)
    found["metrics"] = [{key: row.get(key) for key in keys} for row in result.metrics]
    episodes = list(read_episodes(out / "episodes.jsonl"))
    found["versions"] = sorted({(e.episode_id.split("/")[0], e.policy_version) for e in episodes})
    # vLLM normalises a constrained answer over more tokens than the trainer's choice trie, so its
    # numbers are compared as differences between answers to the same prompt: the normalisers cancel.
    steps = [step for e in episodes if e.episode_id.startswith("u3/") for step in e.steps]
    pairs = [
        (first, second)
        for index, first in enumerate(steps)
        for second in steps[index + 1 :]
        if first.prompt_token_ids == second.prompt_token_ids and first.token_ids[0] != second.token_ids[0]
    ]
    found["engine"] = [first.logprobs[0] - second.logprobs[0] for first, second in pairs]
    for name, folder in (("version_1", out / "checkpoints" / "step-1" / "model"), ("final", result.final_model)):
        backend = HFBackend(folder, threads=1)
        scored = backend.sequence_logprobs([s.prompt_token_ids for s in steps], [s.token_ids for s in steps])
        first_token = {id(step): float(row[0]) for step, row in zip(steps, scored)}
        found[name] = [first_token[id(first)] - first_token[id(second)] for first, second in pairs]
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
    # Every stale sample was compared with the version that played it (the trainer kept its weights);
    # the end token after a whole choice (probability 1 in the trie) never moves, so never is masked.
    assert rows[1]["async/unmasked_stale_samples"] == 0
    assert 0.0 <= rows[1]["async/masked_token_fraction"] <= 0.5
    assert trained["versions"] == [["u1", 0], ["u2", 0], ["u3", 1]]


def test_the_engine_played_with_the_version_it_was_given(trained: dict[str, Any]) -> None:
    def gap(first: list[float], second: list[float]) -> float:
        return max(abs(a - b) for a, b in zip(first, second, strict=True))

    engine = trained["engine"]
    assert len(engine) >= 5
    assert gap(engine, trained["version_1"]) < 2 * SAME  # the pushed version, exactly
    assert gap(engine, trained["final"]) > 20 * SAME  # not the trainer's newer weights
