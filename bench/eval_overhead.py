"""Harness overhead: how fast `run_eval` plays, and how much wall time is spent outside the model.

1. Episodes/s of the full harness (plan, rollout, JSONL writes, summary) with the random policy
   on Frozen Lake, against the bare rollout engine on the same seeds in the same run.
2. With a model playing (a tiny Llama-shape model built on the spot, through the HF backend and a
   LAP): the share of wall time spent outside ``generate`` — prompts, parsing, game steps,
   records, statistics and report.

Usage: python bench/eval_overhead.py [--episodes 2000] [--model-episodes 64]
The last line printed is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from tsmg.apps.evaluation import EvalConfig, run_eval
from tsmg.apps.evaluation.runner import build_policy
from tsmg.lap import ActionFormat, LAPConfig
from tsmg.policies import RandomPolicy
from tsmg.rollout import rollout

GAME = "FrozenLake-NoSlip-v0"


def harness_speed(episodes: int, folder: Path) -> tuple[float, float]:
    """Episodes/s through ``run_eval`` (with report) and through the bare engine."""
    started = time.perf_counter()
    run_eval(EvalConfig(games=[GAME], models=["random"], episodes=episodes), folder / "random")
    harness = episodes / (time.perf_counter() - started)
    started = time.perf_counter()
    rollout(GAME, RandomPolicy(), seeds=range(episodes))
    engine = episodes / (time.perf_counter() - started)
    return harness, engine


def model_share(episodes: int, folder: Path) -> dict[str, float]:
    """Share of ``run_eval`` wall time spent outside the model's ``generate``."""
    from backends.hf import HFBackend
    from backends.tiny import build_tiny_model

    model_dir = build_tiny_model(folder / "tiny")
    spec = f"hf:{model_dir}"
    inside = {"seconds": 0.0}

    def timed_factory(model_spec: str, config: EvalConfig) -> Any:
        policy = build_policy(model_spec, config)
        backend: HFBackend = policy.model  # type: ignore[attr-defined]
        generate = backend.generate

        def timed_generate(requests: Any, sampling: Any) -> Any:
            began = time.perf_counter()
            try:
                return generate(requests, sampling)
            finally:
                inside["seconds"] += time.perf_counter() - began

        backend.generate = timed_generate  # type: ignore[method-assign]
        return policy

    config = EvalConfig(
        games=[GAME],
        models=[spec],
        episodes=episodes,
        lap=LAPConfig(action_format=ActionFormat(kind="choice"), max_tokens=4),
    )
    started = time.perf_counter()
    run_eval(config, folder / "model", policy_factory=timed_factory)
    wall = time.perf_counter() - started
    return {"wall_s": wall, "generate_s": inside["seconds"], "outside_share": 1 - inside["seconds"] / wall}


def main() -> None:
    """Measure both figures and print them, then the JSON headline line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--model-episodes", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        harness, engine = harness_speed(args.episodes, folder)
        print(f"random policy, {args.episodes} episodes of {GAME}:")
        print(f"  run_eval (plan + rollout + JSONL + summary + report): {harness:,.0f} episodes/s")
        print(f"  bare rollout engine:                                  {engine:,.0f} episodes/s")
        share = model_share(args.model_episodes, folder)
        print(f"tiny HF model, {args.model_episodes} episodes, constrained choice:")
        print(f"  wall {share['wall_s']:.2f} s, inside generate {share['generate_s']:.2f} s")
        print(f"  share of wall time outside the backend: {100 * share['outside_share']:.1f}%")
    print(
        json.dumps(
            {
                "harness_episodes_per_s": round(harness, 1),
                "engine_episodes_per_s": round(engine, 1),
                "harness_vs_engine": round(harness / engine, 3),
                "model_outside_backend_share": round(share["outside_share"], 4),
            }
        )
    )


if __name__ == "__main__":
    main()
