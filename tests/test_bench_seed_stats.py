"""bench/seed_stats.py: comparisons over training seeds, with known values and SciPy as the reference."""

import math

import pytest
from bench_modules import load_bench

seed_stats = load_bench("seed_stats")


@pytest.mark.parametrize(("df", "quantile"), [(1, 12.706204736174694), (2, 4.302652729749462),
                                               (3, 3.1824463052837078), (4, 2.7764451051977934),
                                               (9, 2.262157162798205), (30, 2.0422724563012378)])  # fmt: skip
def test_the_t_quantile_is_the_table_value(df, quantile):
    assert seed_stats.t_quantile(0.975, df) == pytest.approx(quantile, rel=1e-9)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 13, 40])
@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.5, 7.0])
def test_the_t_distribution_is_scipys(df, t):
    scipy_stats = pytest.importorskip("scipy.stats")
    assert seed_stats.t_p_value(t, df) == pytest.approx(2 * scipy_stats.t.sf(t, df), rel=1e-9, abs=1e-15)
    assert seed_stats.t_p_value(-t, df) == seed_stats.t_p_value(t, df)


def test_the_paired_t_over_seeds_has_the_hand_computed_figures():
    # The equal-CPU greedy differences of issue 40: mean 32.5, sd sqrt(252.25) = 15.882, se 9.1697.
    result = seed_stats.paired_t([50.0, 28.5, 19.0])
    stderr = math.sqrt(252.25) / math.sqrt(3)
    assert result["mean"] == pytest.approx(32.5)
    assert result["df"] == 2
    assert result["t"] == pytest.approx(32.5 / stderr)
    assert result["p_value"] == pytest.approx(0.0712074040, rel=1e-8)
    assert result["ci95"] == pytest.approx([32.5 - 4.302652729749464 * stderr, 32.5 + 4.302652729749464 * stderr])
    negative = seed_stats.paired_t([-50.0, -28.5, -19.0])  # the sign is kept, the p is symmetric
    assert negative["t"] == pytest.approx(-result["t"]) and negative["p_value"] == pytest.approx(result["p_value"])
    assert seed_stats.paired_t([3.0])["p_value"] is None  # one seed: nothing to judge the spread by
    assert seed_stats.paired_t([2.0, 2.0])["p_value"] == 0.0


def test_the_paired_t_agrees_with_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    differences = [23.5, 17.5, 22.0, -4.0, 11.25]
    ours = seed_stats.paired_t(differences)
    theirs = scipy_stats.ttest_1samp(differences, 0.0)
    assert ours["t"] == pytest.approx(theirs.statistic) and ours["p_value"] == pytest.approx(theirs.pvalue)
    low, high = theirs.confidence_interval(0.95)
    assert ours["ci95"] == pytest.approx([low, high])


def test_mcnemar_counts_the_discordant_maps_and_gives_the_exact_two_sided_p():
    arm = {seed: seed < 7 for seed in range(10)}  # solves 0-6
    baseline = {seed: 2 <= seed < 8 for seed in range(10)}  # solves 2-7
    test = seed_stats.mcnemar(arm, baseline)
    assert (test["only_arm"], test["only_baseline"], test["maps"]) == (2, 1, 10)
    assert test["p_value"] == pytest.approx(1.0)  # 2 vs 1 of 3: as likely as not
    lopsided = seed_stats.mcnemar({s: True for s in range(6)}, {s: False for s in range(6)})
    assert lopsided["p_value"] == pytest.approx(2 / 2**6)  # 6 vs 0: 2 * 0.5**6
    scipy_stats = pytest.importorskip("scipy.stats")
    for only_arm, only_base in ((3, 11), (11, 3), (0, 9), (20, 21)):
        keys = range(only_arm + only_base)
        found = seed_stats.mcnemar({k: k < only_arm for k in keys}, {k: k >= only_arm for k in keys})
        assert found["p_value"] == pytest.approx(scipy_stats.binomtest(only_arm, only_arm + only_base).pvalue)


def test_seeds_are_compared_pair_by_pair_and_never_pooled():
    # Seed 0: arm 6/10 vs 2/10 (+40 points); seed 1: 5/10 vs 4/10 (+10); seed 2: 3/10 vs 3/10 (0).
    arm = {0: {m: m < 6 for m in range(10)}, 1: {m: m < 5 for m in range(10)}, 2: {m: m < 3 for m in range(10)}}
    base = {0: {m: m < 2 for m in range(10)}, 1: {m: m < 4 for m in range(10)}, 2: {m: m >= 7 for m in range(10)}}
    result = seed_stats.compare_over_seeds(arm, base)
    assert [s["difference_points"] for s in result["per_seed"]] == pytest.approx([40.0, 10.0, 0.0])
    assert [(s["only_arm"], s["only_baseline"]) for s in result["per_seed"]] == [(4, 0), (1, 0), (3, 3)]
    assert result["seeds"] == 3 and result["df"] == 2
    assert result["mean_points"] == pytest.approx(50 / 3)
    assert result["p_value"] == pytest.approx(seed_stats.paired_t([40.0, 10.0, 0.0])["p_value"])
    assert result["p_value"] > 0.2  # pooled, 8 vs 3 discordant maps would claim far more
    line = seed_stats.describe(result)
    assert "seed 0: +40.0 pts" in line and "paired t(2)" in line
