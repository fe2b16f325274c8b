"""Episode samplers: AAW never draws A = 0, frequencies match p, no global RNG, empty when no signal."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from training.sampling import (
    SAMPLERS,
    aaw_probabilities,
    aaw_sample,
    draw_steps,
    importance_weights,
    sample,
    uniform_sample,
)

advantage_lists = st.lists(st.sampled_from([0.0, 0.5, -1.0, 2.0, -0.25]), min_size=1, max_size=20)


def test_probabilities_hand_computed():
    np.testing.assert_allclose(aaw_probabilities([1.0, -3.0, 0.0]), [0.25, 0.75, 0.0])
    np.testing.assert_allclose(aaw_probabilities([1.0, -3.0, 0.0], alpha=2.0), [0.1, 0.9, 0.0])
    np.testing.assert_allclose(aaw_probabilities([1.0, -3.0, 0.0], alpha=0.0), [0.5, 0.5, 0.0])  # 0^0 taken as 0
    assert aaw_probabilities([0.0, 0.0]) is None
    with pytest.raises(ValueError):
        aaw_probabilities([1.0], alpha=-1.0)
    with pytest.raises(ValueError):
        aaw_probabilities([np.nan])


@given(advantage_lists, st.integers(0, 2**32 - 1), st.booleans())
def test_aaw_never_draws_an_item_with_zero_advantage(advantages, seed, replace):
    result = aaw_sample(advantages, 30, np.random.default_rng(seed), replace=replace)
    assert all(advantages[index] != 0.0 for index in result.indices)
    eligible = sum(value != 0.0 for value in advantages)
    assert result.stats.eligible == eligible
    if eligible == 0:
        assert result.indices.size == 0 and result.stats.empty_reason


def test_aaw_with_replacement_matches_p():
    advantages = np.array([1.0, -2.0, 3.0, 0.0, 4.0])
    draws = 100_000
    result = aaw_sample(advantages, draws, np.random.default_rng(1234))
    frequencies = np.bincount(result.indices, minlength=advantages.size) / draws
    expected = np.abs(advantages) / np.abs(advantages).sum()
    # Standard error of each frequency is at most sqrt(0.25 / 1e5) = 0.0016; 0.006 is about 4 of them.
    np.testing.assert_allclose(frequencies, expected, atol=0.006)
    assert frequencies[3] == 0.0
    assert result.stats.drawn == draws and result.stats.distinct == 4


def test_aaw_without_replacement_draws_distinct_items_and_caps_at_the_eligible():
    advantages = [0.0, 1.0, 2.0, 0.0, 3.0]
    result = aaw_sample(advantages, 3, np.random.default_rng(0), replace=False)
    assert len(set(result.indices.tolist())) == 3
    assert set(result.indices.tolist()) == {1, 2, 4}
    capped = aaw_sample(advantages, 10, np.random.default_rng(0), replace=False)
    assert sorted(capped.indices.tolist()) == [1, 2, 4]
    assert (capped.stats.requested, capped.stats.drawn, capped.stats.distinct) == (10, 3, 3)


def test_aaw_without_replacement_prefers_large_advantages():
    advantages = np.array([0.01] * 9 + [100.0])
    first = [aaw_sample(advantages, 1, np.random.default_rng(seed), replace=False).indices[0] for seed in range(50)]
    assert np.mean(np.array(first) == 9) > 0.9


def test_all_zero_advantages_give_an_empty_sample_with_the_reason():
    for name in ("aaw", "uniform-nonzero"):
        result = sample(name, [0.0, 0.0, 0.0], 5, np.random.default_rng(0))
        assert result.indices.size == 0
        assert "every advantage is 0" in (result.stats.empty_reason or "")
        assert result.stats.as_metrics()["sampler/empty"] == 1.0
    assert sample("uniform", [], 5, np.random.default_rng(0)).stats.empty_reason == "no items to draw from"


def test_uniform_includes_zero_items_and_uniform_nonzero_skips_them():
    advantages = [0.0, 1.0, 0.0, 5.0]
    result = uniform_sample(advantages, 40_000, np.random.default_rng(7))
    np.testing.assert_allclose(np.bincount(result.indices, minlength=4) / 40_000, [0.25] * 4, atol=0.01)
    skipping = uniform_sample(advantages, 40_000, np.random.default_rng(7), skip_zero=True)
    np.testing.assert_allclose(np.bincount(skipping.indices, minlength=4) / 40_000, [0, 0.5, 0, 0.5], atol=0.01)
    distinct = uniform_sample(advantages, 4, np.random.default_rng(7), replace=False)
    assert sorted(distinct.indices.tolist()) == [0, 1, 2, 3]


def test_draws_depend_only_on_the_given_generator():
    advantages = [0.5, -1.0, 2.0, 0.0, 1.5]
    np.random.seed(1)
    first = {name: sample(name, advantages, 8, np.random.default_rng(42)).indices for name in SAMPLERS}
    np.random.seed(2)
    np.random.random(10)
    second = {name: sample(name, advantages, 8, np.random.default_rng(42)).indices for name in SAMPLERS}
    for name in SAMPLERS:
        np.testing.assert_array_equal(first[name], second[name])


def test_registry_refuses_unknown_names_with_the_choices():
    with pytest.raises(ValueError, match="aaw"):
        sample("weighted", [1.0], 1, np.random.default_rng(0))
    assert SAMPLERS["aaw"].uses_alpha and not SAMPLERS["uniform"].uses_alpha


def test_aaw_reweights_the_estimator_by_abs_advantage_and_the_importance_correction_undoes_it():
    # One group of 8 with a lone success: A_success = 7 |A_failure| (any normalisation). An item's
    # expected weight in the update is k p_i A_i: uniform 7:1, AAW (alpha 1) 49:1, alpha 2 343:1.
    advantages = np.array([7.0] + [-1.0] * 7)
    uniform = np.full(8, 1 / 8) * advantages
    assert uniform[0] / -uniform[1] == pytest.approx(7.0)
    for alpha, ratio in ((1.0, 49.0), (2.0, 343.0)):
        weights = aaw_probabilities(advantages, alpha) * advantages
        assert weights[0] / -weights[1] == pytest.approx(ratio)  # sign(A) |A|^(1 + alpha)
        corrected = aaw_probabilities(advantages, alpha) * advantages / (8 * aaw_probabilities(advantages, alpha))
        assert corrected[0] / -corrected[1] == pytest.approx(7.0)


def test_importance_weights_make_the_aaw_draw_an_unbiased_estimate_of_the_uniform_mean():
    advantages = np.array([2.0, -1.0, 0.0, 0.5, -3.0, 0.0])
    estimates = []
    for seed in range(4000):
        drawn = aaw_sample(advantages, 4, np.random.default_rng(seed))
        estimates.append(float(np.mean(importance_weights(drawn) * advantages[drawn.indices])))
    # Standard error about 1.3 / sqrt(4000) = 0.02.
    assert np.mean(estimates) == pytest.approx(advantages.mean(), abs=0.08)
    plain = [
        float(np.mean(advantages[aaw_sample(advantages, 4, np.random.default_rng(seed)).indices]))
        for seed in range(4000)
    ]
    assert abs(np.mean(plain) - advantages.mean()) > 0.5  # uncorrected AAW is biased toward large |A|


def test_draw_steps_applies_the_importance_correction_per_draw():
    from training.credit import assign_credit
    from tsmg.episode import Episode, StepRecord

    def episode(name, reward):
        step = StepRecord(index=0, round=0, agent="p", observation="", reward=reward, state_key="s")
        return Episode(
            episode_id=name,
            game_id="g",
            group_id="g",
            agents=["p"],
            policies={"p": "m"},
            steps=[step],
            returns={"p": reward},
        )

    credit = assign_credit("dr-grpo", [episode("a", 1.0), episode("b", 0.0), episode("c", 0.0), episode("d", 0.0)])
    steps, drawn = draw_steps(credit, "aaw", np.random.default_rng(0), count=6, importance_correction=True)
    # p = |A| / sum |A| = (0.75, 0.25, 0.25, 0.25) / 1.5; 1 / (N p) = 0.5 or 1.5: every corrected A is +-0.375.
    assert [step.draw for step in steps] == list(range(6))
    assert all(abs(step.advantage) == pytest.approx(0.375) for step in steps)
    plain, _ = draw_steps(credit, "aaw", np.random.default_rng(0), count=6)
    assert [abs(step.advantage) for step in plain] != [abs(step.advantage) for step in steps]
