"""The scoring module: what a rollout recorded is what a scoring forward gives, token for token; sharing the
prompt prefix changes the work, not the numbers."""

import pytest
import torch

import tsmg
from backends.base import GenerationRequest
from backends.hf import HFBackend
from backends.scoring import MIN_SHARED_PREFIX, ChoiceMasks, score_completions, shared_prefix_length
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.rollout import plan_episodes, rollout

ACTIONS = ["left", "down", "right", "up"]


@pytest.mark.parametrize(("kind", "temperature"), [("tag", 1.0), ("tag", 0.7), ("raw", 0.0), ("choice", 1.0)])
def test_recorded_logprobs_are_the_scoring_forwards_token_for_token(tiny_backend, kind, temperature):
    # Free text (the tag and raw formats) as well as constrained choice: a shift of the targets
    # against the logits, a wrong temperature or a missing choice mask shows here.
    config = LAPConfig(action_format=ActionFormat(kind=kind), temperature=temperature, max_tokens=12)
    episodes = rollout("FrozenLake-v0", LAP(tiny_backend, config), plans=plan_episodes("FrozenLake-v0", [3], 3))
    steps = [step for episode in episodes for step in episode.steps][:24]
    assert steps and all(step.prompt_token_ids and step.token_ids for step in steps)
    if kind != "choice":
        assert any(len(step.token_ids) > 1 for step in steps) and all(step.choices is None for step in steps)
    scores = score_completions(
        tiny_backend.model,
        [step.prompt_token_ids for step in steps],
        [step.token_ids for step in steps],
        pad_id=tiny_backend.pad_id,
        temperature=temperature,
        choices=[step.choices for step in steps],
        choice_masks=ChoiceMasks(tiny_backend.choice_tries),
    )
    for step, scored in zip(steps, scores.rows(), strict=True):
        assert step.logprobs == pytest.approx(scored.tolist(), abs=1e-4)


@pytest.fixture(scope="module")
def samples(tiny_backend):
    """Six boards behind one system prompt and the same rules; every other answer constrained."""
    game = tsmg.make("FrozenLake-NoSlip-v0")
    requests = []
    for seed in range(6):
        observation = game.reset(seed=seed)[0]["player"]
        messages = [
            {"role": "system", "content": "You are playing a text game. " * 4},
            {"role": "user", "content": observation},
        ]
        requests.append(GenerationRequest(messages=messages, choices=ACTIONS))
    prompts = tiny_backend.encode_prompts(requests)
    completions = [tiny_backend.tokenizer.encode(ACTIONS[index % 4], add_special_tokens=False) for index in range(6)]
    choices = [ACTIONS if index % 2 else None for index in range(6)]
    return prompts, completions, choices


def scores_and_grads(backend, samples, share_prefix):
    prompts, completions, choices = samples
    model = backend.model
    model.zero_grad(set_to_none=True)
    scores = score_completions(
        model,
        prompts,
        completions,
        pad_id=backend.pad_id,
        choices=choices,
        choice_masks=ChoiceMasks(backend.choice_tries),
        entropy=True,
        entropy_grad=True,
        share_prefix=share_prefix,
    )
    picked = torch.where(scores.mask, scores.logprobs, torch.zeros_like(scores.logprobs))
    (picked.sum() + 0.1 * torch.where(scores.mask, scores.entropy, torch.zeros_like(scores.entropy)).sum()).backward()
    grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}
    return scores, grads


def test_the_samples_share_a_long_prompt_prefix(samples):
    prompts, _, _ = samples
    assert shared_prefix_length(prompts, MIN_SHARED_PREFIX) >= MIN_SHARED_PREFIX
    assert shared_prefix_length([prompts[0][:5], prompts[1]], MIN_SHARED_PREFIX) == 0  # too short to pay


def test_sharing_the_prefix_gives_the_same_logprobs_entropies_and_gradients(tiny_model_dir, samples):
    backend = HFBackend(tiny_model_dir, dtype="float32")
    shared, shared_grads = scores_and_grads(backend, samples, share_prefix=True)
    plain, plain_grads = scores_and_grads(backend, samples, share_prefix=False)
    assert torch.equal(shared.mask, plain.mask)
    torch.testing.assert_close(shared.logprobs[shared.mask], plain.logprobs[plain.mask], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(shared.entropy[shared.mask], plain.entropy[plain.mask], rtol=1e-4, atol=1e-5)
    assert shared_grads.keys() == plain_grads.keys() and shared_grads
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)


def test_a_constrained_answer_is_scored_over_the_allowed_tokens_only(tiny_backend, samples):
    prompts, completions, _ = samples
    kwargs = {"pad_id": tiny_backend.pad_id, "choice_masks": ChoiceMasks(tiny_backend.choice_tries)}
    free = score_completions(tiny_backend.model, prompts[:2], completions[:2], choices=[None, None], **kwargs)
    constrained = score_completions(tiny_backend.model, prompts[:2], completions[:2], choices=[ACTIONS] * 2, **kwargs)
    # Renormalised over four moves, each answer is likelier than among the whole vocabulary.
    assert all((c > f).all() for c, f in zip(constrained.rows(), free.rows(), strict=True))
    with pytest.raises(ValueError, match="choice_masks"):
        score_completions(tiny_backend.model, prompts[:1], completions[:1], pad_id=0, choices=[ACTIONS])
