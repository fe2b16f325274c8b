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
    *,
    progress: float | None = None,
) -> float:
    """The factor applied to the base learning rate at optimizer step ``step`` (0-based).

    Linear warm-up from 1/(warmup_steps + 1) to 1 over the first ``warmup_steps`` steps (never 0,
    so the first step moves the weights), then constant, linear decay or cosine decay from 1 to
    ``min_lr_ratio`` at ``total_steps`` (held there afterwards).

    ``progress`` (0 to 1), when given, replaces the steps' own progress through the decay: a run
    with an episode budget decays by the fraction of its episodes played (warm-up still counts
    steps).

    Example:
        >>> [round(lr_multiplier(s, 4, "linear", warmup_steps=1), 3) for s in range(5)]
        [0.5, 1.0, 0.667, 0.333, 0.0]
        >>> lr_multiplier(3, 4, "linear", progress=0.25)
        0.75
    """
    if warmup_steps and step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    if schedule == "constant":
        return 1.0
    if progress is None:
        span = max(total_steps - warmup_steps, 1)
        progress = max(step - warmup_steps, 0) / span
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "linear":
        shape = 1.0 - progress
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_lr_ratio + (1.0 - min_lr_ratio) * shape
