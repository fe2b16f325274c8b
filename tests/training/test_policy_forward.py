"""The training forward pass: sharing the prompt prefix changes the work, not the numbers."""

import pytest
import torch

import tsmg
from backends.base import GenerationRequest
from backends.hf import HFBackend
from training.trainer import MIN_SHARED_PREFIX, ChoiceMasks, TrainSample, _shared_prompt_prefix, policy_forward

ACTIONS = ["left", "down", "right", "up"]


@pytest.fixture(scope="module")
def samples_and_backend(tmp_path_factory):
    from backends.tiny import build_tiny_model

    folder = tmp_path_factory.mktemp("model")
    build_tiny_model(folder, preset="0.15m", seed=3)
    backend = HFBackend(folder, threads=1, dtype="float32")
    game = tsmg.make("FrozenLake-NoSlip-v0")
    requests = []
    for seed in range(6):  # six boards behind one system prompt and the same rules
        observation = game.reset(seed=seed)[0]["player"]
        messages = [
            {"role": "system", "content": "You are playing a text game. " * 4},
            {"role": "user", "content": observation},
        ]
        requests.append(GenerationRequest(messages=messages, choices=ACTIONS))
    prompts = backend.encode_prompts(requests)
    completions = [backend.tokenizer.encode(ACTIONS[index % 4], add_special_tokens=False) for index in range(6)]
    samples = [
        TrainSample(
            prompt_ids=list(prompt),
            completion_ids=list(completion),
            behaviour_logprobs=None,
            advantage=1.0,
            choices=ACTIONS if index % 2 else None,
        )
        for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=True))
    ]
    return samples, backend


def forward_and_grads(backend, samples, share_prefix):
    model = backend.model
    model.zero_grad(set_to_none=True)
    output = policy_forward(
        model,
        samples,
        pad_id=backend.pad_id,
        temperature=1.0,
        choice_masks=ChoiceMasks(backend.tokenizer, backend.eos_ids),
        entropy_grad=True,
        share_prefix=share_prefix,
    )
    picked = torch.where(output.mask, output.logprobs, torch.zeros_like(output.logprobs))
    (picked.sum() + 0.1 * torch.where(output.mask, output.entropy, torch.zeros_like(output.entropy)).sum()).backward()
    grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}
    return output, grads


def test_the_samples_share_a_long_prompt_prefix(samples_and_backend):
    samples, _ = samples_and_backend
    assert _shared_prompt_prefix(samples) >= MIN_SHARED_PREFIX
    assert _shared_prompt_prefix(samples[:1]) == 0


def test_sharing_the_prefix_gives_the_same_logprobs_entropies_and_gradients(samples_and_backend):
    samples, backend = samples_and_backend
    shared, shared_grads = forward_and_grads(backend, samples, share_prefix=True)
    plain, plain_grads = forward_and_grads(backend, samples, share_prefix=False)
    assert torch.equal(shared.mask, plain.mask)
    torch.testing.assert_close(shared.logprobs[shared.mask], plain.logprobs[plain.mask], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(shared.entropy[shared.mask], plain.entropy[plain.mask], rtol=1e-4, atol=1e-5)
    assert shared_grads.keys() == plain_grads.keys() and shared_grads
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)
