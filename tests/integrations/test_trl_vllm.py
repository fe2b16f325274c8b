"""TRL with ``use_vllm=True`` through tsmg.apps.integrations.trl: each route's settings, and the colocated engine.

``GameRollout.rollout_func`` samples on TRL's colocated engine (``trainer.vllm_generation.llm``,
which TRL fills with the current weights before calling it) through
``backends.vllm_engine.VLLMBackend.from_llm``; the settings it cannot use are refused with a
sentence, checked here with TRL's real ``GRPOConfig``. The engine path runs for real in
``.venv-vllm`` (vLLM's CPU build; TRL is not installed there, so the script hands ``rollout_func``
a trainer that holds only what it reads: the config's fields, the step, the tokenizer and the
engine), and this test compares the log-probabilities it returns with a transformers forward
pass of the same model. The whole TRL loop on vLLM runs in ``bench/gpu_check.sh`` (a GPU).
Skipped when ``.venv-vllm`` is missing, unless ``TSMG_REQUIRE_VLLM=1``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("trl", reason="the TRL integration needs the trl extra: pip install 'tsmg[trl]'")

from trl import GRPOConfig  # noqa: E402

from tsmg.apps.integrations.trl import GameRollout  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from vllm_env import require_vllm_python, run_in_vllm_env, vllm_model_dir  # noqa: E402

SAME = 2e-3  # vLLM's and transformers' log-probabilities of the same tokens (as in tests/training)


def config(tmp_path, **vllm):
    return GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", use_vllm=True, **vllm)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"vllm_mode": "server"}, "with use_vllm=True set vllm_mode='colocate'"),
        ({"vllm_mode": "colocate", "vllm_enable_sleep_mode": True}, "set vllm_enable_sleep_mode=False"),
        ({"vllm_mode": "colocate", "vllm_tensor_parallel_size": 2}, "set vllm_tensor_parallel_size=1"),
    ],
)
def test_vllm_settings_the_rollout_func_cannot_use_are_refused_with_what_to_do(tmp_path, settings, refusal):
    game = GameRollout("FrozenLake-NoSlip-v0", seeds=[0])
    with pytest.raises(ValueError, match=refusal):
        game.rollout_func([game.prompt(0)], SimpleNamespace(args=config(tmp_path, **settings)))


SCRIPT = r"""
import json
import sys
from types import SimpleNamespace


def main():
    from transformers import AutoTokenizer
    from vllm import LLM

    import games  # noqa: F401
    from tsmg.apps.integrations.trl import GameRollout

    model_dir, out = sys.argv[1], sys.argv[2]
    # As TRL's colocate mode starts it (trl/generation/vllm_generation.py), on the CPU
    llm = LLM(model=model_dir, seed=0, logprobs_mode="processed_logprobs", max_model_len=1024,
              max_num_batched_tokens=4096, enforce_eager=True, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    args = SimpleNamespace(use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=False,
                           vllm_tensor_parallel_size=1, temperature=1.0, top_p=1.0, seed=0)
    trainer = SimpleNamespace(
        args=args, state=SimpleNamespace(global_step=0), accelerator=SimpleNamespace(process_index=0),
        model=SimpleNamespace(training=True), processing_class=tokenizer, vllm_generation=SimpleNamespace(llm=llm),
    )
    from tsmg.lap import ActionFormat, LAPConfig
    game = GameRollout("FrozenLake-NoSlip-v0", seeds=[3, 4], game_options={"size": 2, "max_steps": 3},
                       lap=LAPConfig(action_format=ActionFormat(kind="raw")), episodes_path=out)
    rows = game.rollout_func([game.prompt(3)] * 2 + [game.prompt(4)] * 2, trainer)
    backend = game._model(trainer)
    print("FOUND " + json.dumps({"rows": rows, "backend": repr(backend), "same_engine": backend.llm is llm}))


if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def colocated(tmp_path_factory):
    python = require_vllm_python()
    out = tmp_path_factory.mktemp("trl-vllm") / "episodes.jsonl"
    done = run_in_vllm_env(python, SCRIPT, str(vllm_model_dir()), str(out))
    found = [line for line in done.stdout.splitlines() if line.startswith("FOUND ")]
    assert done.returncode == 0 and found, done.stdout[-4000:]
    from tsmg.episode import read_episodes

    return {**json.loads(found[-1][6:]), "episodes": list(read_episodes(out))}


def test_the_rollout_func_samples_on_the_colocated_engine_token_exactly(colocated):
    import torch
    from transformers import AutoModelForCausalLM

    from tsmg.apps.integrations.conversation import episode_sequence

    rows, episodes = colocated["rows"], colocated["episodes"]
    assert colocated["same_engine"] and colocated["backend"].startswith("VLLMBackend(")
    assert rows["tsmg_seed"] == [3, 3, 4, 4] and [e.episode_id for e in episodes] == rows["tsmg_episode_id"]
    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir(), dtype=torch.float32)
    for index, episode in enumerate(episodes):
        sequence = episode_sequence(episode, "player")
        assert rows["prompt_ids"][index] == sequence.prompt_ids
        n = len(sequence.completion_ids)
        assert rows["completion_ids"][index][:n] == sequence.completion_ids
        assert rows["env_mask"][index][:n] == sequence.model_mask and sum(sequence.model_mask) > 0
        # The engine's log-probabilities of the sampled tokens are the model's, in context
        ids = torch.tensor([sequence.prompt_ids + sequence.completion_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(sequence.prompt_ids) - 1 : -1].log_softmax(-1)
        own = logits.gather(1, torch.tensor(sequence.completion_ids)[:, None])[:, 0].tolist()
        for flag, theirs, mine in zip(sequence.model_mask, rows["logprobs"][index][:n], own, strict=True):
            if flag:
                assert theirs == pytest.approx(mine, abs=SAME)
