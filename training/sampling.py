"""Episode samplers: which credited trajectories (or steps) an update trains on.

MS-GRPO draws episodes with probability p_i proportional to |A_i| (absolute-advantage-weighted,
AAW); the paper does not publish the exact form, so :func:`aaw_sample` implements
p_i proportional to |A_i|^alpha with alpha = 1 by default, with or without replacement. The
ablation is :func:`uniform_sample` (every item equally likely, zero-advantage ones included) and
``uniform-nonzero`` (equally likely among the items with A != 0), which separates "weighting by
|A|" from "skipping items without signal".

What AAW changes in the estimator: a drawn item trains with its own A, so item i's expected
weight in the update is proportional to p_i A_i, i.e. sign(A_i)|A_i|^(1+alpha): AAW *reweights*
the policy gradient toward large |A| (a lone success among 8 failures in a group weighs 7:1
against one failure under uniform sampling, 49:1 under AAW). That is MS-GRPO's choice, not an
unbiased estimate of the uniform gradient. ``importance_correction`` multiplies each draw's
advantage by 1 / (N p_i) (:func:`importance_weights`), which makes the update's expectation the
uniform one (draws with replacement). Without replacement and with as many draws as items with
A != 0, AAW draws each of them once: it *is* ``uniform-nonzero`` (the configuration refuses that).

Every sampler takes a :class:`numpy.random.Generator` (never the global RNG) and returns a
:class:`Sample`: the drawn indices into the input array plus :class:`SampleStats`. Nothing here
divides by zero: when no item is eligible the sample is empty and the stats say why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import replace as replace_fields
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    from training.credit import CreditAssignment, StepCredit

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: What the sampler draws: whole (episode, agent) trajectories or single steps.
SampleUnit = Literal["episode", "step"]


@dataclass(frozen=True)
class SampleStats:
    """What a draw did, for the metrics.

    Attributes:
        items: Items offered (trajectories or steps).
        eligible: Items with non-zero probability.
        requested: Draws asked for.
        drawn: Draws made (fewer than requested without replacement when too few are eligible).
        distinct: Distinct items among the draws.
        empty_reason: Why nothing was drawn (None when something was).
    """

    items: int
    eligible: int
    requested: int
    drawn: int
    distinct: int
    empty_reason: str | None = None

    def as_metrics(self, prefix: str = "sampler/") -> dict[str, float]:
        """The numeric stats as namespaced metrics (plus ``empty`` as 0/1)."""
        return {
            f"{prefix}items": float(self.items),
            f"{prefix}eligible": float(self.eligible),
            f"{prefix}requested": float(self.requested),
            f"{prefix}drawn": float(self.drawn),
            f"{prefix}distinct": float(self.distinct),
            f"{prefix}empty": float(self.empty_reason is not None),
        }


@dataclass(frozen=True)
class Sample:
    """Drawn indices (into the array given to the sampler, repeats possible) and the draw's stats."""

    indices: IntArray
    stats: SampleStats
    probabilities: FloatArray = field(repr=False, default_factory=lambda: np.zeros(0))


def aaw_probabilities(advantages: ArrayLike, alpha: float = 1.0) -> FloatArray | None:
    """p_i = |A_i|^alpha / sum_j |A_j|^alpha, or None when every A is 0.

    Items with A = 0 get p = 0 for every alpha (0^0 is taken as 0, not 1), so they are never
    drawn.

    Example:
        >>> aaw_probabilities([1.0, -3.0, 0.0]).tolist()
        [0.25, 0.75, 0.0]
        >>> aaw_probabilities([0.0, 0.0]) is None
        True
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    magnitudes = np.abs(np.asarray(advantages, dtype=np.float64))
    if not np.all(np.isfinite(magnitudes)):
        raise ValueError("advantages must be finite")
    weights = np.where(magnitudes > 0, magnitudes**alpha, 0.0)
    total = float(weights.sum())
    if total <= 0.0:
        return None
    probabilities: FloatArray = weights / total
    return probabilities


def draw(probabilities: FloatArray, num_samples: int, rng: np.random.Generator, *, replace: bool) -> Sample:
    """Draw indices from ``probabilities`` (entries with p = 0 are never drawn).

    Without replacement at most the number of eligible items is drawn (the stats report the
    shortfall), since distinct draws cannot exceed them.
    """
    if num_samples < 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    eligible = int(np.count_nonzero(probabilities))
    size = num_samples if replace else min(num_samples, eligible)
    if eligible == 0:
        size = 0
    indices = rng.choice(probabilities.size, size=size, replace=replace, p=probabilities) if size else np.zeros(0)
    indices = np.asarray(indices, dtype=np.int64)
    stats = SampleStats(probabilities.size, eligible, num_samples, size, int(np.unique(indices).size))
    return Sample(indices, stats, probabilities)


def _empty(items: int, num_samples: int, reason: str) -> Sample:
    return Sample(np.zeros(0, dtype=np.int64), SampleStats(items, 0, num_samples, 0, 0, reason), np.zeros(items))


def aaw_sample(
    advantages: ArrayLike,
    num_samples: int,
    rng: np.random.Generator,
    *,
    alpha: float = 1.0,
    replace: bool = True,
) -> Sample:
    """Absolute-advantage-weighted sampling: draw item i with p_i proportional to |A_i|^alpha.

    Args:
        advantages: One advantage (or |A|) per item.
        num_samples: Draws wanted.
        rng: The source of randomness.
        alpha: Sharpness: 0 = uniform over non-zero items, 1 = proportional to |A| (default).
        replace: Draw with replacement (an item may repeat) or distinct items.

    Returns:
        The draw; empty, with ``stats.empty_reason`` set, when every advantage is 0.
    """
    values = np.asarray(advantages, dtype=np.float64)
    probabilities = aaw_probabilities(values, alpha)
    if probabilities is None:
        return _empty(values.size, num_samples, "every advantage is 0: no item carries a learning signal")
    return draw(probabilities, num_samples, rng, replace=replace)


def uniform_sample(
    advantages: ArrayLike,
    num_samples: int,
    rng: np.random.Generator,
    *,
    replace: bool = True,
    skip_zero: bool = False,
) -> Sample:
    """Uniform sampling over every item (or, with ``skip_zero``, over the items with A != 0).

    Args:
        advantages: One advantage per item (only its length and, with ``skip_zero``, its zeros matter).
        num_samples: Draws wanted.
        rng: The source of randomness.
        replace: With or without replacement.
        skip_zero: Leave out items whose advantage is 0.

    Returns:
        The draw; empty, with ``stats.empty_reason`` set, when no item is eligible.
    """
    values = np.asarray(advantages, dtype=np.float64)
    weights = (values != 0).astype(np.float64) if skip_zero else np.ones_like(values)
    total = float(weights.sum())
    if total == 0.0:
        reason = "every advantage is 0: no item carries a learning signal" if values.size else "no items to draw from"
        return _empty(values.size, num_samples, reason)
    return draw(weights / total, num_samples, rng, replace=replace)


SamplerFn = Callable[[FloatArray, int, np.random.Generator, float, bool], Sample]


@dataclass(frozen=True)
class SamplerSpec:
    """A registered sampler.

    Attributes:
        name: The name a configuration selects it by.
        description: One line saying what it does.
        uses_alpha: Whether the ``alpha`` option matters.
        sample: ``sample(advantages, num_samples, rng, alpha, replace) -> Sample``.
    """

    name: str
    description: str
    uses_alpha: bool
    sample: SamplerFn = field(repr=False)


SAMPLERS: dict[str, SamplerSpec] = {
    spec.name: spec
    for spec in (
        SamplerSpec(
            "aaw",
            "absolute-advantage-weighted: p_i proportional to |A_i|^alpha; A = 0 never drawn (MS-GRPO); it reweights "
            "the update (expected weight sign(A)|A|^(1+alpha)) unless importance_correction (x 1/(N p_i))",
            True,
            lambda values, count, rng, alpha, replace: aaw_sample(values, count, rng, alpha=alpha, replace=replace),
        ),
        SamplerSpec(
            "uniform",
            "every item equally likely, zero-advantage items included (the AAW ablation)",
            False,
            lambda values, count, rng, alpha, replace: uniform_sample(values, count, rng, replace=replace),
        ),
        SamplerSpec(
            "uniform-nonzero",
            "equally likely among items with A != 0 (separates weighting from filtering)",
            False,
            lambda values, count, rng, alpha, replace: uniform_sample(
                values, count, rng, replace=replace, skip_zero=True
            ),
        ),
    )
}


def sampler(name: str) -> SamplerSpec:
    """The registered sampler called ``name``.

    Raises:
        ValueError: No sampler has that name (the message lists the valid names).
    """
    try:
        return SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; choose one of {sorted(SAMPLERS)}") from None


def sample(
    name: str,
    advantages: ArrayLike,
    num_samples: int,
    rng: np.random.Generator,
    *,
    alpha: float = 1.0,
    replace: bool = True,
) -> Sample:
    """Draw with the registered sampler ``name`` (see :data:`SAMPLERS`).

    Example:
        >>> result = sample("aaw", [0.0, 2.0, 0.0], 3, np.random.default_rng(0))
        >>> result.indices.tolist(), result.stats.eligible
        ([1, 1, 1], 1)
    """
    return sampler(name).sample(np.asarray(advantages, dtype=np.float64), num_samples, rng, alpha, replace)


def importance_weights(drawn: Sample) -> FloatArray:
    """1 / (N p_i) of every draw: the weights that make a draw with replacement estimate the uniform mean.

    With them, sum over k draws of w A / k has the expectation sum_i A_i / N whatever p is.

    Example:
        >>> importance_weights(Sample(np.array([1, 0]), SampleStats(2, 2, 2, 2, 2), np.array([0.25, 0.75]))).tolist()
        [0.6666666666666666, 2.0]
    """
    chosen = drawn.probabilities[drawn.indices]
    weights: FloatArray = 1.0 / (drawn.probabilities.size * chosen)
    return weights


def draw_steps(
    credit: CreditAssignment,
    name: str,
    rng: np.random.Generator,
    *,
    unit: SampleUnit = "episode",
    count: int | Literal["all"] | None = None,
    alpha: float = 1.0,
    replace: bool = True,
    importance_correction: bool = False,
) -> tuple[list[StepCredit], Sample]:
    """The credited steps an update trains on, drawn with the registered sampler ``name``.

    Args:
        credit: The rollout's credit assignment.
        name: A registered sampler (see :data:`SAMPLERS`).
        rng: The update's generator.
        unit: ``episode``: draw (episode, agent) trajectories by their mean |A| and train every
            step of each; ``step``: draw single steps by their own |A|.
        count: Draws (None: as many as there are items to draw from); ``"all"``: no draw, every item once, in
            order, with its own advantage (zero ones included: they add nothing to the policy gradient).
        alpha: AAW sharpness.
        replace: Draw with replacement.
        importance_correction: Multiply each draw's advantages by 1 / (N p_i) (:func:`importance_weights`).

    Returns:
        The drawn steps (repeats kept, in draw order) and the draw.
    """
    if count == "all":
        if importance_correction:
            raise ValueError("importance_correction reweights a draw; count 'all' draws nothing")
        return every_item(credit, unit)
    if unit == "episode":
        values = credit.sampling_advantages()
        drawn = sample(name, values, count or len(values), rng, alpha=alpha, replace=replace)
        steps = credit.steps(drawn.indices)
    else:
        every_step = credit.steps()
        advantages = [item.advantage for item in every_step]
        drawn = sample(name, advantages, count or len(every_step), rng, alpha=alpha, replace=replace)
        steps = [replace_fields(every_step[int(index)], draw=draw) for draw, index in enumerate(drawn.indices)]
    if importance_correction and steps:
        weights = importance_weights(drawn)
        steps = [replace_fields(step, advantage=step.advantage * float(weights[step.draw])) for step in steps]
    return steps, drawn


def every_item(credit: CreditAssignment, unit: SampleUnit = "episode") -> tuple[list[StepCredit], Sample]:
    """Every trajectory (``unit`` ``episode``) or every step of the rollout once, in order: no draw.

    What ``sampler.samples_per_update: all`` trains on: all of a rollout's decisions, each with its own
    advantage, instead of a draw of some of them.
    """
    if unit == "episode":
        items = len(credit.sampling_advantages())
        indices = np.arange(items, dtype=np.int64)
        steps = credit.steps(indices)
    else:
        every_step = credit.steps()
        items = len(every_step)
        indices = np.arange(items, dtype=np.int64)
        steps = [replace_fields(step, draw=draw) for draw, step in enumerate(every_step)]
    probabilities = np.full(items, 1.0 / items) if items else np.zeros(0)
    stats = SampleStats(items, items, items, items, items, None if items else "no items to draw from")
    return steps, Sample(indices, stats, probabilities)
