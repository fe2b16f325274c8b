"""GSPO's sequence ratio and SORL's clipping-triggered normalisation: hand-computed values and gradients."""

import math

import pytest
import torch

from tests.training.loss_helpers import one_batch_loss, settings_for
from training.losses import StepFigures, clipped_turns, policy_loss, sequence_ratio

LOG = math.log


def batch(log_ratios_by_row, old=-1.0):
    """Rows of different lengths (padding on the left), their new log-probs as a leaf with gradient."""
    width = max(len(row) for row in log_ratios_by_row)
    mask = torch.tensor([[False] * (width - len(row)) + [True] * len(row) for row in log_ratios_by_row])
    ratios = torch.tensor([[0.0] * (width - len(row)) + list(row) for row in log_ratios_by_row], dtype=torch.float64)
    logprobs_old = torch.full(mask.shape, old, dtype=torch.float64)
    logprobs_new = (logprobs_old + ratios).detach().requires_grad_(True)
    return logprobs_new, logprobs_old, mask


def gspo_reference(logprobs_new, logprobs_old, mask, sequence_ids, advantages, eps_low, eps_high):
    """GSPO written plainly: s_i = exp(mean over the sequence's tokens of the log-ratio), one term per sequence."""
    terms = []
    for sequence in sorted(set(sequence_ids)):
        rows = [row for row, owner in enumerate(sequence_ids) if owner == sequence]
        deltas = torch.cat([(logprobs_new[row] - logprobs_old[row])[mask[row]] for row in rows])
        ratio = torch.exp(deltas.mean())
        advantage = advantages[rows[0]]
        terms.append(-torch.minimum(ratio * advantage, ratio.clamp(1 - eps_low, 1 + eps_high) * advantage))
    return torch.stack(terms).mean()


ROWS = [[LOG(1.5), LOG(1.1)], [LOG(0.9)], [LOG(1.2), LOG(1.0), LOG(0.7)], [LOG(1.05)]]
SEQUENCES = [0, 0, 1, 2]  # rows 0 and 1 are one trajectory's two turns
ADVANTAGES = [1.0, 1.0, -1.0, 2.0]


@pytest.mark.parametrize("eps", [(0.2, 0.2), (3e-4, 4e-4)])
def test_gspo_loss_and_gradient_equal_the_sequence_level_objective(eps):
    new, old, mask = batch(ROWS)
    settings = settings_for("gspo", clip_eps_low=eps[0], clip_eps_high=eps[1])
    assert settings.ratio_level == "sequence" and settings.aggregation == "sequence-mean"
    output = one_batch_loss(
        new, old, torch.tensor(ADVANTAGES, dtype=torch.float64), mask, settings, torch.tensor(SEQUENCES)
    )
    output.loss.backward()
    ours = new.grad.clone()
    reference_new = new.detach().clone().requires_grad_(True)
    expected = gspo_reference(reference_new, old, mask, SEQUENCES, ADVANTAGES, *eps)
    expected.backward()
    assert output.loss.item() == pytest.approx(expected.item())
    torch.testing.assert_close(ours, reference_new.grad)


def test_gspo_hand_computed_value():
    # Sequence 0: tokens with ratios 1.5, 1.1, 0.9 -> s = (1.5 x 1.1 x 0.9)^(1/3); A = 1, eps 0.2 -> min(s, 1.2).
    # Sequence 1: ratios 1.2, 1.0, 0.7 -> s = 0.84^(1/3) = 0.9436; A = -1 -> -min(-s, -max(s, 0.8)) = s.
    # Sequence 2: ratio 1.05; A = 2 -> -2.1.
    new, old, mask = batch(ROWS)
    settings = settings_for("gspo", clip_eps_low=0.2, clip_eps_high=0.2)
    output = one_batch_loss(
        new, old, torch.tensor(ADVANTAGES, dtype=torch.float64), mask, settings, torch.tensor(SEQUENCES)
    )
    first = (1.5 * 1.1 * 0.9) ** (1 / 3)
    second = 0.84 ** (1 / 3)
    assert output.loss.item() == pytest.approx((-min(first, 1.2) + second - 2 * 1.05) / 3)


def test_gspo_split_over_micro_batches_gives_the_whole_batchs_gradient():
    new, old, mask = batch(ROWS)
    settings = settings_for("gspo", clip_eps_low=0.2, clip_eps_high=0.2)
    advantages = torch.tensor(ADVANTAGES, dtype=torch.float64)
    ids = torch.tensor(SEQUENCES)
    one_batch_loss(new, old, advantages, mask, settings, ids).loss.backward()
    whole = new.grad.clone()
    # The figures of the whole step (what training.ratio_context computes), then rows 0 | 1, 2, 3 apart.
    log_ratio = (new - old).detach().where(mask, torch.zeros((), dtype=torch.float64))
    sums = torch.zeros(3, dtype=torch.float64).index_add(0, ids, log_ratio.sum(-1))
    counts = torch.zeros(3, dtype=torch.float64).index_add(0, ids, mask.sum(-1).double())
    per_row_mean, per_row_tokens = (sums / counts)[ids], counts[ids]
    share = float((mask.sum(-1) / per_row_tokens).sum())
    assert share == pytest.approx(3.0)
    split_new = new.detach().clone().requires_grad_(True)
    for rows in ([0], [1, 2, 3]):
        policy_loss(
            split_new[rows],
            old[rows],
            advantages[rows],
            mask[rows],
            settings,
            StepFigures(share, sequence_log_ratio=per_row_mean[rows], sequence_tokens=per_row_tokens[rows]),
        ).loss.backward()
    torch.testing.assert_close(split_new.grad, whole)


def test_sequence_ratio_is_the_geometric_mean_and_each_token_shares_one_over_its_sequence():
    new, old, mask = batch(ROWS)
    ratio, share = sequence_ratio(new, old, mask, torch.tensor(SEQUENCES))
    assert ratio[0, -1].item() == pytest.approx((1.5 * 1.1 * 0.9) ** (1 / 3))
    assert ratio[1, -1].item() == pytest.approx(ratio[0, -1].item())  # one sequence, one ratio
    assert share[mask].tolist() == pytest.approx([1 / 3] * 3 + [1 / 3] * 3 + [1.0])


def test_sorl_scales_the_policy_term_by_the_unclipped_turn_fraction():
    # Three turns (rows): ratios 1.5 (A = 1: clipped), 0.9 (A = 1), 0.5 (A = -1: clipped) -> c = 2/3.
    new, old, mask = batch([[LOG(1.5)], [LOG(0.9)], [LOG(0.5)]])
    advantages = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    plain = policy_loss(new, old, advantages, mask, settings_for("turn-clip"))
    sorl = one_batch_loss(new, old, advantages, mask, settings_for("sorl"))
    assert sorl.metrics["loss/clipped_turn_fraction"] == pytest.approx(2 / 3)
    assert sorl.loss.item() == pytest.approx(plain.loss.item() / 3)
    assert plain.loss.item() == pytest.approx((-1.2 - 0.9 + 0.8) / 3)
    given = policy_loss(new, old, advantages, mask, settings_for("sorl"), StepFigures(clipped_fraction=0.25))
    assert given.loss.item() == pytest.approx(0.75 * plain.loss.item())  # the step's fraction, when given


def test_sorl_without_clipping_is_the_turn_level_loss():
    new, old, mask = batch([[LOG(1.1), LOG(1.05)], [LOG(0.95)]])
    advantages = torch.tensor([1.0, -1.0], dtype=torch.float64)
    plain = policy_loss(new, old, advantages, mask, settings_for("turn-clip"))
    sorl = one_batch_loss(new, old, advantages, mask, settings_for("sorl"))
    assert sorl.loss.item() == pytest.approx(plain.loss.item())
    assert sorl.metrics["loss/clipped_turn_fraction"] == 0.0


def test_clipped_turns_counts_turns_not_tokens():
    was_clipped = torch.tensor([[True, False, False], [False, False, False]])
    mask = torch.tensor([[True, True, True], [False, True, True]])
    assert clipped_turns(was_clipped, mask) == (1.0, 2.0)
