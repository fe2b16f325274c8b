"""The ``tsmg`` command line: list, check, play and roll out games.

Listings take ``--json`` (a JSON document on stdout, nothing else) so other tools can read them.
Bad input of any kind (an unknown game or model, a missing API key, a bad option) ends the
command with one line on stderr and a non-zero exit code, never a traceback; ``TSMG_DEBUG=1``
shows the traceback of an unexpected error. ``--import MODULE`` (anywhere on the line, or
``TSMG_IMPORT=MODULE``) imports a module that registers games before the command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import tsmg
from tsmg.apps.catalog import catalog_markdown, game_listing, game_options, options_text
from tsmg.apps.cli_parser import Parser, UsageError, add_game_option, at_least_one, examples
from tsmg.assignments import parse_assignments, validation_problems
from tsmg.core import Game, GameCodeError, GameError, Invalid
from tsmg.policies import DecisionRequest, OraclePolicy, Policy, policy_from_spec
from tsmg.registry import UnknownGameError, import_game_modules, make, refusals
from tsmg.rollout import plan_episodes, rollout
from tsmg.run_folder import SUMMARY_FILE, append_episodes
from tsmg.summary import summarize, summary_line


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code.

    0 success, 1 a failed run, 2 bad input, 130 interrupted, 141 when the reader of the output went away.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        arguments, modules = _take_imports(arguments)
        import_game_modules(modules)
        parser = _build_parser()
        args, unknown = parser.parse_known_args(arguments)
        if unknown:
            command = next((word for word in arguments if not word.startswith("-")), None)
            see = f"tsmg {command} --help" if command else "tsmg --help"
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)} (see: {see})")
        if not hasattr(args, "handler"):
            parser.print_help()
            return 2
        args.command_line = list(sys.argv[1:] if argv is None else argv)  # the resume command an interrupt prints
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError as error:
        if not _stdout_closed():  # a connection of a served game or an API, not our reader
            return report_error(error)
        # The reader of the output went away (`tsmg games --json | head`): stop quietly, as Unix tools
        # do, with SIGPIPE's exit status; stdout goes to /dev/null so that Python's last flush is silent.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as error:
        return report_error(error)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on it; False where poll is missing)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or stdout is no file
        return False


def report_error(error: BaseException) -> int:
    """Print ``error`` as one line on stderr; the exit code (2 for bad input, 1 for anything else).

    Errors that say what the user got wrong (an unknown game, a bad option, a missing key) are
    printed as they are, and so is a game's own failure (:class:`~tsmg.core.GameCodeError`: the
    game and the call, with the file that holds the traceback); anything else is named as an
    unexpected error, with its traceback only under ``TSMG_DEBUG=1``.
    """
    if os.environ.get("TSMG_DEBUG"):
        traceback.print_exception(error)
    if isinstance(error, GameCodeError):  # a bug of the game: one sentence here, the traceback in the run folder
        where = f"; its traceback is in {error.written_to}" if error.written_to else ""
        where = where or ("" if os.environ.get("TSMG_DEBUG") else " (set TSMG_DEBUG=1 to see the traceback)")
        note = f"; {error.note}" if error.note else ""
        print(f"error: {one_line(error)}{where}{note}", file=sys.stderr)
        return 1
    if isinstance(error, UsageError | ValidationError) or _is_user_error(error):
        print(f"error: {one_line(error)}", file=sys.stderr)
        return 2
    hint = "" if os.environ.get("TSMG_DEBUG") else " (set TSMG_DEBUG=1 to see the traceback)"
    print(f"error: unexpected {type(error).__name__}: {one_line(error)}{hint}", file=sys.stderr)
    return 1


def one_line(error: BaseException) -> str:
    """The message of ``error`` on one line (pydantic errors as ``field: problem`` pairs)."""
    if isinstance(error, ValidationError):
        text = f"invalid {error.title}: {validation_problems(error)}"
    elif isinstance(error, NotADirectoryError) and error.filename:
        text = f"cannot make the folder {error.filename}: a file stands on its path; choose another --out"
    else:
        text = str(error) or type(error).__name__
    text = _PYDANTIC_NOISE.sub("", text)  # pydantic's "[type=..., input_value=...]" and its help link
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


_PYDANTIC_NOISE = re.compile(r"\s*\[type=[^\]]*\]|\s*For further information visit \S+")


def _is_user_error(error: BaseException) -> bool:
    # Errors whose message tells the user what to fix. BackendError is checked by name so that the
    # CLI never imports the backends package (its heavy libraries load only when a model is used).
    user_errors = (ValueError, UnknownGameError, GameError, ImportError, FileNotFoundError, PermissionError)
    if isinstance(error, NotADirectoryError | FileExistsError | IsADirectoryError):  # --out where a file is
        return True
    if isinstance(error, user_errors):
        return True
    return any(cls.__name__ == "BackendError" and cls.__module__ == "backends.base" for cls in type(error).__mro__)


def _take_imports(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Split ``--import MODULE`` / ``--import=MODULE`` (allowed anywhere) from the other arguments."""
    rest: list[str] = []
    modules: list[str] = []
    words = iter(arguments)
    for word in words:
        if word == "--import":
            module = next(words, None)
            if module is None or module.startswith("-"):
                raise UsageError("--import needs a module name or a .py file (e.g. --import my_games)")
            modules.append(module)
        elif word.startswith("--import="):
            modules.append(word.removeprefix("--import="))
        else:
            rest.append(word)
    return rest, modules


def _build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="tsmg",
        description="Text-mediated games for language models.",
        epilog=(
            "Games registered in your own module: add --import MODULE (any command) or set TSMG_IMPORT=MODULE.\n"
            "Each command's --help has examples; e.g. tsmg rollout --help."
        ),
    )
    parser.add_argument("--version", action="version", version=f"tsmg {tsmg.__version__}")
    parser.add_argument(
        "--import",
        metavar="MODULE",
        dest="imports",
        action="append",
        help="import a module (or .py file) that registers games (repeatable; default: $TSMG_IMPORT, else none)",
    )
    commands = parser.add_subparsers(title="commands", parser_class=Parser)

    games = commands.add_parser(
        "games",
        help="list the registered games",
        description="List the registered games: id, number of agents, turn-based or simultaneous, description.",
        epilog=examples(
            "tsmg games",
            "tsmg games --json",
            "tsmg games --refused --json",
            "tsmg --import my_games games",
            "# the docs' catalog page is this listing: python -m tsmg.apps.cli games --markdown > docs/catalog.md",
            "tsmg games --markdown",
        ),
    )
    games.add_argument("--json", action="store_true", help="print a JSON list instead of the table")
    games.add_argument(
        "--markdown",
        action="store_true",
        help="print the catalog page (docs/catalog.md): every id by source, and the refused games with the reason",
    )
    games.add_argument(
        "--refused",
        action="store_true",
        help="list the games tsmg refuses to play (by the name a user would type), with the reason, instead",
    )
    games.add_argument(
        "--options",
        metavar="ID",
        help="list every option of the game ID (-o KEY=VALUE): type, this id's default, bounds, meaning "
        "(default: list the games)",
    )
    games.set_defaults(handler=_cmd_games)

    check = commands.add_parser(
        "check",
        help="check that games keep the TSMG contract",
        description=(
            "Play each game with random and hostile answers and check the TSMG contract (determinism per seed, "
            "rewards, observations, invalid answers); exit 1 if any game fails."
        ),
        epilog=examples(
            "tsmg check --game FrozenLake-v0",
            "tsmg check --game FrozenLake-v0 --game KuhnPoker-v0 --json",
            "tsmg check --all --nonsense-seeds 20",
        ),
    )
    add_game_option(check, several=True, required=False, help="game id to check")
    check.add_argument("--all", action="store_true", help="check every registered game")
    check.add_argument("--json", action="store_true", help="print results as JSON")
    check.add_argument(
        "--nonsense-seeds", type=int, default=100, metavar="N", help="seeds of the always-invalid vs random comparison"
    )
    check.set_defaults(handler=_cmd_check)

    play = commands.add_parser(
        "play",
        help="play a game in the terminal",
        description=(
            "Play a game in the terminal: you take every seat, or --agent against --opponent; with --model a "
            "model plays the seats you do not take (alone, you watch it play)."
        ),
        epilog=examples(
            "tsmg play --game FrozenLake-v0",
            "tsmg play --game KuhnPoker-v0 --agent player_0 --opponent oracle",
            "tsmg play --game FrozenLake-v0 --model smollm2 --temperature 0",
        ),
    )
    add_game_option(play)
    play.add_argument("--seed", type=int, default=0, help="seed of the episode")
    play.add_argument("--agent", help="the seat you play (default: every seat)")
    play.add_argument("--opponent", default="random", help="policy of the other seats: random, oracle, fixed:TEXT")
    play.add_argument(
        "--model",
        metavar="SPEC",
        help="a model plays the other seats (all seats without --agent): e.g. smollm2, hf:DIR (default: none, "
        "--opponent plays)",
    )
    play.add_argument(
        "--action-format", choices=["tag", "choice", "raw"], default="tag", help="how the model answers (with --model)"
    )
    play.add_argument("--temperature", type=float, default=0.0, help="with --model (0 = greedy)")
    play.add_argument("--max-tokens", type=int, default=64, help="most tokens per answer (with --model)")
    _add_option_flag(play)
    play.set_defaults(handler=_cmd_play)

    roll = commands.add_parser(
        "rollout",
        help="play episodes with a scripted policy",
        description=(
            "Play episodes of a game with a scripted policy (random, oracle, fixed:TEXT) on consecutive seeds; "
            "print a summary, and with --out keep the episodes. Exit 1 if an episode failed."
        ),
        epilog=examples(
            "tsmg rollout --game FrozenLake-v0 --episodes 20",
            "tsmg rollout --game FrozenLake-NoSlip-v0 --model oracle --episodes 200 --out runs/oracle",
            "tsmg rollout --game FrozenLake-v0 --model fixed:down -o map_name=8x8 --json",
        ),
    )
    add_game_option(roll)
    model = roll.add_argument(
        "--model", metavar="SPEC", help="scripted policy: random, oracle or fixed:TEXT (default: random)"
    )
    policy = roll.add_argument("--policy", metavar="SPEC", help="deprecated spelling of --model (default: none)")
    roll.add_alias(policy, model, default="random")
    roll.add_argument("--episodes", type=at_least_one, default=100, help="episodes to play")
    roll.add_argument("--seed", type=int, default=0, help="first episode seed (seeds are consecutive)")
    roll.add_argument(
        "--out",
        type=Path,
        help="append episodes to OUT/episodes.jsonl and write OUT/summary.json (default: keep nothing)",
    )
    roll.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_option_flag(roll)
    roll.set_defaults(handler=_cmd_rollout)

    from tsmg.apps.evaluation.cli import add_commands
    from tsmg.apps.prompt import add_command as add_prompt_command
    from tsmg.apps.serve.cli import add_command as add_serve_command

    add_commands(commands)
    add_prompt_command(commands)
    add_serve_command(commands)
    from tsmg.apps.view.cli import add_commands as add_view_commands

    add_view_commands(commands)
    try:  # the training package is part of the distribution; its heavy imports happen only when used
        from tsmg.apps.train.cli import add_commands as add_training_commands
        from tsmg.apps.train.demo import add_demo_command
        from tsmg.apps.train.export import add_export_command
    except ImportError:  # pragma: no cover - a stripped install without training/
        return parser
    add_training_commands(commands)
    add_demo_command(commands)
    add_export_command(commands)
    return parser


def _add_option_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="game option, e.g. -o max_steps=20 (repeatable)",
    )


def _cmd_games(args: argparse.Namespace) -> int:
    if args.options is not None:
        if args.json:
            print(json.dumps({"id": args.options, "options": game_options(args.options)}, indent=2))
        else:
            print(options_text(args.options))
        return 0
    if args.refused:
        refused = refusals()
        if args.json:
            print(json.dumps([{"name": name, "reason": reason} for name, reason in refused.items()], indent=2))
        else:
            for name, reason in refused.items():
                print(f"{name}: {reason}")
        return 0
    items = game_listing()
    if args.json:
        print(json.dumps(items, indent=2))
        return 0
    if args.markdown:
        print(catalog_markdown(items, tsmg.registry.refusals()), end="")
        return 0
    width = max(len(item["id"]) for item in items)
    print(f"{'id':<{width}}  agents  turns         description")
    for item in items:
        turns = {True: "turn-based", False: "simultaneous", None: "?"}[item["turn_based"]]
        agents = item["num_agents"] if item["num_agents"] is not None else "?"
        missing = f" ({item['error']})" if "error" in item else ""  # what to install to play it
        print(f"{item['id']:<{width}}  {agents!s:>6}  {turns:<12}  {item['description'] or ''}{missing}".rstrip())
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from tsmg.apps.check import check_games, result_line

    ids = [spec.id for spec in tsmg.specs()] if args.all else list(args.game)
    if not ids:
        print("error: name games to check, or use --all", file=sys.stderr)
        return 2
    # Each game's line as soon as its check ends; Ctrl-C keeps what finished (tsmg/apps/check.py).
    show = None if args.json else lambda result, run: print(result_line(result, run), flush=True)
    run = check_games(ids, args.nonsense_seeds, on_result=show)
    if args.json:
        print(json.dumps(run.results, indent=2))
    if len(ids) > 1 or run.interrupted:
        print(run.summary_text(), file=sys.stderr if args.json or run.interrupted else sys.stdout, flush=True)
    if run.interrupted:
        return 130
    return 0 if run.ok else 1


def _cmd_play(args: argparse.Namespace) -> int:
    game = tsmg.make(args.game, **parse_assignments(args.option, "-o/--option"))
    if args.agent and args.agent not in game.agents:
        raise ValueError(f"{args.game} has no agent {args.agent!r}; agents: {', '.join(game.agents)}")
    # Without --model a person plays (every seat, or --agent against --opponent); with --model the
    # model plays every seat the person does not take, so `--model M` alone is watching it play.
    human_seats = {args.agent} if args.agent else (set() if args.model else set(game.agents))
    other = _model_policy(args) if args.model else policy_from_spec(args.opponent, seed=args.seed, scripted_only=True)
    game.reset(seed=args.seed)
    who = f"{args.model} plays" if args.model and not human_seats else "Type your answer; Ctrl-D quits"
    print(f"{game.game_id} (seed {args.seed}). {who}.\n")
    returns = dict.fromkeys(game.agents, 0.0)
    while not game.done:
        actions: dict[str, str | Invalid] = {}
        for agent in game.active_agents:
            if agent in human_seats:
                answer = _ask_human(game, agent)
                if answer is None:
                    return 0
                actions[agent] = answer
                continue
            request = DecisionRequest(
                game, agent, game.observe(agent), game.legal_actions(agent), round=game_round(game)
            )
            if args.model:
                print(f"--- {agent} sees ---\n{request.observation}")
            decision = other.act([request])[0]
            actions[agent] = decision.action
            if args.model:
                print(f"[{agent} ({other.name}) wrote] {decision.completion}")
            else:
                print(f"[{agent} plays {decision.action}]")
        result = game.step(actions)
        for agent, info in result.infos.items():
            if agent in actions:
                verdict = "valid" if info.get("valid") else f"INVALID ({info.get('reason')})"
                print(f"-> {agent}: {info.get('action')!s} [{verdict}], reward {result.rewards[agent]:+g}")
        for agent, reward in result.rewards.items():
            returns[agent] += reward
    print("\nEpisode over." + "".join(f" {agent}: return {value:+g}." for agent, value in returns.items()))
    for agent in game.agents:
        success = game.is_success(agent)
        if success is not None:
            print(f"{agent}: {'success' if success else 'no success'}")
    return 0


def _model_policy(args: argparse.Namespace) -> Policy:
    from tsmg.lap import ActionFormat, LAPConfig

    config = LAPConfig(
        action_format=ActionFormat(kind=args.action_format), temperature=args.temperature, max_tokens=args.max_tokens
    )
    return policy_from_spec(args.model, seed=args.seed, lap=config)


def game_round(game: Game) -> int:
    """The round number of a rules-based game (0 for games that do not count rounds)."""
    return int(getattr(game, "rounds", 0))


def _ask_human(game: Game, agent: str) -> str | None:
    print(f"--- {agent} sees ---\n{game.observe(agent)}")
    legal = game.legal_actions(agent)
    if legal and len(legal) <= 20:
        print(f"(legal: {', '.join(legal)})")
    try:
        return input(f"{agent}> ")
    except EOFError:
        print()
        return None


def _run_policy(game_id: str, policy_spec: str, episodes: int, seed: int, options: dict[str, Any]) -> list[Any]:
    policy = policy_from_spec(policy_spec, seed=seed, scripted_only=True)
    if isinstance(policy, OraclePolicy):  # refused before anything is played
        game = make(game_id, **options)
        try:
            OraclePolicy.check_game(game, seed)
        finally:
            game.close()
    plans = plan_episodes(game_id, list(range(seed, seed + episodes)))
    return rollout(game_id, policy, plans=plans, game_options=options)


def _cmd_rollout(args: argparse.Namespace) -> int:
    options = parse_assignments(args.option, "-o/--option")
    episodes = _run_policy(args.game, args.model, args.episodes, args.seed, options)
    summary = summarize(episodes)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        append_episodes(args.out, episodes)
        (args.out / SUMMARY_FILE).write_text(
            json.dumps({"game": args.game, "policy": args.model, **summary.as_dict()}, indent=2)
        )
    if args.json:
        print(json.dumps({"game": args.game, "policy": args.model, **summary.as_dict()}))
    else:
        print(summary_line(args.game, args.model, summary))
        if args.out:
            from tsmg.apps.next_steps import view_text

            print(view_text(args.out))
    return 0 if summary.failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
