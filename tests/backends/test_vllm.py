"""VLLMBackend (the in-process engine) for real, in the vLLM environment ``.venv-vllm``.

vLLM is not importable in the test environment, so one script runs the checks with
``.venv-vllm/bin/python`` (PYTHONPATH = the checkout) and prints its findings as JSON; the tests
read them. The engine starts once (~35 s on 2 CPU cores) for all of them. Logprobs are then
checked against a forward pass of the same model in transformers, here.

Skipped when ``.venv-vllm`` is missing, unless ``TSMG_REQUIRE_VLLM=1`` (then they fail).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from vllm_env import require_vllm_python, run_in_vllm_env, vllm_adapter_dir, vllm_model_dir

ENGINE_SCRIPT = r"""
import json
import sys


def main():
    from safetensors.torch import load_file

    from backends import load_model
    from backends.base import BackendError, GenerationRequest, ModelNotFoundError, SamplingParams

    model_dir, adapter_dir = sys.argv[1], sys.argv[2]
    found = {}
    try:
        load_model("vllm:/no/such/model")
    except ModelNotFoundError as error:
        found["missing_model_error"] = str(error)
    backend = load_model(
        f"vllm:{model_dir}", dtype="float32", max_model_len=512, enable_lora=True, max_lora_rank=8, enforce_eager=True
    )
    found["repr"] = repr(backend)

    def chat(text, **options):
        return GenerationRequest(messages=[{"role": "user", "content": text}], **options)

    def dump(completion):
        return {
            "text": completion.text, "finish_reason": completion.finish_reason, "error": completion.error,
            "token_ids": completion.token_ids, "logprobs": completion.logprobs,
            "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
        }

    sampled = SamplingParams(temperature=1.0, max_tokens=12)
    requests = [chat("go", seed=1), chat("go", seed=1), chat("go", seed=2), chat("go", seed=3), chat("go", seed=4)]
    found["seeded"] = [dump(c) for c in backend.generate(requests, sampled)]
    found["prompt_ids"] = backend._prompt_ids(requests[0])
    choices = ["left", "down", "right", "up"]
    constrained = [chat(f"move {index}", choices=choices, seed=index) for index in range(16)]
    found["choices"] = [dump(c) for c in backend.generate(constrained, sampled)]
    # Issue 15: a one-token budget must still give whole choices ("north-north-west" takes several).
    whole = ["left", "down", "right", "up", "north-north-west"]
    budget_one = [chat(f"pick {index}", choices=whole, seed=index) for index in range(240)]
    found["budget_one"] = [dump(c) for c in backend.generate(budget_one, SamplingParams(temperature=1.0, max_tokens=1))]
    mixed = [
        GenerationRequest(prompt="Frozen lake", seed=5),
        GenerationRequest(),
        chat("stop", max_tokens=3),
        chat("left " * 600),  # longer than max_model_len=512
        GenerationRequest(prompt="left " * 500, max_tokens=64),  # fits, but its answer cannot
    ]
    found["mixed"] = [dump(c) for c in backend.generate(mixed, sampled)]

    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    probe = [chat("go")]
    found["base"] = backend.generate(probe, greedy)[0].token_ids
    backend.set_adapter(adapter_dir)
    found["lora"] = backend.generate(probe, greedy)[0].token_ids
    backend.set_adapter(None)
    found["lora_off"] = backend.generate(probe, greedy)[0].token_ids

    weights = load_file(f"{model_dir}/model.safetensors")
    backend.load_weights({name: tensor * 2.5 for name, tensor in weights.items() if "mlp" in name})
    found["updated"] = backend.generate(probe, greedy)[0].token_ids
    backend.load_weights(weights.items())
    found["restored"] = backend.generate(probe, greedy)[0].token_ids
    backend.close()
    print("RESULT " + json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def engine_results() -> dict[str, Any]:
    python = require_vllm_python()
    run = run_in_vllm_env(python, ENGINE_SCRIPT, str(vllm_model_dir()), str(vllm_adapter_dir()), timeout_s=420)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, f"the vLLM engine script failed ({run.returncode}):\n{run.stdout[-6000:]}"
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def test_vllm_engine_generates_token_ids_and_logprobs(engine_results: dict[str, Any]) -> None:
    for completion in engine_results["seeded"]:
        assert completion["error"] is None and completion["prompt_tokens"] > 0
        assert len(completion["token_ids"]) == len(completion["logprobs"]) == completion["completion_tokens"] > 0
        assert all(value <= 0 for value in completion["logprobs"])


def test_vllm_engine_logprobs_match_a_transformers_forward_pass(engine_results: dict[str, Any]) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir(), dtype=torch.float32).eval()
    prompt = engine_results["prompt_ids"]
    completion = engine_results["seeded"][0]
    ids = torch.tensor([prompt + completion["token_ids"]])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1]
    expected = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(completion["token_ids"])[:, None])[:, 0]
    # vLLM reports raw logprobs (temperature 1 here): the model's own next-token distribution.
    assert completion["logprobs"] == pytest.approx(expected.tolist(), abs=2e-3)


def test_vllm_engine_seeds_are_per_request(engine_results: dict[str, Any]) -> None:
    first, again, *others = engine_results["seeded"]
    assert first["token_ids"] == again["token_ids"]  # same seed, same batch: same sample
    assert any(other["token_ids"] != first["token_ids"] for other in others)


def test_vllm_engine_constrained_choice_is_always_legal(engine_results: dict[str, Any]) -> None:
    answers = [completion["text"] for completion in engine_results["choices"]]
    assert all(completion["error"] is None for completion in engine_results["choices"])
    assert set(answers) <= {"left", "down", "right", "up"}
    assert len(set(answers)) > 1  # sampled, not a constant


def test_vllm_engine_constrained_choice_with_a_one_token_budget_yields_whole_choices(
    engine_results: dict[str, Any],
) -> None:
    from transformers import AutoTokenizer

    whole = ["left", "down", "right", "up", "north-north-west"]
    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir())
    assert len(tokenizer("north-north-west", add_special_tokens=False)["input_ids"]) > 1  # the test can fail
    completions = engine_results["budget_one"]
    assert len(completions) >= 200 and all(c["error"] is None for c in completions)
    answers = [c["text"] for c in completions]
    assert set(answers) <= set(whole) and len(set(answers)) > 2


def test_vllm_engine_plain_prompts_bad_and_too_long_requests_in_one_batch(engine_results: dict[str, Any]) -> None:
    plain, empty, short, too_long, near_limit = engine_results["mixed"]
    assert plain["error"] is None and plain["token_ids"]
    assert empty["finish_reason"] == "error" and "messages or a prompt" in empty["error"]
    assert short["completion_tokens"] <= 3 and short["finish_reason"] in ("length", "stop")
    assert too_long["finish_reason"] == "error" and "context window of 512" in too_long["error"]
    # A prompt that fits but leaves less room than max_tokens stops at the window, not with an error.
    assert near_limit["error"] is None and near_limit["finish_reason"] == "length"
    assert near_limit["prompt_tokens"] + near_limit["completion_tokens"] <= 512


def test_vllm_engine_lora_adapter_changes_output_and_can_be_removed(engine_results: dict[str, Any]) -> None:
    assert engine_results["lora"] != engine_results["base"]
    assert engine_results["lora_off"] == engine_results["base"]


def test_vllm_engine_load_weights_changes_output_and_restores(engine_results: dict[str, Any]) -> None:
    assert engine_results["updated"] != engine_results["base"]
    assert engine_results["restored"] == engine_results["base"]


def test_vllm_engine_missing_model_is_named(engine_results: dict[str, Any]) -> None:
    assert "/no/such/model" in engine_results["missing_model_error"]
    assert "VLLMBackend(model_path=" in engine_results["repr"]
