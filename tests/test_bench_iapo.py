"""bench/iapo_comparison.py's pure parts: the look-up share of the credit, the per-arm summary, the configurations."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import games  # noqa: F401  (registers the catalog)
from tests.bench_modules import load_bench
from training.credit import assign_credit
from tsmg.policies import OraclePolicy
from tsmg.rollout import rollout

bench = load_bench("iapo_comparison")


def test_the_lookup_share_is_the_absolute_advantage_on_lookup_and_policy_steps():
    # An oracle refund of the easy game: lookup_order, check_policy, decide; two look-ups of three steps.
    episodes = rollout("ServiceRefund-Easy-v0", OraclePolicy(), seeds=[1, 2])
    by_id = {episode.episode_id: episode for episode in episodes}
    first, second = episodes
    assert [step.parsed_action.split("(")[0] for step in first.steps] == ["lookup_order", "check_policy", "deny_refund"]
    steps = [SimpleNamespace(episode_id=first.episode_id, step_index=index, advantage=-1.0) for index in range(3)]
    steps.append(SimpleNamespace(episode_id=second.episode_id, step_index=2, advantage=2.0))
    credit = SimpleNamespace(steps=lambda: steps)
    assert bench.lookup_share(credit, by_id) == pytest.approx((1 + 1) / (3 + 2))
    assert bench.lookup_share(SimpleNamespace(steps=lambda: []), by_id) is None


def test_iapo_on_the_exact_graph_moves_advantage_to_the_lookups():
    """On a group of oracle and random refunds the routed credit puts a larger share on the look-ups."""
    from tsmg.policies import RandomPolicy

    episodes = rollout("ServiceRefund-Easy-v0", OraclePolicy(), seeds=[7])
    episodes += [rollout("ServiceRefund-Easy-v0", RandomPolicy(seed=k), seeds=[7])[0] for k in range(7)]
    assert 0 < sum(bool(episode.success["player"]) for episode in episodes) < len(episodes)
    for index, episode in enumerate(episodes):
        episode.group_id, episode.episode_id = "g", f"e{index}"
    by_id = {episode.episode_id: episode for episode in episodes}
    flat = bench.lookup_share(assign_credit("ms-grpo", episodes), by_id)
    routed = bench.lookup_share(assign_credit("iapo", episodes), by_id)
    assert routed > flat


def test_summary_pairs_every_arm_with_ms_grpo_by_seed():
    def run(arm, seed, success, share):
        return {
            "game": "G",
            "arm": arm,
            "seed": seed,
            "test_success": success,
            "rollout_success": success,
            "lookup_share": share,
            "lookup_share_ms_grpo": 0.4,
        }

    runs = [run("ms-grpo", 0, 0.5, 0.4), run("ms-grpo", 1, 0.25, 0.4), run("iapo-exact", 0, 0.75, 0.5)]
    runs.append(run("iapo-exact", 1, 0.0, 0.6))
    runs.append({**run("iapo-model", 0, 0.5, 0.4), "model_graph": {"tp": 3, "fp": 1, "fn": 5, "dropped_lines": 2}})
    summary = bench.summarise(runs)["G"]
    assert summary["iapo-exact"]["test_success_minus_ms_grpo"]["mean"] == pytest.approx((0.25 - 0.25) / 2)
    assert summary["iapo-exact"]["test_success_minus_ms_grpo"]["min"] == pytest.approx(-0.25)
    assert summary["iapo-exact"]["lookup_share"]["mean"] == pytest.approx(0.55)
    assert summary["iapo-model"]["model_graph"] == {"precision": 0.75, "recall": 0.375, "dropped_lines": 2}
    assert "test_success_minus_ms_grpo" not in summary["ms-grpo"]


def test_the_arms_configurations_differ_only_in_credit_and_annotators(tmp_path):
    job = {"game": "ServiceRefund-Easy-v0", "model": str(tmp_path), "groups": 2, "updates": 3, "seed": 1}
    configs = {arm: bench.run_config({**job, "arm": arm, "out_dir": str(tmp_path / arm)}) for arm in bench.ARMS}
    assert configs["iapo-exact"].rollout.annotators == ["exact"]
    assert configs["iapo-model"].rollout.annotators == ["model"]
    assert configs["iapo-model"].credit.params["graph"] == "model"
    assert {config.rollout.lap.action_format.kind for config in configs.values()} == {"choice"}
    assert {config.run.updates * config.rollout.groups_per_update for config in configs.values()} == {6}
