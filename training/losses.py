"""Policy losses over padded per-token tensors.

Inputs are ``(batch, tokens)`` tensors: the log-probabilities of the sampled tokens under the
policy being trained (``logprobs_new``, with gradient) and under the policy that sampled them
(``logprobs_old``), the advantage of each token (or one per sequence), and a ``mask`` that is
true on real response tokens and false on padding. Masked positions may hold anything (even
NaN or -inf): they are replaced before any arithmetic, so they reach neither the loss nor the
gradient.

The loss is the PPO clipped surrogate ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)`` with:

* the ratio ``r`` per token (``ppo-clip``, ``clip-higher``), one per turn (``turn-clip``,
  ``sorl``): ``r_k = exp(mean over the turn's tokens of (log pi_new - log pi_old))``, shared by the
  turn's tokens (a row is one turn), or one per sequence
  (``gspo``): the same geometric mean over every token of a sequence, rows sharing a
  ``sequence_ids`` entry forming one sequence (a drawn trajectory's turns), in GSPO's token form
  (:func:`sequence_ratio`) so that a sequence split over micro-batches gets the gradient of the
  whole;
* SORL's clipping-triggered normalisation (``sorl``): the policy term is scaled by
  ``1 - c``, ``c`` the fraction of turns whose clipped branch was taken (the paper does not
  publish its exact form; this one shrinks the step as more turns leave the trust region and
  leaves an unclipped step as it is);
* an optional per-token importance weight ``w`` multiplying the policy term, without gradient
  (asynchronous training's decoupled PPO: ``w = pi_prox / pi_behaviour`` of a stale token, so that
  the loss is ``-w min(r A, clip(r) A)`` with ``r = pi_new / pi_prox``);
* truncated importance sampling (TIS) against the sampler-trainer mismatch, where the rollout
  engine is not the trainer's numerics (vLLM, another dtype): given the log-probabilities the
  sampler reported (``logprobs_sampler``), each token's policy term is also multiplied by
  ``min(pi_old / pi_sampler, C)`` (``tis_cap`` C; no gradient), and the share of tokens capped,
  the mean weight and the k3 estimate of KL(sampler || trainer) are logged
  (:func:`truncated_importance_weights`);
* an optional KL penalty to a reference policy, ``beta * k3`` with
  ``k3 = exp(ref - new) - (ref - new) - 1`` (unbiased, always >= 0);
* an optional entropy bonus, ``- entropy_coef * entropy`` (the caller computes per-token entropy
  from its logits);
* one of three aggregations (:func:`aggregate`): ``token-mean`` over the whole batch (DAPO),
  ``sequence-mean`` (GRPO; at the sequence ratio level, over sequences of several rows: each
  token weighs 1 / its sequence's tokens), or ``constant`` (Dr.GRPO: sum over tokens /
  (sequences x a constant length)).

With micro-batches and gradient accumulation, every micro-batch takes the figures of its whole
optimizer step (:class:`StepFigures`: the aggregation ``denominator`` of
:func:`aggregation_denominator`, GSPO's sequence ratios, SORL's clipped fraction), so that the
accumulated gradient equals the one of a single big batch. A step of one batch takes
:meth:`StepFigures.of_batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from training.loss_specs import LOSSES, Aggregation, LossSpec, RatioLevel

__all__ = [
    "LOSSES",
    "LossOutput",
    "LossSettings",
    "LossSpec",
    "StepFigures",
    "aggregate",
    "aggregation_denominator",
    "clipped_surrogate",
    "importance_ratio",
    "importance_weights",
    "truncated_importance_weights",
    "k3_kl",
    "clipped_turns",
    "off_policy_mask",
    "policy_loss",
    "sequence_ratio",
    "turn_mean",
]


@dataclass(frozen=True)
class LossSettings:
    """Everything that shapes the loss besides the tensors.

    Attributes:
        ratio_level: "token" or "turn" (SORL).
        clip_eps_low: The ratio is clipped below at 1 - clip_eps_low.
        clip_eps_high: The ratio is clipped above at 1 + clip_eps_high.
        aggregation: "token-mean", "sequence-mean" or "constant".
        constant_normalizer: The constant length of the "constant" aggregation (e.g. max new tokens).
        kl_beta: Weight of the k3 KL penalty to the reference (0: no reference needed).
        entropy_coef: Weight of the entropy bonus (0: no entropy needed).
        clip_normalization: Scale the policy term by 1 - the fraction of clipped turns (SORL).
        tis_cap: Truncated importance sampling's cap C on pi_old / pi_sampler where the sampler's
            log-probabilities are given (None: no weight, the sampler-trainer KL still logged).
    """

    ratio_level: RatioLevel = "token"
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2
    aggregation: Aggregation = "token-mean"
    constant_normalizer: float | None = None
    kl_beta: float = 0.0
    entropy_coef: float = 0.0
    clip_normalization: bool = False
    tis_cap: float | None = None


@dataclass(frozen=True)
class StepFigures:
    """What one micro-batch's loss takes from its whole optimizer step (:mod:`training.ratio_context`).

    Attributes:
        denominator: The step's aggregation denominator (:func:`aggregation_denominator`; GSPO's
            sequence-mean: the step's sequences); None: this batch's own.
        sequence_log_ratio: ``(batch,)`` each row's whole-sequence mean log-ratio under the current
            weights, without gradient; required by a sequence-level ratio (see :func:`sequence_ratio`).
        sequence_tokens: ``(batch,)`` each row's whole-sequence token count, with ``sequence_log_ratio``.
        clipped_fraction: SORL's fraction of the step's turns whose clipped branch is taken;
            required with ``clip_normalization``.
    """

    denominator: float | None = None
    sequence_log_ratio: Tensor | None = None
    sequence_tokens: Tensor | None = None
    clipped_fraction: float | None = None

    @classmethod
    def of_batch(
        cls,
        logprobs_new: Tensor,
        logprobs_old: Tensor,
        advantages: Tensor,
        mask: Tensor,
        settings: LossSettings,
        sequence_ids: Tensor | None = None,
    ) -> StepFigures:
        """The figures of an optimizer step that is this one batch (the arguments as :func:`policy_loss`'s).

        Args:
            logprobs_new: ``(batch, tokens)`` log pi_theta of the sampled tokens.
            logprobs_old: ``(batch, tokens)`` log pi_old of the same tokens.
            advantages: ``(batch, tokens)`` per token, or ``(batch,)`` per sequence.
            mask: ``(batch, tokens)``, true on real response tokens.
            settings: The loss's settings (which figures it needs, its clip range).
            sequence_ids: ``(batch,)`` sequence of each row (None: a row is one sequence).
        """
        mask = mask.bool()
        with torch.no_grad():
            new, old = _masked(logprobs_new.detach(), mask), _masked(logprobs_old.detach(), mask)
            log_ratio = tokens = None
            if settings.ratio_level == "sequence":
                ids = sequence_ids if sequence_ids is not None else torch.arange(mask.shape[0], device=mask.device)
                _, slots = torch.unique(ids, return_inverse=True)
                size = int(slots.max()) + 1 if slots.numel() else 0
                deltas = _masked(new - old, mask)
                sums = torch.zeros(size, dtype=deltas.dtype, device=mask.device).index_add(0, slots, deltas.sum(-1))
                weights = mask.to(deltas.dtype).sum(-1)
                counts = torch.zeros(size, dtype=deltas.dtype, device=mask.device).index_add(0, slots, weights)
                log_ratio, tokens = (sums / counts.clamp(min=1.0))[slots], counts[slots]
            fraction = None
            if settings.clip_normalization:
                ratio = importance_ratio(new, old, mask, settings.ratio_level)
                _, was_clipped = clipped_surrogate(
                    ratio, _per_token(advantages, new, mask), settings.clip_eps_low, settings.clip_eps_high
                )
                hit, turns = clipped_turns(was_clipped, mask)
                fraction = hit / turns if turns else 0.0
        return cls(None, log_ratio, tokens, fraction)


@dataclass(frozen=True)
class LossOutput:
    """The loss to backpropagate and float metrics (token means over the masked tokens)."""

    loss: Tensor
    metrics: dict[str, float]


def _masked(values: Tensor, mask: Tensor) -> Tensor:
    """Values on real tokens, 0 on padding (padding may hold NaN/inf; ``where`` keeps them out)."""
    return torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device))


def _per_token(advantages: Tensor, like: Tensor, mask: Tensor) -> Tensor:
    """Advantages per token (one per sequence is copied to its tokens), 0 on padding."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    return _masked(advantages.to(like.dtype).expand_as(like), mask)


def turn_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Each token gets the mean of ``values`` over the masked tokens of its turn (a row is one turn).

    Args:
        values: ``(batch, tokens)``, already zero on padding.
        mask: ``(batch, tokens)`` bool, true on real tokens.

    Returns:
        ``(batch, tokens)``: the row means (padding gets its row's mean; mask it later).
    """
    sums = values.sum(dim=-1, keepdim=True)
    counts = mask.to(values.dtype).sum(dim=-1, keepdim=True).clamp(min=1.0)
    return (sums / counts).expand_as(values)


def importance_ratio(
    logprobs_new: Tensor,
    logprobs_old: Tensor,
    mask: Tensor,
    level: RatioLevel = "token",
) -> Tensor:
    """pi_new / pi_old per token, or the turn's geometric-mean ratio on each of its tokens.

    Why the geometric mean per turn (SORL): a turn is one decision; a product of token ratios
    explodes with length, while their geometric mean stays on the scale of one token's ratio.
    Returns 1 on padding.
    """
    log_ratio = _masked(logprobs_new - logprobs_old, mask)
    if level == "turn":
        log_ratio = _masked(turn_mean(log_ratio, mask), mask)
    return torch.exp(log_ratio)


def sequence_ratio(
    logprobs_new: Tensor,
    logprobs_old: Tensor,
    mask: Tensor,
    sequence_ids: Tensor | None = None,
    *,
    sequence_log_ratio: Tensor | None = None,
    sequence_tokens: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """GSPO's sequence ratio on every token, in its token form, and each token's share of its sequence.

    The ratio of sequence i is s_i = exp(mean over its tokens of (log pi_new - log pi_old)). Each
    token carries ``sg[s_i] * exp(delta_t - sg[delta_t])`` (GSPO-token): the value is s_i and the
    gradient s_i grad(delta_t), so that summing a sequence's tokens with weight 1 / n_i (the share
    returned) gives exactly the gradient of s_i. That sum splits over micro-batches: pass the
    whole sequence's mean log-ratio and token count (``sequence_log_ratio``, ``sequence_tokens``,
    one per row, computed without gradient) when a sequence's rows are not all in this batch.

    Args:
        logprobs_new: ``(batch, tokens)``, already zero on padding.
        logprobs_old: ``(batch, tokens)``, already zero on padding.
        mask: ``(batch, tokens)`` bool.
        sequence_ids: ``(batch,)`` ints: rows with the same id form one sequence (None: each row is one).
        sequence_log_ratio: ``(batch,)`` each row's sequence mean log-ratio (None: from this batch).
        sequence_tokens: ``(batch,)`` each row's sequence token count (None: from this batch).

    Returns:
        ``(ratio, share)``, both ``(batch, tokens)``; share is 1 / n_i on real tokens.

    Example:
        >>> new = torch.tensor([[0.0, 0.2], [0.4, 0.0]])
        >>> ratio, share = sequence_ratio(new, torch.zeros(2, 2), torch.tensor([[True, True], [True, False]]),
        ...                              torch.tensor([0, 0]))
        >>> round(float(ratio[1, 0]), 4), float(share[0, 0])
        (1.2214, 0.3333333432674408)
    """
    log_ratio = _masked(logprobs_new - logprobs_old, mask)
    weights = mask.to(log_ratio.dtype)
    if sequence_log_ratio is None or sequence_tokens is None:
        ids = sequence_ids if sequence_ids is not None else torch.arange(mask.shape[0], device=mask.device)
        _, slots = torch.unique(ids, return_inverse=True)
        size = int(slots.max()) + 1 if slots.numel() else 0
        sums = torch.zeros(size, dtype=log_ratio.dtype, device=mask.device).index_add(0, slots, log_ratio.sum(-1))
        counts = torch.zeros(size, dtype=log_ratio.dtype, device=mask.device).index_add(0, slots, weights.sum(-1))
        sequence_log_ratio = (sums / counts.clamp(min=1.0))[slots]
        sequence_tokens = counts[slots]
    mean = sequence_log_ratio.detach().to(log_ratio.dtype).unsqueeze(-1)
    ratio = torch.exp(_masked(mean + log_ratio - log_ratio.detach(), mask))
    share = _masked((1.0 / sequence_tokens.to(log_ratio.dtype).clamp(min=1.0)).unsqueeze(-1).expand_as(log_ratio), mask)
    return ratio, share


def clipped_turns(was_clipped: Tensor, mask: Tensor) -> tuple[float, float]:
    """(turns whose clipped branch was taken on some token, turns): SORL's trigger, a row being one turn.

    Example:
        >>> clipped_turns(torch.tensor([[True, True], [False, False]]), torch.ones(2, 2, dtype=torch.bool))
        (1.0, 2.0)
    """
    clipped = _masked(was_clipped.to(torch.float32), mask)
    real = mask.any(dim=-1)
    return float((clipped.sum(-1) > 0)[real].sum()), float(real.sum())


def clipped_surrogate(
    ratio: Tensor, advantages: Tensor, clip_eps_low: float = 0.2, clip_eps_high: float = 0.2
) -> tuple[Tensor, Tensor]:
    """Per-token PPO loss ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)`` and where it clipped.

    Returns:
        The per-token loss and a bool tensor, true where the clipped branch is the smaller one
        and strictly so (those tokens get no gradient): A > 0 with r > 1 + eps_high, or A < 0
        with r < 1 - eps_low.
    """
    clipped_ratio = ratio.clamp(1.0 - clip_eps_low, 1.0 + clip_eps_high)
    unclipped = ratio * advantages
    clipped = clipped_ratio * advantages
    was_clipped = clipped < unclipped
    return -torch.minimum(unclipped, clipped), was_clipped


def k3_kl(logprobs_new: Tensor, logprobs_ref: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi_new || pi_ref): exp(ref - new) - (ref - new) - 1 (>= 0).

    Why k3: unbiased for the KL on tokens sampled from pi_new, and never negative, unlike the
    plain log-ratio (k1).
    """
    delta = logprobs_ref - logprobs_new
    return torch.exp(delta) - delta - 1.0


def truncated_importance_weights(logprobs_trainer: Tensor, logprobs_sampler: Tensor, cap: float) -> Tensor:
    """TIS weight per token: min(pi_trainer / pi_sampler, cap), without gradient.

    Why: a rollout engine other than the trainer (vLLM's kernels, another dtype) samples from a
    slightly different distribution than the one the loss assumes; weighting each token by the
    trainer's probability over the sampler's makes the policy gradient an estimate under the
    trainer's policy, and the cap bounds the variance a rare token with a tiny sampler probability
    would bring (the bias it leaves is small where the two policies are close).

    Example:
        >>> trainer, sampler = torch.tensor([0.5, 0.5, 0.5]).log(), torch.tensor([0.5, 0.4, 0.1]).log()
        >>> truncated_importance_weights(trainer, sampler, 2.0)
        tensor([1.0000, 1.2500, 2.0000])
    """
    with torch.no_grad():
        return torch.exp(logprobs_trainer.detach() - logprobs_sampler.detach()).clamp(max=cap)


def aggregate(
    values: Tensor,
    mask: Tensor,
    mode: Aggregation = "token-mean",
    *,
    constant_normalizer: float | None = None,
    denominator: float | None = None,
) -> Tensor:
    """Reduce per-token values to one number.

    * ``token-mean``: sum over every masked token / number of masked tokens (DAPO: long answers
      weigh in proportion to their length).
    * ``sequence-mean``: mean over sequences of each sequence's token mean (GRPO: every answer
      weighs the same, so its tokens weigh 1/length each).
    * ``constant``: sum over masked tokens / (sequences x ``constant_normalizer``) (Dr.GRPO: no
      length bias in either direction).

    Sequences without a masked token count for nothing (not even in the number of sequences).

    Args:
        values: ``(batch, tokens)`` per-token values.
        mask: ``(batch, tokens)`` bool, true on real tokens.
        mode: The aggregation.
        constant_normalizer: The constant of ``constant`` (required there).
        denominator: Overrides the batch's own count (tokens, sequences, or sequences x constant)
            with the whole update's, for micro-batching (:func:`aggregation_denominator`).

    Returns:
        A scalar tensor (0 when there is no masked token).
    """
    masked = _masked(values, mask)
    if mode == "sequence-mean":
        counts = mask.sum(dim=-1)
        per_sequence = masked.sum(dim=-1) / counts.clamp(min=1)
        total = per_sequence.sum()
    else:
        total = masked.sum()
    if denominator is None:
        denominator = aggregation_denominator([mask], mode, constant_normalizer)
    return total / denominator if denominator > 0 else total


def aggregation_denominator(
    masks: Sequence[Tensor], mode: Aggregation, constant_normalizer: float | None = None
) -> float:
    """The denominator of :func:`aggregate` over several micro-batches' masks.

    Example:
        >>> masks = [torch.tensor([[True, True, False]]), torch.tensor([[True, False, False]])]
        >>> aggregation_denominator(masks, "token-mean"), aggregation_denominator(masks, "sequence-mean")
        (3.0, 2.0)
    """
    if mode == "token-mean":
        return float(sum(int(mask.sum()) for mask in masks))
    sequences = float(sum(int((mask.sum(dim=-1) > 0).sum()) for mask in masks))
    if mode == "sequence-mean":
        return sequences
    if constant_normalizer is None or constant_normalizer <= 0:
        raise ValueError("the 'constant' aggregation needs a positive constant_normalizer (e.g. max new tokens)")
    return sequences * float(constant_normalizer)


def _token_mean(values: Tensor, mask: Tensor) -> float:
    count = int(mask.sum())
    return float(_masked(values, mask).sum()) / count if count else 0.0


def policy_loss(
    logprobs_new: Tensor,
    logprobs_old: Tensor,
    advantages: Tensor,
    mask: Tensor,
    settings: LossSettings | None = None,
    step: StepFigures | None = None,
    *,
    logprobs_ref: Tensor | None = None,
    entropy: Tensor | None = None,
    token_weights: Tensor | None = None,
    logprobs_sampler: Tensor | None = None,
) -> LossOutput:
    """Clipped policy loss (+ beta KL to a reference, - entropy bonus), aggregated, with metrics.

    Args:
        logprobs_new: ``(batch, tokens)`` log pi_theta of the sampled tokens (with gradient).
        logprobs_old: ``(batch, tokens)`` log pi_old (behaviour) of the same tokens.
        advantages: ``(batch, tokens)`` per token, or ``(batch,)`` per sequence.
        mask: ``(batch, tokens)``, true (or 1) on real response tokens.
        settings: Ratio level, clip range, aggregation, KL and entropy weights (default: ppo-clip).
        step: The figures of the whole optimizer step this batch belongs to (default: none, which
            a token- or turn-level loss without SORL's normalisation needs; a sequence-level ratio
            or SORL needs theirs, :meth:`StepFigures.of_batch` for a step of one batch).
        logprobs_ref: ``(batch, tokens)`` log pi_ref, required when ``kl_beta > 0``.
        entropy: ``(batch, tokens)`` per-token entropy, required when ``entropy_coef != 0``.
        token_weights: ``(batch, tokens)`` importance weight of each token's policy term, taken
            without gradient (decoupled PPO's pi_prox / pi_behaviour; None: 1 everywhere). The
            KL and entropy terms are not weighted: they regularise the current policy, whoever sampled.
        logprobs_sampler: ``(batch, tokens)`` log-probabilities the rollout engine reported for the
            sampled tokens, where it is not the trainer (None: the trainer sampled them). With
            ``settings.tis_cap`` each token's policy term is multiplied by
            :func:`truncated_importance_weights` of ``logprobs_old`` over these (and by ``token_weights``).

    Returns:
        The scalar loss and metrics ``loss/policy``, ``loss/total``, ``loss/clip_fraction``,
        ``loss/approx_kl`` (k3 of pi_old vs pi_new per token), ``loss/ratio_mean``,
        ``loss/tokens``, plus ``loss/kl_ref`` and ``loss/entropy`` when given; with
        ``logprobs_sampler``, ``loss/sampler_trainer_kl`` (the k3 estimate of KL(sampler || trainer)
        on the sampled tokens: exp(D) - 1 - D, D = log pi_old - log pi_sampler) and, with a cap,
        ``loss/tis_capped_share`` (tokens whose pi_old / pi_sampler exceeds the cap) and
        ``loss/tis_weight_mean``.

    Raises:
        ValueError: Mismatched shapes, a KL / entropy weight without its tensor, or a sequence-level
            ratio or SORL without the step's figures.
    """
    settings = settings or LossSettings()
    step = step or StepFigures()
    if settings.ratio_level == "sequence" and (step.sequence_log_ratio is None or step.sequence_tokens is None):
        raise ValueError(
            "a sequence-level ratio needs the step's sequence_log_ratio and sequence_tokens "
            "(StepFigures.of_batch for a step of one batch)"
        )
    if settings.clip_normalization and step.clipped_fraction is None:
        raise ValueError("SORL's normalisation needs the step's clipped_fraction (StepFigures.of_batch for one batch)")
    mask = mask.bool()
    if not logprobs_new.shape == logprobs_old.shape == mask.shape:
        raise ValueError(
            f"logprobs_new {tuple(logprobs_new.shape)}, logprobs_old {tuple(logprobs_old.shape)} and "
            f"mask {tuple(mask.shape)} must have the same (batch, tokens) shape"
        )
    advantages = _per_token(advantages, logprobs_new, mask)
    logprobs_new = _masked(logprobs_new, mask)
    logprobs_old = _masked(logprobs_old.detach(), mask)

    share = None
    if settings.ratio_level == "sequence":
        ratio, share = sequence_ratio(
            logprobs_new,
            logprobs_old,
            mask,
            sequence_log_ratio=step.sequence_log_ratio,
            sequence_tokens=step.sequence_tokens,
        )
    else:
        ratio = importance_ratio(logprobs_new, logprobs_old, mask, settings.ratio_level)
    per_token, was_clipped = clipped_surrogate(ratio, advantages, settings.clip_eps_low, settings.clip_eps_high)
    if token_weights is not None:
        if token_weights.shape != mask.shape:
            shapes = f"{tuple(token_weights.shape)} and {tuple(mask.shape)}"
            raise ValueError(f"token_weights and mask must have the same (batch, tokens) shape, got {shapes}")
        per_token = per_token * _masked(token_weights.detach().to(per_token.dtype), mask)
    sampler_metrics: dict[str, float] = {}
    if logprobs_sampler is not None:
        if logprobs_sampler.shape != mask.shape:
            shapes = f"{tuple(logprobs_sampler.shape)} and {tuple(mask.shape)}"
            raise ValueError(f"logprobs_sampler and mask must have the same (batch, tokens) shape, got {shapes}")
        sampler = _masked(logprobs_sampler.detach().to(logprobs_old.dtype), mask)
        with torch.no_grad():
            # k3 with the sampler as the "current" policy: tokens were drawn from it, so this estimates
            # KL(sampler || trainer) without bias, and is never negative. In float64: a float32 engine's
            # gaps of ~1e-6 give a k3 of ~1e-12, which float32's exp(D) - 1 - D rounds to 0.
            kl = k3_kl(sampler.double(), logprobs_old.double())
            sampler_metrics["loss/sampler_trainer_kl"] = _token_mean(kl, mask)
        if settings.tis_cap is not None:
            weights = _masked(truncated_importance_weights(logprobs_old, sampler, settings.tis_cap), mask)
            per_token = per_token * weights.to(per_token.dtype)
            with torch.no_grad():
                capped = torch.exp(logprobs_old - sampler) > settings.tis_cap
                sampler_metrics["loss/tis_capped_share"] = _token_mean(capped.to(weights.dtype), mask)
                sampler_metrics["loss/tis_weight_mean"] = _token_mean(weights, mask)
    per_sequence = share is not None and settings.aggregation == "sequence-mean"
    denominator = step.denominator

    def reduce(values: Tensor) -> Tensor:
        if per_sequence:  # each sequence weighs the same: its tokens 1 / its length each
            assert share is not None
            total_share = float(share.sum()) if denominator is None else denominator
            weighted = _masked(values * share, mask).sum()
            return weighted / total_share if total_share > 0 else weighted
        return aggregate(
            values,
            mask,
            settings.aggregation,
            constant_normalizer=settings.constant_normalizer,
            denominator=denominator,
        )

    policy_term = reduce(per_token)
    clipped_fraction = step.clipped_fraction
    if settings.clip_normalization and clipped_fraction is not None:  # SORL: more turns clipped, smaller step
        policy_term = (1.0 - clipped_fraction) * policy_term
    total = policy_term
    with torch.no_grad():
        token_ratio = torch.exp(logprobs_new - logprobs_old)
        metrics = {
            "loss/policy": float(policy_term.detach()),
            "loss/clip_fraction": _token_mean(was_clipped.to(ratio.dtype), mask),
            "loss/approx_kl": _token_mean(token_ratio - 1.0 - (logprobs_new - logprobs_old), mask),
            "loss/ratio_mean": _token_mean(ratio, mask),
            "loss/tokens": float(mask.sum()),
        }
        if settings.clip_normalization:
            metrics["loss/clipped_turn_fraction"] = float(clipped_fraction or 0.0)
        metrics.update(sampler_metrics)
    if settings.kl_beta and logprobs_ref is None:
        raise ValueError("kl_beta > 0 needs logprobs_ref (the reference policy's log-probabilities)")
    if settings.entropy_coef and entropy is None:
        raise ValueError("entropy_coef != 0 needs the per-token entropy")
    if logprobs_ref is not None:
        kl = k3_kl(logprobs_new, _masked(logprobs_ref.detach(), mask))
        metrics["loss/kl_ref"] = _token_mean(kl.detach(), mask)
        if settings.kl_beta:
            total = total + settings.kl_beta * reduce(kl)
    if entropy is not None:
        metrics["loss/entropy"] = _token_mean(entropy.detach(), mask)
        if settings.entropy_coef:
            total = total - settings.entropy_coef * reduce(entropy)
    metrics["loss/total"] = float(total.detach())
    return LossOutput(total, metrics)


def off_policy_mask(logprobs_trainer: Tensor, logprobs_engine: Tensor, eps_low: float, eps_high: float) -> Tensor:
    """Tokens whose ratio pi_trainer / pi_engine lies in ``[1 - eps_low, 1 + eps_high]`` (the others are masked).

    Asynchronous training's off-policy correction: a token sampled by an older policy whose
    probability the trainer's current weights put too far from the engine's is left out of the
    loss altogether (masked, not clipped: a clipped token still counts in the aggregation and
    its gradient may still flow on the other side of the clip).

    Example:
        >>> trainer, engine = torch.tensor([0.5, 0.5, 0.5]).log(), torch.tensor([0.5, 0.3, 0.6]).log()
        >>> off_policy_mask(trainer, engine, 0.2, 0.2)
        tensor([ True, False,  True])
    """
    ratio = torch.exp(logprobs_trainer - logprobs_engine)
    return (ratio >= 1.0 - eps_low) & (ratio <= 1.0 + eps_high)


def importance_weights(logprobs_trainer: Tensor, logprobs_engine: Tensor, keep: Tensor) -> Tensor:
    """Decoupled PPO's per-token importance weight w = pi_trainer / pi_engine on kept tokens, 0 on masked ones.

    pi_trainer is the proximal policy (the trainer's weights when the update starts), pi_engine
    the behaviour policy that sampled the token. Masked tokens (``keep`` false,
    :func:`off_policy_mask`) get 0: they are out of the loss anyway.

    Example:
        >>> trainer, engine = torch.tensor([0.5, 0.5, 0.5]).log(), torch.tensor([0.5, 0.25, 0.4]).log()
        >>> importance_weights(trainer, engine, off_policy_mask(trainer, engine, 0.5, 1.0))
        tensor([1.0000, 2.0000, 1.2500])
    """
    ratio = torch.exp(logprobs_trainer - logprobs_engine)
    return torch.where(keep, ratio, torch.zeros_like(ratio))
