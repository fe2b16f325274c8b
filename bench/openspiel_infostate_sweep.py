"""Sweep whole history trees: does each adapted two-player game's text tell its information states apart?

For every registered two-player, turn-based OpenSpiel game whose information states can be
compared (perfect information, or an information-state string), walks the history tree up to
``--max-histories`` (10⁵ by default) with :func:`tsmg.adapters.openspiel_infostates.sweep` and
prints a table: histories visited, whether the tree was complete, information states, prompts,
faithful or not. `make test` runs the same check on each game's first histories only
(tests/test_openspiel_views.py). The last line is a JSON object with every row.

    python bench/openspiel_infostate_sweep.py --max-histories 100000 --view full
    python bench/openspiel_infostate_sweep.py --max-histories 100000 --whole-trees-only
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import tsmg
from tsmg.adapters.openspiel_infostates import sweep


def comparable_games() -> list[str]:
    """The OpenSpiel game strings of the registered two-player, turn-based games with comparable information states."""
    import pyspiel

    games = []
    for spec in tsmg.specs():
        if not spec.id.startswith("OpenSpiel/"):
            continue
        game: Any = tsmg.make(spec.id)  # an OpenSpielGame
        perfect = game.game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        if game.turn_based and len(game.agents) == 2 and (perfect or game.game_type.provides_information_state_string):
            games.append(game.config.game)
    return games


def _larger_than(game: str, limit: int) -> bool:
    """Whether ``game``'s history tree has more than ``limit`` histories (OpenSpiel's states only, no prompts).

    Breadth first, one level at a time, stopping as soon as the count passes ``limit``: memory
    holds at most ``limit`` states of one depth (a depth-first walk down a long game holds a
    state per move, and go's states grow with their history).
    """
    from tsmg.adapters.openspiel import load

    level, count = [load(game).new_initial_state()], 1
    while level:
        deeper = []
        for state in level:
            for action in _actions(state):
                count += 1
                if count > limit:
                    return True
                deeper.append(state.child(action))
        level = deeper
    return False


def _actions(state: Any) -> list[int]:
    if state.is_terminal():
        return []
    return [action for action, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-histories", type=int, default=100_000, help="stop a game's walk after this many")
    parser.add_argument("--view", default="full", choices=["full", "compact", "raw"], help="the text view to check")
    parser.add_argument("--game", action="append", help="OpenSpiel game string (repeatable; default: every one)")
    parser.add_argument(
        "--whole-trees-only",
        action="store_true",
        help="count each tree first and sweep only those within --max-histories (the others are listed as larger)",
    )
    args = parser.parse_args()
    rows = []
    larger = []
    print("| Game | histories | whole tree | information states | prompts | faithful | seconds |")
    print("|---|---|---|---|---|---|---|")
    for game in args.game or comparable_games():
        if args.whole_trees_only and _larger_than(game, args.max_histories):
            larger.append(game)
            continue
        start = time.perf_counter()
        result = sweep(game, view=args.view, max_histories=args.max_histories)
        seconds = time.perf_counter() - start
        row = {**result.to_dict(), "seconds": round(seconds, 2)}
        row.pop("merged"), row.pop("split")
        rows.append(row)
        print(
            f"| `{game}` | {result.histories} | {'yes' if result.complete else 'no'} | {result.information_states} | "
            f"{result.prompts} | {'yes' if result.faithful else 'NO'} | {seconds:.1f} |",
            flush=True,
        )
    whole = [row for row in rows if row["complete"]]
    if larger:
        print(f"\nLarger than {args.max_histories:,} histories, not swept: {', '.join(larger)}")
    print(
        json.dumps(
            {
                "view": args.view,
                "max_histories": args.max_histories,
                "games": len(rows),
                "whole_trees": len(whole),
                "faithful": sum(row["faithful"] for row in rows),
                "larger": larger,
                "seconds": round(sum(row["seconds"] for row in rows), 1),
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
