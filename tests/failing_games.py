"""Games with bugs of their own, as users write them (``tests/register_failing_games.py`` registers them).

* :class:`OldSignatureLake`: Frozen Lake whose ``parse_action`` still has the two-argument
  signature the README once showed, so every call of it raises a TypeError.
* :class:`NoOracleLake`: Frozen Lake without an oracle.
* :class:`WorkerOnlyFailingLake`: Frozen Lake whose ``parse_action`` raises only in a child
  process (an asynchronous training run's rollout worker), so it passes the trainer's checks.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from games.frozen_lake import _MOVES, FrozenLake
from tsmg.core import RulesGame


class OldSignatureLake(FrozenLake):
    """``parse_action(agent, text)``: the referee's three-argument call raises a TypeError."""

    def parse_action(self, agent: str, text: str) -> Any:  # type: ignore[override]
        return _MOVES.read(text)


class NoOracleLake(FrozenLake):
    """Frozen Lake with RulesGame's default oracle: none."""

    oracle = RulesGame.oracle


class WorkerOnlyFailingLake(FrozenLake):
    """Frozen Lake whose ``parse_action`` raises a ValueError in a child process, and only there."""

    def parse_action(self, agent: str, text: str, state: Any) -> Any:
        if multiprocessing.parent_process() is not None:
            raise ValueError("this lake breaks in the rollout worker")
        return super().parse_action(agent, text, state)
