"""IAPO against MS-GRPO and GiGPO on the tool-using service games, tiny model, paired seeds, equal episodes.

Arms (everything else equal: the tiny model built per seed and shared by every arm, fully
fine-tuned at lr 1e-3 as the demo does, constrained
choice among the legal tool calls, ``--groups`` groups of 8 episodes per update, ``--updates``
updates, the same game seeds per update):

* ``ms-grpo``: the trajectory's group-normalised return on every step;
* ``gigpo``: GiGPO's step groups on top;
* ``iapo-exact``: IAPO routing along the game's own influence record (``exact`` annotator);
* ``iapo-model``: IAPO routing along the graph a model labels (``model`` annotator, the model
  given by ``--annotator-model``: ``smollm2`` from the wheel by default, asked once per update for
  all the rollout's episodes).

Figures per run: held-out success before training (the seed's initial model, shared by the arms)
and after the last update (greedy, on ``--test-episodes`` game seeds from 2,000,000 on, which no
run trains on: training draws its game seeds below ``run.eval_seed_start``, 1,000,000), the mean
rollout success over the run, and **what the graph changed**: the share of
the absolute advantage that the credit put on the look-up actions (``lookup_*`` and
``check_policy``, the calls whose results the final action uses), computed from the credit's own
per-step advantages on the run's episodes (:func:`training.credit.assign_credit`), beside the
same share under MS-GRPO on the same episodes (where every step of a trajectory gets the same
advantage). For ``iapo-model`` also the edge precision and recall of the model's graphs against
the exact ones on the run's episodes (:func:`training.model_annotator.edge_agreement`).

Over the seeds, each arm against MS-GRPO: the per-seed difference in held-out points with its
exact McNemar test on the test seeds, and the paired t test over the training seeds with its 95 %
interval (:mod:`seed_stats`; test seeds are never pooled over training seeds).

GiGPO differs from MS-GRPO only where a state recurs within a group. The service games are
deterministic once seeded and a state's key is its observation, so the 8 episodes of a group meet
again exactly where they opened with the same calls in the same order (asking for the email and
then the address is another state than the other order): on ServiceAddress-v0 its credit differs
from MS-GRPO's on every seed.

Runs are appended to ``OUT/runs.jsonl`` as they finish (a record names its updates, groups and
test episodes: a run of another budget is run again), and each run checkpoints every update: a
killed bench started again with the same ``--out`` skips finished runs and resumes the others.
One process, runs one after another (the machine is shared). Ends with one line holding a JSON object.

The table of docs/tool-games.md: its records are in bench/results/iapo/runs.jsonl, so the command
below with ``--out bench/results/iapo`` prints it from them in seconds; with a fresh ``--out`` it
runs all 15 (66 min here)::

    nice -n 10 python bench/iapo_comparison.py --games ServiceAddress-v0 --seeds 5 --updates 30 --groups 2 \
        --test-episodes 64 --arms ms-grpo gigpo iapo-exact --out runs/iapo
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seed_stats import compare_over_seeds, describe  # noqa: E402  (the benches' one helper for training seeds)

ARMS: dict[str, dict[str, Any]] = {
    "ms-grpo": {"credit": {"name": "ms-grpo"}},
    "gigpo": {"credit": {"name": "gigpo"}},
    "iapo-exact": {"credit": {"name": "iapo", "params": {"graph": "exact"}}},
    "iapo-model": {"credit": {"name": "iapo", "params": {"graph": "model"}}, "annotators": ["model"]},
}
REFERENCE = "ms-grpo"
GROUP_SIZE = 8
#: Test game seeds: above every training seed (training draws below run.eval_seed_start, 1,000,000).
TEST_SEED_START = 2_000_000
#: The look-up actions: calls whose results the final action's arguments and decision come from.
LOOKUPS = ("lookup_", "check_policy")


def run_config(job: dict[str, Any]) -> Any:
    """The training configuration of one (game, arm, seed)."""
    from training.config import TrainConfig

    arm = ARMS[job["arm"]]
    data: dict[str, Any] = {
        "rollout": {
            "game_id": job["game"],
            "group_size": GROUP_SIZE,
            "groups_per_update": job["groups"],
            "lap": {"action_format": {"kind": "choice"}},
            "annotators": list(arm.get("annotators", [])),
        },
        "model": {"spec": f"hf:{job['model']}", "finetune": "full", "dtype": "float32"},  # as the tiny configs
        # The demo's optimiser for the tiny model (training.presets.demo_config): full fine-tuning at lr 1e-3.
        "optim": {"lr": 1e-3, "micro_batch_size": 64, "grad_accumulation": 1},
        "credit": arm["credit"],
        "run": {
            "out_dir": job["out_dir"],
            "seed": job["seed"],
            "updates": job["updates"],
            "eval_every": 0,
            "checkpoint_every": 1,
            "keep_last": 1,
            "episodes_every": 1,
            "tensorboard": False,
        },
    }
    return TrainConfig.model_validate(data)


def lookup_share(credit: Any, episodes: dict[str, Any]) -> float | None:
    """The share of the absolute advantage on look-up steps (None when every advantage is zero)."""
    total = lookups = 0.0
    for item in credit.steps():
        action = episodes[item.episode_id].steps[item.step_index].parsed_action or ""
        magnitude = abs(float(item.advantage))
        total += magnitude
        if action.startswith(LOOKUPS):
            lookups += magnitude
    return lookups / total if total else None


def graph_figures(run_dir: Path, config: Any) -> dict[str, Any]:
    """The look-up share under the run's credit and under MS-GRPO, and the model graphs' edge agreement."""
    from training.credit import assign_credit
    from training.model_annotator import edge_agreement
    from tsmg.episode import read_episodes

    episodes = [episode for episode in read_episodes(run_dir / "episodes.jsonl") if episode.error is None]
    by_id = {episode.episode_id: episode for episode in episodes}
    own = assign_credit(config.credit.name, episodes, params=config.credit.params)
    flat = assign_credit("ms-grpo", episodes)
    figures: dict[str, Any] = {
        "lookup_share": lookup_share(own, by_id),
        "lookup_share_ms_grpo": lookup_share(flat, by_id),
    }
    if any("model" in episode.influence for episode in episodes):
        counts = {"tp": 0, "fp": 0, "fn": 0}
        for episode in episodes:
            if "model" in episode.influence and "exact" in episode.influence:
                for key, value in edge_agreement(episode.influence["exact"], episode.influence["model"]).items():
                    counts[key] += value
        found, claimed = counts["tp"] + counts["fn"], counts["tp"] + counts["fp"]
        figures["model_graph"] = {
            **counts,
            "precision": counts["tp"] / claimed if claimed else None,
            "recall": counts["tp"] / found if found else None,
            "dropped_lines": sum(
                int(episode.annotations.get("model", {}).get("dropped_count", 0)) for episode in episodes
            ),
        }
    return figures


def held_out_outcomes(model_dir: Any, config: Any, episodes: int) -> dict[str, bool]:
    """Greedy success of the model in ``model_dir`` on each of ``episodes`` test seeds (seed -> solved)."""
    from backends.hf import HFBackend
    from training.rollout.engines import HFRolloutEngine
    from tsmg.rollout import plan_episodes

    seeds = list(range(TEST_SEED_START, TEST_SEED_START + episodes))
    backend = HFBackend(str(model_dir), threads=config.run.threads, max_batch_size=len(seeds))
    engine = HFRolloutEngine(backend, config.rollout, model_seats=["player"])
    plans = plan_episodes(config.rollout.game_id, seeds, group_size=1, id_prefix="test")
    played = engine.play(plans, seed=config.run.seed + 1, temperature=0.0).episodes
    assert config.run.eval_seed_start <= TEST_SEED_START, "test seeds must lie above every training seed"
    return {str(seed): bool(episode.success.get("player")) for seed, episode in zip(seeds, played, strict=True)}


def rate(outcomes: dict[str, bool]) -> float:
    """The share of solved test seeds."""
    return sum(outcomes.values()) / len(outcomes) if outcomes else 0.0


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Train one (game, arm, seed), then measure it."""
    from training.annotators import register_annotator
    from training.model_annotator import MODEL, ModelAnnotator
    from training.trainer import train

    spec = f"hf:{job['model']}" if job["annotator_model"] == "tiny" else job["annotator_model"]
    register_annotator(MODEL, ModelAnnotator(spec, max_tokens=job["annotator_max_tokens"]))
    config = run_config(job)
    began = time.perf_counter()
    result = train(config, resume=True)
    rates = [row["rollout/success_rate"] for row in result.metrics if "rollout/success_rate" in row]
    outcomes = held_out_outcomes(result.final_model, config, job["test_episodes"])
    return {
        **{key: job[key] for key in ("game", "arm", "seed", "updates", "groups", "test_episodes")},
        "episodes": job["updates"] * job["groups"] * GROUP_SIZE,
        "test_success_start": rate(job["start_outcomes"]),
        "test_success": rate(outcomes),
        "test_outcomes": outcomes,
        "rollout_success": statistics.fmean(rates) if rates else None,
        **graph_figures(Path(job["out_dir"]), config),
        "seconds": time.perf_counter() - began,
    }


FIGURES = ("test_success_start", "test_success", "rollout_success", "lookup_share", "lookup_share_ms_grpo")


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "sd": None, "min": None, "max": None}
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per game and arm: the spread of each figure over seeds, and the paired difference from MS-GRPO."""
    summary: dict[str, Any] = {}
    for game in dict.fromkeys(run["game"] for run in runs):
        summary[game] = {}
        of = {arm: {run["seed"]: run for run in runs if run["game"] == game and run["arm"] == arm} for arm in ARMS}
        for arm, by_seed in of.items():
            if not by_seed:
                continue
            row: dict[str, Any] = {"seeds": sorted(by_seed)}
            for figure in FIGURES:
                row[figure] = _spread([run[figure] for run in by_seed.values() if run.get(figure) is not None])
            rises = [
                run["test_success"] - run["test_success_start"]
                for run in by_seed.values()
                if "test_success_start" in run
            ]
            row["test_success_rise"] = _spread(rises)
            shared = [seed for seed in by_seed if seed in of[REFERENCE]]
            if arm != REFERENCE and shared:
                row["test_success_minus_ms_grpo"] = _spread(
                    [by_seed[seed]["test_success"] - of[REFERENCE][seed]["test_success"] for seed in shared]
                )
                paired = [
                    seed
                    for seed in shared
                    if "test_outcomes" in by_seed[seed] and "test_outcomes" in of[REFERENCE][seed]
                ]
                if paired:
                    row["against_ms_grpo"] = compare_over_seeds(
                        {seed: by_seed[seed]["test_outcomes"] for seed in paired},
                        {seed: of[REFERENCE][seed]["test_outcomes"] for seed in paired},
                    )
            graphs = [run["model_graph"] for run in by_seed.values() if "model_graph" in run]
            if graphs:
                tp, fp, fn = (sum(graph[key] for graph in graphs) for key in ("tp", "fp", "fn"))
                row["model_graph"] = {
                    "precision": tp / (tp + fp) if tp + fp else None,
                    "recall": tp / (tp + fn) if tp + fn else None,
                    "dropped_lines": sum(graph["dropped_lines"] for graph in graphs),
                }
            summary[game][arm] = row
    return summary


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


def start_outcomes(out: Path, game: str, seed: int, model: str, episodes: int) -> dict[str, bool]:
    """The held-out outcomes of seed ``seed``'s initial model, kept in ``OUT/models/start-<game>-<seed>-<n>.json``."""
    path = out / "models" / f"start-{game}-{seed}-{episodes}.json"
    if path.is_file():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    # The LAP every arm plays with (run_config): only the model's weights differ from the trained ones.
    job = {"game": game, "arm": REFERENCE, "seed": seed, "model": model, "groups": 1, "updates": 1, "out_dir": str(out)}
    config = run_config(job)
    outcomes = held_out_outcomes(model, config, episodes)
    path.write_text(json.dumps(outcomes), encoding="utf-8")
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Run the missing (game, arm, seed) runs into ``--out``, then print the table and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=["ServiceAddress-v0"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--groups", type=int, default=4, help="groups of 8 episodes per update")
    parser.add_argument("--test-episodes", type=int, default=32)
    parser.add_argument(
        "--annotator-model",
        default="smollm2",
        help="model spec of iapo-model's annotator ('tiny': the seed's own model)",
    )
    parser.add_argument("--annotator-max-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=Path("runs/iapo"))
    args = parser.parse_args(argv)

    import games  # noqa: F401  (registers the catalog)
    from training.config import TrainConfig
    from training.trainer import base_model_source

    began = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    budget = {"updates": args.updates, "groups": args.groups, "test_episodes": args.test_episodes}
    done = {
        (run["game"], run["arm"], run["seed"])
        for run in read_runs(args.out)
        if all(run.get(key) == value for key, value in budget.items())
    }
    models: dict[int, str] = {}
    starts: dict[tuple[str, int], dict[str, bool]] = {}
    for seed in range(args.seeds):
        for game in args.games:
            for arm in args.arms:
                if (game, arm, seed) in done:
                    continue
                if seed not in models:  # one tiny model per seed, shared by every arm (paired)
                    folder = args.out / "models" / f"seed-{seed}"
                    config = TrainConfig(
                        rollout={"game_id": game}, model={"spec": "tiny"}, run={"seed": seed, "out_dir": str(folder)}
                    )
                    models[seed] = str(base_model_source(config.model, folder, seed=config.run.seed))
                if (game, seed) not in starts:  # the initial model's held-out outcomes, shared by the arms
                    starts[(game, seed)] = start_outcomes(args.out, game, seed, models[seed], args.test_episodes)
                job = {
                    "game": game,
                    "arm": arm,
                    "seed": seed,
                    "model": models[seed],
                    "groups": args.groups,
                    "updates": args.updates,
                    "test_episodes": args.test_episodes,
                    "annotator_model": args.annotator_model,
                    "annotator_max_tokens": args.annotator_max_tokens,
                    "out_dir": str(args.out / game / arm / f"seed-{seed}"),
                    "start_outcomes": starts[(game, seed)],
                }
                record = run_one(job)
                with open(args.out / "runs.jsonl", "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record) + "\n")
                print(
                    f"{game} {arm} seed {seed}: test success {record['test_success']:.3f}, "
                    f"look-up share {record['lookup_share']}",
                    file=sys.stderr,
                )
    runs = [
        run
        for run in read_runs(args.out)
        if run["arm"] in args.arms
        and run["game"] in args.games
        and run["seed"] < args.seeds
        and all(run.get(key) == value for key, value in budget.items())
    ]
    summary = summarise(runs)
    for game, rows in summary.items():
        print(
            f"{game}: arm, held-out success before -> after, mean (sd), rollout success, "
            "look-up share (MS-GRPO's on the same episodes)"
        )
        for arm, row in rows.items():
            start, test = row["test_success_start"], row["test_success"]
            share, flat = row["lookup_share"], row["lookup_share_ms_grpo"]
            print(
                f"  {arm:11s} {start['mean']:.3f} -> {test['mean']:.3f} ({test['sd']:.3f})  "
                f"{row['rollout_success']['mean']:.3f}  {share['mean']:.3f}  ({flat['mean']:.3f})"
            )
            if "against_ms_grpo" in row:
                print(f"    against ms-grpo: {describe(row['against_ms_grpo'])}")
    seconds = time.perf_counter() - began
    print(
        json.dumps(
            {
                "games": args.games,
                "seeds": args.seeds,
                "updates": args.updates,
                "groups": args.groups,
                "annotator_model": args.annotator_model,
                "summary": summary,
                "seconds": seconds,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
