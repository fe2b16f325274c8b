"""``tsmg serve --game ID…``: registered games as OpenEnv environment servers."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Any

from tsmg.apps.cli_parser import add_game_option, examples
from tsmg.apps.serve.auth import TOKEN_ENV_VAR, client_token


def add_command(commands: Any) -> None:
    """Register ``serve`` on an argparse sub-parser set (imports nothing heavy)."""
    serve = commands.add_parser(
        "serve",
        help="serve games as OpenEnv environments (HTTP and WebSocket)",
        description=(
            "Each game is served under /GAME_ID by OpenEnv's server: WebSocket /GAME_ID/ws (one session per "
            "connection), HTTP POST /GAME_ID/reset (returns a session_id), /GAME_ID/step, GET /GAME_ID/state, "
            "/GAME_ID/schema, /GAME_ID/info, /health. Play it from Python with tsmg.make('http://HOST:PORT/GAME_ID')."
        ),
        epilog=examples(
            "tsmg serve --game FrozenLake-v0 --port 8000",
            "tsmg serve --game FrozenLake-v0 --game KuhnPoker-v0 --opponent oracle --port 0",
            "tsmg serve --game KuhnPoker-v0 --opponent-model hf:runs/kuhn/final --host 0.0.0.0 --token SECRET",
            "# an OpenEnv project (openenv.yaml, Dockerfile, server, client) instead of serving:",
            "tsmg serve --game TicTacToe-v0 --opponent oracle --client-options none --export-project tictactoe-env",
        ),
    )
    add_game_option(serve, several=True, help="registered game id to serve")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument(
        "--port", type=int, default=8000, help="port to listen on; 0 picks a free one (printed at start)"
    )
    serve.add_argument("--max-sessions", type=int, default=256, help="sessions open at once, per game")
    serve.add_argument(
        "--idle-timeout", type=float, default=300.0, help="close sessions idle this many seconds (0: never)"
    )
    serve.add_argument(
        "--opponent",
        default="random",
        help="policy of the seats a one-seat session leaves, unless it names one: random, oracle, fixed:TEXT, "
        "or a model given with --opponent-model (default: random)",
    )
    serve.add_argument(
        "--opponent-model",
        action="append",
        default=[],
        metavar="SPEC",
        help="a model a one-seat session may name as its opponent (repeatable; loaded once at start, shared by "
        "sessions); clients can name no other model",
    )
    serve.add_argument(
        "--client-options",
        default="all",
        metavar="NAMES",
        help="game options a client may set at reset: all (default), none, or NAME,NAME,...",
    )
    serve.add_argument(
        "--option-limit",
        action="append",
        default=[],
        metavar="NAME=MAX",
        help="largest value of a numeric option a client may ask for (or size of another, in characters and "
        "items); without one, no larger than the served game's own value (repeatable)",
    )
    serve.add_argument(
        "--token",
        default=None,
        help=f"clients must send 'Authorization: Bearer TOKEN' (default: ${TOKEN_ENV_VAR}); required when "
        "--host is not loopback",
    )
    serve.add_argument("--max-answer-chars", type=int, default=262_144, help="longest answer accepted")
    serve.add_argument("--max-request-bytes", type=int, default=4 * 1024 * 1024, help="largest HTTP body accepted")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="server log level",
    )
    serve.add_argument("--no-access-log", action="store_true", help="do not log each HTTP request")
    serve.add_argument(
        "--export-project",
        metavar="DIR",
        default=None,
        help="write an OpenEnv environment project of the one --game into DIR (new or empty), carrying the "
        "settings above, instead of serving (its README says how to start it; --token makes it require one; "
        "default: serve, write nothing)",
    )
    serve.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Check the games and options, bind the port, print the URLs, then serve until interrupted."""
    import tsmg
    from tsmg.apps.serve.limits import (
        canonical_spec,
        check_opponent,
        offered_opponents,
        parse_client_options,
        parse_option_limit,
    )

    for name, value in (
        ("--max-sessions", args.max_sessions),
        ("--max-answer-chars", args.max_answer_chars),
        ("--max-request-bytes", args.max_request_bytes),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be 0..65535, got {args.port}")
    token = client_token(args.token)
    if token is None and not is_loopback(args.host):
        raise ValueError(
            f"--host {args.host} lets other machines connect: give --token TOKEN (or set {TOKEN_ENV_VAR}) so that only "
            "clients presenting it can play"
        )
    models = tuple(dict.fromkeys(canonical_spec(model) for model in args.opponent_model))
    # Nothing is loaded to check the default: it must be scripted or one of the models loaded below.
    opponent = check_opponent(args.opponent, offered_opponents(models))
    limits = dict(parse_option_limit(text) for text in args.option_limit)
    allowed = parse_client_options(args.client_options)
    if args.export_project is not None:  # makes the game itself; a URL is refused before it is reached
        return _export(args, opponent, models, allowed, limits, token)
    for game_id in args.game:
        tsmg.make(game_id)  # an unknown id fails here, naming the closest ones
    try:  # after the checks above, which import nothing of the server, so that a typo is told at once
        from tsmg.apps.serve.environment import load_opponent_models
        from tsmg.apps.serve.server import bind, serve
    except ImportError as error:
        missing = f"tsmg serve needs the serve extra ({error.name} is missing)"
        print(f"error: {missing}: pip install 'tsmg[serve]'", file=sys.stderr)
        return 2
    settings = _settings(args, opponent, models, allowed, limits, token)
    loaded = load_opponent_models(settings)  # before the port opens: a model that cannot load stops here
    try:
        sock = bind(args.host, args.port)
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    print(f"tsmg serve: {len(args.game)} game(s) on {base} (OpenEnv HTTP and WebSocket; Ctrl-C stops)", flush=True)
    for game_id in dict.fromkeys(args.game):
        print(f"  {base}/{game_id}", flush=True)
    serve(
        args.game,
        sock=sock,
        settings=settings,
        models=loaded,
        log_level=args.log_level,
        access_log=not args.no_access_log,
    )
    return 0


def _settings(
    args: argparse.Namespace,
    opponent: str,
    models: tuple[str, ...],
    allowed: frozenset[str] | None,
    limits: dict[str, float],
    token: str | None,
) -> Any:
    """The :class:`~tsmg.apps.serve.environment.ServeSettings` the flags describe (imported now: it loads OpenEnv)."""
    from tsmg.apps.serve.environment import ServeSettings
    from tsmg.apps.serve.limits import OptionRules

    return ServeSettings(
        opponent=opponent,
        opponent_models=models,
        option_rules=OptionRules(allowed=None if allowed is None else allowed | set(limits), limits=limits),
        max_answer_chars=args.max_answer_chars,
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout or None,
        max_request_bytes=args.max_request_bytes,
        token=token,
    )


def _export(
    args: argparse.Namespace,
    opponent: str,
    models: tuple[str, ...],
    allowed: frozenset[str] | None,
    limits: dict[str, float],
    token: str | None,
) -> int:
    """``--export-project DIR``: write the project of the one game, with the settings given."""
    from tsmg.apps.serve.project import export_project

    if len(set(args.game)) != 1:
        raise ValueError("--export-project writes the project of one game: give exactly one --game")
    # The token itself never goes into the project: its server reads it from its own environment.
    settings = _settings(args, opponent, models, allowed, limits, token=None)
    root = export_project(args.export_project, args.game[0], settings, require_token=token is not None)
    print(f"tsmg serve: wrote the OpenEnv project of {args.game[0]} to {root}", flush=True)
    print(f"  start it: cd {root} && python -m server.app --port 8000   (or: openenv build {root})", flush=True)
    return 0


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False
