"""Policy losses: hand-computed values, gradient directions, masking, aggregation modes."""

import math

import pytest
import torch

from tests.training.loss_helpers import settings_for
from training.losses import (
    LOSSES,
    LossSettings,
    StepFigures,
    aggregate,
    aggregation_denominator,
    clipped_surrogate,
    importance_ratio,
    k3_kl,
    policy_loss,
    turn_mean,
)

LOG = math.log


def tensors(log_ratios, advantages, old=-1.0):
    logprobs_old = torch.full((1, len(log_ratios)), old, dtype=torch.float64)
    logprobs_new = (logprobs_old + torch.tensor([log_ratios], dtype=torch.float64)).requires_grad_(True)
    return logprobs_new, logprobs_old, torch.tensor([advantages], dtype=torch.float64)


def test_clipped_surrogate_hand_computed():
    ratio = torch.tensor([1.5, 0.5, 0.5, 1.1])
    advantages = torch.tensor([1.0, 1.0, -1.0, -2.0])
    per_token, was_clipped = clipped_surrogate(ratio, advantages, 0.2, 0.2)
    # -min(1.5, 1.2) = -1.2; -min(0.5, 0.8) = -0.5; -min(-0.5, -0.8) = 0.8; -min(-2.2, -2.2) = 2.2
    torch.testing.assert_close(per_token, torch.tensor([-1.2, -0.5, 0.8, 2.2]))
    assert was_clipped.tolist() == [True, False, True, False]


def test_policy_loss_hand_computed_with_metrics():
    new, old, advantages = tensors([LOG(1.5), LOG(0.5), LOG(0.5), LOG(1.1)], [1.0, 1.0, -1.0, -2.0])
    output = policy_loss(new, old, advantages, torch.ones(1, 4, dtype=torch.bool))
    assert output.loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 2.2) / 4)
    metrics = output.metrics
    assert metrics["loss/clip_fraction"] == pytest.approx(0.5)
    assert metrics["loss/ratio_mean"] == pytest.approx((1.5 + 0.5 + 0.5 + 1.1) / 4)
    approx_kl = sum(r - 1 - LOG(r) for r in (1.5, 0.5, 0.5, 1.1)) / 4
    assert metrics["loss/approx_kl"] == pytest.approx(approx_kl)
    assert metrics["loss/tokens"] == 4.0
    assert metrics["loss/total"] == pytest.approx(output.loss.item())


def test_ratio_one_and_positive_advantage_pushes_the_logprob_up():
    new, old, _ = tensors([0.0, 0.0], [0.0, 0.0])
    output = policy_loss(new, old, torch.tensor([[2.0, -1.0]], dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool))
    output.loss.backward()
    assert new.grad is not None
    assert new.grad[0, 0] < 0  # gradient descent raises the log-probability of the A > 0 token
    assert new.grad[0, 1] > 0  # and lowers the A < 0 one
    torch.testing.assert_close(new.grad, torch.tensor([[-1.0, 0.5]], dtype=torch.float64))  # -A / tokens


def test_clipped_tokens_get_zero_gradient():
    new, old, advantages = tensors([LOG(1.5), LOG(0.5), LOG(0.5), LOG(1.1)], [1.0, -1.0, 1.0, -1.0])
    policy_loss(new, old, advantages, torch.ones(1, 4, dtype=torch.bool)).loss.backward()
    assert new.grad is not None
    assert new.grad[0, 0] == 0 and new.grad[0, 1] == 0  # clipped: beyond the range in the advantage's direction
    assert new.grad[0, 2] != 0 and new.grad[0, 3] != 0  # outside the range but moving back: not clipped


def test_clip_higher_widens_the_upper_range_only():
    new, old, advantages = tensors([LOG(1.25), LOG(0.75)], [1.0, -1.0])
    mask = torch.ones(1, 2, dtype=torch.bool)
    symmetric = policy_loss(new, old, advantages, mask, settings_for("ppo-clip"))
    higher = policy_loss(new, old, advantages, mask, settings_for("clip-higher"))
    assert symmetric.loss.item() == pytest.approx((-1.2 + 0.8) / 2)
    assert higher.loss.item() == pytest.approx((-1.25 + 0.8) / 2)
    assert symmetric.metrics["loss/clip_fraction"] == 1.0 and higher.metrics["loss/clip_fraction"] == 0.5


def test_masking_ignores_padding_even_when_it_holds_nan():
    new, old, advantages = tensors([LOG(1.1), LOG(0.9)], [1.0, -1.0])
    reference = policy_loss(new, old, advantages, torch.ones(1, 2, dtype=torch.bool))
    padded_new = torch.cat([new.detach(), torch.tensor([[float("nan"), 5.0]], dtype=torch.float64)], dim=1)
    padded_new.requires_grad_(True)
    padded_old = torch.cat([old, torch.tensor([[float("-inf"), -3.0]], dtype=torch.float64)], dim=1)
    padded_advantages = torch.cat([advantages, torch.tensor([[float("nan"), 100.0]], dtype=torch.float64)], dim=1)
    mask = torch.tensor([[True, True, False, False]])
    padded = policy_loss(
        padded_new,
        padded_old,
        padded_advantages,
        mask,
        LossSettings(kl_beta=0.1, entropy_coef=0.01),
        logprobs_ref=torch.full((1, 4), float("nan"), dtype=torch.float64).masked_fill(mask, -1.0),
        entropy=torch.tensor([[0.5, 0.5, float("inf"), 9.0]], dtype=torch.float64),
    )
    plain = policy_loss(
        new,
        old,
        advantages,
        torch.ones(1, 2, dtype=torch.bool),
        LossSettings(kl_beta=0.1, entropy_coef=0.01),
        logprobs_ref=torch.full((1, 2), -1.0, dtype=torch.float64),
        entropy=torch.tensor([[0.5, 0.5]], dtype=torch.float64),
    )
    assert padded.loss.item() == pytest.approx(plain.loss.item())
    assert plain.loss.item() != pytest.approx(reference.loss.item())
    padded.loss.backward()
    assert padded_new.grad is not None
    assert torch.isfinite(padded_new.grad).all()
    assert padded_new.grad[0, 2:].abs().sum() == 0


def test_aggregation_modes_differ_exactly_as_specified():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 99.0, 99.0], [7.0, 7.0, 7.0]])
    mask = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
    assert aggregate(values, mask, "token-mean").item() == pytest.approx(10 / 4)  # sum / tokens
    assert aggregate(values, mask, "sequence-mean").item() == pytest.approx((2 + 4) / 2)  # mean of row means
    assert aggregate(values, mask, "constant", constant_normalizer=4).item() == pytest.approx(10 / (2 * 4))
    with pytest.raises(ValueError, match="constant_normalizer"):
        aggregate(values, mask, "constant")
    empty = torch.zeros(1, 3, dtype=torch.bool)
    assert aggregate(values[:1], empty, "token-mean").item() == 0.0


@pytest.mark.parametrize("mode", ["token-mean", "sequence-mean", "constant"])
def test_micro_batches_with_the_update_denominator_add_up_to_the_whole_batch(mode):
    generator = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 5, generator=generator, dtype=torch.float64)
    new = old + 0.3 * torch.randn(4, 5, generator=generator, dtype=torch.float64)
    advantages = torch.randn(4, generator=generator, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    settings = LossSettings(aggregation=mode, constant_normalizer=5.0)
    whole = policy_loss(new, old, advantages, mask, settings).loss
    denominator = aggregation_denominator([mask[:2], mask[2:]], mode, 5.0)
    parts = [
        policy_loss(new[rows], old[rows], advantages[rows], mask[rows], settings, StepFigures(denominator)).loss
        for rows in (slice(0, 2), slice(2, 4))
    ]
    assert (parts[0] + parts[1]).item() == pytest.approx(whole.item())


def test_sequence_advantages_broadcast_over_tokens():
    new, old, _ = tensors([LOG(1.1), LOG(0.7), 0.0], [0.0, 0.0, 0.0])
    mask = torch.ones(1, 3, dtype=torch.bool)
    per_sequence = policy_loss(new, old, torch.tensor([1.5], dtype=torch.float64), mask)
    per_token = policy_loss(new, old, torch.full((1, 3), 1.5, dtype=torch.float64), mask)
    assert per_sequence.loss.item() == pytest.approx(per_token.loss.item())


def test_turn_ratio_is_the_geometric_mean_shared_by_the_turn():
    log_ratios = torch.tensor([[LOG(2.0), 0.0, LOG(0.5), LOG(0.5)]])
    mask = torch.tensor([[True, True, True, False]])
    whole_row = importance_ratio(log_ratios, torch.zeros_like(log_ratios), mask, "turn")
    expected = (2.0 * 1.0 * 0.5) ** (1 / 3)
    torch.testing.assert_close(whole_row, torch.tensor([[expected, expected, expected, 1.0]]))
    torch.testing.assert_close(
        turn_mean(torch.tensor([[1.0, 3.0]]), torch.tensor([[True, True]])), torch.tensor([[2.0, 2.0]])
    )


def test_turn_clip_loss_hand_computed_and_gradient_spread_over_the_turn():
    new, old, _ = tensors([LOG(4.0), 0.0], [0.0, 0.0])  # geometric mean ratio 2 -> clipped at 1.2 for A > 0
    settings = settings_for("turn-clip")
    output = policy_loss(
        new, old, torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool), settings
    )
    assert output.loss.item() == pytest.approx(-1.2)
    assert output.metrics["loss/clip_fraction"] == 1.0
    new2, old2, _ = tensors([LOG(1.1), LOG(0.9)], [0.0, 0.0])
    policy_loss(
        new2, old2, torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool), settings
    ).loss.backward()
    assert new2.grad is not None
    assert new2.grad[0, 0] == pytest.approx(new2.grad[0, 1].item())  # one ratio per turn: equal share


def test_kl_k3_and_entropy_terms():
    assert k3_kl(torch.tensor([-1.0]), torch.tensor([-1.0])).item() == 0.0
    delta = LOG(2.0)  # ref - new
    assert k3_kl(torch.tensor([0.0]), torch.tensor([delta])).item() == pytest.approx(2.0 - delta - 1.0)
    new, old, _ = tensors([0.0, 0.0], [0.0, 0.0])
    mask = torch.ones(1, 2, dtype=torch.bool)
    zero_advantage = torch.zeros(1, dtype=torch.float64)
    ref = new.detach() + delta
    entropy = torch.tensor([[1.0, 3.0]], dtype=torch.float64)
    output = policy_loss(
        new, old, zero_advantage, mask, LossSettings(kl_beta=0.5, entropy_coef=0.1), logprobs_ref=ref, entropy=entropy
    )
    assert output.loss.item() == pytest.approx(0.5 * (2.0 - delta - 1.0) - 0.1 * 2.0)
    assert output.metrics["loss/kl_ref"] == pytest.approx(2.0 - delta - 1.0)
    assert output.metrics["loss/entropy"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="logprobs_ref"):
        policy_loss(new, old, zero_advantage, mask, LossSettings(kl_beta=0.5))
    with pytest.raises(ValueError, match="entropy"):
        policy_loss(new, old, zero_advantage, mask, LossSettings(entropy_coef=0.5))


def test_shapes_must_match():
    with pytest.raises(ValueError, match="same"):
        policy_loss(torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1), torch.ones(1, 2, dtype=torch.bool))


def test_loss_registry():
    assert set(LOSSES) == {"ppo-clip", "clip-higher", "turn-clip", "sorl", "gspo"}
    assert settings_for("clip-higher").clip_eps_high == 0.28
    assert settings_for("turn-clip").ratio_level == "turn"
    assert settings_for("ppo-clip", aggregation="sequence-mean").aggregation == "sequence-mean"
    with pytest.raises(ValueError, match="ppo-clip"):
        settings_for("ppo")


def test_the_sampler_trainer_kl_resolves_a_float32_engine_gap():
    # vLLM in float32 differs from the trainer by ~1e-6 per token: the k3 of such gaps (~1e-12) must
    # not round to 0 (or to noise) in float32 arithmetic. Mutation killed: the k3 taken in float32.
    old = torch.full((1, 4), -1.3, dtype=torch.float32)
    sampler = old + torch.tensor([[2e-6, -3e-6, 1e-5, 0.0]])
    gap = old.double() - sampler.double()
    expected = float((torch.exp(gap) - 1.0 - gap).mean())
    out = policy_loss(old.clone().requires_grad_(True), old, torch.ones(1), torch.ones(1, 4, dtype=torch.bool),
                      LossSettings(tis_cap=2.0), logprobs_sampler=sampler)  # fmt: skip
    assert expected > 1e-12
    assert out.metrics["loss/sampler_trainer_kl"] == pytest.approx(expected, rel=1e-6)
    assert out.metrics["loss/tis_capped_share"] == 0.0
