"""Run the served games under uvicorn on a socket bound here (so ``--port 0`` can say its port)."""

from __future__ import annotations

import copy
import logging
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import uvicorn

from tsmg.apps.serve.app import RedactQueries, build_app
from tsmg.apps.serve.environment import ServeSettings
from tsmg.policies import Policy

#: The largest WebSocket message accepted (uvicorn's default): a longer answer than the game
#: accepts is then refused by the game with its reason, and the session goes on.
WS_MAX_BYTES = 16 * 1024 * 1024


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port).

    Raises:
        OSError: The address is taken or cannot be bound; the message says which.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({error.strerror}); pick another --port or --host") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(
    game_ids: Sequence[str],
    *,
    sock: socket.socket,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    settings: ServeSettings | None = None,
    models: Mapping[str, Policy] | None = None,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Serve ``game_ids`` on the bound ``sock`` until interrupted.

    Args:
        game_ids: Registered ids (each under ``/GAME_ID``).
        sock: From :func:`bind`.
        options: Options per game id.
        settings: Capacity, limits, the opponents offered and the token.
        models: The opponent models, loaded (None: loaded here).
        log_level: uvicorn's log level.
        access_log: Whether to log each HTTP request (query strings are always cut).

    The socket listens already, so a client may connect at once: it is answered once the app
    has started.
    """
    run_app(build_app(game_ids, options, settings, models), sock=sock, log_level=log_level, access_log=access_log)


def run_app(app: Any, *, sock: socket.socket, log_level: str = "info", access_log: bool = True) -> None:
    """Run a served app (:func:`~tsmg.apps.serve.app.build_app` or :func:`~.app.create_app`) on ``sock``."""
    # uvicorn's own logging, plus tsmg.apps.serve's loggers (a game's failure, one line) on its error stream.
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["tsmg.apps.serve"] = {"handlers": ["default"], "level": log_level.upper(), "propagate": False}
    config = uvicorn.Config(
        app,
        log_config=log_config,
        log_level=log_level,
        access_log=access_log,
        ws_max_size=WS_MAX_BYTES,
        # Observations are a few hundred bytes: compressing each costs both ends more CPU than it
        # saves on loopback or a LAN (bench/serve_speed.py).
        ws_per_message_deflate=False,
        timeout_graceful_shutdown=5,
    )
    # uvicorn configures its loggers when the config is built; the filter goes on after.
    for name in ("uvicorn.access", "uvicorn.error"):
        logging.getLogger(name).addFilter(RedactQueries())
    uvicorn.Server(config).run(sockets=[sock])
