"""What a sequence-level or clip-normalised loss needs from a whole optimizer step, not one micro-batch.

GSPO's ratio is taken over a whole sequence (a drawn trajectory's turns) and SORL scales the step
by the fraction of clipped turns; both depend on every sample of the optimizer step, while the
loss sees one micro-batch at a time. :func:`step_context` computes those numbers once per
optimizer step, without gradient, from each sample's log-probabilities under the current weights
(before the step's first backward: the weights the step's gradient is taken at) and under pi_old,
so that k micro-batches give exactly the gradient of one batch, as for the other losses.

Pure functions over lists of numbers; :class:`training.update.PolicyUpdate` supplies the
log-probabilities (a forward pass without gradient, skipped at an update's first optimizer
step, where the current weights are pi_old's).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepContext:
    """Per-sample figures of one optimizer step.

    Attributes:
        sequence_log_ratio: Per sample, the mean log-ratio over every token of its sequence.
        sequence_tokens: Per sample, the number of tokens of its sequence.
        share: Sum over the step's samples of (its tokens / its sequence's tokens): the number of
            sequences the step holds, counting a sequence split over steps by its part.
        clipped_fraction: Fraction of the step's turns whose clipped branch is taken.
    """

    sequence_log_ratio: dict[int, float] = field(default_factory=dict)
    sequence_tokens: dict[int, float] = field(default_factory=dict)
    share: float = 0.0
    clipped_fraction: float = 0.0


def sequence_members(sequences: Sequence[int], rows: Sequence[int]) -> list[int]:
    """Every sample (index into ``sequences``) of the sequences that ``rows`` belong to.

    Example:
        >>> sequence_members([0, 0, 1, 2, 2], [1, 3])
        [0, 1, 3, 4]
    """
    touched = {sequences[row] for row in rows}
    return [index for index, sequence in enumerate(sequences) if sequence in touched]


def step_context(
    rows: Sequence[int],
    sequences: Sequence[int],
    current: Mapping[int, Sequence[float]],
    old: Sequence[Sequence[float]],
    advantages: Sequence[Sequence[float]],
    *,
    clip_eps_low: float,
    clip_eps_high: float,
) -> StepContext:
    """The step's sequence ratios and clipped-turn fraction.

    Args:
        rows: The step's samples (indices).
        sequences: The sequence of every sample of the update.
        current: Log-probabilities under the current weights of (at least) every sample of the
            sequences ``rows`` touch.
        old: pi_old log-probabilities of every sample.
        advantages: Per-token advantages of every sample.
        clip_eps_low: The ratio is clipped below at 1 - clip_eps_low.
        clip_eps_high: The ratio is clipped above at 1 + clip_eps_high.

    Returns:
        The figures the loss takes for each micro-batch of the step.

    Example:
        Two samples of one sequence (log-ratios 0.1 and 0.3 on one token each) and one of another:

        >>> context = step_context([0, 2], [0, 0, 1], {0: [0.1], 1: [0.3], 2: [0.0]}, [[0.0]] * 3, [[1.0]] * 3,
        ...                        clip_eps_low=0.2, clip_eps_high=0.2)
        >>> round(context.sequence_log_ratio[0], 3), context.sequence_tokens[0], context.share
        (0.2, 2.0, 1.5)
        >>> context.clipped_fraction  # exp(0.1) < 1.2: no turn is clipped
        0.0
    """
    sums: dict[int, float] = defaultdict(float)
    counts: dict[int, float] = defaultdict(float)
    for index in sequence_members(sequences, rows):
        values = current[index]
        sums[sequences[index]] += sum(new - before for new, before in zip(values, old[index], strict=True))
        counts[sequences[index]] += len(values)
    log_ratio, tokens, share, clipped = {}, {}, 0.0, 0
    for row in rows:
        sequence = sequences[row]
        log_ratio[row] = sums[sequence] / counts[sequence] if counts[sequence] else 0.0
        tokens[row] = counts[sequence]
        share += len(old[row]) / counts[sequence] if counts[sequence] else 0.0
        clipped += turn_clipped(current[row], old[row], advantages[row], clip_eps_low, clip_eps_high)
    fraction = clipped / len(rows) if rows else 0.0
    return StepContext(log_ratio, tokens, share, fraction)


def turn_clipped(
    current: Sequence[float], old: Sequence[float], advantages: Sequence[float], eps_low: float, eps_high: float
) -> bool:
    """Whether a turn's geometric-mean ratio takes the clipped branch on one of its tokens (SORL's trigger).

    Example:
        >>> turn_clipped([0.5], [0.0], [1.0], 0.2, 0.2), turn_clipped([0.5], [0.0], [-1.0], 0.2, 0.2)
        (True, False)
    """
    if not current:
        return False
    ratio = math.exp(sum(new - before for new, before in zip(current, old, strict=True)) / len(current))
    return any(
        (advantage > 0 and ratio > 1 + eps_high) or (advantage < 0 and ratio < 1 - eps_low) for advantage in advantages
    )
