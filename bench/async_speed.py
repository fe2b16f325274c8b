"""Asynchronous training speed: wall time to the random-maps threshold, synchronous vs asynchronous (eta = 1, 2).

Every arm trains the demo's random-maps set-up (:func:`training.presets.demo_config`: the 0.15M
tiny model, FrozenLake-NoSlip-v0 random 4x4 maps, 16 groups of 8 per update, one CPU thread
for torch) from the same initial weights per seed, until held-out greedy success on
``--eval-episodes`` maps reaches ``--target`` (checked every ``--eval-every`` updates) or
``--max-updates`` run out. The arms differ only in ``loop.mode`` / ``loop.max_staleness``:

* ``sync``: rollouts and updates alternate;
* ``async eta=1`` / ``eta=2``: a worker process plays update u + 1 (up to u + eta) with the weights
  of update u - 1 - eta while the trainer computes update u (:mod:`training.rollout.async_loop`); its
  one torch thread is a second one, so the arm uses both cores of a 2-core machine.

The same seed gives an arm the same episodes every time, and eta = 0 would give the synchronous
ones; eta >= 1 changes which weights play, so the learning curves differ: the figure is wall
time to the threshold (updates and episodes to it are printed too). Rollout and update shares
of the wall time: ``time/rollout_s`` is the time the trainer waited for a rollout (the whole
rollout when synchronous), ``async/worker_play_s`` the worker's time playing (overlapped with
the updates), ``time/update_s`` the update, ``time/eval_s`` the evaluations. Arms run one at a
time; the machine may be shared, so compare the arms of one run, seed by seed.

Usage::

    python bench/async_speed.py --seeds 3            # ~45 CPU-minutes on 2 cores
    python bench/async_speed.py --seeds 1 --max-updates 20 --target 0.5   # a quick look

The last line printed is one JSON object: per arm, the median wall seconds to the threshold,
the paired ratio to synchronous, and the time shares.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ARMS: dict[str, dict[str, Any]] = {
    "sync": {},
    "async eta=1": {"mode": "async", "max_staleness": 1},
    "async eta=2": {"mode": "async", "max_staleness": 2},
}


def run_arm(arm: str, seed: int, model: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Train one arm from ``model`` until the target; what it took and where the time went."""
    from training.config import TrainConfig
    from training.presets import demo_config
    from training.trainer import TrainHooks, train

    data = demo_config(
        random_maps=True,
        out_dir=folder / arm.replace(" ", "-").replace("=", "") / f"seed-{seed}",
        seed=seed,
        updates=args.max_updates,
        max_seconds=1e6,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
    ).model_dump()
    data["model"]["spec"] = f"hf:{model}"
    data["run"]["tensorboard"] = False
    data["loop"] = ARMS[arm]
    config = TrainConfig.model_validate(data)

    def reached(step: int, metrics: dict[str, Any]) -> bool:
        return (metrics.get("eval/success_rate") or 0.0) >= args.target

    began = time.perf_counter()
    result = train(config, hooks=TrainHooks(should_stop=reached))
    wall = time.perf_counter() - began
    rows = [row for row in result.metrics if row["step"] > 0]
    hit = next((row for row in rows if (row.get("eval/success_rate") or 0.0) >= args.target), None)

    def total(key: str) -> float:
        return float(sum(row.get(key, 0.0) for row in rows))

    return {
        "arm": arm,
        "seed": seed,
        "reached": hit is not None,
        "seconds": round(wall, 1),
        "updates": int(rows[-1]["step"]) if rows else 0,
        "episodes": rows[-1].get("rollout/episodes_total") if rows else None,
        "final_eval": rows[-1].get("eval/success_rate") if rows else None,
        "rollout_wait_s": round(total("time/rollout_s"), 1),
        "worker_play_s": round(total("async/worker_play_s"), 1),
        "update_s": round(total("time/update_s"), 1),
        "eval_s": round(total("time/eval_s"), 1),
        "max_staleness_seen": max((row.get("async/staleness", 0.0) for row in rows), default=0.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.9, help="held-out greedy success to reach")
    parser.add_argument("--max-updates", type=int, default=150)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--out", type=Path, help="keep the run folders here (default: a temporary folder)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from learning import build_models  # the same initial weights per seed as bench/learning.py

    folder = args.out or Path(tempfile.mkdtemp(prefix="tsmg-async-speed-"))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    models = build_models(seeds, folder / "models")
    print(f"{len(seeds)} seeds x {len(args.arms)} arms, target {100 * args.target:.0f}% held-out, one at a time")
    results = []
    for seed in seeds:
        for arm in args.arms:
            outcome = run_arm(arm, seed, models[seed], folder, args)
            results.append(outcome)
            busy = outcome["rollout_wait_s"] + outcome["update_s"] + outcome["eval_s"]
            verdict = "reached" if outcome["reached"] else "MISSED "
            print(
                f"  seed {seed} {arm:<12} {verdict} after {outcome['updates']:>3} updates, {outcome['seconds']:>6.1f} s"
                f" | trainer waiting for rollouts {outcome['rollout_wait_s']:>5.1f} s, updating "
                f"{outcome['update_s']:>5.1f} s, evaluating {outcome['eval_s']:>5.1f} s, other "
                f"{outcome['seconds'] - busy:>4.1f} s | worker playing {outcome['worker_play_s']:>5.1f} s",
                flush=True,
            )
    summary = summarise(results, args.arms)
    print()
    print(f"{'arm':<13}{'reached':>8}  {'seconds: median (range)':<26}{'x sync (paired)':<18}shares of the wall time")
    for arm, row in summary.items():
        shares = ", ".join(f"{name} {value:.0%}" for name, value in row["shares"].items())
        ratio = "-" if row["median_ratio_to_sync"] is None else f"{row['median_ratio_to_sync']:.2f}"
        seconds = f"{row['median_seconds']:.1f} ({row['seconds_range'][0]:.1f}-{row['seconds_range'][1]:.1f})"
        print(f"{arm:<13}{row['reached']:>4}/{row['seeds']:<3}  {seconds:<26}{ratio:<18}{shares}")
    print(json.dumps({"bench": "async_speed", "target": args.target, "seeds": seeds, "arms": summary}))
    return 0


def summarise(results: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    """Per arm: seeds that reached the target, wall seconds, the paired ratio to sync, where the time went."""
    summary: dict[str, Any] = {}
    sync = {result["seed"]: result["seconds"] for result in results if result["arm"] == "sync"}
    for arm in arms:
        runs = [result for result in results if result["arm"] == arm]
        seconds = [run["seconds"] for run in runs]
        ratios = [run["seconds"] / sync[run["seed"]] for run in runs if run["seed"] in sync]
        wall = sum(seconds) or 1.0
        summary[arm] = {
            "seeds": len(runs),
            "reached": sum(run["reached"] for run in runs),
            "median_seconds": statistics.median(seconds),
            "seconds_range": [min(seconds), max(seconds)],
            "median_ratio_to_sync": statistics.median(ratios) if ratios and arm != "sync" else None,
            "median_updates": statistics.median(run["updates"] for run in runs),
            "shares": {
                "rollout (trainer waiting)": sum(run["rollout_wait_s"] for run in runs) / wall,
                "update": sum(run["update_s"] for run in runs) / wall,
                "eval": sum(run["eval_s"] for run in runs) / wall,
                "worker playing (overlapped)": sum(run["worker_play_s"] for run in runs) / wall,
            },
            "per_seed": {str(run["seed"]): run for run in runs},
        }
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
