"""SmolLM2-135M in the paper's setting: the docs/results.md table from ``tsmg eval`` run folders, with the baselines.

The setting: FrozenLake-NoSlip-v0 (a random 4x4 map per episode, 8 steps), free-text answers with
``<action>`` tags, unconstrained, judged on held-out maps. This script trains and evaluates nothing
with a model; it reads what ``tsmg eval`` wrote (one folder per arm: the zero-shot model, after the
supervised warm start, after MS-GRPO) and adds, on exactly the same seeds:

* random play and the right/down heuristic of the demo (:func:`training.presets.right_or_down`:
  right or down at random, never into a visible hole), which ``tsmg eval`` does not offer;
* how held-out the held-out maps are: the evaluation seeds against the seeds of the oracle
  transcripts (``--sft-episodes``) and of the training rollouts (``--train-run``, a training run
  folder whose ``episodes.jsonl`` holds every rollout: ``run.episodes_every: 1``), and the share of
  held-out maps that are the same map as one of those (a random 4x4 map with few holes recurs
  across seeds), with each arm's success on the maps never seen;
* with ``--curve PNG``, the training run's learning curve: success and invalid-answer rate of the
  rollouts and of the greedy validation episodes.

Prints the table (success with its Wilson 95 % interval, invalid-answer rate) and ends with one
line holding a JSON object. See docs/results.md, "SmolLM2-135M in the paper's setting"::

    python bench/smollm2_tags.py --eval runs/eval-zero-shot runs/eval-sft runs/eval-rl
        --sft-episodes runs/oracle/episodes.jsonl --train-run runs/rl-tags --curve docs/smollm2-tags-curve.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import games  # noqa: F401  (registers the catalog)
from tsmg import make
from tsmg.apps.evaluation.metrics import wilson_interval
from tsmg.apps.evaluation.plan import episode_seeds
from tsmg.episode import Episode, read_episodes
from tsmg.policies import CallablePolicy, RandomPolicy
from tsmg.rollout import rollout


def maps_of(game_id: str, options: dict[str, Any], seeds: list[int]) -> dict[int, tuple[str, ...]]:
    """The map each seed starts on."""
    game = make(game_id, **options)
    maps = {}
    for seed in seeds:
        game.reset(seed=seed)
        maps[seed] = game.state.desc  # type: ignore[attr-defined]
    game.close()
    return maps


def row(name: str, episodes: list[Episode]) -> dict[str, Any]:
    """Success with its Wilson 95 % interval and the invalid-answer rate of ``episodes``."""
    successes = sum(bool(episode.success.get("player")) for episode in episodes)
    decisions = sum(len(episode.steps) for episode in episodes)
    invalid = sum(episode.invalid_answers for episode in episodes) / decisions if decisions else 0.0
    low, high = wilson_interval(successes, len(episodes))
    return {
        "arm": name,
        "episodes": len(episodes),
        "success": successes / max(len(episodes), 1),
        "ci95": [low, high],
        "invalid": invalid,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval", nargs="+", type=Path, required=True, help="tsmg eval run folders")
    parser.add_argument("--sft-episodes", nargs="*", type=Path, default=[], help="episodes.jsonl of the SFT data")
    parser.add_argument(
        "--train-run", nargs="*", type=Path, default=[], help="training run folders (run.episodes_every: 1)"
    )
    parser.add_argument(
        "--compare", nargs=2, action="append", default=[], metavar=("ARM", "BASELINE"), help="paired test of two arms"
    )
    parser.add_argument("--curve", type=Path, help="also draw the first training run's learning curve into this PNG")
    args = parser.parse_args()

    summaries = [json.loads((folder / "summary.json").read_text()) for folder in args.eval]
    configs = {
        json.dumps({k: s["config"][k] for k in ("games", "episodes", "seed", "game_options")}) for s in summaries
    }
    if len(configs) != 1:
        raise SystemExit("the evaluation folders used different games, episode counts, seeds or game options")
    config = summaries[0]["config"]
    [game_id] = config["games"]
    options = config["game_options"]
    seeds = episode_seeds(game_id, options, config["seed"], config["episodes"])

    held_out = maps_of(game_id, options, seeds)
    seen: dict[str, set[int]] = {}
    train_episodes = [folder / "episodes.jsonl" for folder in args.train_run]
    for label, paths in (("sft", args.sft_episodes), ("train", train_episodes)):
        seen[label] = {int(e.seed) for path in paths for e in read_episodes(path) if e.seed is not None}
    shared_seeds = {label: len(set(seeds) & found) for label, found in seen.items()}
    seen_maps = set(maps_of(game_id, options, sorted(seen["sft"] | seen["train"])).values())
    unseen = {seed for seed in seeds if held_out[seed] not in seen_maps}

    arms: list[tuple[str, list[Episode]]] = []
    for name, policy in (
        ("random", RandomPolicy(seed=0)),
        ("right/down heuristic", CallablePolicy(_right_or_down(), name="right/down")),
    ):
        arms.append((name, rollout(game_id, policy, seeds=seeds, game_options=options)))
    for folder in args.eval:
        by_model: dict[str, list[Episode]] = {}
        for episode in read_episodes(folder / "episodes.jsonl"):
            by_model.setdefault(episode.policies["player"], []).append(episode)
        single = len(by_model) == 1  # an arm is named by its folder (and by the model where a folder holds more)
        arms += [(folder.name if single else f"{folder.name}:{model}", found) for model, found in by_model.items()]
    rows = []
    for name, episodes in arms:
        if sorted(int(e.seed or 0) for e in episodes) != sorted(seeds):
            raise SystemExit(f"{name}: its episodes are not exactly the held-out seeds (an unfinished evaluation?)")
        entry = row(name, episodes)
        entry["unseen_maps"] = row(name, [e for e in episodes if e.seed in unseen])
        rows.append(entry)

    print(
        f"{game_id}: {len(seeds)} held-out seeds (tsmg eval --seed {config['seed']}), "
        f"{len(set(held_out.values()))} distinct maps"
    )
    print(f"seeds shared with the SFT transcripts: {shared_seeds['sft']} of {len(seen['sft'])}")
    print(f"seeds shared with the training rollouts: {shared_seeds['train']} of {len(seen['train'])}")
    print(f"held-out episodes on a map never seen in SFT or training: {len(unseen)} of {len(seeds)}\n")
    print("| arm | episodes | success (95% CI) | invalid answers | success on never-seen maps (95% CI) |")
    print("|---|---|---|---|---|")
    for entry in rows:
        print(
            f"| {entry['arm']} | {entry['episodes']} | {_success(entry)} | {100 * entry['invalid']:.1f}% "
            f"| {_success(entry['unseen_maps'])} of {entry['unseen_maps']['episodes']} |"
        )
    comparisons = []
    for name, other in args.compare:
        found = {entry_name: episodes for entry_name, episodes in arms}
        if name not in found or other not in found:
            raise SystemExit(f"--compare names arms of the table: {sorted(found)}")
        comparisons.append(paired(name, found[name], other, found[other]))
    for entry in comparisons:
        print(
            f"{entry['arm']} vs {entry['baseline']}, same seeds: {entry['only_arm']} maps solved only by the first, "
            f"{entry['only_baseline']} only by the second; exact McNemar p = {entry['p_value']:.3g}"
        )
    if args.curve is not None and args.train_run:
        from training.run_log import plot_learning_curve, read_metrics

        keys = ("rollout/success_rate", "eval/success_rate", "rollout/invalid_rate", "eval/invalid_rate")
        title = "SmolLM2-135M, <action> tags, random maps (MS-GRPO after SFT)"
        plot_learning_curve(read_metrics(args.train_run[0] / "metrics.jsonl"), args.curve, title=title, keys=keys)
        print(f"learning curve: {args.curve}")
    print(
        json.dumps(
            {
                "game": game_id,
                "held_out_seeds": len(seeds),
                "shared_seeds": shared_seeds,
                "unseen_map_episodes": len(unseen),
                "rows": rows,
                "paired": comparisons,
            }
        )
    )


def paired(name: str, episodes: list[Episode], baseline: str, others: list[Episode]) -> dict[str, Any]:
    """Exact McNemar test of two arms played on the same seeds: did one solve maps the other did not?"""
    from scipy.stats import binomtest

    solved = {episode.seed: bool(episode.success.get("player")) for episode in episodes}
    solved_by_baseline = {episode.seed: bool(episode.success.get("player")) for episode in others}
    only_arm = sum(solved[seed] and not solved_by_baseline[seed] for seed in solved)
    only_baseline = sum(solved_by_baseline[seed] and not solved[seed] for seed in solved)
    discordant = only_arm + only_baseline
    p_value = binomtest(only_arm, discordant, 0.5).pvalue if discordant else 1.0
    return {"arm": name, "baseline": baseline, "only_arm": only_arm, "only_baseline": only_baseline, "p_value": p_value}


def _success(entry: dict[str, Any]) -> str:
    low, high = entry["ci95"]
    return f"{100 * entry['success']:.1f}% ({100 * low:.1f}–{100 * high:.1f}%)"


def _right_or_down() -> Any:
    from training.presets import right_or_down

    return right_or_down


if __name__ == "__main__":
    main()
