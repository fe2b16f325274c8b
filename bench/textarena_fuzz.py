"""Hostile answers on every registered TextArena id: is any answer naming two moves accepted where moves are listed?

For each ``TextArena/<EnvId>`` (the 178 of ``games/registrations_textarena.py``), seeded episodes of
random listed moves (``--seeds``, cut at ``--rounds``); at every turn, the seat's answer is read
(``Game.parse``, what a step would record) for every answer of the checker's hostile corpus
(:func:`tsmg.checker.hostile_answers`) and every two-move answer (:func:`tsmg.checker.two_move_answers`)
of pairs of listed moves. Prints one row per id (its moves listed or open text, answers tried,
two-move answers tried and accepted, answers accepted that are not one listed move), then one
line holding a JSON object of headline figures. Where moves are listed, no two-move answer may be
accepted and every accepted answer must be one listed move.

``--derive`` instead works out, from TextArena's behaviour, which ids list their moves (the rule
is :mod:`tsmg.adapters.textarena_moves`'s; :data:`~tsmg.adapters.textarena_moves.LISTED_MOVES` is
its output) and prints, per id, the verdict and the first evidence of open text, then a JSON line
with the listed ids and whether they equal the adapter's::

    python bench/textarena_fuzz.py [--seeds N] [--rounds N] [--derive] [ENV_ID ...]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

import tsmg
from games.registrations_textarena import TEXTARENA_GAMES, tsmg_id
from tsmg.adapters.textarena import MAX_CANDIDATES, TextArenaGame
from tsmg.adapters.textarena_moves import LISTED_MOVES, NEUTRAL_ANSWER, bracketed, play_signature, relays
from tsmg.adapters.textarena_refusals import family
from tsmg.checker import hostile_answers, two_move_answers
from tsmg.core import Invalid

#: Bracketed words tried at every turn by ``--derive`` (moves of other games, numbers, coordinates).
VOCABULARY = (
    *(str(number) for number in range(13)), "up", "down", "left", "right", "a1", "A4", "B2", "c3", "e4", "yes", "no",
    "pass", "check", "call", "fold", "bet", "raise", "accept", "deny", "reject", "hold", "roll", "hit", "stand",
    "draw", "play", "guess", "vote", "0 1", "1 2", "0 0 0 1", "1, 2", "A1 B2",
)  # fmt: skip
#: Values a number of a listed move or message is changed to by ``--derive``.
NUMBERS = ("0", "1", "2", "3", "5", "7", "10", "20", "50", "100")
#: Placeholders in a message's bracketed text, filled with :data:`NUMBERS` by ``--derive``.
_PLACEHOLDER = re.compile(r"<[^<>]{1,20}>|\{[^{}]{1,20}\}|\b[A-Z]\b|\b(?:amount|number|quantity|value)\b", re.I)
#: Probes tried per turn by ``--derive`` (each a trial on a copy of the environment).
MAX_PROBES = 300


def turns(env_id: str, seeds: Sequence[int], rounds: int) -> Iterator[tuple[TextArenaGame, str, list[str] | None]]:
    """Every turn of seeded episodes of random listed moves: the game, the seat to move, its listed moves.

    An episode ends at its end, at ``rounds`` rounds, or at a turn that lists no move (after yielding it).
    """
    for seed in seeds:
        game = tsmg.make(tsmg_id(env_id), max_steps=rounds)
        assert isinstance(game, TextArenaGame)
        game.reset(seed=seed)
        rng = np.random.default_rng(seed)
        while not game.done:
            [agent] = game.active_agents
            legal = game.legal_actions(agent)
            yield game, agent, legal
            if not legal:
                break
            game.step({agent: legal[int(rng.integers(len(legal)))]})


# ------------------------------------------------------------------------------ the fuzz
def fuzz(env_id: str, seeds: Sequence[int], rounds: int) -> dict[str, Any]:
    """Read the hostile and two-move answers at every turn of ``env_id``'s episodes; the counts."""
    started = time.monotonic()
    row: dict[str, Any] = {"id": env_id, "moves": "listed" if env_id in LISTED_MOVES else "open text", "turns": 0}
    row.update(answers=0, two_move=0, two_move_accepted=0, accepted_not_one_move=0, examples=[])
    for game, agent, legal in turns(env_id, seeds, rounds):
        row["turns"] += 1
        listed = legal or []
        rng = np.random.default_rng(row["turns"])
        sample = [listed[int(index)] for index in rng.choice(len(listed), size=min(len(listed), 8), replace=False)]
        pairs = {
            answer: (first, second)
            for first, second in zip(sample, sample[1:] + sample[:1], strict=True)
            if first != second
            for answer in two_move_answers(first, second)
        }
        for answer in dict.fromkeys([*hostile_answers(sample, listed), *pairs]):
            if answer in listed:
                continue
            move = game.parse(agent, answer)
            row["answers"] += 1
            row["two_move"] += answer in pairs
            if isinstance(move, Invalid):
                continue
            row["two_move_accepted"] += answer in pairs
            if row["moves"] == "listed" and move not in listed:
                row["accepted_not_one_move"] += 1
            if answer in pairs and len(row["examples"]) < 2:
                row["examples"].append(f"{answer!r} -> {move!r}")
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


# ------------------------------------------------------------------------------ the derivation
def derive(env_id: str, seeds: Sequence[int], rounds: int) -> dict[str, Any]:
    """Whether ``env_id`` lists its moves, by TextArena's behaviour (the rule: tsmg.adapters.textarena_moves)."""
    seen: set[str] = set()
    for turn, (game, agent, legal) in enumerate(turns(env_id, seeds, rounds)):
        if not legal:
            return {"id": env_id, "listed": False, "why": "a turn whose messages announce no move TextArena takes"}
        if len(_candidates(game, agent)) > MAX_CANDIDATES:
            return {"id": env_id, "listed": False, "why": f"a turn announcing over {MAX_CANDIDATES} moves"}
        player = game.player(agent)
        neutral = game._trial(NEUTRAL_ANSWER)
        if neutral[2] is None and relays(neutral[0], NEUTRAL_ANSWER, player):
            return {"id": env_id, "listed": False, "why": "free speech: TextArena relays any sentence to the others"}
        known = {play_signature(game._trial(move)[0]) for move in legal}
        if neutral[2] is None:
            known.add(play_signature(neutral[0]))  # the game's own reading of nonsense is no new move
        for probe in _probes(game, agent, legal, seen, turn):
            try:
                env, _, invalid = game._trial(probe)
            except Exception:  # the game's own error on this text: no move either
                continue
            if invalid is None and play_signature(env) not in known:
                return {"id": env_id, "listed": False, "why": f"TextArena takes {probe!r}, which no message lists"}
        seen.update(legal)
    return {"id": env_id, "listed": True, "why": "every answer TextArena took played as an announced move"}


def _candidates(game: TextArenaGame, agent: str) -> list[str]:
    """Every bracketed text of the game's messages to ``agent`` (what the adapter tries as moves)."""
    return list(
        dict.fromkeys(text for sender, message in game._history[agent] if sender == -1 for text in bracketed(message))
    )


def _probes(game: TextArenaGame, agent: str, legal: list[str], seen: set[str], turn: int) -> list[str]:
    """Texts that would be moves no message lists: other turns' moves, changed numbers, bracketed words."""
    probes = [*sorted(seen), *(f"[{word}]" for word in VOCABULARY)]
    for text in [*legal, *_candidates(game, agent)]:
        runs = list(re.finditer(r"\d+", text))
        for number in NUMBERS:  # numbers changed (all, or one), placeholders filled: '[Raise N]', '[Bid <q>, <f>]'
            probes.append(re.sub(r"\d+", number, text))
            probes += [text[: run.start()] + number + text[run.end() :] for run in runs]
            probes.append(_PLACEHOLDER.sub(number, text))
    probes += [f"{legal[0]} {NEUTRAL_ANSWER}", f"{{{NEUTRAL_ANSWER}}}", f"[{NEUTRAL_ANSWER}]"]
    listed = set(legal)
    unique = [probe for probe in dict.fromkeys(probes) if probe not in listed]
    rng = np.random.default_rng(turn)
    if len(unique) > MAX_PROBES:  # a sample of them, different at each turn
        unique = [unique[int(index)] for index in sorted(rng.choice(len(unique), size=MAX_PROBES, replace=False))]
    return unique


# ------------------------------------------------------------------------------ the command
def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the fuzz (or ``--derive``) and print its table and headline figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env_ids", nargs="*", help="TextArena ids (default: every registered one)")
    parser.add_argument("--seeds", type=int, help="seeds per id (default 3; with --derive 6)")
    parser.add_argument("--rounds", type=int, help="rounds per episode (default 15; with --derive 30)")
    parser.add_argument("--derive", action="store_true", help="work out which ids list their moves instead")
    args = parser.parse_args(argv)
    env_ids = args.env_ids or [name for name, _ in TEXTARENA_GAMES]
    seeds = range(args.seeds or (6 if args.derive else 3))
    args.rounds = args.rounds or (30 if args.derive else 15)
    if args.derive:
        verdicts = [derive(env_id, seeds, args.rounds) for env_id in env_ids]
        open_families = {family(verdict["id"]): verdict for verdict in verdicts if not verdict["listed"]}
        for verdict in verdicts:  # variants of a family run the same code: evidence on one holds for all
            other = open_families.get(family(verdict["id"]))
            if verdict["listed"] and other is not None:
                verdict.update(listed=False, why=f"as its variant {other['id']}: {other['why']}")
            print(f"{verdict['id']:<36} {'listed' if verdict['listed'] else 'open text':<10} {verdict['why']}")
        listed = sorted(verdict["id"] for verdict in verdicts if verdict["listed"])
        expected = sorted(env_id for env_id in env_ids if env_id in LISTED_MOVES)
        summary = {
            "ids": len(verdicts),
            "listed": len(listed),
            "equals_adapter": listed == expected,
            "listed_ids": listed,
        }
    else:
        rows = []
        print("| id | moves | turns | answers tried | two-move tried | two-move accepted | accepted, not one move |")
        print("|---|---|---|---|---|---|---|")
        for env_id in env_ids:
            rows.append(fuzz(env_id, seeds, args.rounds))
            row = rows[-1]
            print(
                f"| `{tsmg_id(env_id)}` | {row['moves']} | {row['turns']} | {row['answers']} | {row['two_move']} | "
                f"{row['two_move_accepted']} | {row['accepted_not_one_move'] if row['moves'] == 'listed' else '-'} |",
                flush=True,
            )
        listed_rows = [row for row in rows if row["moves"] == "listed"]
        summary = {
            "ids": len(rows),
            "listed": len(listed_rows),
            "open_text": len(rows) - len(listed_rows),
            "answers_tried": sum(row["answers"] for row in rows),
            "two_move_tried_where_listed": sum(row["two_move"] for row in listed_rows),
            "two_move_accepted_where_listed": sum(row["two_move_accepted"] for row in listed_rows),
            "accepted_not_one_listed_move": sum(row["accepted_not_one_move"] for row in listed_rows),
            "two_move_accepted_open_text": sum(row["two_move_accepted"] for row in rows if row["moves"] != "listed"),
            "open_text_ids": [tsmg_id(row["id"]) for row in rows if row["moves"] != "listed"],
        }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
