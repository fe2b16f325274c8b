"""Edge precision and recall of the model annotator against the exact one, on the tool-using service games.

Plays ``--episodes`` episodes of each game with the random-tool policy (seeded: successes, wrong
look-ups and failed calls alike), asks ``--model`` once, in one batched call, for all their
dependencies (:class:`training.model_annotator.ModelAnnotator`), and scores its graphs against the
games' own records (:func:`training.model_annotator.edge_agreement`): typed (support or failure
must match too) and untyped, summed over the episodes, with the lines its answers lost.
Ends with one line holding a JSON object.

The figures of docs/tool-games.md::

    nice -n 10 python bench/annotator_agreement.py --model smollm2 --episodes 8
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Annotate, score, print a line per game and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="the annotator's model spec (smollm2, hf:PATH, openai:M)")
    parser.add_argument("--games", nargs="+", default=["ServiceRefund-v0", "ServiceAddress-v0"])
    parser.add_argument("--episodes", type=int, default=8, help="episodes per game")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import games  # noqa: F401  (registers the catalog)
    from training.model_annotator import ModelAnnotator, edge_agreement
    from tsmg.policies import RandomPolicy
    from tsmg.rollout import rollout

    began = time.perf_counter()
    played = {
        game: rollout(game, RandomPolicy(seed=args.seed), seeds=range(args.seed, args.seed + args.episodes))
        for game in args.games
    }
    annotator = ModelAnnotator(args.model, max_tokens=args.max_tokens)
    everything = [episode for episodes in played.values() for episode in episodes]
    asked = time.perf_counter()
    annotator(everything)
    answer_s = time.perf_counter() - asked
    results: dict[str, dict[str, Any]] = {}
    for game, episodes in played.items():
        row: dict[str, Any] = {"episodes": len(episodes)}
        for typed, prefix in ((True, ""), (False, "untyped_")):
            counts = {"tp": 0, "fp": 0, "fn": 0}
            for episode in episodes:
                if "model" in episode.influence:
                    found = edge_agreement(episode.influence["exact"], episode.influence["model"], typed=typed)
                    counts = {key: counts[key] + found[key] for key in counts}
            claimed, true = counts["tp"] + counts["fp"], counts["tp"] + counts["fn"]
            row[prefix + "precision"] = counts["tp"] / claimed if claimed else None
            row[prefix + "recall"] = counts["tp"] / true if true else None
            if typed:
                row.update(exact_edges=true, model_edges=claimed)
        row["dropped_lines"] = sum(
            int(episode.annotations.get("model", {}).get("dropped_count", 0)) for episode in episodes
        )
        # What the lost lines looked like: the first dropped line of the first episodes, with the reason.
        examples = [
            episode.annotations["model"]["dropped"][0]
            for episode in episodes
            if episode.annotations.get("model", {}).get("dropped")
        ]
        row["dropped_examples"] = examples[:3]
        results[game] = row
        print(f"{game}: {row}")
    print(
        json.dumps(
            {
                "model": args.model,
                "seed": args.seed,
                "games": results,
                "answer_s": answer_s,
                "seconds": time.perf_counter() - began,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
