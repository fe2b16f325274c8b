"""A warning when training has had nothing to learn from for several updates in a row.

MS-GRPO (and every group-relative assigner) learns from the differences between the returns of a
group's episodes. An update where every group's episodes got the same return (every group
zero-signal, ``credit/zero_signal_fraction`` 1) or where every answer was invalid
(``rollout/invalid_rate`` 1, so that the game only ever saw the invalid-answer rule) changes
nothing but the clock. A run in that state for :data:`PATIENCE` updates is most likely set up
wrong, and the usual fixes are few; :class:`SignalWatch` names them, once per run, through this
module's logger (which a bare ``tsmg train`` shows on stderr).

Example:
    >>> watch = SignalWatch(action_format="tag")
    >>> [watch.observe(step, {"rollout/invalid_rate": 1.0}) is not None for step in range(1, 7)]
    [False, False, False, False, True, False]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

__all__ = ["PATIENCE", "SignalWatch"]

logger = logging.getLogger(__name__)

#: Consecutive updates without signal before the warning.
PATIENCE = 5


class SignalWatch:
    """Counts consecutive updates without a learning signal and warns once when they reach ``patience``.

    Args:
        action_format: The rollouts' ``rollout.lap.action_format.kind`` (the advice for invalid answers names it).
        patience: Consecutive updates without signal before the warning.
    """

    def __init__(self, action_format: str | None = None, *, patience: int = PATIENCE) -> None:
        self.action_format = action_format
        self.patience = patience
        self.invalid_streak = 0
        self.silent_streak = 0
        self.warned = False

    def observe(self, step: int, metrics: Mapping[str, float | None]) -> str | None:
        """Take one update's metrics; return (and log) the warning the first time a streak reaches ``patience``."""
        invalid = metrics.get("rollout/invalid_rate") == 1.0
        silent = invalid or metrics.get("credit/zero_signal_fraction") == 1.0
        self.invalid_streak = self.invalid_streak + 1 if invalid else 0
        self.silent_streak = self.silent_streak + 1 if silent else 0
        if self.warned or self.silent_streak < self.patience:
            return None
        self.warned = True
        message = self._message(step)
        logger.warning(message)
        return message

    def _message(self, step: int) -> str:
        if self.invalid_streak >= self.patience:
            current = f" ({self.action_format})" if self.action_format else ""
            return (
                f"warning: every answer was invalid for the last {self.invalid_streak} updates (update {step}): the "
                f"model cannot produce the action format{current}, so there is nothing to learn from; try "
                "--action-format choice (answers constrained to the legal moves), a model that can follow the "
                "format, or a supervised warm start on valid moves (tsmg sft)"
            )
        return (
            f"warning: no group had a learning signal for the last {self.silent_streak} updates (update {step}): "
            "every episode of each group got the same return, so the update changed nothing; try larger or more "
            "groups (--group-size, --groups), a higher --temperature, a game option that shapes the reward, or "
            "replacing such groups (--set sampler.refill_zero_variance=true)"
        )
