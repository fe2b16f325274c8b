"""Episode statistics, in one place: outcomes, return, invalid answers, turns, tokens and latency.

:func:`summarize_seats` is the one computation, over ``(agent, episode)`` pairs (a *seat*: one
agent's play in one episode). Its views: :func:`summarize` (one agent over a list of episodes,
for ``tsmg rollout`` and the demo), :meth:`EpisodeSummary.as_metrics` (the trainer's
``rollout/...`` and ``eval/...`` metrics) and the evaluation harness's per-model rows
(:func:`tsmg.apps.evaluation.metrics.model_row`, which adds confidence intervals and cost).

What an episode's result is depends on the game (:attr:`tsmg.core.Game.outcome`): a goal is
reached or not (success), or each seat wins, draws or loses (:func:`seat_outcomes`), a seat that
forfeited by invalid answers losing (:func:`forfeits`). Both are read from the episode records
alone, so run folders written before outcomes were counted are summarised the same way.

Example:
    >>> from tsmg.policies import OraclePolicy
    >>> from tsmg.rollout import rollout
    >>> summary = summarize(rollout("FrozenLake-v0", OraclePolicy(), seeds=[0, 1]))
    >>> summary.success_rate, summary.mean_turns
    (1.0, 6.0)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from tsmg.core import GameConfig, OutcomeKind
from tsmg.episode import Episode

#: One seat's result in a game of wins, draws and losses.
Outcome = Literal["win", "draw", "loss"]


@dataclass(frozen=True)
class EpisodeSummary:
    """Aggregate figures of a set of seats (one agent's play in one episode each).

    Attributes:
        episodes: Distinct finished episodes counted (failed ones excluded, see ``failed``).
        failed: Episodes that ended with an error.
        seats: ``(agent, episode)`` pairs counted (``episodes`` x seats per episode).
        success_rate: Fraction of seats that succeeded (None if the game defines no success).
        successes: Seats that succeeded.
        success_trials: Seats whose success is defined.
        mean_return: Mean return per seat.
        return_stderr: Standard error of that mean (sample standard deviation; 0 for one seat).
        mean_rounds: Mean number of game rounds per episode.
        invalid_rate: Invalid answers per decision.
        decisions: Decisions taken in the seats.
        mean_turns: Decisions per seat.
        prompt_tokens: Prompt tokens over every decision.
        completion_tokens: Completion tokens over every decision.
        reasoning_tokens: Of those, tokens spent thinking, where the backend reported them (None
            when no decision reported any).
        mean_latency_s: Mean wall time per decision.
        mean_episode_latency_s: Mean wall time per seat's episode.
        outcome: What a result is in these seats' games (:attr:`tsmg.core.Game.outcome`; ``goal``
            when they mix kinds).
        wins: Seats won (None for a goal game), wins by an opponent's forfeit included.
        draws: Seats drawn (None for a goal game).
        losses: Seats lost (None for a goal game), the seat's own forfeits included.
        forfeits: Seats lost by forfeiting (invalid answers), as counted in ``losses``.
        wins_by_forfeit: Seats won because an opponent forfeited, as counted in ``wins``.
        returns: The return of each seat, in order.
    """

    episodes: int
    failed: int
    seats: int
    success_rate: float | None
    successes: int
    success_trials: int
    mean_return: float
    return_stderr: float
    mean_rounds: float
    invalid_rate: float
    decisions: int
    mean_turns: float
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None
    mean_latency_s: float
    mean_episode_latency_s: float
    outcome: OutcomeKind = "goal"
    wins: int | None = None
    draws: int | None = None
    losses: int | None = None
    forfeits: int = 0
    wins_by_forfeit: int = 0
    returns: tuple[float, ...] = field(default=(), repr=False)

    @property
    def win_draw_loss(self) -> bool:
        """Whether the seats' results are wins, draws and losses (else success of a goal)."""
        return self.wins is not None

    def as_dict(self) -> dict[str, float | int | str | None]:
        """The figures as a JSON-ready dict (without the per-seat returns)."""
        figures = asdict(self)
        figures.pop("returns")
        return figures

    def as_metrics(self, prefix: str = "rollout/") -> dict[str, float]:
        """The training loop's namespaced metrics (``success_rate`` only where success is defined)."""
        metrics = {
            f"{prefix}episodes": float(self.episodes),
            f"{prefix}failed_episodes": float(self.failed),
            f"{prefix}mean_return": 0.0 if math.isnan(self.mean_return) else self.mean_return,
            f"{prefix}invalid_rate": self.invalid_rate,
            f"{prefix}mean_steps": 0.0 if math.isnan(self.mean_turns) else self.mean_turns,
            f"{prefix}completion_tokens": float(self.completion_tokens),
        }
        if self.success_rate is not None:
            metrics[f"{prefix}success_rate"] = self.success_rate
        return metrics


def summarize_seats(seats: Sequence[tuple[str, Episode]], failed: int = 0) -> EpisodeSummary:
    """The figures of ``seats``: ``(agent, episode)`` pairs of finished episodes.

    Args:
        seats: The seats to count (an episode may appear once per agent counted).
        failed: Episodes that failed and are left out of ``seats`` (reported as they are).
    """
    returns = [episode.returns.get(agent, 0.0) for agent, episode in seats]
    first_of_game = {episode.game_id: episode for _, episode in seats}
    kinds = {outcome_kind(episode) for episode in first_of_game.values()}
    kind: OutcomeKind = kinds.pop() if len(kinds) == 1 else "goal"
    results: Counter[str] = Counter()
    if kind != "goal":
        judged = {}
        for _, episode in seats:
            if id(episode) not in judged:  # an episode counted for several seats is judged once
                gone = forfeits(episode)
                judged[id(episode)] = (seat_outcomes(episode, kind, gone), gone)
        for agent, episode in seats:
            outcomes, gone = judged[id(episode)]
            results[outcomes[agent]] += 1
            results["forfeit"] += agent in gone
            results["win_by_forfeit"] += bool(gone) and outcomes[agent] == "win"
    defined = [bool(value) for agent, episode in seats if (value := episode.success.get(agent)) is not None]
    steps = [step for agent, episode in seats for step in episode.steps_of(agent)]
    thinking = [step.reasoning_tokens for step in steps if step.reasoning_tokens is not None]
    episodes = list({id(episode): episode for _, episode in seats}.values())
    count = len(seats)
    if count:
        mean = sum(returns) / count
        variance = sum((value - mean) ** 2 for value in returns) / (count - 1) if count > 1 else 0.0
        stderr = math.sqrt(variance / count)
    else:
        mean = stderr = math.nan
    return EpisodeSummary(
        episodes=len(episodes),
        failed=failed,
        seats=count,
        success_rate=sum(defined) / len(defined) if defined else None,
        successes=sum(defined),
        success_trials=len(defined),
        mean_return=mean,
        return_stderr=stderr,
        mean_rounds=sum(episode.num_rounds for episode in episodes) / len(episodes) if episodes else math.nan,
        invalid_rate=sum(not step.valid for step in steps) / len(steps) if steps else 0.0,
        decisions=len(steps),
        mean_turns=len(steps) / count if count else math.nan,
        prompt_tokens=sum(step.prompt_tokens or 0 for step in steps),
        completion_tokens=sum(step.completion_tokens or 0 for step in steps),
        reasoning_tokens=sum(thinking) if thinking else None,
        mean_latency_s=sum(step.latency_s for step in steps) / len(steps) if steps else 0.0,
        mean_episode_latency_s=sum(episode.latency_s for _, episode in seats) / count if count else 0.0,
        outcome=kind,
        wins=results["win"] if kind != "goal" else None,
        draws=results["draw"] if kind != "goal" else None,
        losses=results["loss"] if kind != "goal" else None,
        forfeits=results["forfeit"],
        wins_by_forfeit=results["win_by_forfeit"],
        returns=tuple(returns),
    )


def outcome_kind(episode: Episode) -> OutcomeKind:
    """What a result is in ``episode``'s game: its declared :attr:`~tsmg.core.Game.outcome`.

    A game that declares none (or is not registered in this process) is a win/draw/loss game
    when it has several agents and a goal game when it has one.
    """
    declared = getattr(_entry_point(episode.game_id), "outcome", None)
    for kind in get_args(OutcomeKind):
        if declared == kind:
            return kind
    return "win_draw_loss" if len(episode.agents) > 1 else "goal"


def seat_outcomes(
    episode: Episode, kind: OutcomeKind | None = None, gone: Sequence[str] | None = None
) -> dict[str, Outcome]:
    """Each seat's win, draw or loss in a finished episode of a win/draw/loss game.

    A seat that forfeited loses. Every other seat wins with a :func:`standings` score above
    every other seat's, draws when it ties for the top and loses otherwise (a lone seat left by
    forfeits wins). A single-agent game against a built-in opponent, which is zero-sum, goes by
    the sign of the return.

    Args:
        episode: A finished episode.
        kind: The game's outcome rule (None: :func:`outcome_kind`).
        gone: The seats that forfeited, where the caller has them (None: :func:`forfeits`).

    Raises:
        ValueError: The game's results are successes of a goal, not wins, draws and losses.
    """
    kind = kind or outcome_kind(episode)
    if kind == "goal":
        raise ValueError(f"{episode.game_id} is a goal game: its results are successes, not wins, draws and losses")
    gone = forfeits(episode) if gone is None else gone
    if len(episode.agents) == 1:
        [agent] = episode.agents
        return {agent: "loss" if agent in gone else _compare(episode.returns.get(agent, 0.0), 0.0)}
    scores = standings(episode, kind, gone)
    results: dict[str, Outcome] = {}
    for agent in episode.agents:
        best_other = max(score for other, score in scores.items() if other != agent)
        results[agent] = "loss" if agent in gone else _compare(scores[agent], best_other)
    return results


def standings(
    episode: Episode, kind: OutcomeKind | None = None, gone: Sequence[str] | None = None
) -> dict[str, float]:
    """A score per seat that orders the seats as the game's outcome rule does (higher is better).

    The seat's return (``win_draw_loss``, and goal games), or 1 for a seat the game calls
    successful and 0 for the others (``win_draw_loss_by_success``); a seat that forfeited scores
    below every other. Head-to-head tables and ratings compare seats by it.

    Args:
        episode: A finished episode.
        kind: The game's outcome rule (None: :func:`outcome_kind`).
        gone: The seats that forfeited (None: :func:`forfeits`).
    """
    kind = kind or outcome_kind(episode)
    gone = forfeits(episode) if gone is None else gone
    if kind == "win_draw_loss_by_success":
        scores = {agent: float(bool(episode.success.get(agent))) for agent in episode.agents}
    else:
        scores = {agent: episode.returns.get(agent, 0.0) for agent in episode.agents}
    floor = min(scores.values(), default=0.0) - 1.0
    return {agent: floor if agent in gone else score for agent, score in scores.items()}


def _compare(mine: float, theirs: float) -> Outcome:
    return "win" if mine > theirs else "loss" if mine < theirs else "draw"


def forfeits(episode: Episode) -> tuple[str, ...]:
    """The seats that forfeited ``episode`` by invalid answers, read from its record.

    The referee ends an episode when a seat's answers are invalid ``forfeit_after`` times in a
    row (or once under ``on_invalid="terminate"``): the seat's last answer was invalid and
    closed a run that long. The two settings are the game's registered options updated by the
    episode's own; a game this process cannot find has the defaults of
    :class:`~tsmg.core.GameConfig`.
    """
    if not episode.terminated or not episode.steps:
        return ()
    on_invalid, limit = _forfeit_rule(episode.game_id, episode.game_options)
    if on_invalid != "terminate" and limit is None:
        return ()
    last_round = episode.steps[-1].round
    gone = []
    for agent in episode.agents:
        steps = episode.steps_of(agent)
        if not steps or steps[-1].valid or steps[-1].round != last_round:
            continue
        streak = next((count for count, step in enumerate(reversed(steps)) if step.valid), len(steps))
        if on_invalid == "terminate" or (limit is not None and streak >= limit):
            gone.append(agent)
    return tuple(gone)


def _entry_point(game_id: str) -> Any:
    """The registered entry point of ``game_id`` (None where this process cannot load it)."""
    from tsmg.registry import spec

    try:
        return spec(game_id).load()
    except Exception:  # unregistered here, or its module is gone: the caller falls back on defaults
        return None


def _forfeit_rule(game_id: str, options: Mapping[str, Any]) -> tuple[str, int | None]:
    """``on_invalid`` and ``forfeit_after`` of ``game_id`` made with ``options``."""
    from tsmg.registry import spec

    factory = _entry_point(game_id)
    config_class = getattr(factory, "Config", None)
    if not (isinstance(config_class, type) and issubclass(config_class, GameConfig)):
        config_class = GameConfig
    values = {**spec(game_id).kwargs, **options} if factory is not None else dict(options)
    try:
        config = config_class.model_validate({key: values[key] for key in config_class.model_fields if key in values})
    except ValueError:
        config = GameConfig()
    return config.on_invalid, config.forfeit_after


def summarize(episodes: Sequence[Episode], agent: str | Iterable[str] | None = None) -> EpisodeSummary:
    """Summarise ``episodes`` from the point of view of ``agent`` (default: the first agent).

    Args:
        episodes: Episodes, failed ones included (they are counted in ``failed`` only).
        agent: One agent, several (each episode then counts once per agent that plays in it),
            or None for the first agent of the first finished episode.
    """
    completed = [episode for episode in episodes if episode.error is None]
    if agent is None:
        agents = [completed[0].agents[0]] if completed else []
        seats = [(agents[0], episode) for episode in completed] if agents else []
    elif isinstance(agent, str):
        seats = [(agent, episode) for episode in completed]
    else:
        wanted = list(agent)
        seats = [(name, episode) for episode in completed for name in wanted if name in episode.agents]
    return summarize_seats(seats, failed=len(episodes) - len(completed))


def summary_line(game_id: str, policy: str, summary: EpisodeSummary) -> str:
    """One line of figures for the terminal (``tsmg rollout``, ``tsmg demo --no-train``)."""
    if summary.win_draw_loss:
        result = f"W/D/L {summary.wins}/{summary.draws}/{summary.losses}"
        if summary.forfeits or summary.wins_by_forfeit:
            result += f" (forfeited {summary.forfeits}, won by forfeit {summary.wins_by_forfeit})"
    else:
        result = "success " + ("n/a" if summary.success_rate is None else f"{100 * summary.success_rate:5.1f}%")
    return (
        f"{game_id:<24} {policy:<8} episodes {summary.episodes:>5}  {result}  "
        f"return {summary.mean_return:+.3f} ± {summary.return_stderr:.3f}  "
        f"rounds {summary.mean_rounds:.2f}  invalid {100 * summary.invalid_rate:.1f}%"
    )
