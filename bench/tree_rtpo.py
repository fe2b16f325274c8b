"""Tree rollouts and RTPO against MS-GRPO on Frozen Lake random maps, at the same episode budget, paired by seed.

Every arm trains the demo's random-maps set-up (:func:`training.presets.demo_config`: the 0.15M
tiny model, FrozenLake-NoSlip-v0 random 4x4 maps, 8-step limit, 16 groups of 8 episodes per
update, AAW sampling, the entropy bonus over the rollout) from the same initial weights per seed,
with a constant learning rate (every arm's schedule would otherwise depend on how many updates
its episodes take), until it has played ``--episodes`` training episodes. The arms differ only in
how the rollout is shaped and credited:

* ``ms-grpo``: 8 independent episodes per seed, MS-GRPO credit (the product's default);
* ``tree``: ``rollout.shape: tree`` with ``tree-grpo`` credit (2 roots per group, every episode
  forks in two after each round while the group has leaves left, 8 leaves per group; shared
  steps trained once with the mean of their leaves' advantages, :mod:`training.rollout.tree`);
* ``rtpo``: ``rollout.shape: rtpo``: 16 spines per cycle, 8 branches per turn, one update per turn from
  the last back (:mod:`training.rollout.rtpo`). Its updates play fewer and shorter episodes, so it does
  more updates within the budget;
* (on request, ``--arms ... tree-each``) the tree with each shared step trained once per leaf.

Reported per arm: held-out greedy success on ``--eval-episodes`` maps at the budget's end, the
best one seen (every ``--eval-every`` updates) and the episodes until 80 % / 90 %; then the
paired difference to ``ms-grpo`` in points (mean, per seed) with the two-sided Wilcoxon
signed-rank p (scipy). PATR reports +9.3 points over GRPO on Frozen Lake (its own set-up).

Usage::

    python bench/tree_rtpo.py --seeds 5 --episodes 6400 --jobs 2     # about an hour on 2 shared cores

The last line printed is one JSON object with the per-arm results and the paired tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

ARMS: dict[str, dict[str, Any]] = {
    "ms-grpo": {},
    "tree": {
        "rollout": {"shape": "tree", "tree": {"roots": 2, "branch_factor": 2, "fork_every": 1}},
        "credit": "tree-grpo",
    },
    "rtpo": {"rollout": {"shape": "rtpo"}},
    # Not run by default: the tree with every shared step trained once per leaf (the flat weighting).
    "tree-each": {
        "rollout": {"shape": "tree", "tree": {"roots": 2, "branch_factor": 2, "fork_every": 1, "shared_steps": "each"}},
        "credit": "tree-grpo",
    },
}
DEFAULT_ARMS = ["ms-grpo", "tree", "rtpo"]


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Train one (arm, seed) until the episode budget; its evaluations."""
    import games  # noqa: F401  (registers the catalog)
    from training.config import TrainConfig
    from training.presets import demo_config
    from training.trainer import TrainHooks, train

    data = demo_config(
        random_maps=True,
        out_dir=job["out_dir"],
        seed=job["seed"],
        updates=100_000,
        max_seconds=1e7,
        eval_every=job["eval_every"],
        eval_episodes=job["eval_episodes"],
    ).model_dump()
    arm = ARMS[job["arm"]]
    data["model"]["spec"] = f"hf:{job['model']}"
    data["run"]["tensorboard"] = False
    data["optim"].update(schedule="constant", min_lr_ratio=0.0)
    for key, value in arm.get("rollout", {}).items():
        data["rollout"][key] = value
    if "credit" in arm:
        data["credit"] = {"name": arm["credit"]}
    config = TrainConfig.model_validate(data)

    def spent(step: int, metrics: dict[str, Any]) -> bool:
        return metrics.get("rollout/episodes_total", 0.0) >= job["episodes"]

    began = time.perf_counter()
    result = train(config, hooks=TrainHooks(should_stop=spent))
    rows = [row for row in result.metrics if row["step"] > 0]
    evals = [(row["rollout/episodes_total"], row["eval/success_rate"]) for row in rows if "eval/success_rate" in row]

    def episodes_to(target: float) -> float | None:
        return next((episodes for episodes, success in evals if success >= target), None)

    return {
        "arm": job["arm"],
        "seed": job["seed"],
        "updates": int(rows[-1]["step"]),
        "episodes": rows[-1]["rollout/episodes_total"],
        "final": evals[-1][1],
        "best": max(success for _, success in evals),
        "episodes_to_80": episodes_to(0.8),
        "episodes_to_90": episodes_to(0.9),
        "seconds": round(time.perf_counter() - began, 1),
    }


def paired(results: list[dict[str, Any]], arm: str, key: str = "final") -> dict[str, Any]:
    """``arm`` minus ``ms-grpo`` in points of ``key``, paired by seed, with Wilcoxon's p (None without scipy)."""
    base = {result["seed"]: result[key] for result in results if result["arm"] == "ms-grpo"}
    differences = [100 * (result[key] - base[result["seed"]]) for result in results if result["arm"] == arm]
    p_value = None
    try:
        from scipy.stats import wilcoxon

        if any(differences):
            p_value = float(wilcoxon(differences).pvalue)
    except ImportError:
        pass
    return {
        "mean_points": statistics.fmean(differences) if differences else None,
        "per_seed_points": [round(value, 1) for value in differences],
        "better": sum(value > 0 for value in differences),
        "worse": sum(value < 0 for value in differences),
        "wilcoxon_p": p_value,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=6400, help="training episodes per run (the budget)")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=DEFAULT_ARMS)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one CPU thread each)")
    parser.add_argument("--out", type=Path, help="keep the run folders here (default: a temporary folder)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from learning import build_models  # the same initial weights per seed as bench/learning.py

    began = time.perf_counter()
    folder = args.out or Path(tempfile.mkdtemp(prefix="tsmg-tree-rtpo-"))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    models = build_models(seeds, folder / "models")
    jobs = [
        {
            "arm": arm,
            "seed": seed,
            "model": models[seed],
            "out_dir": str(folder / arm / f"seed-{seed}"),
            "episodes": args.episodes,
            "eval_every": args.eval_every,
            "eval_episodes": args.eval_episodes,
        }
        for seed in seeds
        for arm in args.arms
    ]
    print(f"{len(jobs)} runs, {args.episodes} training episodes each, {args.jobs} at a time", flush=True)
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        for result in pool.map(run_one, jobs):
            results.append(result)
            print(
                f"  {result['arm']:<8} seed {result['seed']}: final {result['final']:.0%}, best {result['best']:.0%}, "
                f"{result['updates']} updates, {result['episodes']:.0f} episodes, {result['seconds']} s",
                flush=True,
            )
    print()
    print(f"{'arm':<9}{'final: mean (per seed)':<44}{'to 80 %: reached, median episodes':<36}")
    summary: dict[str, Any] = {}
    for arm in args.arms:
        runs = [result for result in results if result["arm"] == arm]
        reached = [run["episodes_to_80"] for run in runs if run["episodes_to_80"] is not None]
        summary[arm] = {
            "mean_final": statistics.fmean(run["final"] for run in runs),
            "per_seed_final": [run["final"] for run in runs],
            "mean_best": statistics.fmean(run["best"] for run in runs),
            "reached_80": len(reached),
            "median_episodes_to_80": statistics.median(reached) if reached else None,
            "reached_90": sum(run["episodes_to_90"] is not None for run in runs),
            "median_updates": statistics.median(run["updates"] for run in runs),
        }
        finals = " ".join(f"{value:.0%}" for value in summary[arm]["per_seed_final"])
        to_80 = f"{len(reached)}/{len(runs)}, {summary[arm]['median_episodes_to_80'] or '-'}"
        print(f"{arm:<9}{summary[arm]['mean_final']:>5.1%} ({finals}){'':<4}{to_80}")
    tests = {arm: paired(results, arm) for arm in args.arms if arm != "ms-grpo" and "ms-grpo" in args.arms}
    for arm, test in tests.items():
        p_text = "n/a" if test["wilcoxon_p"] is None else f"{test['wilcoxon_p']:.2g}"
        print(
            f"{arm} - ms-grpo, final held-out success: {test['mean_points']:+.1f} points on average "
            f"(per seed {test['per_seed_points']}), better in {test['better']}, worse in {test['worse']}; "
            f"Wilcoxon p = {p_text}"
        )
    wall = round(time.perf_counter() - began, 1)
    print(
        json.dumps(
            {
                "bench": "tree_rtpo",
                "episodes": args.episodes,
                "seeds": seeds,
                "arms": summary,
                "paired": tests,
                "seconds": wall,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
