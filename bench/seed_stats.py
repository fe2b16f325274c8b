"""Comparisons of two training recipes over training seeds: the one helper every bench uses for them.

A training seed is the unit of replication of a recipe: the maps one evaluation plays are shared by
every seed's model, so the maps of several seeds are not independent trials, and a test pooling them
(their discordant maps summed into one McNemar test) overstates. Here:

* per seed, the difference in success (points) and an exact McNemar test on the maps that seed's two
  models both played (what that one pair of models shows, nothing more);
* over seeds, a paired t test on the per-seed differences, with its 95 % interval (df = seeds - 1).
  With 3 seeds a Wilcoxon signed-rank test cannot go below p = 0.25, hence the t test and its interval.

Nothing here pools maps over seeds. Standard library only (SciPy is an optional extra): the Student t
distribution function is the exact finite series for an integer number of degrees of freedom
(Abramowitz & Stegun 26.7.3-4), its quantile found by bisection on it, both checked against SciPy in
tests/test_bench_seed_stats.py. This lives with the benches, not with ``tsmg eval``'s statistics
(:mod:`tsmg.apps.evaluation.metrics`): an evaluation compares models on one set of episodes, while training
seeds are what only a bench that trains several times has.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from typing import Any


def mcnemar(arm: Mapping[Hashable, bool], baseline: Mapping[Hashable, bool]) -> dict[str, Any]:
    """Exact two-sided McNemar test on the maps both played: maps only ``arm`` solved vs only ``baseline``.

    ``arm`` and ``baseline`` map each map (an evaluation seed or a layout) to whether it was solved.
    The p value is the exact binomial test of ``only_arm`` of the discordant maps at 1/2 (SciPy's
    ``binomtest(...).pvalue``: with a symmetric null, twice the smaller tail, at most 1).
    """
    shared = [key for key in arm if key in baseline]
    only_arm = sum(arm[key] and not baseline[key] for key in shared)
    only_baseline = sum(baseline[key] and not arm[key] for key in shared)
    discordant = only_arm + only_baseline
    tail = sum(math.comb(discordant, k) for k in range(min(only_arm, only_baseline) + 1)) / 2**discordant
    p_value = min(1.0, 2 * tail) if discordant else 1.0
    return {"only_arm": only_arm, "only_baseline": only_baseline, "p_value": p_value, "maps": len(shared)}


def t_cdf_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` (a positive integer) degrees of freedom, exactly.

    A & S 26.7.3 (odd df) and 26.7.4 (even df), with theta = atan(t / sqrt(df)).
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be a positive integer, not {df}")
    t = abs(t)
    if math.isinf(t):
        return 1.0
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), df - 2 powers
        total, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= (2 * k) / (2 * k + 1) * cos2
        series = math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0
        return 2 / math.pi * (theta + series)
    total, term = 0.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), up to cos^(df - 2)
    for k in range(1, df // 2 + 1):
        total += term
        term *= (2 * k - 1) / (2 * k) * cos2
    return math.sin(theta) * total


def t_p_value(t: float, df: int) -> float:
    """Two-sided p value of Student's t statistic ``t`` with ``df`` degrees of freedom."""
    return max(0.0, 1.0 - t_cdf_two_sided(t, df))


def t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile (above 1/2) of Student's t with ``df`` degrees of freedom, to float precision."""
    if not 0.5 < probability < 1.0:
        raise ValueError(f"a quantile above the median is asked, between 0.5 and 1, not {probability}")
    target = 2 * probability - 1  # P(|T| <= q)
    low, high = 0.0, 1.0
    while t_cdf_two_sided(high, df) < target:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if t_cdf_two_sided(middle, df) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def paired_t(differences: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Paired t test of per-seed ``differences`` against 0, with the ``confidence`` interval of their mean.

    ``t``, ``p_value`` and the interval are None with fewer than two seeds (no spread to judge by); with
    no spread at all, p is 0 (or 1 when every difference is 0) and the interval is the mean itself.
    """
    n = len(differences)
    mean = statistics.fmean(differences) if differences else math.nan
    result: dict[str, Any] = {"seeds": n, "df": n - 1, "mean": mean, "t": None, "p_value": None, "ci95": None}
    if n < 2:
        return result
    stderr = statistics.stdev(differences) / math.sqrt(n)
    if stderr == 0:
        result.update(p_value=1.0 if mean == 0 else 0.0, ci95=[mean, mean])
        return result
    t = mean / stderr
    half = t_quantile(0.5 + confidence / 2, n - 1) * stderr
    result.update(t=t, p_value=t_p_value(t, n - 1), ci95=[mean - half, mean + half])
    return result


def compare_over_seeds(
    arm: Mapping[Any, Mapping[Hashable, bool]], baseline: Mapping[Any, Mapping[Hashable, bool]]
) -> dict[str, Any]:
    """``arm`` against ``baseline``, training seed by training seed, then over the seeds.

    Both map a training seed to that seed's model's outcomes (map -> solved). For every seed both
    have: the success of each on the maps both played, the difference in points, and the exact
    McNemar test of that pair. Over the seeds: the paired t test of the differences with its 95 %
    interval (``mean_points``, ``ci95_points``, ``t``, ``df``, ``p_value``). The maps are never pooled.
    """
    per_seed = []
    for seed in sorted(set(arm) & set(baseline), key=str):
        shared = [key for key in arm[seed] if key in baseline[seed]]
        if not shared:
            continue
        arm_success = 100 * sum(arm[seed][key] for key in shared) / len(shared)
        base_success = 100 * sum(baseline[seed][key] for key in shared) / len(shared)
        per_seed.append({
            "seed": seed,
            "arm_points": arm_success,
            "baseline_points": base_success,
            "difference_points": arm_success - base_success,
            **mcnemar(arm[seed], baseline[seed]),
        })  # fmt: skip
    over = paired_t([entry["difference_points"] for entry in per_seed])
    return {
        "per_seed": per_seed,
        "seeds": over["seeds"],
        "mean_points": over["mean"],
        "ci95_points": over["ci95"],
        "t": over["t"],
        "df": over["df"],
        "p_value": over["p_value"],
    }


def describe(comparison: Mapping[str, Any]) -> str:
    """One line of a :func:`compare_over_seeds` result: per-seed differences and McNemar p, then the paired t."""
    seeds = "; ".join(
        f"seed {s['seed']}: {s['difference_points']:+.1f} pts ({s['only_arm']} vs {s['only_baseline']} maps, "
        f"McNemar p {s['p_value']:.3g})"
        for s in comparison["per_seed"]
    )
    if comparison["p_value"] is None:
        return f"{seeds}; one seed: no test over seeds"
    low, high = comparison["ci95_points"]
    return (
        f"{seeds}; over {comparison['seeds']} training seeds: mean {comparison['mean_points']:+.1f} pts "
        f"(95% CI {low:+.1f} to {high:+.1f}), paired t({comparison['df']}) p {comparison['p_value']:.3g}"
    )
