"""Plain summaries of a list of episodes (the evaluation harness builds richer reports)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from tsmg.episode import Episode


@dataclass(frozen=True)
class EpisodeSummary:
    """Aggregate figures of a set of episodes, for one agent.

    Attributes:
        episodes: Episodes counted (failed ones excluded, see ``failed``).
        failed: Episodes that ended with an error.
        success_rate: Fraction of successful episodes (None if the game defines no success).
        mean_return: Mean return of the agent.
        return_stderr: Standard error of that mean.
        mean_rounds: Mean number of rounds per episode.
        invalid_rate: Invalid answers per decision.
    """

    episodes: int
    failed: int
    success_rate: float | None
    mean_return: float
    return_stderr: float
    mean_rounds: float
    invalid_rate: float

    def as_dict(self) -> dict[str, float | int | None]:
        """The figures as a JSON-ready dict."""
        return asdict(self)


def summarize(episodes: Sequence[Episode], agent: str | None = None) -> EpisodeSummary:
    """Summarise ``episodes`` from the point of view of ``agent`` (default: the first agent)."""
    completed = [episode for episode in episodes if episode.error is None]
    failed = len(episodes) - len(completed)
    if not completed:
        return EpisodeSummary(0, failed, None, math.nan, math.nan, math.nan, math.nan)
    agent = agent or completed[0].agents[0]
    returns = [episode.returns.get(agent, 0.0) for episode in completed]
    mean = sum(returns) / len(returns)
    variance = sum((value - mean) ** 2 for value in returns) / max(len(returns) - 1, 1)
    successes = [episode.success.get(agent) for episode in completed]
    defined = [bool(value) for value in successes if value is not None]
    decisions = sum(len(episode.steps_of(agent)) for episode in completed)
    invalid = sum(1 for episode in completed for step in episode.steps_of(agent) if not step.valid)
    return EpisodeSummary(
        episodes=len(completed),
        failed=failed,
        success_rate=sum(defined) / len(defined) if defined else None,
        mean_return=mean,
        return_stderr=math.sqrt(variance / len(returns)),
        mean_rounds=sum(episode.num_rounds for episode in completed) / len(completed),
        invalid_rate=invalid / decisions if decisions else 0.0,
    )
