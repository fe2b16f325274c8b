"""Learning-rate schedules as a pure function of the optimizer step (for ``torch``'s ``LambdaLR``)."""

from __future__ import annotations

import math
from typing import Literal

Schedule = Literal["constant", "linear", "cosine"]


def lr_multiplier(
    step: int,
    total_steps: int,
    schedule: Schedule = "constant",
    warmup_steps: int = 0,
    min_lr_ratio: float = 0.0,
) -> float:
    """The factor applied to the base learning rate at optimizer step ``step`` (0-based).

    Linear warm-up from 1/(warmup_steps + 1) to 1 over the first ``warmup_steps`` steps (never 0,
    so the first step moves the weights), then constant, linear decay or cosine decay from 1 to
    ``min_lr_ratio`` at ``total_steps`` (held there afterwards).

    Example:
        >>> [round(lr_multiplier(s, 4, "linear", warmup_steps=1), 3) for s in range(5)]
        [0.5, 1.0, 0.667, 0.333, 0.0]
    """
    if warmup_steps and step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    if schedule == "constant":
        return 1.0
    span = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps, 0) / span, 1.0)
    if schedule == "linear":
        shape = 1.0 - progress
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_lr_ratio + (1.0 - min_lr_ratio) * shape
