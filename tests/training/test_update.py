"""The update stage on a tiny model, in free text: micro-batching, the entropy bonus's sign, pi_old from the record."""

from dataclasses import dataclass, replace

import numpy as np
import pytest
import torch

import tsmg
from backends.hf import HFBackend
from tests.small_lake import make_config
from training.config import OptimConfig
from training.credit import StepCredit
from training.distributed import World
from training.setup import set_up
from training.trainer import train
from training.update import PolicyUpdate, UpdateData, padding_share, plan_optimizer_steps, training_samples
from tsmg.core import Invalid, RulesGame
from tsmg.lap import LAP, ActionFormat, LAPConfig, PromptTemplate
from tsmg.rollout import plan_episodes, rollout

GAME = "test/FirstLetter-v0"
FREE_TEXT = {
    "template": {"system": None, "user": "{observation}"},
    "action_format": {"kind": "raw"},
    "temperature": 1.0,
    "max_tokens": 6,
}


@dataclass(frozen=True)
class Said:
    text: str | None = None


class FirstLetter(RulesGame[Said, str]):
    """Say anything: reward 1 when the answer starts with a letter from a to m (free text gets signal)."""

    def initial_state(self, rng, options):
        return Said()

    def transition(self, state, actions, rng):
        text = actions["player"]
        return Said(text), {"player": float(text[0].lower() in "abcdefghijklm")}

    def is_terminal(self, state):
        return state.text is not None

    def success(self, state, agent):
        return state.text is not None and state.text[0].lower() in "abcdefghijklm"

    def render(self, state, agent):
        return "Say something." if state.text is None else f"You said {state.text!r}."

    def parse_action(self, agent, text, state):
        return text.strip() or Invalid("say something")

    def action_text(self, agent, action):
        return action


@pytest.fixture(scope="module", autouse=True)
def first_letter_game():
    tsmg.register(GAME, FirstLetter, description="say anything", max_steps=1)
    yield
    tsmg.registry.unregister(GAME)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), seed=4)


def free_text_config(out_dir, model_dir, **sections):
    rollout_section = {"game_id": GAME, "game_options": {}, "observation_lines": None, "lap": FREE_TEXT}
    return make_config(out_dir, model_dir, rollout={**rollout_section, **sections.pop("rollout", {})}, **sections)


@pytest.fixture(scope="module")
def samples(model_dir):
    """Free-text answers of the tiny model, of different lengths, with advantages +1 and -1 in turn."""
    lap_config = LAPConfig(
        template=PromptTemplate(system=None, user="{observation}"), action_format=ActionFormat(kind="raw"), max_tokens=6
    )
    episodes = rollout(GAME, LAP(HFBackend(model_dir, threads=1), lap_config), plans=plan_episodes(GAME, [0], 12))
    steps = [
        StepCredit(0, episode.episode_id, "player", 0, 1.0 - 2 * (index % 2)) for index, episode in enumerate(episodes)
    ]
    found = training_samples(steps, {episode.episode_id: episode for episode in episodes}, exact_logprobs=True)
    assert len(found) == 12 and all(sample.choices is None and sample.behaviour_logprobs for sample in found)
    for index, sample in enumerate(found):  # answers of 2 to 6 tokens: micro-batches of unequal token counts
        keep = 2 + index % 5
        sample.completion_ids, sample.behaviour_logprobs = (
            sample.completion_ids[:keep],
            sample.behaviour_logprobs[:keep],
        )
    return found


def gradients_of_one_optimizer_step(config, tmp_path, samples, rollout_samples=(), *, lengths=None):
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    data = UpdateData(samples, rollout_samples, update.old_logprobs(samples, 1.0), None, 1.0)
    [planned] = plan_optimizer_steps(
        len(samples), len(rollout_samples), config.optim, np.random.default_rng(0), lengths
    )
    setup.optimizer.zero_grad(set_to_none=True)
    losses, finite = update.backward_step(1, planned, data)
    assert finite and losses
    grads = {name: parameter.grad.clone() for name, parameter in setup.backend.model.named_parameters()}
    return grads, planned, update, losses


@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-mean", "constant"])
def test_k_micro_batches_give_the_gradient_of_one_batch(model_dir, samples, tmp_path, aggregation):
    found = {}
    for micro_batch in (12, 5):
        config = free_text_config(
            tmp_path / "run",
            model_dir,
            loss={"aggregation": aggregation},
            optim={"micro_batch_size": micro_batch, "grad_accumulation": None},
        )
        grads, planned, _, _ = gradients_of_one_optimizer_step(config, tmp_path, samples)
        assert len(planned.policy) == -(-12 // micro_batch)
        found[micro_batch] = grads
    assert any(grad.abs().sum() > 0 for grad in found[12].values())
    for name, grad in found[12].items():
        torch.testing.assert_close(found[5][name], grad, rtol=1e-4, atol=1e-7, msg=name)


@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-mean"])
def test_length_sorted_micro_batches_give_the_same_loss_and_gradient_with_less_padding(
    model_dir, samples, tmp_path, aggregation
):
    # The samples run 2, 3, 4, 5, 6, 2, ... tokens: in sampled order every micro-batch of 5 pads to 6.
    lengths = [len(sample.prompt_ids) + len(sample.completion_ids) for sample in samples]
    found = {}
    for sort in (False, True):
        optim = {"micro_batch_size": 5, "grad_accumulation": None, "sort_by_length": sort}
        config = free_text_config(tmp_path / "run", model_dir, loss={"aggregation": aggregation}, optim=optim)
        grads, planned, _, losses = gradients_of_one_optimizer_step(config, tmp_path, samples, lengths=lengths)
        members = sorted(int(index) for batch in planned.policy for index in batch)
        assert members == list(range(12)) and all(len(batch) <= 5 for batch in planned.policy)
        found[sort] = (
            grads,
            sum(metrics["loss/policy"] for metrics, _ in losses),
            padding_share(samples, planned.policy),
        )
    (unsorted, loss, padding), (ordered, sorted_loss, sorted_padding) = found[False], found[True]
    assert sorted_padding < 0.5 * padding, (sorted_padding, padding)
    assert sorted_loss == pytest.approx(loss, rel=1e-5, abs=1e-7)
    assert any(grad.abs().sum() > 0 for grad in unsorted.values())
    for name, grad in unsorted.items():
        torch.testing.assert_close(ordered[name], grad, rtol=1e-4, atol=1e-7, msg=name)


def test_sorting_by_length_keeps_each_optimizer_step_its_own_samples():
    lengths = np.random.default_rng(1).integers(10, 90, size=23)
    optim = OptimConfig(micro_batch_size=3, grad_accumulation=2, epochs=2)
    rng_plain, rng_sorted = np.random.default_rng(5), np.random.default_rng(5)
    plain = plan_optimizer_steps(23, 0, optim.model_copy(update={"sort_by_length": False}), rng_plain, lengths)
    ordered = plan_optimizer_steps(23, 0, optim, rng_sorted, lengths)
    assert len(plain) == len(ordered) == 2 * 4
    for before, after in zip(plain, ordered, strict=True):
        assert sorted(np.concatenate(before.policy).tolist()) == sorted(np.concatenate(after.policy).tolist())
        flat = np.concatenate(after.policy)
        assert (np.diff(lengths[flat]) >= 0).all() and [len(batch) for batch in after.policy][0] == 3


def test_masked_tokens_add_nothing_to_the_gradient(model_dir, samples, tmp_path):
    # Asynchronous training masks off-policy tokens (TrainSample.token_mask): a fully masked sample
    # must leave the gradient (and the token-mean denominator) as if it were not there.
    config = free_text_config(tmp_path / "run", model_dir, optim={"micro_batch_size": 12, "grad_accumulation": None})
    masked = [replace(samples[0], token_mask=[False] * len(samples[0].completion_ids)), *samples[1:]]
    with_mask, *_ = gradients_of_one_optimizer_step(config, tmp_path / "masked", masked)
    without, *_ = gradients_of_one_optimizer_step(config, tmp_path / "without", samples[1:])
    assert any(grad.abs().sum() > 0 for grad in without.values())
    for name, grad in without.items():
        torch.testing.assert_close(with_mask[name], grad, rtol=1e-4, atol=1e-7, msg=name)


def test_the_rollout_entropy_bonus_pushes_the_entropy_up(model_dir, samples, tmp_path):
    # Only the rollout-wide entropy term (no sampled steps): its gradient must point along -dH/dtheta.
    config = free_text_config(tmp_path / "run", model_dir, loss={"entropy_coef": 0.5, "entropy_scope": "rollout"})
    grads, _, update, _ = gradients_of_one_optimizer_step(config, tmp_path, [], rollout_samples=samples)
    model = update.backend.model
    model.zero_grad(set_to_none=True)
    scores = update.score(model, samples, 1.0, entropy_grad=True)
    torch.where(scores.mask, scores.entropy, torch.zeros_like(scores.entropy)).sum().backward()
    loss_direction = torch.cat([grads[name].flatten() for name, _ in model.named_parameters()])
    entropy_direction = torch.cat([parameter.grad.flatten() for _, parameter in model.named_parameters()])
    cosine = torch.nn.functional.cosine_similarity(loss_direction, entropy_direction, dim=0)
    assert cosine < -0.999  # descending the loss ascends the entropy


def test_a_free_text_run_trains_on_the_log_probabilities_the_rollout_recorded(model_dir, tmp_path):
    config = free_text_config(
        tmp_path / "run",
        model_dir,
        rollout={"group_size": 8, "groups_per_update": 4},
        optim={"micro_batch_size": 8, "grad_accumulation": None},
        run={"updates": 2, "episodes_every": 1},
    )
    result = train(config)
    rows = [row for row in result.metrics if row["optim/steps"]]
    assert rows and all(row["rollout/invalid_rate"] < 0.5 and row["loss/skipped"] == 0 for row in rows)
    # One optimizer step per update, pi_old taken from the episode records: the ratio is exactly 1
    # only when the training forward scores the tokens the rollout recorded, token for token.
    assert all(abs(row["loss/ratio_mean"] - 1.0) < 1e-4 and row["loss/approx_kl"] < 1e-6 for row in rows)
    episodes = list(tsmg.episode.read_episodes(result.run_dir / "episodes.jsonl"))
    steps = [step for episode in episodes for step in episode.steps]
    assert all(
        step.prompt_token_ids and step.choices is None and len(step.logprobs) == len(step.token_ids) for step in steps
    )


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_the_kl_reference_is_the_policy_before_training(model_dir, samples, tmp_path, finetune):
    # The reference is the untrained policy (LoRA: the adapter switched off; full: a frozen copy).
    # Scored with the adapter left on (the policy itself), kl_ref would stay 0 after the weights moved.
    model = {"finetune": "lora", "lora_r": 4} if finetune == "lora" else {"finetune": "full"}
    config = free_text_config(
        tmp_path / "run",
        model_dir,
        model=model,
        loss={"kl_beta": 0.1},
        optim={"lr": 0.05, "micro_batch_size": 12, "grad_accumulation": None},
    )
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    rng = np.random.default_rng(0)
    first = update(1, samples, temperature=1.0, rng=rng)
    assert first["optim/steps"] == 1 and first["loss/kl_ref"] == pytest.approx(0.0, abs=1e-7)  # not moved yet

    # By hand, before the second update's only optimizer step: k3 of the current policy against the
    # untrained weights loaded afresh, token mean over every sample.
    with torch.no_grad():
        current = torch.cat(update.score(setup.backend.model, samples, 1.0, entropy=False).rows())
        untrained = HFBackend(model_dir, threads=1).model
        reference = torch.cat(update.score(untrained, samples, 1.0, entropy=False).rows())
    delta = reference - current
    by_hand = float((torch.exp(delta) - delta - 1.0).mean())
    second = update(2, samples, temperature=1.0, rng=rng)
    assert by_hand > 1e-4  # the update moved the policy away from the reference
    assert second["loss/kl_ref"] == pytest.approx(by_hand, rel=1e-4)


def test_at_temperature_0_7_the_first_optimizer_step_scores_what_the_rollout_sampled(model_dir, tmp_path):
    # The rollout samples from softmax(logits / 0.7) and records those log-probabilities; the update
    # must score the same distribution (a scorer that forgot to divide by T gives a ratio far from 1).
    config = free_text_config(
        tmp_path / "run",
        model_dir,
        rollout={"group_size": 8, "groups_per_update": 2, "lap": {**FREE_TEXT, "temperature": 0.7}},
        optim={"micro_batch_size": 16, "grad_accumulation": None},
        run={"updates": 1},
    )
    assert config.rollout.lap.temperature == 0.7
    [row] = [row for row in train(config).metrics if row["step"] == 1]
    assert row["optim/steps"] == 1 and row["loss/tokens"] > 16  # one optimizer step, over several tokens per answer
    assert abs(row["loss/ratio_mean"] - 1.0) < 1e-4 and row["loss/approx_kl"] < 1e-6


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_at_temperature_0_7_an_unmoved_policy_is_at_kl_0_from_its_reference(model_dir, samples, tmp_path, finetune):
    """The reference is scored at the rollout temperature, as the policy is: same weights, KL exactly 0.

    Kills the mutation that scores the KL reference at T = 1 while the policy is scored at the
    rollout's T (``training/update.py``: ``self.reference_logprobs(samples, 1.0)`` in ``_update``,
    or ``1.0`` in :meth:`PolicyUpdate.reference_logprobs`): the other KL test runs at T = 1 only.
    """
    model = {"finetune": "lora", "lora_r": 4} if finetune == "lora" else {"finetune": "full"}
    config = free_text_config(
        tmp_path / "run",
        model_dir,
        rollout={"lap": {**FREE_TEXT, "temperature": 0.7}},
        model=model,
        loss={"kl_beta": 0.1},
        optim={"micro_batch_size": 12, "grad_accumulation": None},
    )
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    at_t = [replace(sample, behaviour_logprobs=None) for sample in samples]  # pi_old recomputed at T = 0.7
    with torch.no_grad():
        policy = update.score(setup.backend.model, at_t, 0.7, entropy=False).rows()
    reference = update.reference_logprobs(at_t, 0.7)
    for mine, theirs in zip(policy, reference, strict=True):
        torch.testing.assert_close(torch.tensor(theirs), mine, rtol=0, atol=1e-5)
    first = update(1, at_t, temperature=0.7, rng=np.random.default_rng(0))
    assert first["optim/steps"] == 1
    assert first["loss/kl_ref"] == pytest.approx(0.0, abs=1e-7), "the reference is not scored at the policy's T"
    assert first["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # and pi_old at T too


# ----------------------------------------------------------------------------- truncated importance sampling
#: Per-token offsets log pi_sampler - log pi_trainer, in turn over an update's tokens. With the cap
#: C = 2 a token's weight exp(-offset) exceeds C where offset < -ln 2: here -1.0 and -0.9.
TIS_OFFSETS = (-1.0, -0.5, 0.0, 0.4, -0.9, 1.2, 0.25)


def with_sampler_offsets(samples, trainer):
    """The samples as a foreign engine would have played them: its log-probabilities = the trainer's + TIS_OFFSETS."""
    found, offsets, position = [], [], 0
    for sample, row in zip(samples, trainer, strict=True):
        shifts = [TIS_OFFSETS[(position + k) % len(TIS_OFFSETS)] for k in range(len(row))]
        position += len(row)
        offsets += shifts
        sampler = [value + shift for value, shift in zip(row, shifts, strict=True)]
        found.append(replace(sample, behaviour_logprobs=None, sampler_logprobs=sampler))
    return found, np.array(offsets)


def tis_gradients(config, tmp_path, samples, temperature):
    """The gradient of one optimizer step over ``samples`` at ``temperature``, pi_old recomputed."""
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    data = UpdateData(samples, (), update.old_logprobs(samples, temperature), None, temperature)
    [planned] = plan_optimizer_steps(len(samples), 0, config.optim, np.random.default_rng(0))
    setup.optimizer.zero_grad(set_to_none=True)
    losses, finite = update.backward_step(1, planned, data)
    assert finite
    return {name: parameter.grad.clone() for name, parameter in setup.backend.model.named_parameters()}, losses


def test_truncated_importance_sampling_weighs_each_token_by_the_capped_trainer_over_sampler_ratio(
    model_dir, samples, tmp_path
):
    """Sampler log-probabilities = the trainer's (at the rollout temperature) + known offsets.

    Mutations this kills (each tried by hand, 2026-12-05): the cap dropped from the weight
    (``tis_weight_mean`` 1.396 instead of 1.223), the sign of the log-ratio flipped (capped share
    0.133 instead of 0.289), the KL estimated in the other direction (exp(-D) - 1 + D: 0.281
    instead of 0.290), the weights computed but not multiplied in (the gradient is the plain one).
    """
    temperature = 0.7
    config = free_text_config(
        tmp_path / "run", model_dir, loss={"tis_cap": 2.0}, optim={"micro_batch_size": 5, "grad_accumulation": None}
    )
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    unrecorded = [replace(sample, behaviour_logprobs=None) for sample in samples]
    trainer = update.old_logprobs(unrecorded, temperature)
    foreign, offsets = with_sampler_offsets(samples, trainer)
    delta = -offsets  # log pi_trainer - log pi_sampler
    weights = np.minimum(np.exp(delta), 2.0)
    assert 0 < (np.exp(delta) > 2.0).sum() < len(delta)  # some tokens capped, not all

    metrics = update(1, foreign, temperature=temperature, rng=np.random.default_rng(0))
    assert metrics["loss/tokens"] == len(delta)
    assert metrics["loss/tis_capped_share"] == pytest.approx((np.exp(delta) > 2.0).mean(), abs=1e-9)
    assert metrics["loss/tis_weight_mean"] == pytest.approx(weights.mean(), rel=1e-5)
    assert metrics["loss/sampler_trainer_kl"] == pytest.approx((np.exp(delta) - 1.0 - delta).mean(), rel=1e-5)

    # The weights multiply each token's policy term: the gradient is the one of explicit per-token
    # weights min(exp D, 2), and not the unweighted one.
    rows, start = [], 0
    for sample in samples:
        rows.append(weights[start : start + len(sample.completion_ids)].tolist())
        start += len(sample.completion_ids)
    explicit = [
        replace(sample, behaviour_logprobs=None, token_weights=row) for sample, row in zip(samples, rows, strict=True)
    ]
    with_tis, losses = tis_gradients(config, tmp_path, foreign, temperature)
    by_hand, _ = tis_gradients(config, tmp_path, explicit, temperature)
    plain, _ = tis_gradients(config, tmp_path, unrecorded, temperature)
    assert all("loss/tis_weight_mean" in metrics for metrics, _ in losses)
    assert any(grad.abs().sum() > 0 for grad in with_tis.values())
    for name, grad in with_tis.items():
        torch.testing.assert_close(grad, by_hand[name], rtol=1e-4, atol=1e-7, msg=name)
    assert any(not torch.allclose(grad, plain[name], rtol=1e-3, atol=1e-6) for name, grad in with_tis.items())


def test_tis_off_leaves_the_gradient_unweighted_and_still_logs_the_gap(model_dir, samples, tmp_path):
    config = free_text_config(
        tmp_path / "run", model_dir, loss={"tis_cap": "off"}, optim={"micro_batch_size": 12, "grad_accumulation": None}
    )
    assert config.loss.tis_cap is None
    setup = set_up(config, tmp_path, None, World())
    unrecorded = [replace(sample, behaviour_logprobs=None) for sample in samples]
    trainer = PolicyUpdate.from_config(setup, config, World()).old_logprobs(unrecorded, 1.0)
    foreign, offsets = with_sampler_offsets(samples, trainer)
    with_sampler, losses = tis_gradients(config, tmp_path, foreign, 1.0)
    plain, _ = tis_gradients(config, tmp_path, unrecorded, 1.0)
    for name, grad in with_sampler.items():
        torch.testing.assert_close(grad, plain[name], rtol=1e-5, atol=1e-8, msg=name)
    [(metrics, _)] = losses
    assert "loss/tis_weight_mean" not in metrics
    assert metrics["loss/sampler_trainer_kl"] == pytest.approx((np.exp(-offsets) - 1.0 + offsets).mean(), rel=1e-5)


def test_tis_cap_spellings():
    for off in ("off", "OFF", False, None, "null"):
        assert free_text_config("/tmp/x", "/m", loss={"tis_cap": off}).loss.tis_cap is None
    assert free_text_config("/tmp/x", "/m").loss.tis_cap == 2.0
    with pytest.raises(ValueError, match="tis_cap"):
        free_text_config("/tmp/x", "/m", loss={"tis_cap": 0.5})


def test_a_sampler_in_another_dtype_is_weighed_by_truncated_importance_sampling(model_dir, tmp_path):
    """bfloat16: the rollout's recorded log-probabilities are not taken as the trainer's, so TIS weighs them.

    On this tiny model bfloat16's decode and the training forward happen to agree token for token
    (the KL measured is 0.0), so the weights are 1: what this checks is that the path is taken.
    """
    config = free_text_config(
        tmp_path / "run",
        model_dir,
        model={"dtype": "bfloat16"},
        rollout={"group_size": 8, "groups_per_update": 2},
        optim={"micro_batch_size": 16, "grad_accumulation": None},
        run={"updates": 1},
    )
    [row] = [row for row in train(config).metrics if row["step"] == 1]
    assert row["optim/steps"] == 1
    assert row["loss/sampler_trainer_kl"] >= 0.0 and row["loss/tis_capped_share"] == 0.0
    assert row["loss/tis_weight_mean"] == pytest.approx(1.0, abs=1e-2)


def test_only_foreign_log_probabilities_become_sampler_log_probabilities(model_dir):
    lap_config = LAPConfig(
        template=PromptTemplate(system=None, user="{observation}"), action_format=ActionFormat(kind="raw"), max_tokens=4
    )
    [episode] = rollout(GAME, LAP(HFBackend(model_dir, threads=1), lap_config), plans=plan_episodes(GAME, [0], 1))
    steps, episodes = [StepCredit(0, episode.episode_id, "player", 0, 1.0)], {episode.episode_id: episode}
    [own] = training_samples(steps, episodes)
    assert own.behaviour_logprobs and own.sampler_logprobs is None
    episode.steps[0].exact_logprobs = False  # as a vLLM engine, or an HF sampler outside float32, records
    [foreign] = training_samples(steps, episodes)
    assert foreign.behaviour_logprobs is None and foreign.sampler_logprobs == episode.steps[0].logprobs
    [asynchronous] = training_samples(steps, episodes, exact_logprobs=True)  # corrects them its own way
    assert asynchronous.sampler_logprobs is None
