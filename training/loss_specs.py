"""The registry of policy losses, without torch (so configs and ``tsmg algos`` stay light).

The arithmetic lives in :mod:`training.losses`; a loss here is a named choice of ratio level and
default clip range.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

#: Where the importance ratio is taken: per token, one geometric-mean ratio per turn (SORL), or
#: one per sequence, a trajectory's turns together (GSPO).
RatioLevel = Literal["token", "turn", "sequence"]
#: How per-token losses become one number (see :func:`training.losses.aggregate`).
Aggregation = Literal["token-mean", "sequence-mean", "constant"]

AGGREGATIONS: dict[Aggregation, str] = {
    "token-mean": "sum over every token of the batch / number of tokens (DAPO)",
    "sequence-mean": "mean over sequences of each sequence's token mean (GRPO)",
    "constant": "sum over tokens / (number of sequences x a constant length) (Dr.GRPO)",
}


@dataclass(frozen=True)
class LossSpec:
    """A registered policy loss.

    Attributes:
        name: The name a configuration selects it by.
        description: One line saying what it does.
        ratio_level: "token" or "turn" (one ratio per turn shared by its tokens).
        clip_eps_low: Default lower clip: the ratio is clipped below at 1 - clip_eps_low.
        clip_eps_high: Default upper clip: the ratio is clipped above at 1 + clip_eps_high.
        clip_normalization: SORL's clipping-triggered normalisation: the policy term of an
            optimizer step is scaled by (1 - the fraction of its turns whose ratio was clipped).
        aggregation: The aggregation its paper prescribes (None: the configuration's).
    """

    name: str
    description: str
    ratio_level: RatioLevel
    clip_eps_low: float
    clip_eps_high: float
    clip_normalization: bool = False
    aggregation: Aggregation | None = None


LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        LossSpec("ppo-clip", "token-level PPO clipped ratio, eps = 0.2 (MS-GRPO, GRPO)", "token", 0.2, 0.2),
        LossSpec("clip-higher", "token-level clipped ratio, eps_low 0.2 / eps_high 0.28 (DAPO)", "token", 0.2, 0.28),
        LossSpec(
            "turn-clip",
            "one geometric-mean ratio per turn, clipped and shared by the turn's tokens (SORL's ratio alone)",
            "turn",
            0.2,
            0.2,
        ),
        LossSpec(
            "sorl",
            "SORL: one geometric-mean ratio per turn, and each optimizer step's policy term scaled by "
            "(1 - the fraction of turns clipped)",
            "turn",
            0.2,
            0.2,
            clip_normalization=True,
        ),
        LossSpec(
            "gspo",
            "GSPO: one geometric-mean ratio per sequence (a drawn trajectory's turns together), clipped at "
            "1 -/+ 3e-4/4e-4, each sequence weighing the same",
            "sequence",
            3e-4,
            4e-4,
            aggregation="sequence-mean",
        ),
    )
}


def loss_spec(name: str) -> LossSpec:
    """The registered loss called ``name``.

    Raises:
        ValueError: No loss has that name (the message lists the valid names).
    """
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown policy loss {name!r}; choose one of {sorted(LOSSES)}") from None


def row_token_weights(
    lengths: Sequence[int], aggregation: Aggregation, sequences: Sequence[Hashable] | None = None
) -> list[float]:
    """The weight ``aggregation`` gives each token of each row, up to one factor common to every row.

    ``token-mean`` and ``constant`` weigh every token alike (1 / the batch's tokens, or 1 /
    (sequences x a constant)); ``sequence-mean`` weighs a token 1 / its sequence's tokens: a row's
    own length, or, when ``sequences`` says which rows form one sequence (a sequence-level ratio:
    GSPO's drawn trajectory), the length of all its rows together
    (:func:`training.losses.policy_loss`). A row's total weight in the loss is its length times this.

    Example:
        >>> row_token_weights([2, 4], "token-mean"), row_token_weights([2, 4], "sequence-mean")
        ([1.0, 1.0], [0.5, 0.25])
        >>> row_token_weights([2, 4, 2], "sequence-mean", sequences=[0, 0, 1])
        [0.16666666666666666, 0.16666666666666666, 0.5]
    """
    if aggregation != "sequence-mean":
        return [1.0] * len(lengths)
    if sequences is None:
        return [1.0 / max(length, 1) for length in lengths]
    totals: dict[Hashable, int] = {}
    for length, sequence in zip(lengths, sequences, strict=True):
        totals[sequence] = totals.get(sequence, 0) + length
    return [1.0 / max(totals[sequence], 1) for sequence in sequences]
