"""Game speed: steps/s (render + parse included) and reset time for every registered game.

For the toy-text games that also exist in Gymnasium, the raw Gymnasium env is timed in the same
run on the same kind of random play, and the ratio tsmg / raw is reported (the target for the
Frozen Lake port is >= 1/3: a text layer costs something, but not most of the step).

Every measurement is budgeted by steps or by time, whichever ends first (``--steps 20000``,
``--seconds 0.5``), so the slow games (ConnectFour-vsMinimax-v0 searches five plies every step)
do not hold the run up: the defaults time every game in about a minute.

Usage: python bench/env_speed.py [--steps 20000] [--seconds 0.5] [--games ID ...]
The last line printed is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import gymnasium
import numpy as np

import tsmg

# tsmg id -> (Gymnasium id, kwargs) of the same game, for the ratio against raw Gymnasium.
RAW_COUNTERPARTS: dict[str, tuple[str, dict[str, object]]] = {
    "FrozenLake-v0": ("FrozenLake-v1", {"map_name": "4x4", "is_slippery": False}),
    "Taxi-v0": ("Taxi-v4", {}),
    "CliffWalking-v0": ("CliffWalking-v1", {}),
    "Blackjack-v0": ("Blackjack-v1", {}),
}


def best_of(repeats: int, measure: Callable[[], float]) -> float:
    """The best (highest) of several measurements: the least disturbed by other load."""
    return max(measure() for _ in range(repeats))


#: Steps between two looks at the clock (both loops look equally often, so the ratio stays fair).
CLOCK_EVERY = 32


def tsmg_steps_per_second(game_id: str, steps: int, seconds: float) -> float:
    """Random legal play through ``Game.step`` with text answers, resetting when done."""
    game = tsmg.make(game_id)
    rng = np.random.default_rng(0)
    choices = rng.random(steps)
    game.reset(seed=0)
    episode = 0
    started = time.perf_counter()
    deadline = started + seconds
    done = 0
    for i in range(steps):
        if i % CLOCK_EVERY == 0 and i and time.perf_counter() > deadline:
            break
        actions = {}
        for agent in game.active_agents:
            legal = game.legal_actions(agent) or ["?"]
            actions[agent] = legal[int(choices[i] * len(legal))]
        game.step(actions)
        done += 1
        if game.done:
            episode += 1
            game.reset(seed=episode)
    return done / (time.perf_counter() - started)


def raw_steps_per_second(env_id: str, kwargs: dict[str, object], steps: int, seconds: float) -> float:
    """Random play on the raw Gymnasium env (integer actions, no text), resetting when done."""
    env = gymnasium.make(env_id, **kwargs)
    rng = np.random.default_rng(0)
    n = int(env.action_space.n)  # type: ignore[attr-defined]
    actions = (rng.random(steps) * n).astype(int).tolist()
    env.reset(seed=0)
    episode = 0
    started = time.perf_counter()
    deadline = started + seconds
    done = 0
    for i, action in enumerate(actions):
        if i % CLOCK_EVERY == 0 and i and time.perf_counter() > deadline:
            break
        _, _, terminated, truncated, _ = env.step(action)
        done += 1
        if terminated or truncated:
            episode += 1
            env.reset(seed=episode)
    return done / (time.perf_counter() - started)


def reset_ms(game_id: str, resets: int, seconds: float) -> float:
    """Median time of ``reset(seed)`` in milliseconds (including the first observations)."""
    game = tsmg.make(game_id)
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    for seed in range(resets):
        if times and time.perf_counter() > deadline:
            break
        started = time.perf_counter()
        game.reset(seed=seed)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main() -> None:
    """Measure and print every game, then the JSON headline line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20_000, help="most steps per measurement")
    parser.add_argument("--seconds", type=float, default=0.5, help="most seconds per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--resets", type=int, default=200, help="most resets timed per game")
    parser.add_argument("--games", nargs="*", help="game ids (default: all registered)")
    args = parser.parse_args()
    ids = args.games or [spec.id for spec in tsmg.specs()]
    run_started = time.perf_counter()
    figures: dict[str, dict[str, float]] = {}
    print(f"{'game':<28} {'steps/s':>10} {'reset ms':>9} {'raw gym/s':>10} {'ratio':>6}")
    for game_id in ids:
        try:
            tsmg.make(game_id)
        except ImportError as error:
            print(f"{game_id:<28} skipped ({error})")
            continue
        speed = best_of(args.repeats, lambda game_id=game_id: tsmg_steps_per_second(game_id, args.steps, args.seconds))
        entry = {"steps_per_s": round(speed), "reset_ms_median": round(reset_ms(game_id, args.resets, args.seconds), 4)}
        line = f"{game_id:<28} {speed:>10,.0f} {entry['reset_ms_median']:>9.3f}"
        if game_id in RAW_COUNTERPARTS:
            env_id, kwargs = RAW_COUNTERPARTS[game_id]
            raw = best_of(args.repeats, lambda e=env_id, k=kwargs: raw_steps_per_second(e, k, args.steps, args.seconds))
            entry["raw_gymnasium_steps_per_s"] = round(raw)
            entry["ratio_vs_raw"] = round(speed / raw, 3)
            line += f" {raw:>10,.0f} {speed / raw:>6.2f}"
        print(line)
        figures[game_id] = entry
    headline: dict[str, object] = {"games": figures, "wall_s": round(time.perf_counter() - run_started, 1)}
    if "FrozenLake-v0" in figures:
        headline["frozen_lake_ratio_vs_raw"] = figures["FrozenLake-v0"].get("ratio_vs_raw")
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
