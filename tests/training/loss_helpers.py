"""Loss settings of a registered loss, for tests that call :func:`training.losses.policy_loss` directly.

Training builds its settings from the configuration (:meth:`training.config.TrainConfig.loss_options`);
tests that exercise one registered loss on hand-written tensors take its ratio level, clip range,
aggregation and normalisation from the registry here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from training.loss_specs import loss_spec
from training.losses import LossSettings


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
