"""The ablation benches: arms differ only in what they claim; a miss counts the run's own budget."""

import json

import pytest
from bench_modules import flat, load_bench

ablation = load_bench("credit_ablation")
learning = load_bench("learning")


def job(arm, game="frozen-lake", **extra):
    return {
        "game": game,
        "arm": arm,
        "seed": 3,
        "model": "/models/seed-3",
        "out_dir": "/runs/x",
        "updates": 60,
        "max_seconds": 1e5,
        "eval_every": 5,
        "eval_episodes": 50,
        "checkpoint_every": 10,
        **extra,
    }


@pytest.mark.parametrize("game", sorted(ablation.GAMES))
@pytest.mark.parametrize("arm", sorted(ablation.ARMS))
def test_every_arm_differs_from_the_reference_only_in_what_its_name_says(arm, game):
    reference = flat(ablation.run_config(job(ablation.REFERENCE, game)).model_dump())
    config = flat(ablation.run_config(job(arm, game)).model_dump())
    changed = {key for key in config if config[key] != reference[key]}
    allowed = set(ablation.ARMS[arm].settings) | {"credit.params"}
    if arm == "dr-grpo":
        allowed.add("loss.aggregation")  # Dr.GRPO's constant normaliser comes with it
    unexplained = {key for key in changed if not any(key == name or key.startswith(f"{name}.") for name in allowed)}
    assert not unexplained, unexplained
    assert (config["run.episodes"], config["run.updates"]) == (reference["run.episodes"], reference["run.updates"])
    assert config["rollout.game_id"] == ablation.GAMES[game].game_id
    assert config["model.spec"] == "hf:/models/seed-3" and config["run.seed"] == 3  # paired: same weights, seeds


def test_every_arm_plays_the_reference_episodes():
    frozen_lake, snake = (ablation.run_config(job("rtpo", game)).run for game in ("frozen-lake", "snake"))
    assert frozen_lake.episodes == 60 * 16 * 8 and snake.episodes == 60 * 4 * 8
    assert frozen_lake.updates >= 2 * 60  # RTPO makes more updates within the same episodes
    tree = ablation.run_config(job("tree")).rollout
    assert tree.shape == "tree" and tree.group_size == 8  # as many episodes per update as independent groups


def test_dr_grpo_arm_runs_with_the_constant_normaliser():
    assert ablation.run_config(job("dr-grpo")).loss.aggregation == "constant"


ROWS = [
    {"step": 0, "eval/success_rate": 0.0},
    {"step": 5, "rollout/episodes_total": 640.0, "eval/success_rate": 0.5},
    {"step": 10, "rollout/episodes_total": 1280.0, "eval/success_rate": 0.85},
    {"step": 12, "rollout/episodes_total": 1536.0, "eval/success_rate": 0.7},
]


def test_outcome_reaches_the_threshold_or_counts_the_run_own_budget():
    hit = ablation.outcome(ROWS, {"success": 0.6}, 0.8)
    assert (hit["reached"], hit["episodes"], hit["episodes_run"], hit["updates_run"]) == (True, 1280.0, 1536.0, 12)
    miss = ablation.outcome(ROWS, {"success": 0.6}, 0.9)
    assert not miss["reached"] and ablation.episodes_or_budget(miss) == 1536.0  # cut short: its own 12 updates


def run(arm, seed, episodes, played, success):
    return {
        "game": "g",
        "arm": arm,
        "seed": seed,
        "reached": episodes is not None,
        "episodes": episodes,
        "episodes_run": played,
        "test_success": success,
        "test_apples": None,
    }


def test_summary_pairs_by_seed_against_the_reference():
    results = [run("ms-grpo+aaw", seed, 640.0 * (seed + 1), 7680.0, 0.9) for seed in range(6)]
    results += [run("ms-grpo+uniform", seed, None, 7680.0 if seed else 3840.0, 0.5) for seed in range(6)]
    results.append({"game": "g", "arm": "mt-grpo", "seed": 0, "refused": "needs per-step rewards"})
    summary = ablation.summarise(results)["g"]
    versus = summary["ms-grpo+uniform"]["vs_reference"]
    assert (versus["seeds"], versus["fewer_episodes"], versus["more_episodes"]) == (6, 0, 6)
    assert versus["episodes_wilcoxon_p"] == pytest.approx(0.03125)  # all six pairs one way: 2 / 2^6
    assert versus["mean_test_success_difference"] == pytest.approx(-0.4)
    assert summary["ms-grpo+uniform"]["episodes_to_threshold"]["min"] == 3840.0  # the short run's own budget
    assert summary["mt-grpo"] == {"refused": "needs per-step rewards"}


def test_summarise_rereads_kept_runs_at_another_threshold(tmp_path):
    folder = tmp_path / "frozen-lake" / "rloo" / "seed-0"
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (folder / "final.json").write_text(json.dumps({"success": 0.75, "apples_per_episode": 0.0}))
    (tmp_path / "runs.jsonl").write_text(json.dumps({"game": "snake", "arm": "x", "seed": 0, "refused": "r"}) + "\n")
    [refused, rerun] = ablation.reread_runs(tmp_path, {"frozen-lake": 0.5, "snake": 0.3})
    assert refused["refused"] == "r"
    assert (rerun["arm"], rerun["episodes"], rerun["test_success"]) == ("rloo", 640.0, 0.75)


def test_learning_bench_imputes_a_miss_from_the_run_own_budget():
    # Seed 0's uniform run was stopped by --max-seconds after 5 updates (640 episodes): it counts
    # those, not the 150-update budget it never had; --summarise reads the same from the metrics.
    results = [
        learning.outcome({"game": "g", "variant": "ms-grpo+aaw", "seed": 0}, ROWS, 0.8),
        learning.outcome({"game": "g", "variant": "ms-grpo+uniform", "seed": 0}, ROWS[:2], 0.9),
    ]
    assert results[1]["episodes_run"] == 640.0
    test = learning.paired_aaw_vs(results)["g"]
    assert test["median_ratio_over_aaw"] == pytest.approx(640.0 / 1280.0)
