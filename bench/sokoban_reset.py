"""Time ``reset`` of the generated Sokoban levels (level generation plus the first observation).

Prints the median, 90th percentile and maximum over 200 seeds per variant, then one last line
holding a JSON object with the figures (``sokoban_reset_ms_median`` is Sokoban-v0's median).
Target: a median of at most 5 ms (TextArena's Sokoban reset takes about 67 ms).
"""

from __future__ import annotations

import json
import statistics
import time

import tsmg


def reset_times_ms(game_id: str, seeds: range) -> list[float]:
    game = tsmg.make(game_id)
    game.reset(seed=10_000)  # warm-up: imports and caches
    times = []
    for seed in seeds:
        start = time.perf_counter()
        game.reset(seed=seed)
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def main() -> None:
    figures: dict[str, float] = {}
    for game_id in ("Sokoban-v0", "Sokoban-8x8-v0"):
        times = sorted(reset_times_ms(game_id, range(200)))
        median = statistics.median(times)
        p90 = times[int(0.9 * len(times))]
        print(f"{game_id}: reset median {median:.3f} ms, p90 {p90:.3f} ms, max {times[-1]:.3f} ms over 200 seeds")
        key = "sokoban" if game_id == "Sokoban-v0" else "sokoban_8x8"
        figures[f"{key}_reset_ms_median"] = round(median, 4)
        figures[f"{key}_reset_ms_p90"] = round(p90, 4)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
