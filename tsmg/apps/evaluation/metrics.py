"""Statistics of an evaluation: per-model rates with intervals, win/draw/loss, ratings.

A row of a goal game reports success with its Wilson interval; a row of a win/draw/loss game
(:attr:`tsmg.core.Game.outcome`) reports wins, draws, losses and forfeits instead, in all and by
seat, and no success rate.

Ratings use a maintained library, OpenSkill (Plackett-Luce), imported when they are computed. The
Wilson interval is SciPy's formula in the standard library (tested against SciPy), so that a base
install without the ``eval`` extra still summarises runs (``tsmg view``, ``tsmg rollout``).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

from tsmg.apps.evaluation.config import EvalConfig
from tsmg.apps.evaluation.plan import opponent_label, seat_spec
from tsmg.episode import Episode
from tsmg.model_spec import parse_model_spec
from tsmg.summary import EpisodeSummary, outcome_kind, standings, summarize_seats


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a success rate, two-sided, without continuity correction.

    The formula of SciPy's ``binomtest(...).proportion_ci(method="wilson")`` (Newcombe 1998),
    including its ends pinned at 0 for no successes and 1 for all, in the standard library so that
    `tsmg view` and the eval summaries work on a base install (SciPy is the ``eval`` extra).
    """
    if trials == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(0.5 + 0.5 * confidence)
    p = successes / trials
    denominator = 2 * (trials + z**2)
    center = (2 * trials * p + z**2) / denominator
    delta = z / denominator * math.sqrt(4 * trials * p * (1 - p) + z**2)
    low = 0.0 if successes == 0 else center - delta
    high = 1.0 if successes == trials else center + delta
    return low, high


def model_row(
    game_id: str, model: str, agent_episodes: Sequence[tuple[str, Episode]], prices: Mapping[str, tuple[float, float]]
) -> dict[str, Any]:
    """Figures of one model on one game, over the seats it played (``(agent, episode)`` pairs).

    The figures are :func:`tsmg.summary.summarize_seats`'s, with a Wilson interval and the cost
    added. In a win/draw/loss game, ``outcomes`` holds the wins, draws, losses and forfeits of
    every seat together and ``outcomes_by_seat`` those of each seat, and ``success_rate`` and
    ``success_ci95`` are None (a draw is no failure, and a win by forfeit no goal reached).
    """
    summary = summarize_seats(agent_episodes)
    trials = summary.success_trials if not summary.win_draw_loss else 0
    low, high = wilson_interval(summary.successes, trials) if trials else (math.nan, math.nan)
    price = price_of(model, prices, summary.prompt_tokens + summary.completion_tokens)
    count = summary.seats
    return {
        "game": game_id,
        "model": model,
        "episodes": count,
        "outcome": summary.outcome,
        "success_rate": summary.success_rate if not summary.win_draw_loss else None,
        "success_ci95": [low, high] if trials else None,
        **_outcome_figures(summary, agent_episodes),
        "mean_return": summary.mean_return,
        "return_stderr": summary.return_stderr,
        "returns": list(summary.returns),
        "invalid_rate": summary.invalid_rate,
        "mean_turns": summary.mean_turns,
        "tokens_in_per_episode": summary.prompt_tokens / count if count else 0.0,
        "tokens_out_per_episode": summary.completion_tokens / count if count else 0.0,
        # None: a hosted model without a price (--price), whose cost the run cannot know (never shown as 0).
        "cost_usd": (
            (summary.prompt_tokens * price[0] + summary.completion_tokens * price[1]) / 1e6 if price else None
        ),
        # Part of tokens_out (billed as output, so part of cost_usd); None when no step reported any.
        "reasoning_tokens_per_episode": (
            summary.reasoning_tokens / count if summary.reasoning_tokens is not None and count else None
        ),
        "reasoning_cost_usd": (
            summary.reasoning_tokens * price[1] / 1e6 if summary.reasoning_tokens is not None and price else None
        ),
        "timing": {
            "mean_latency_s": summary.mean_latency_s,
            "episode_latency_s": summary.mean_episode_latency_s,
        },
    }


def price_of(model: str, prices: Mapping[str, tuple[float, float]], tokens: int) -> tuple[float, float] | None:
    """USD per million tokens in and out of ``model``, or None where its cost cannot be known.

    A price given (``--price``) wins. Without one, a run that spent no tokens (a scripted player)
    and a model whose weights are on this machine (``hf:``, ``smollm2``, ``vllm:``, ``tiny``: no
    bill per token) cost nothing; any other model (a hosted one, ``openai:M``) is unknown, not 0.

    Example:
        >>> price_of("openai:gpt-4o-mini", {}, 1200), price_of("random", {}, 0), price_of("smollm2", {}, 900)
        (None, (0.0, 0.0), (0.0, 0.0))
    """
    if seat_spec(model) in prices:
        return prices[seat_spec(model)]
    if tokens == 0:
        return (0.0, 0.0)
    try:
        local = parse_model_spec(seat_spec(model)).local_weights
    except ValueError:  # a policy named other than by a model spec (a script's own): not billed by us either
        local = False
    return (0.0, 0.0) if local else None


def _outcome_figures(summary: EpisodeSummary, seats: Sequence[tuple[str, Episode]]) -> dict[str, Any]:
    """``outcomes`` and ``outcomes_by_seat`` of a win/draw/loss game's row (nothing for a goal game)."""
    if not summary.win_draw_loss:
        return {}
    by_seat: dict[str, list[tuple[str, Episode]]] = defaultdict(list)
    for agent, episode in seats:
        by_seat[agent].append((agent, episode))
    return {
        "outcomes": _counts(summary),
        "outcomes_by_seat": {agent: _counts(summarize_seats(played)) for agent, played in sorted(by_seat.items())},
    }


def _counts(summary: EpisodeSummary) -> dict[str, int | None]:
    return {
        "wins": summary.wins,
        "draws": summary.draws,
        "losses": summary.losses,
        "forfeits": summary.forfeits,
        "wins_by_forfeit": summary.wins_by_forfeit,
    }


def head_to_head(episodes: Sequence[Episode]) -> dict[str, dict[str, dict[str, int]]]:
    """Win/draw/loss of each model (row) against each other model (column), seat by seat.

    Within an episode every pair of seats held by different models is compared by the game's
    outcome rule (:func:`seat_pairs`): higher wins, equal draws.
    """
    table: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: {"W": 0, "D": 0, "L": 0}))
    for episode in episodes:
        for model_a, model_b, score in seat_pairs(episode):
            outcome_a = "W" if score == 1.0 else "L" if score == 0.0 else "D"
            outcome_b = {"W": "L", "L": "W", "D": "D"}[outcome_a]
            table[model_a][model_b][outcome_a] += 1
            table[model_b][model_a][outcome_b] += 1
    return {row: dict(columns) for row, columns in table.items()}


def seat_pairs(episode: Episode, player: Callable[[str], str] = str) -> list[tuple[str, str, float]]:
    """Every pair of seats of ``episode`` held by different players: ``(a, b, a's score)``, 1 win, ½ draw, 0 loss.

    The one place a pairwise result is read from an episode (the head-to-head table and the pooled
    Bradley-Terry rating both use it). Seats compare by the game's outcome rule
    (:func:`tsmg.summary.standings`: return, or success; a forfeit loses). ``player`` names the
    player behind a seat's policy label (default: the label itself); pairs of seats whose players
    have the same name (self-play) are left out: they say nothing about relative strength.
    """
    seats = [(agent, player(label)) for agent, label in episode.policies.items()]
    scores = standings(episode)
    pairs = []
    for (agent_a, model_a), (agent_b, model_b) in _pairs(seats):
        if model_a == model_b:
            continue
        ra, rb = scores[agent_a], scores[agent_b]
        pairs.append((model_a, model_b, 1.0 if ra > rb else 0.0 if ra < rb else 0.5))
    return pairs


def _pairs(seats: Sequence[tuple[str, str]]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    return [(seats[i], seats[j]) for i in range(len(seats)) for j in range(i + 1, len(seats))]


def ratings(episodes: Sequence[Episode], models: Sequence[str]) -> dict[str, dict[str, float]]:
    """OpenSkill (Plackett-Luce) ratings from the seat ranking of every episode, in plan order.

    Seats rank by the game's outcome rule (:func:`tsmg.summary.standings`), so a forfeit ranks
    last. Episodes where one model holds several seats (self-play) carry no information about
    the models' relative strength and are skipped.
    """
    from openskill.models import PlackettLuce

    model = PlackettLuce()
    current = {name: model.rating(name=name) for name in models}
    for episode in episodes:
        seats = list(episode.policies.items())
        names = [name for _, name in seats]
        if len(set(names)) != len(names):
            continue
        standing = standings(episode)
        scores = [standing[agent] for agent, _ in seats]
        teams = [[current[name]] for name in names]
        rated = model.rate(teams, scores=scores)
        for name, [rating] in zip(names, rated, strict=True):
            current[name] = rating
    return {
        name: {"mu": rating.mu, "sigma": rating.sigma, "ordinal": rating.ordinal()} for name, rating in current.items()
    }


def summarize_eval(config: EvalConfig, episodes_by_game: Mapping[str, Sequence[Episode]]) -> dict[str, Any]:
    """The ``summary.json`` content: per-game rows per model, and head-to-head for multi-agent games."""
    games = []
    for game_id in config.games:
        episodes = list(episodes_by_game.get(game_id, []))
        seats_by_model: dict[str, list[tuple[str, Episode]]] = defaultdict(list)
        for episode in episodes:
            for agent, model in episode.policies.items():
                seats_by_model[model].append((agent, episode))
        rows = [model_row(game_id, model, seats_by_model[model], config.prices) for model in config.models]
        entry: dict[str, Any] = {"game": game_id, "episodes": len(episodes), "rows": rows}
        if episodes:
            entry["outcome"] = outcome_kind(episodes[0])
        if episodes and len(episodes[0].agents) > 1:
            entry["head_to_head"] = head_to_head(episodes)
            rated = list(config.models) + ([opponent_label(config.opponent)] if config.opponent else [])
            entry["ratings"] = ratings(episodes, rated)
        games.append(entry)
    summary: dict[str, Any] = {"config": json.loads(config.to_json()), "games": games}
    if config.suite is not None:
        from tsmg.apps.evaluation.suites import get_suite, score_summary

        summary["suite"] = score_summary(get_suite(config.suite), games, config.models)
    return summary
