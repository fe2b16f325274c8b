"""Loss settings of a registered loss, for tests that call :func:`training.losses.policy_loss` directly.

Training builds its settings from the configuration (:meth:`training.config.TrainConfig.loss_options`);
tests that exercise one registered loss on hand-written tensors take its ratio level, clip range,
aggregation and normalisation from the registry here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from torch import Tensor

from training.loss_specs import loss_spec
from training.losses import LossOutput, LossSettings, StepFigures, policy_loss


def settings_for(name: str, **overrides: Any) -> LossSettings:
    """Settings of the registered loss ``name`` (its ratio level and clip range), then ``overrides``."""
    spec = loss_spec(name)
    settings = LossSettings(
        spec.ratio_level,
        spec.clip_eps_low,
        spec.clip_eps_high,
        aggregation=spec.aggregation or "token-mean",
        clip_normalization=spec.clip_normalization,
    )
    return replace(settings, **overrides)


def one_batch_loss(
    new: Tensor,
    old: Tensor,
    advantages: Tensor,
    mask: Tensor,
    settings: LossSettings,
    sequence_ids: Tensor | None = None,
) -> LossOutput:
    """:func:`training.losses.policy_loss` of an optimizer step that is this one batch (its figures from the batch)."""
    step = StepFigures.of_batch(new, old, advantages, mask, settings, sequence_ids)
    return policy_loss(new, old, advantages, mask, settings, step)
