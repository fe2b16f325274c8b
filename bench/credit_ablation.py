"""Credit assigners and samplers at one budget: Frozen Lake random maps and Snake, paired seeds.

Every arm trains the demo's set-up (:func:`training.presets.demo_config` with ``random_maps``: the
0.15M-parameter tiny model, the grid-only view, constrained choice, 16 groups of 8 episodes per
update, lr 1e-3 decaying to a tenth, the rollout-wide entropy bonus) for the same number of
training episodes (``--updates`` of the reference's episodes: ``run.episodes``, over which the
learning rate decays), and differs from ``ms-grpo+aaw`` (the product's default) only in what its
name says:

* samplers (MS-GRPO credit): ``aaw`` (p proportional to |A|), ``uniform`` (every trajectory, A = 0
  included), ``uniform-nonzero`` (uniform among A != 0: separates "weighting by |A|" from
  "skipping A = 0"), ``aaw-is`` (AAW with the 1 / (N p) importance correction: unbiased);
* credit assigners (AAW sampling): ``rloo``, ``dr-grpo`` (with its constant-normaliser
  aggregation), ``gigpo``, ``pgpo``, ``graft``, ``mt-grpo`` (needs per-step rewards: Snake only;
  on Frozen Lake the configuration is refused and the table says why);
* rollout shapes: ``tree`` (``rollout.shape: tree`` with ``tree-grpo`` credit: 2 roots per group,
  every episode forking in two after each round while the group has leaves left, 8 leaves per
  group, a shared step trained once with its leaves' mean advantage; :mod:`training.rollout.tree`) and
  ``rtpo`` (reverse-turn updates, :mod:`training.rollout.rtpo`: spines, then one update per turn from
  the last back; its updates play fewer and shorter episodes, so it makes more of them within
  the same episodes). PATR reports +9.3 points over GRPO on Frozen Lake (its own set-up).

Games: ``frozen-lake`` (FrozenLake-NoSlip-v0, random 4x4 maps, 8 steps, 16 groups per update) and
``snake`` (Snake-v0, 10x10, 8 steps, 4 groups per update; the model sees the grid lines only). A
seed fixes the initial weights (one tiny model per seed, shared by every arm and game) and the
game seeds of every update, so arms are paired by seed. Progress is held-out success (Frozen
Lake greedy, Snake sampled at temperature 1) on ``--eval-episodes`` validation seeds every
``--eval-every`` updates; "episodes to threshold" is the training episodes played when it first
reached its game's threshold (``--threshold GAME=VALUE``); a run that never did counts the
episodes it actually played: its own budget, so a run cut short by ``--max-seconds`` is not
credited with updates it never had. The final figure is success on ``--test-episodes`` other
seeds (and apples per episode on Snake) after the last update. Paired tests (Wilcoxon
signed-rank, two-sided) compare every arm with ``ms-grpo+aaw`` on the seeds they share.

Runs are appended to ``OUT/runs.jsonl`` as they finish, and each run checkpoints: a killed bench
started again with the same ``--out`` skips finished runs and resumes the interrupted ones.
``--summarise OUT`` reports kept runs again without training (e.g. another ``--threshold``).
Ends with one line holding a JSON object.

Add an arm: one line in :data:`ARMS` (a name and the configuration fields it changes).

Quick look (a few minutes)::

    python bench/credit_ablation.py --games frozen-lake --arms ms-grpo+aaw rloo --seeds 2 --updates 10

The table of docs/results.md::

    python bench/credit_ablation.py --seeds 5 --sampler-seeds 10 --updates 60 --jobs 2 --out runs/ablation
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

REFERENCE = "ms-grpo+aaw"


@dataclass(frozen=True)
class Arm:
    """One arm: the configuration fields it sets on top of the demo's set-up (``section.field: value``).

    Attributes:
        settings: Dotted configuration fields and their values.
        sampler_comparison: Run with ``--sampler-seeds`` seeds (the AAW / uniform comparison).
    """

    settings: dict[str, Any] = field(default_factory=dict)
    sampler_comparison: bool = False


ARMS: dict[str, Arm] = {
    "ms-grpo+aaw": Arm({"credit.name": "ms-grpo", "sampler.name": "aaw"}, sampler_comparison=True),
    "ms-grpo+uniform": Arm({"credit.name": "ms-grpo", "sampler.name": "uniform"}, sampler_comparison=True),
    "ms-grpo+uniform-nonzero": Arm({"sampler.name": "uniform-nonzero"}, sampler_comparison=True),
    "ms-grpo+aaw-is": Arm({"sampler.importance_correction": True}),
    "rloo": Arm({"credit.name": "rloo"}),
    "dr-grpo": Arm({"credit.name": "dr-grpo"}),
    "gigpo": Arm({"credit.name": "gigpo"}),
    "pgpo": Arm({"credit.name": "pgpo"}),
    "graft": Arm({"credit.name": "graft"}),
    "mt-grpo": Arm({"credit.name": "mt-grpo"}),
    "tree": Arm(
        {
            "rollout.shape": "tree",
            "rollout.tree": {"roots": 2, "branch_factor": 2, "fork_every": 1, "shared_steps": "mean"},
            "credit.name": "tree-grpo",
        }
    ),
    "rtpo": Arm({"rollout.shape": "rtpo"}),
}


@dataclass(frozen=True)
class GameSetting:
    """A game of the ablation.

    Attributes:
        game_id: The registered game.
        view: Regular expression of the observation lines the model sees (the grid).
        groups_per_update: Groups of 8 episodes per update.
        threshold: Default validation success that counts as learned.
        eval_temperature: Temperature of the validation and test episodes (0: greedy).
    """

    game_id: str
    view: str
    groups_per_update: int
    threshold: float
    eval_temperature: float


GAMES: dict[str, GameSetting] = {
    # The grid: P you, O hole, G goal, _ frozen. The demo's random-maps set-up, greedy held-out play.
    "frozen-lake": GameSetting("FrozenLake-NoSlip-v0", "[_OPG]+", 16, 0.8, 0.0),
    # The grid: 1 your head, 2 the enemy's, T body, A apple, _ empty. Its prompts are 5 times longer
    # (10 x 10 cells, one token each): 4 groups per update keep a run's CPU time near Frozen Lake's
    # (about 55 s against 50 s). Held-out play samples (temperature 1): the untrained model's greedy
    # move is the same in most states and walks into a wall (2 % success); sampled, about 20 %.
    "snake": GameSetting("Snake-v0", "[_AT0-9]+", 4, 0.4, 1.0),
}
#: Final-figure seeds start here: apart from training (below 1,000,000) and validation seeds.
TEST_SEED_START = 2_000_000
#: Updates an arm may make, in multiples of ``--updates`` (the budget is the episodes; this only bounds a run).
UPDATE_CAP = 10


# --------------------------------------------------------------------------- one run
def episode_budget(game: str, updates: int) -> int:
    """Training episodes every arm plays on ``game``: those of ``updates`` reference updates."""
    from training.presets import demo_config

    return updates * GAMES[game].groups_per_update * demo_config(random_maps=True).rollout.group_size


def run_config(job: dict[str, Any]) -> Any:
    """The training configuration of one (game, arm, seed)."""
    from training.config import TrainConfig
    from training.presets import demo_config

    data = demo_config(
        random_maps=True,
        out_dir=job["out_dir"],
        seed=job["seed"],
        max_seconds=job["max_seconds"],
        updates=job["updates"],
        eval_episodes=job["eval_episodes"],
        eval_every=job["eval_every"],
    ).model_dump()
    game = GAMES[job["game"]]
    data["rollout"].update(game_id=game.game_id, observation_lines=game.view, groups_per_update=game.groups_per_update)
    # Every arm plays the reference's episodes (its updates x episodes per update); an arm that
    # plays fewer per update (RTPO) makes more updates, and the lr decays over the episodes alike.
    data["run"]["episodes"] = episode_budget(job["game"], job["updates"])
    data["run"]["updates"] = UPDATE_CAP * job["updates"]
    data["run"]["eval_temperature"] = game.eval_temperature
    data["model"]["spec"] = f"hf:{job['model']}"
    data["run"].update(tensorboard=False, checkpoint_every=job["checkpoint_every"], keep_last=1)
    for dotted, value in ARMS[job["arm"]].settings.items():
        section, name = dotted.split(".")
        data[section][name] = value
    if data["credit"]["name"] != "ms-grpo":
        data["credit"].pop("params", None)  # the assigner's own defaults
        data["loss"].pop("aggregation", None)  # and its paper's aggregation, where it has one
    return TrainConfig.model_validate(data)


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Train one (game, arm, seed) for the whole budget, then measure it on the test seeds."""
    import games  # noqa: F401  (registers the catalog)
    from training.config import IncompatibleGameError
    from training.trainer import train

    record = {key: job[key] for key in ("game", "arm", "seed")}
    config = run_config(job)
    try:
        result = train(config, resume=True)
    except IncompatibleGameError as error:
        return {**record, "refused": str(error)}
    final = held_out_figures(result.final_model, config, job["test_episodes"])
    Path(job["out_dir"], "final.json").write_text(json.dumps(final), encoding="utf-8")
    return {**record, **outcome(result.metrics, final, job["threshold"])}


def held_out_figures(model_dir: Any, config: Any, episodes: int) -> dict[str, float]:
    """Success, mean return and apples (steps rewarded above 0) per episode on the test seeds (held-out play)."""
    from backends.hf import HFBackend
    from training.rollout.engines import HFRolloutEngine
    from tsmg.rollout import plan_episodes
    from tsmg.summary import summarize

    seeds = list(range(TEST_SEED_START, TEST_SEED_START + episodes))
    backend = HFBackend(str(model_dir), threads=config.run.threads, max_batch_size=len(seeds))
    engine = HFRolloutEngine(backend, config.rollout, model_seats=["player"])
    plans = plan_episodes(config.rollout.game_id, seeds, group_size=1, id_prefix="test")
    played = engine.play(plans, seed=config.run.seed + 1, temperature=config.run.eval_temperature).episodes
    summary = summarize(played)
    apples = [sum(step.reward > 0 for step in episode.steps) for episode in played]
    return {
        "success": summary.success_rate or 0.0,
        "mean_return": summary.mean_return,
        "apples_per_episode": statistics.fmean(apples) if apples else 0.0,
    }


def outcome(rows: list[dict[str, Any]], final: dict[str, float], threshold: float) -> dict[str, Any]:
    """What one run did: when validation success first reached ``threshold``, its budget, its final figures.

    Example:
        >>> rows = [{"step": 5, "eval/success_rate": 0.8, "rollout/episodes_total": 640.0},
        ...         {"step": 10, "eval/success_rate": 0.7, "rollout/episodes_total": 1280.0}]
        >>> result = outcome(rows, {"success": 0.75}, 0.8)
        >>> result["episodes"], result["episodes_run"], result["reached"]
        (640.0, 1280.0, True)
    """
    reached = next(
        (row for row in rows if row["step"] > 0 and (row.get("eval/success_rate") or 0.0) >= threshold), None
    )
    played = [row["rollout/episodes_total"] for row in rows if "rollout/episodes_total" in row]
    return {
        "reached": reached is not None,
        "episodes": None if reached is None else float(reached["rollout/episodes_total"]),
        "episodes_run": float(max(played, default=0.0)),
        "updates_run": max((int(row["step"]) for row in rows), default=0),
        "run_seconds": round(max((row.get("time/elapsed_s", 0.0) for row in rows), default=0.0), 1),
        "best_validation": max(
            (row["eval/success_rate"] for row in rows if row.get("eval/success_rate") is not None), default=None
        ),
        "test_success": final["success"],
        "test_return": final.get("mean_return"),
        "test_apples": final.get("apples_per_episode"),
    }


# --------------------------------------------------------------------------- statistics
def episodes_or_budget(run: dict[str, Any]) -> float:
    """Episodes to the threshold, or, for a miss, the episodes the run actually played (its budget)."""
    return float(run["episodes"] if run["episodes"] is not None else run["episodes_run"])


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "sd": None, "median": None, "min": None, "max": None}
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def wilcoxon_p(first: list[float], second: list[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p of paired values (None without scipy or without differences)."""
    try:
        from scipy.stats import wilcoxon
    except ImportError:
        return None
    if all(a == b for a, b in zip(first, second, strict=True)):
        return None
    return float(wilcoxon(first, second).pvalue)


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per game and arm: seeds that reached the threshold, episodes to it, final figures, paired tests."""
    summary: dict[str, Any] = {}
    for game in dict.fromkeys(result["game"] for result in results):
        summary[game] = {}
        runs_of = {
            arm: {run["seed"]: run for run in results if run["game"] == game and run["arm"] == arm}
            for arm in dict.fromkeys(result["arm"] for result in results if result["game"] == game)
        }
        reference = runs_of.get(REFERENCE, {})
        for arm, runs in runs_of.items():
            refused = [run["refused"] for run in runs.values() if "refused" in run]
            if refused:
                summary[game][arm] = {"refused": refused[0]}
                continue
            row: dict[str, Any] = {
                "seeds": len(runs),
                "reached": sum(run["reached"] for run in runs.values()),
                "episodes_to_threshold": _spread([episodes_or_budget(run) for run in runs.values()]),
                "test_success": _spread([run["test_success"] for run in runs.values()]),
                "test_apples": _spread([run["test_apples"] for run in runs.values() if run["test_apples"] is not None]),
            }
            shared = sorted(seed for seed in runs if seed in reference and "refused" not in reference[seed])
            if arm != REFERENCE and shared:
                ours = [episodes_or_budget(runs[seed]) for seed in shared]
                theirs = [episodes_or_budget(reference[seed]) for seed in shared]
                ours_final = [runs[seed]["test_success"] for seed in shared]
                theirs_final = [reference[seed]["test_success"] for seed in shared]
                row["vs_reference"] = {
                    "seeds": len(shared),
                    "fewer_episodes": sum(a < b for a, b in zip(ours, theirs, strict=True)),
                    "more_episodes": sum(a > b for a, b in zip(ours, theirs, strict=True)),
                    "median_ratio_episodes": statistics.median(a / b for a, b in zip(ours, theirs, strict=True)),
                    "episodes_wilcoxon_p": wilcoxon_p(ours, theirs),
                    "mean_test_success_difference": statistics.fmean(
                        a - b for a, b in zip(ours_final, theirs_final, strict=True)
                    ),
                    "test_success_wilcoxon_p": wilcoxon_p(ours_final, theirs_final),
                }
            summary[game][arm] = row
    return summary


# --------------------------------------------------------------------------- the bench
def build_models(seeds: list[int], folder: Path) -> dict[int, str]:
    """One tiny model per seed, shared by every arm and game (the comparison is paired)."""
    from training.presets import demo_config
    from training.trainer import base_model_source

    return {seed: base_model_source(demo_config(seed=seed).model, folder / f"seed-{seed}", seed=seed) for seed in seeds}


def read_runs(folder: Path) -> list[dict[str, Any]]:
    """The runs recorded in ``folder/runs.jsonl`` (the last record of each (game, arm, seed))."""
    path = folder / "runs.jsonl"
    if not path.is_file():
        return []
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            runs[(record["game"], record["arm"], record["seed"])] = record
    return list(runs.values())


def reread_runs(folder: Path, thresholds: dict[str, float]) -> list[dict[str, Any]]:
    """Every kept run folder of ``folder`` measured again at its game's threshold (refusals as recorded)."""
    from training.run_log import METRICS_FILE, read_metrics

    results = [run for run in read_runs(folder) if "refused" in run]
    for final_path in sorted(folder.glob("*/*/seed-*/final.json")):
        run_dir = final_path.parent
        record = {"game": run_dir.parent.parent.name, "arm": run_dir.parent.name, "seed": int(run_dir.name[5:])}
        final = json.loads(final_path.read_text(encoding="utf-8"))
        if record["game"] in thresholds:
            metrics = read_metrics(run_dir / METRICS_FILE)
            results.append({**record, **outcome(metrics, final, thresholds[record["game"]])})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--games", nargs="+", choices=sorted(GAMES), default=list(GAMES))
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds per (game, arm)")
    parser.add_argument("--sampler-seeds", type=int, default=10, help="seeds of the AAW / uniform comparison arms")
    parser.add_argument(
        "--threshold",
        nargs="+",
        default=[],
        metavar="GAME=VALUE",
        help="validation success to reach, per game (defaults: "
        + ", ".join(f"{name}={game.threshold}" for name, game in GAMES.items())
        + ")",
    )
    parser.add_argument(
        "--updates",
        type=int,
        default=60,
        help="budget per run: the training episodes of this many reference updates (every arm the same episodes)",
    )
    parser.add_argument("--max-seconds", type=float, default=100_000.0, help="wall-time cap per run")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=50, help="validation episodes per evaluation")
    parser.add_argument("--test-episodes", type=int, default=200, help="test episodes of the final figure")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="so that a killed bench resumes")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one CPU thread each)")
    parser.add_argument("--out", type=Path, help="keep runs here (default: a temporary folder); rerun to resume")
    parser.add_argument("--summarise", type=Path, metavar="OUT", help="train nothing: report the runs kept in OUT")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    args.thresholds = {name: GAMES[name].threshold for name in args.games}
    for assignment in args.threshold:
        name, _, value = assignment.partition("=")
        if name not in GAMES or not value:
            parser.error(f"--threshold takes GAME=VALUE with GAME one of {sorted(GAMES)}, got {assignment!r}")
        args.thresholds[name] = float(value)
    if args.summarise is not None:
        return report(args, reread_runs(args.summarise, args.thresholds), began)
    folder = args.out or Path(tempfile.mkdtemp(prefix="tsmg-ablation-"))
    folder.mkdir(parents=True, exist_ok=True)
    done = {(run["game"], run["arm"], run["seed"]) for run in read_runs(folder)}
    seeds_of = {arm: args.sampler_seeds if ARMS[arm].sampler_comparison else args.seeds for arm in args.arms}
    models = build_models(list(range(max(seeds_of.values()))), folder / "models")
    jobs = [
        {
            "game": game,
            "arm": arm,
            "seed": seed,
            "model": models[seed],
            "out_dir": str(folder / game / arm / f"seed-{seed}"),
            "threshold": args.thresholds[game],
            "updates": args.updates,
            "max_seconds": args.max_seconds,
            "eval_every": args.eval_every,
            "eval_episodes": args.eval_episodes,
            "test_episodes": args.test_episodes,
            "checkpoint_every": args.checkpoint_every,
        }
        for seed in range(max(seeds_of.values()))
        for game in args.games
        for arm in args.arms
        if seed < seeds_of[arm] and (game, arm, seed) not in done
    ]
    print(
        f"{len(jobs)} runs to go ({len(done)} kept in {folder}), the episodes of {args.updates} reference updates "
        f"each, thresholds "
        f"{args.thresholds} (validation success), {args.jobs} at a time",
        flush=True,
    )
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_one, job) for job in jobs]
        for future in as_completed(futures):
            result = future.result()
            with (folder / "runs.jsonl").open("a", encoding="utf-8") as file:
                file.write(json.dumps(result) + "\n")
            if "refused" in result:
                what = f"refused: {result['refused']}"
            else:
                reached = f"{result['episodes']:.0f} episodes" if result["reached"] else "not reached"
                what = f"threshold: {reached}; test success {100 * result['test_success']:.1f}%"
            print(f"  {result['game']:<12}{result['arm']:<25} seed {result['seed']}: {what}", flush=True)
    return report(args, read_runs(folder), began)


def _cell(spread: dict[str, float | None], scale: float = 1.0, digits: int = 0) -> str:
    if spread["median"] is None:
        return "-"
    return (
        f"{scale * spread['median']:,.{digits}f} ({scale * spread['min']:,.{digits}f}-"  # type: ignore[operator]
        f"{scale * spread['max']:,.{digits}f})"  # type: ignore[operator]
    )


def report(args: argparse.Namespace, results: list[dict[str, Any]], began: float) -> int:
    """Print the table (markdown) and the closing JSON line."""
    summary = summarise(results)
    print()
    print(
        "| game | arm | seeds | reached | episodes to threshold: median (range) | test success: mean ± sd | "
        "apples / episode | vs ms-grpo+aaw: episodes fewer/more, p | test success difference, p |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for game, arms in summary.items():
        for arm, row in arms.items():
            if "refused" in row:
                print(f"| {game} | {arm} | refused: {row['refused']} |")
                continue
            success = row["test_success"]
            apples = row["test_apples"]
            versus, difference = "-", "-"
            if "vs_reference" in row:
                test = row["vs_reference"]
                p = "n/a" if test["episodes_wilcoxon_p"] is None else f"{test['episodes_wilcoxon_p']:.2g}"
                versus = f"{test['fewer_episodes']}/{test['more_episodes']}, p = {p}"
                p = "n/a" if test["test_success_wilcoxon_p"] is None else f"{test['test_success_wilcoxon_p']:.2g}"
                difference = f"{100 * test['mean_test_success_difference']:+.1f} points, p = {p}"
            apples_text = "-" if apples["mean"] is None or game != "snake" else f"{apples['mean']:.2f}"
            print(
                f"| {game} | {arm} | {row['seeds']} | {row['reached']}/{row['seeds']} | "
                f"{_cell(row['episodes_to_threshold'])} | {100 * success['mean']:.1f} ± {100 * success['sd']:.1f} % | "
                f"{apples_text} | {versus} | {difference} |"
            )
    figures = {
        "benchmark": "credit_ablation",
        "thresholds": args.thresholds,
        "budget_updates": args.updates,
        "budget_episodes": {name: episode_budget(name, args.updates) for name in args.thresholds},
        "summary": summary,
        "runs": results,
        "wall_seconds": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
