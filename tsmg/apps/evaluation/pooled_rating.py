"""One Bradley-Terry rating per player, pooled over every game of the compared runs.

The model (Kaggle Game Arena's leaderboard does the same): player i has a strength θ_i, and
player a beats player b with probability σ(θ_a − θ_b) = 1 / (1 + e^−(θ_a − θ_b)). The data are
the pairwise results of every episode of every game of several-seat games in the runs
(:func:`tsmg.apps.evaluation.metrics.seat_pairs`, the pairs the head-to-head tables count): every
pair of seats held by different players, a win scoring 1, a loss 0 and a draw ½ (half a win and
half a loss in the likelihood). Bots (random, oracle, OpenSpiel's MCTS) are players like the
models; a bot with model options (MCTS's ``simulations``) is named with them, so MCTS at 25 and
at 100 simulations are two players.

Conventions, each with its reason:

- **Each game weighs the same.** A result of game g carries weight N / (G · n_g), where n_g is the
  number of pairwise results of g, G the number of games and N the number of results of all
  games: every game contributes N / G in all, whatever its episode count, so a game played ten
  times as often does not decide the rating (as on Game Arena's leaderboard), and the total weight
  stays the number of results (the prior's pull shrinks as results accumulate).
- **A weak Gaussian prior** θ_i ~ N(0, 2²), i.e. a rating standard deviation of 2 · 400/ln 10 ≈ 347
  points: without it a player that won (or lost) every game has no finite maximum-likelihood
  strength. With a few dozen results it moves a rating by a few points (the tests bound it).
- **The scale is Elo-like:** rating = 1000 + (400 / ln 10) · θ, with the players' mean rating
  1000: a 400-point gap means odds of 10 to 1, and p = 0.75 a gap of 400·log10 3 ≈ 191 points.
  Only differences mean something; the mean is fixed by convention.
- **Intervals:** 1,000 bootstrap resamples (seeded: the same runs give the same intervals), each
  drawing, within every run and game, as many episodes with replacement as it holds, then
  refitting; the 2.5th and 97.5th percentiles of a player's ratings are its 95 % interval
  (percentile bootstrap, each resample centred at 1000 like the point estimate).
- **Missing games:** a player is rated on the games it played; ``missing_games`` lists the pooled
  games it did not play (its rating then rests on fewer games than the others').

Why SciPy and not a Bradley-Terry library: the fit is the penalised log-likelihood above,
minimised by SciPy with its analytic gradient and Hessian (a dozen lines). The method is
``trust-exact`` (Newton steps in a trust region; the objective is strictly convex and has one
variable per player, so two to five steps reach it), not L-BFGS-B: L-BFGS-B's compiled core calls
a threaded BLAS, and on a 2-core machine under load 200 fits of 6 players took 6.7 s against
0.30 s for ``trust-exact`` (0.12 s against 0.15 s single-threaded). The maintained BT package
``choix`` is not a dependency, and its pairwise fits take unweighted comparisons, so the
fractional per-game weights and half-win draws would need duplicated data; OpenSkill (already
used for the per-game ratings) updates online and depends on the order of the episodes.

Refused, in one sentence each (:class:`PoolingRefused`): runs whose language models played
under different LAP settings (:func:`lap_refusal`), and players that fall into groups that never
met, whose ratings would share no scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from tsmg.apps.evaluation.metrics import seat_pairs
from tsmg.apps.evaluation.plan import seat_spec
from tsmg.episode import Episode
from tsmg.model_spec import ModelSpecError, parse_model_spec

#: Rating points per unit of strength θ: 400 / ln 10, so that 400 points are odds of 10 to 1.
SCALE = 400 / math.log(10)
#: The players' mean rating.
CENTER = 1000.0
#: Standard deviation of the Gaussian prior on each strength θ (in θ units; ≈ 347 rating points).
PRIOR_SD = 2.0
#: Bootstrap resamples for the 95 % intervals.
RESAMPLES = 1000


class PoolingRefused(ValueError):
    """The runs cannot be pooled into one rating; the message says why in one sentence."""


@dataclass(frozen=True)
class PairwiseResults:
    """Every pairwise result of the pooled runs, as arrays with one entry per result.

    Attributes:
        players: Player names; ``a`` and ``b`` index them.
        games: Game ids; ``game`` indexes them.
        a: The first player of each result.
        b: The second player.
        score: The first player's score: 1 win, 0.5 draw, 0 loss.
        game: The game of each result.
        episode: The episode each result came from (an index over all episodes of all runs).
        stratum: Per episode, its run and game (an index): the bootstrap resamples within them.
        runs: The runs that gave a result (their indices in the list of runs).
    """

    players: tuple[str, ...]
    games: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    game: np.ndarray
    episode: np.ndarray
    stratum: np.ndarray
    runs: tuple[int, ...] = ()


def player_name(label: str, config: Mapping[str, Any]) -> str:
    """The player behind a seat's policy ``label`` in a run of ``config``: the spec, and a bot's model options.

    Example:
        >>> player_name("openspiel-mcts (opponent)", {"model_options": {"openspiel-mcts": {"simulations": 25}}})
        'openspiel-mcts (simulations=25)'
        >>> player_name("smollm2", {"model_options": {"smollm2": {"threads": 1}}})
        'smollm2'
    """
    spec = seat_spec(label)
    try:
        scripted = parse_model_spec(spec).scripted
    except ModelSpecError:
        scripted = False
    options = (config.get("model_options") or {}).get(spec) or {}
    if not scripted or not options:  # a language model's options (threads, base_url) do not change who it is
        return spec
    return f"{spec} ({', '.join(f'{key}={value}' for key, value in sorted(options.items()))})"


def lap_refusal(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
    """Why ``(run name, summary)`` pairs cannot be pooled for their LAP settings, or None when they can.

    Only runs with a language model (a model or opponent that is not a script) are compared: a bot
    reads no prompt. The LAP's ``seed`` is left out (it is the run's seed, not a setting).
    """
    laps: dict[str, list[str]] = {}
    for name, summary in runs:
        config = summary.get("config") or {}
        players = [*config.get("models", []), *([config["opponent"]] if config.get("opponent") else [])]
        if all(_scripted(spec) for spec in players):
            continue
        lap = {key: value for key, value in (config.get("lap") or {}).items() if key != "seed"}
        laps.setdefault(repr(sorted(lap.items())), []).append(name)
    if len(laps) < 2:
        return None
    groups = "; ".join(", ".join(names) for names in laps.values())
    return (
        f"the runs' language models played under different LAP settings (runs grouped by setting: {groups}), "
        "so their results are not pooled into one rating: compare runs played with the same LAP."
    )


def _scripted(spec: str) -> bool:
    try:
        return parse_model_spec(spec).scripted
    except ModelSpecError:
        return False


def pairwise_results(runs: Sequence[tuple[Mapping[str, Any], Sequence[Episode]]]) -> PairwiseResults:
    """The pairwise results of ``(summary, episodes)`` runs; episodes with an error or no pair are left out."""
    players: dict[str, int] = {}
    games: dict[str, int] = {}
    strata: dict[tuple[int, str], int] = {}
    rows: list[tuple[int, int, float, int, int]] = []
    episode_strata: list[int] = []
    for run, (summary, episodes) in enumerate(runs):
        config = summary.get("config") or {}
        for episode in episodes:
            if episode.error is not None:
                continue
            pairs = seat_pairs(episode, partial(player_name, config=config))
            if not pairs:
                continue
            game = games.setdefault(episode.game_id, len(games))
            index = len(episode_strata)
            episode_strata.append(strata.setdefault((run, episode.game_id), len(strata)))
            for first, second, score in pairs:
                a = players.setdefault(first, len(players))
                b = players.setdefault(second, len(players))
                rows.append((a, b, score, game, index))
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    return PairwiseResults(
        players=tuple(players),
        games=tuple(games),
        a=np.asarray(columns[0], dtype=np.int64),
        b=np.asarray(columns[1], dtype=np.int64),
        score=np.asarray(columns[2], dtype=np.float64),
        game=np.asarray(columns[3], dtype=np.int64),
        episode=np.asarray(columns[4], dtype=np.int64),
        stratum=np.asarray(episode_strata, dtype=np.int64),
        runs=tuple(sorted({run for run, _ in strata})),
    )


def game_weights(game: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """Per result, its weight N / (G · n_g) times its ``multiplicity``: every game weighs N / G in all.

    Example:
        >>> game_weights(np.array([0, 0, 0, 1]), np.ones(4)).tolist()  # 3 results of game 0, 1 of game 1
        [0.6666666666666666, 0.6666666666666666, 0.6666666666666666, 2.0]
    """
    per_game = np.bincount(game, weights=multiplicity)
    played = per_game > 0
    total, count = per_game.sum(), played.sum()
    scale = np.divide(total / count, per_game, out=np.zeros_like(per_game), where=played)
    return multiplicity * scale[game]


def fit_strengths(
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    weight: np.ndarray,
    players: int,
    prior_sd: float = PRIOR_SD,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Strengths θ maximising Σ w·[s·log σ(θ_a − θ_b) + (1 − s)·log σ(θ_b − θ_a)] − Σ θ²/(2·prior_sd²).

    Returned centred at 0 (the prior already centres them: the likelihood ignores a common shift).

    Example:
        >>> theta = fit_strengths(np.array([0]), np.array([1]), np.array([0.75]), np.array([100.0]), 2, prior_sd=1e6)
        >>> round(float(theta[0] - theta[1]), 4), round(math.log(3), 4)  # win rate 3/4: log-odds ln 3
        (1.0986, 1.0986)
    """
    from scipy.optimize import minimize

    # Results of the same ordered pair are summed first: the fit then costs one term per pair.
    keys = a * players + b
    wins = np.bincount(keys, weights=weight * score, minlength=players * players)
    totals = np.bincount(keys, weights=weight, minlength=players * players)
    used = np.flatnonzero(totals)
    first, second = used // players, used % players
    wins, losses = wins[used], totals[used] - wins[used]
    precision = 1.0 / prior_sd**2

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        gap = theta[first] - theta[second]
        # −log σ(x) = log(1 + e^−x), computed without overflow.
        loss = float(np.sum(wins * np.logaddexp(0.0, -gap) + losses * np.logaddexp(0.0, gap)))
        loss += 0.5 * precision * float(theta @ theta)
        p_first = 0.5 * (1.0 + np.tanh(0.5 * gap))  # σ(gap), stable for large |gap|
        slope = (wins + losses) * p_first - wins  # ∂loss/∂gap
        gradient = precision * theta
        np.add.at(gradient, first, slope)
        np.add.at(gradient, second, -slope)
        return loss, gradient

    def hessian(theta: np.ndarray) -> np.ndarray:
        gap = theta[first] - theta[second]
        p_first = 0.5 * (1.0 + np.tanh(0.5 * gap))
        curvature = (wins + losses) * p_first * (1.0 - p_first)
        matrix = precision * np.eye(players)
        np.add.at(matrix, (first, first), curvature)
        np.add.at(matrix, (second, second), curvature)
        np.add.at(matrix, (first, second), -curvature)
        np.add.at(matrix, (second, first), -curvature)
        return matrix

    initial = np.zeros(players) if start is None else start
    result = minimize(objective, initial, jac=True, hess=hessian, method="trust-exact", options={"gtol": 1e-10})
    theta = np.asarray(result.x, dtype=np.float64)
    return theta - theta.mean()


def ratings_of(theta: np.ndarray) -> np.ndarray:
    """Ratings on the Elo-like scale: 1000 + (400 / ln 10) · (θ − mean θ)."""
    return CENTER + SCALE * (theta - theta.mean())


def pooled_rating(
    results: PairwiseResults, resamples: int = RESAMPLES, seed: int = 0, prior_sd: float = PRIOR_SD
) -> list[dict[str, Any]]:
    """One row per player, best first: ``model``, ``rating``, ``ci95``, ``games`` and ``missing_games``.

    ``games`` counts the pooled games the player has a result in; ``missing_games`` names the
    others. ``ci95`` is the percentile bootstrap interval of ``resamples`` resamples drawn with
    ``numpy.random.default_rng(seed)`` (see the module docstring); None with no resamples.

    Raises:
        PoolingRefused: The players fall into groups that never met.
    """
    count = len(results.players)
    if count == 0:
        return []
    _check_connected(results)
    ones = np.ones(len(results.a))
    theta = fit_strengths(
        results.a, results.b, results.score, game_weights(results.game, ones), count, prior_sd=prior_sd
    )
    point = ratings_of(theta)
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(results.stratum == stratum) for stratum in range(int(results.stratum.max()) + 1)]
    draws = np.empty((resamples, count))
    for draw in range(resamples):
        multiplicity = np.zeros(len(results.stratum))
        for episodes in members:
            np.add.at(multiplicity, rng.choice(episodes, size=len(episodes)), 1.0)
        weight = game_weights(results.game, multiplicity[results.episode])
        draws[draw] = ratings_of(
            fit_strengths(results.a, results.b, results.score, weight, count, prior_sd=prior_sd, start=theta)
        )
    low, high = np.percentile(draws, [2.5, 97.5], axis=0) if resamples else (None, None)
    rows = []
    for index, name in enumerate(results.players):
        played = set(results.game[(results.a == index) | (results.b == index)].tolist())
        rows.append(
            {
                "model": name,
                "rating": float(point[index]),
                "ci95": None if low is None or high is None else [float(low[index]), float(high[index])],
                "games": len(played),
                "missing_games": [game for number, game in enumerate(results.games) if number not in played],
            }
        )
    return sorted(rows, key=lambda row: -row["rating"])


def _check_connected(results: PairwiseResults) -> None:
    """Refuse players that fall into groups that never met (no chain of results links them)."""
    group = list(range(len(results.players)))

    def root(index: int) -> int:
        while group[index] != index:
            group[index] = group[group[index]]
            index = group[index]
        return index

    for first, second in zip(results.a.tolist(), results.b.tolist(), strict=True):
        group[root(first)] = root(second)
    groups: dict[int, list[str]] = {}
    for index, name in enumerate(results.players):
        groups.setdefault(root(index), []).append(name)
    if len(groups) > 1:
        listed = " | ".join(", ".join(names) for names in groups.values())
        raise PoolingRefused(
            f"the players fall into groups that never met ({listed}), so one rating would put them on no common "
            "scale: add runs in which the groups play each other."
        )


def pooled_rating_of_runs(
    runs: Sequence[tuple[str, Mapping[str, Any], Sequence[Episode]]],
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The pooled rating of ``(run name, summary, episodes)`` runs (empty when no game has two players).

    Raises:
        PoolingRefused: Different LAP settings, or players that never met.
    """
    results = pairwise_results([(summary, episodes) for _, summary, episodes in runs])
    if not results.players:
        return []
    # Only runs with a pairwise result take part; a single-seat run's LAP does not matter here.
    refusal = lap_refusal([(runs[run][0], runs[run][1]) for run in results.runs])
    if refusal is not None:
        raise PoolingRefused(refusal)
    return pooled_rating(results, resamples=resamples, seed=seed)
