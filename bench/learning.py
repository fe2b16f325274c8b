"""Learning speed: training episodes and wall time until Frozen Lake reaches 90 % held-out success.

Variants (all on the demo's set-up, :func:`training.presets.demo_config`: the 0.15M-parameter tiny
model, the grid-only view, constrained choice, 8 groups of 8 per update, lr 1e-3, micro-batches
of 64 with one optimizer step each):

* ``ms-grpo+aaw``: MS-GRPO credit with absolute-advantage-weighted sampling (the product's default);
* ``ms-grpo+uniform``: the same with uniform sampling (the AAW ablation);
* ``rloo``: leave-one-out credit, AAW sampling;
* ``gigpo``: GiGPO credit (episode + anchor-state terms), AAW sampling;
* ``ms-grpo+uniform-nonzero``: uniform among trajectories with A != 0, which tells "weighting by
  |A|" apart from "leaving out A = 0".

``bench/credit_ablation.py`` is its successor for the credit assigners and samplers (every one,
at one budget, on random maps and Snake); this script stays for the standard map's
time-to-target figures.

Games: ``standard`` (FrozenLake-v0, one map, 16 steps; held-out success sampled at temperature
1) and ``random`` (FrozenLake-NoSlip-v0, random maps, 8 steps; greedy on held-out maps).

Each (game, variant, seed) trains until an evaluation (every ``--eval-every`` updates, on
``--eval-episodes`` held-out episodes) reaches ``--target`` or the budget (``--max-updates``,
``--max-seconds``) runs out. A seed fixes the model's initial weights (the same for every
variant: paired), the rollout seeds and the sampling streams. Runs go ``--jobs`` at a time,
one CPU thread each; wall times include the evaluations and the contention between jobs.

Prints a table, Fisher's exact test of "reached the target" AAW vs uniform (with scipy), paired
tests of AAW against uniform and uniform-nonzero (a run that missed the target counts the
episodes it actually played, so a run cut short by ``--max-seconds`` is not credited with its
whole update budget, and ``--summarise`` reads each run's own budget from its metrics), and ends
with one line holding a JSON object.

Quick look (a few minutes on 2 cores)::

    python bench/learning.py --games standard --seeds 5 --max-updates 40

Report kept runs again without training (e.g. episodes to 80 %; runs stopped at the original target)::

    python bench/learning.py --games random --seeds 5 --target 0.8 --summarise RUNS_DIR

Larger::

    python bench/learning.py --seeds 10 --max-updates 300 --max-seconds 300 --jobs 2
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

VARIANTS: dict[str, dict[str, str]] = {
    "ms-grpo+aaw": {"credit": "ms-grpo", "sampler": "aaw"},
    "ms-grpo+uniform": {"credit": "ms-grpo", "sampler": "uniform"},
    "rloo": {"credit": "rloo", "sampler": "aaw"},
    "gigpo": {"credit": "gigpo", "sampler": "aaw"},
    # Separates "weighting by |A|" from "leaving out A = 0".
    "ms-grpo+uniform-nonzero": {"credit": "ms-grpo", "sampler": "uniform-nonzero"},
}
DEFAULT_VARIANTS = ["ms-grpo+aaw", "ms-grpo+uniform", "ms-grpo+uniform-nonzero", "rloo", "gigpo"]
GAMES = {"standard": False, "random": True}  # name -> random_maps


def build_models(seeds: list[int], folder: Path) -> dict[int, str]:
    """One tiny model per seed (shared by every variant and game: the comparison is paired)."""
    from training.presets import demo_config
    from training.trainer import base_model_source

    models = {}
    for seed in seeds:
        config = demo_config(out_dir=folder / f"seed-{seed}", seed=seed)
        models[seed] = base_model_source(config.model, folder / f"seed-{seed}", seed=config.run.seed)
    return models


def first_reaching(rows: list[dict[str, Any]], target: float) -> dict[str, Any] | None:
    """The first metrics row (after update 0) whose held-out evaluation reached ``target`` (the last one included).

    Example:
        >>> first_reaching([{"step": 5, "eval/success_rate": 0.8}, {"step": 10, "eval/success_rate": 0.9}], 0.9)
        {'step': 10, 'eval/success_rate': 0.9}
    """
    return next((row for row in rows if row["step"] > 0 and (row.get("eval/success_rate") or 0.0) >= target), None)


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Train one (game, variant, seed) until the target or the budget; returns what happened."""
    import games  # noqa: F401  (registers the catalog)
    from training.config import TrainConfig
    from training.presets import demo_config
    from training.trainer import TrainHooks, train

    base = demo_config(
        random_maps=GAMES[job["game"]],
        out_dir=job["out_dir"],
        seed=job["seed"],
        max_seconds=job["max_seconds"],
        updates=job["max_updates"],
        eval_episodes=job["eval_episodes"],
        eval_every=job["eval_every"],
    ).model_dump()
    variant = VARIANTS[job["variant"]]
    base["model"]["spec"] = f"hf:{job['model']}"
    base["credit"] = {"name": variant["credit"]}
    base["sampler"]["name"] = variant["sampler"]
    base["run"]["tensorboard"] = False
    config = TrainConfig.model_validate(base)

    def should_stop(step: int, metrics: dict[str, Any]) -> bool:
        success = metrics.get("eval/success_rate")
        return success is not None and success >= job["target"]

    result = train(config, hooks=TrainHooks(should_stop=should_stop))
    return outcome(job, result.metrics, job["target"])


def outcome(job: dict[str, Any], rows: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """What one run did, from its metrics rows: when it reached ``target``, its best and last evaluations."""
    reached = first_reaching(rows, target)
    evals = [row["eval/success_rate"] for row in rows if row.get("eval/success_rate") is not None]
    zero_signal = [row["credit/zero_signal_fraction"] for row in rows if "credit/zero_signal_fraction" in row]
    played = [row["rollout/episodes_total"] for row in rows if "rollout/episodes_total" in row]
    return {
        **{key: job[key] for key in ("game", "variant", "seed")},
        "reached": reached is not None,
        "update": None if reached is None else int(reached["step"]),
        "episodes": None if reached is None else reached["rollout/episodes_total"],
        "seconds": None if reached is None else round(reached.get("time/elapsed_s", 0.0), 1),
        "updates_run": max((int(row["step"]) for row in rows), default=0),
        "episodes_run": max(played, default=0.0),
        "run_seconds": round(max((row.get("time/elapsed_s", 0.0) for row in rows), default=0.0), 1),
        "best_eval": max(evals, default=None),
        "final_eval": evals[-1] if evals else None,
        "mean_zero_signal_fraction": round(statistics.fmean(zero_signal), 3) if zero_signal else None,
    }


def _median_range(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def summarise(results: list[dict[str, Any]], seeds: int) -> dict[str, Any]:
    """Per game and variant: seeds that got there, median and range of episodes and seconds."""
    summary: dict[str, Any] = {}
    for game in dict.fromkeys(result["game"] for result in results):
        summary[game] = {}
        for variant in dict.fromkeys(result["variant"] for result in results if result["game"] == game):
            runs = [result for result in results if result["game"] == game and result["variant"] == variant]
            hits = [run for run in runs if run["reached"]]
            episodes = [float(run["episodes"]) for run in hits]
            seconds = [float(run["seconds"]) for run in hits]
            summary[game][variant] = {
                "seeds": len(runs),
                "reached": len(hits),
                "median_episodes": statistics.median(episodes) if episodes else None,
                "episodes_range": [min(episodes), max(episodes)] if episodes else None,
                "median_seconds": round(statistics.median(seconds), 1) if seconds else None,
                "seconds_range": [min(seconds), max(seconds)] if seconds else None,
                "median_best_eval": statistics.median(run["best_eval"] or 0.0 for run in runs),
                "per_seed_episodes": {str(run["seed"]): run["episodes"] for run in runs},
            }
    return summary


def fisher_aaw_vs_uniform(summary: dict[str, Any]) -> dict[str, float | None]:
    """Two-sided Fisher exact p of "reached the target", AAW vs uniform, per game (None without scipy)."""
    try:
        from scipy.stats import fisher_exact
    except ImportError:
        return {}
    tests: dict[str, float | None] = {}
    for game, variants in summary.items():
        aaw, uniform = variants.get("ms-grpo+aaw"), variants.get("ms-grpo+uniform")
        if aaw and uniform:
            table = [
                [aaw["reached"], aaw["seeds"] - aaw["reached"]],
                [uniform["reached"], uniform["seeds"] - uniform["reached"]],
            ]
            tests[game] = float(fisher_exact(table)[1])
    return tests


def paired_aaw_vs(results: list[dict[str, Any]], other: str = "ms-grpo+uniform") -> dict[str, dict[str, Any]]:
    """Per game, AAW vs ``other`` paired by seed (same initial weights): episodes to target, fewer is better.

    A run that missed the target counts the episodes it actually played (censored at its own budget:
    a run stopped early by ``--max-seconds`` had fewer). Returns the seeds where AAW needed fewer /
    more episodes, the median ratio other / AAW, and the two-sided Wilcoxon signed-rank p (None
    without scipy or without differences).

    Example:
        >>> runs = [{"game": "g", "variant": v, "seed": 0, "episodes": e, "episodes_run": 640.0}
        ...         for v, e in (("ms-grpo+aaw", 128.0), ("ms-grpo+uniform", None))]
        >>> paired_aaw_vs(runs)["g"]["median_ratio_over_aaw"]
        5.0
    """
    tests: dict[str, dict[str, Any]] = {}
    for game in dict.fromkeys(result["game"] for result in results):
        runs = {
            (result["variant"], result["seed"]): float(
                result["episodes"] if result["episodes"] is not None else result["episodes_run"]
            )
            for result in results
            if result["game"] == game
        }
        seeds = sorted(seed for variant, seed in runs if variant == "ms-grpo+aaw" and (other, seed) in runs)
        if not seeds:
            continue
        aaw = [runs[("ms-grpo+aaw", seed)] for seed in seeds]
        uniform = [runs[(other, seed)] for seed in seeds]
        p_value = None
        try:
            from scipy.stats import wilcoxon

            if any(a != u for a, u in zip(aaw, uniform, strict=True)):
                p_value = float(wilcoxon(aaw, uniform).pvalue)
        except ImportError:
            pass
        tests[game] = {
            "seeds": len(seeds),
            "aaw_fewer": sum(a < u for a, u in zip(aaw, uniform, strict=True)),
            "aaw_more": sum(a > u for a, u in zip(aaw, uniform, strict=True)),
            "median_ratio_over_aaw": statistics.median(u / a for a, u in zip(aaw, uniform, strict=True)),
            "wilcoxon_p": p_value,
        }
    return tests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--games", nargs="+", choices=sorted(GAMES), default=["standard", "random"])
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=DEFAULT_VARIANTS)
    parser.add_argument("--seeds", type=int, default=5, help="seeds per (game, variant)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.9, help="held-out success to reach")
    parser.add_argument("--max-updates", type=int, default=150, help="budget per run, in updates")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="budget per run, in seconds")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one CPU thread each)")
    parser.add_argument("--out", type=Path, help="keep the run folders here (default: a temporary folder)")
    parser.add_argument(
        "--summarise",
        type=Path,
        metavar="DIR",
        help="train nothing: read the runs an earlier --out DIR kept (same games, variants, seeds) and report them "
        "again, e.g. for a lower --target (runs stopped once they reached the original one)",
    )
    args = parser.parse_args(argv)

    began = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.summarise is not None:
        from training.run_log import METRICS_FILE, read_metrics

        results = [
            outcome(
                {"game": game, "variant": variant, "seed": seed},
                read_metrics(args.summarise / game / variant / f"seed-{seed}" / METRICS_FILE),
                args.target,
            )
            for game in args.games
            for seed in seeds
            for variant in args.variants
        ]
        return report(args, seeds, results, began)
    folder = args.out or Path(tempfile.mkdtemp(prefix="tsmg-learning-"))
    models = build_models(seeds, folder / "models")
    jobs = [
        {
            "game": game,
            "variant": variant,
            "seed": seed,
            "model": models[seed],
            "out_dir": str(folder / game / variant / f"seed-{seed}"),
            "target": args.target,
            "max_updates": args.max_updates,
            "max_seconds": args.max_seconds,
            "eval_every": args.eval_every,
            "eval_episodes": args.eval_episodes,
        }
        for game in args.games
        for seed in seeds
        for variant in args.variants
    ]
    print(
        f"{len(jobs)} runs ({len(args.games)} games x {len(args.variants)} variants x {len(seeds)} seeds), "
        f"target {100 * args.target:.0f}% held-out, budget {args.max_updates} updates / {args.max_seconds:.0f}s, "
        f"{args.jobs} at a time",
        flush=True,
    )
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        for result in pool.map(run_one, jobs):
            results.append(result)
            if result["reached"]:
                what = f"update {result['update']}, {result['episodes']:.0f} episodes, {result['seconds']}s"
            else:
                what = f"not reached in {result['updates_run']} updates (best {result['best_eval']})"
            if args.out is not None:  # a crash later on keeps the finished runs
                with (args.out / "runs.jsonl").open("a", encoding="utf-8") as file:
                    file.write(json.dumps(result) + "\n")
            print(f"  {result['game']:<8} {result['variant']:<16} seed {result['seed']}: {what}", flush=True)
    return report(args, seeds, results, began)


def report(args: argparse.Namespace, seeds: list[int], results: list[dict[str, Any]], began: float) -> int:
    """Print the table, the tests and the closing JSON line of ``results``."""
    summary = summarise(results, args.seeds)
    fisher = fisher_aaw_vs_uniform(summary)
    print()
    print(f"{'game':<9}{'variant':<17}{'reached':>8}  {'episodes to target: median (range)':<36}{'seconds':<24}")
    for game, variants in summary.items():
        for variant, row in variants.items():
            hits = [value for value in row["per_seed_episodes"].values() if value is not None]
            seconds = [value for value in (row["seconds_range"] or [])]
            seconds_text = f"{row['median_seconds']} ({seconds[0]}-{seconds[1]})" if seconds else "-"
            print(
                f"{game:<9}{variant:<17}{row['reached']:>4}/{row['seeds']:<3}  {_median_range(hits):<36}{seconds_text}"
            )
    for game, p_value in fisher.items():
        print(f"Fisher exact test, reached target, AAW vs uniform on {game}: p = {p_value:.3f}")
    paired = {
        other: paired_aaw_vs(results, other)
        for other in ("ms-grpo+uniform", "ms-grpo+uniform-nonzero")
        if other in args.variants and "ms-grpo+aaw" in args.variants
    }
    for other, tests in paired.items():
        for game, test in tests.items():
            p_text = "n/a" if test["wilcoxon_p"] is None else f"{test['wilcoxon_p']:.2g}"
            print(
                f"paired by seed on {game}: AAW needed fewer episodes than {other} in {test['aaw_fewer']}/"
                f"{test['seeds']} seeds, more in {test['aaw_more']}; median ratio {other}/AAW "
                f"{test['median_ratio_over_aaw']:.2f}; Wilcoxon signed-rank p = {p_text}"
            )
    figures = {
        "benchmark": "learning",
        "target": args.target,
        "budget": {"max_updates": args.max_updates, "max_seconds": args.max_seconds, "jobs": args.jobs},
        "eval": {"every": args.eval_every, "episodes": args.eval_episodes},
        "seeds": seeds,
        "summary": summary,
        "fisher_p_aaw_vs_uniform": fisher,
        "paired_aaw_vs": paired,
        "runs": results,
        "wall_seconds": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
