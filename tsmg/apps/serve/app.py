"""The ASGI app of ``tsmg serve``: OpenEnv's own server per game, plus tsmg's layer on top.

Each game is an OpenEnv ``HTTPEnvServer`` (WebSocket ``/ws``, ``/schema``, ``/health``,
``/metadata``) mounted under ``/GAME_ID``. What tsmg adds, and why:

* **Sessions over HTTP.** Stock OpenEnv keeps sessions on the WebSocket only: its HTTP ``/step``
  builds a fresh environment per request (so it answers 500: no episode). Here ``POST /reset``
  opens a session in the server's own session table and returns its ``session_id``;
  ``POST /step``, ``GET /state`` and ``POST /close`` take it. Idle sessions are reaped by the
  server's reaper like any other; a WebSocket may attach to one with ``/ws?session_id=…``.
* **Every bad request is a 4xx with the reason.** Bodies are read here by the reader WebSocket
  frames go through too (:mod:`tsmg.apps.serve.wire`: NaN, ``1e999``, lone surrogates and deep
  nesting included, which crash the stock error handler into a 500), errors never echo the input
  back, and requests the game refuses carry the status of their
  :class:`~tsmg.apps.serve.environment.RequestError`. Bodies over ``max_request_bytes`` get 413.
* **A bug of the game is not a 500 either**: its own code raising is a 424 naming the game and
  the call, the same sentence the WebSocket gets, and one line in the log
  (:class:`~tsmg.apps.serve.environment.GameFailed`).
* **Logs hold no credentials.** Query strings are cut from access logs; headers are never logged.
* **A token, where one is set** (``tsmg serve --token``): every HTTP request and WebSocket
  handshake presents ``Authorization: Bearer TOKEN`` or is refused (401; 403 on a WebSocket).
* **JSON text frames only.** OpenEnv's WebSocket handler reads text frames; a binary one would end
  the session with the bare error ``'text'``, and a frame too deep or not an object would end it
  with Python's words. Here each gets an error frame with the sentence HTTP answers, and the
  session goes on.

The HTTP sessions live in OpenEnv's own session table, which ``HTTPEnvServer`` 0.10 exposes
through private members only (:data:`OPENENV_SESSION_API`); a table of our own would split
capacity, idle reaping and ``/ws?session_id=`` between two owners. :func:`check_openenv` looks
for them when the app is built, so an OpenEnv release that moves one fails at start, naming it.
"""

from __future__ import annotations

import hmac
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import ConcurrencyConfig, WSErrorCode, WSErrorResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tsmg.apps.serve.auth import token_headers
from tsmg.apps.serve.environment import (
    GameEnvironment,
    RequestError,
    ServeSettings,
    check_reset_fields,
    load_opponent_models,
)
from tsmg.apps.serve.limits import offered_opponents, scripted_opponents
from tsmg.apps.serve.models import GameAction, GameInfo, GameObservation, GameState
from tsmg.apps.serve.wire import BadJSON, read_json_object
from tsmg.policies import Policy
from tsmg.registry import make, spec
from tsmg.tools import game_tools, provides_influence

logger = logging.getLogger(__name__)

_RECENTLY_CLOSED = 10_000  # closed HTTP session ids remembered, to say "expired" rather than "unknown"

#: The private members of OpenEnv's ``HTTPEnvServer`` (0.10) that the HTTP sessions use, with what
#: each must be. OpenEnv offers no public way to add a session to its table, look one up or end one.
OPENENV_SESSION_API = {
    "_sessions": "a dict of session id to environment (None while one is being made)",
    "_create_session": "a coroutine function () -> (session_id, environment)",
    "_destroy_session": "a coroutine function (session_id)",
    "_update_session_activity": "a function (session_id, increment_step=False)",
}


def check_openenv(server: HTTPEnvServer) -> None:
    """Fail now, naming the member, if OpenEnv's server lacks a private member the HTTP sessions use.

    Raises:
        RuntimeError: A member of :data:`OPENENV_SESSION_API` is missing or of another shape.
    """
    shapes = {
        "_sessions": lambda value: isinstance(value, dict),
        "_create_session": lambda value: inspect.iscoroutinefunction(value) and not _required_parameters(value),
        "_destroy_session": lambda value: (
            inspect.iscoroutinefunction(value) and _required_parameters(value) == ["session_id"]
        ),
        "_update_session_activity": lambda value: (
            callable(value)
            and _required_parameters(value) == ["session_id"]
            and "increment_step" in inspect.signature(value).parameters
        ),
    }
    for name, expected in OPENENV_SESSION_API.items():
        value = getattr(server, name, None)
        if value is None or not shapes[name](value):
            raise RuntimeError(
                f"openenv's HTTPEnvServer.{name} is missing or has changed (tsmg serve needs {expected}); "
                "install the openenv version pyproject.toml pins (openenv>=0.10,<0.11)"
            )


def _required_parameters(function: Any) -> list[str]:
    return [
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]


class _Refused(Exception):
    """A request refused with an HTTP status and one sentence."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _refusal(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"detail": reason}, status_code=status)


def _http_refusal(error: StarletteHTTPException) -> JSONResponse:
    """Starlette's own refusal (an unknown path, a wrong method) as ours: its status and headers, a sentence."""
    detail = error.detail if isinstance(error.detail, str) else "the request was refused"
    return JSONResponse({"detail": detail}, status_code=error.status_code, headers=error.headers)


async def _json_object(request: Request, *, empty_ok: bool) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 that says what is wrong with it (:mod:`tsmg.apps.serve.wire`)."""
    raw = await request.body()
    if not raw.strip():
        if empty_ok:
            return {}
        raise _Refused(400, "the body is empty: send a JSON object")
    try:
        return read_json_object(raw)
    except BadJSON as error:
        raise _Refused(400, str(error)) from None


def _explain(error: ValidationError | RequestValidationError, prefix: str = "") -> str:
    """One line per problem, never echoing the input (it may be huge or unprintable)."""
    problems = []
    for problem in error.errors():
        location = ".".join(str(part) for part in (prefix, *problem.get("loc", ())) if part != "")
        problems.append(f"{location or 'body'}: {problem.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"


class _HTTPSessions:
    """tsmg's HTTP session routes over one OpenEnv server's session table."""

    def __init__(self, server: HTTPEnvServer, info: GameInfo) -> None:
        self.server = server
        self.info = info
        self.closed: OrderedDict[str, float] = OrderedDict()

    def find(self, body_or_query: Mapping[str, Any]) -> tuple[str, GameEnvironment]:
        session_id = body_or_query.get("session_id")
        if session_id is None:
            raise _Refused(
                400,
                "no session_id: POST /reset opens an HTTP session and returns its session_id "
                "(or play over the WebSocket /ws, where the connection is the session)",
            )
        if not isinstance(session_id, str):
            raise _Refused(400, "session_id must be a string")
        # OpenEnv keeps its sessions in this table (None while one is being created).
        env = self.server._sessions.get(session_id)
        if isinstance(env, GameEnvironment):
            return session_id, env
        if session_id in self.closed:
            timeout = self.info.idle_timeout_s
            why = f"idle for more than {timeout:g} s, or closed" if timeout else "closed"
            raise _Refused(410, f"session {session_id} has expired ({why}); POST /reset opens a new one")
        raise _Refused(404, f"no session {session_id!r:.60} on {self.info.id}; POST /reset opens one")

    def remember_closed(self, session_id: str) -> None:
        self.closed[session_id] = time.time()
        while len(self.closed) > _RECENTLY_CLOSED:
            self.closed.popitem(last=False)


def _add_session_routes(app: FastAPI, server: HTTPEnvServer, info: GameInfo) -> None:
    """Add the session routes before OpenEnv's, so that its stateless /reset, /step and /state are shadowed."""
    sessions = _HTTPSessions(server, info)

    @app.post("/reset", tags=["Environment Control"], summary="Open (or reuse) an HTTP session and reset it")
    async def reset(request: Request) -> JSONResponse:
        body = await _json_object(request, empty_ok=True)
        arguments = {key: value for key, value in body.items() if key != "session_id"}
        check_reset_fields(arguments)
        created = "session_id" not in body
        if created:
            try:
                session_id, env = await server._create_session()
            except SessionCapacityError as error:
                raise _Refused(
                    429,
                    f"the server is at capacity ({error.active_sessions} of {error.max_sessions} sessions); "
                    "close a session or retry later",
                ) from None
            assert isinstance(env, GameEnvironment)
            env.on_close = partial(sessions.remember_closed, session_id)
        else:
            session_id, env = sessions.find(body)
        try:
            observation = await env.reset_async(**arguments)
        except Exception:
            if created:  # a failed first reset must not hold a slot
                await server._destroy_session(session_id)
            raise
        server._update_session_activity(session_id)
        return JSONResponse({"session_id": session_id, **serialize_observation(observation)})

    @app.post("/step", tags=["Environment Control"], summary="Play an answer in an HTTP session")
    async def step(request: Request) -> JSONResponse:
        body = await _json_object(request, empty_ok=False)
        session_id, env = sessions.find(body)
        if "action" not in body:
            raise _Refused(400, "no action: send {'session_id': ..., 'action': {'text': ...}}")
        try:
            action = GameAction.model_validate(body["action"])
        except ValidationError as error:
            raise _Refused(422, _explain(error, "action")) from None
        observation = await env.step_async(action)
        server._update_session_activity(session_id, increment_step=True)
        return JSONResponse(serialize_observation(observation))

    @app.get("/state", tags=["State Management"], summary="The state of an HTTP session")
    async def state(request: Request) -> JSONResponse:
        _, env = sessions.find(request.query_params)
        return JSONResponse(env.state.model_dump())

    @app.post("/close", tags=["Environment Control"], summary="Close an HTTP session")
    async def close(request: Request) -> JSONResponse:
        body = await _json_object(request, empty_ok=False)
        session_id, _ = sessions.find(body)
        await server._destroy_session(session_id)
        return JSONResponse({"closed": session_id})

    @app.get("/sessions", tags=["Health"], summary="Open sessions and capacity")
    async def open_sessions() -> dict[str, Any]:
        return {
            "active": server.active_sessions,
            "max": server.max_concurrent_envs,
            "idle_timeout_s": info.idle_timeout_s,
        }

    @app.get("/info", response_model=GameInfo, tags=["Environment Info"], summary="The served game")
    async def game() -> GameInfo:
        return info


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal as ``{"detail": reason}`` with its status; never the input echoed, never a 500."""

    @app.exception_handler(_Refused)
    async def refused(request: Request, error: _Refused) -> JSONResponse:
        return _refusal(error.status, error.reason)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        return _refusal(error.status, str(error))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return _refusal(422, _explain(error))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 501:  # OpenEnv's task API (/ENV/tasks, /ENV/splits, ...): a tsmg game has no tasks
            return _refusal(
                404, f"{request.url.path[:80]} is not offered: a tsmg game has no task list (play it: /reset, /ws)"
            )
        return _http_refusal(error)


def game_info(game_id: str, options: Mapping[str, Any], settings: ServeSettings) -> GameInfo:
    """Describe a served game (made once to read its agents, and reset on a few seeds).

    ``has_random_start`` is what those seeds show (:func:`tsmg.checker.observed_random_start`),
    not merely what the game declares: a client plans its seeds by it.
    """
    from tsmg.checker import observed_random_start

    game = make(game_id, **options)
    rules = settings.option_rules
    return GameInfo(
        id=game_id,
        description=spec(game_id).description,
        agents=list(game.agents),
        turn_based=game.turn_based,
        has_random_start=observed_random_start(game),
        options=dict(options),
        opponents=offered_opponents(settings.opponent_models, scripted_opponents(game)),
        default_opponent=settings.opponent,
        client_options=None if rules.allowed is None else sorted(rules.allowed),
        option_limits=dict(rules.limits),
        max_answer_chars=settings.max_answer_chars,
        max_sessions=settings.max_sessions,
        idle_timeout_s=settings.idle_timeout_s,
        tools=None if (tools := game_tools(game)) is None else [tool.model_dump() for tool in tools],
        provides_influence=provides_influence(game),
    )


def game_app(
    game_id: str,
    options: Mapping[str, Any],
    settings: ServeSettings,
    models: Mapping[str, Policy] | None = None,
) -> FastAPI:
    """One game behind OpenEnv's server, with tsmg's session routes and error handling.

    ``models``: the opponent models loaded at start (by spec), shared by every session.
    """
    info = game_info(game_id, options, settings)
    factory = partial(GameEnvironment, game_id, dict(options), settings, models, info.opponents)
    server = HTTPEnvServer(
        factory,
        GameAction,
        GameObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_sessions, session_timeout=settings.idle_timeout_s
        ),
        env_name=game_id,
        state_cls=GameState,
    )
    check_openenv(server)
    app = FastAPI(title=f"{game_id} (tsmg)", description=info.description, version="1.0.0")
    _add_session_routes(app, server, info)
    server.register_routes(app)
    _add_error_handlers(app)
    return app


def build_app(
    game_ids: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    settings: ServeSettings | None = None,
    models: Mapping[str, Policy] | None = None,
) -> FastAPI:
    """The app of ``tsmg serve``: each game under ``/GAME_ID``, plus ``/health`` and ``/games``.

    Args:
        game_ids: Registered ids to serve.
        options: Options per game id to make it with (default: the registered defaults).
        settings: Capacity, limits, the opponents offered and the token.
        models: ``settings.opponent_models`` already loaded (:func:`load_opponent_models`);
            None loads them here, once for every game and session.

    Raises:
        UnknownGameError, GameOptionsError: A game id or its options are wrong.
        backends.BackendError: An opponent model cannot be loaded.
    """
    settings = settings or ServeSettings()
    options = options or {}
    models = load_opponent_models(settings) if models is None else models
    games = {
        game_id: game_app(game_id, options.get(game_id, {}), settings, models) for game_id in dict.fromkeys(game_ids)
    }

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Starlette runs no lifespan of a mounted app; OpenEnv's session reaper starts in one.
        async with AsyncExitStack() as stack:
            for game in games.values():
                await stack.enter_async_context(game.router.lifespan_context(game))
            yield

    app = FastAPI(title="tsmg games", lifespan=lifespan)
    _harden(app, settings)
    served = ", ".join(f"/{game_id}" for game_id in games)

    @app.get("/health", tags=["Health"])
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "games": list(games)}

    @app.get("/games", tags=["Environment Info"])
    async def served_games() -> list[str]:
        return list(games)

    @app.exception_handler(StarletteHTTPException)
    async def not_served(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 404:
            return _refusal(404, f"no game is served at {request.url.path[:80]}; this server serves {served}")
        return _http_refusal(error)

    for game_id, game in games.items():
        app.mount(f"/{game_id}", game)
    return app


def create_app(
    game_id: str,
    options: Mapping[str, Any] | None = None,
    settings: ServeSettings | None = None,
    models: Mapping[str, Policy] | None = None,
) -> FastAPI:
    """One game at the root of the server, as a standard OpenEnv environment serves (``/ws``, ``/health``, ...).

    What an exported project (:mod:`tsmg.apps.serve.project`) runs, and what clients that expect one
    environment per server take (verifiers' ``OpenEnvEnv``, OpenEnv's ``AutoEnv``): the same
    game, sessions, limits and token as ``tsmg serve`` serves under ``/GAME_ID``.

    Args:
        game_id: A registered id.
        options: Options to make the game with.
        settings: Capacity, limits, the opponents offered and the token.
        models: ``settings.opponent_models`` already loaded (None: loaded here).

    Raises:
        UnknownGameError, GameOptionsError: The game id or its options are wrong.
        backends.BackendError: An opponent model cannot be loaded.
    """
    settings = settings or ServeSettings()
    models = load_opponent_models(settings) if models is None else models
    app = game_app(game_id, options or {}, settings, models)
    _harden(app, settings)
    return app


def _harden(app: FastAPI, settings: ServeSettings) -> None:
    """The middleware every served app wears: the body-size limit, checked frames, and the token where one is set."""
    app.add_middleware(_BodySizeLimit, limit=settings.max_request_bytes)
    app.add_middleware(_CheckedFrames)
    if settings.token is not None:
        app.add_middleware(_RequireToken, token=settings.token)  # added last: runs first


class _BodySizeLimit:
    """Refuse a request body over the limit with 413 and the limit in the reason.

    A declared Content-Length over the limit is refused before reading; a body streamed without
    one is counted as it arrives and refused (through the game app's handler) once it passes.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _reason(self, size: str) -> str:
        return f"the request body is {size} bytes; this server accepts at most {self.limit} (--max-request-bytes)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await _refusal(413, self._reason(value.decode()))(scope, receive, send)
                return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise _Refused(413, self._reason(f"more than {self.limit}"))
            return message

        await self.app(scope, counted, send)


class _RequireToken:
    """Refuse every request and WebSocket handshake that does not present the server's token.

    HTTP gets 401 with the reason; a WebSocket handshake is refused before it is accepted (the
    client sees HTTP 403). Tokens are compared in constant time.
    """

    REASON = (
        "this server needs a token: send the header 'Authorization: Bearer TOKEN' "
        "(tsmg.make(URL, token=...) or TSMG_SERVE_TOKEN do this)"
    )

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        ((name, value),) = token_headers(token).items()
        self.header, self.expected = name.lower().encode(), value.encode()

    def _presented(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == self.header and hmac.compare_digest(value, self.expected):
                return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._presented(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http":
            response = JSONResponse({"detail": self.REASON}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await receive()  # the handshake
        await send({"type": "websocket.close", "code": 1008, "reason": "a token is needed"})


class _CheckedFrames:
    """Answer a WebSocket frame that is binary, or not a JSON object within bounds, with an error frame.

    OpenEnv's handler reads ``receive_text()``, which fails on a binary frame with a bare
    ``KeyError('text')`` that ends the session, and parses text with ``json.loads`` alone, so deep
    nesting ends the session with Python's "maximum recursion depth exceeded" and a top level
    that is not an object with an ``AttributeError``. Here each text frame is read by
    :func:`~tsmg.apps.serve.wire.read_json_object`, as an HTTP body is, and one it refuses gets that
    sentence in an error frame, the session going on. The handler answers one message at a
    time, so the error frame sent here, while it waits for the next message, cannot interleave
    with one of its own.
    """

    BINARY = "binary WebSocket frames are not accepted: send each message as a JSON text frame"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def checked() -> Message:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                text = message.get("text")
                try:
                    if text is None:
                        raise BadJSON(self.BINARY)
                    read_json_object(text)
                except BadJSON as error:
                    frame = WSErrorResponse(data={"message": str(error), "code": WSErrorCode.INVALID_JSON})
                    await send({"type": "websocket.send", "text": frame.model_dump_json()})
                    continue
                return message

        await self.app(scope, checked, send)


class RedactQueries(logging.Filter):
    """Cut query strings (where tokens and session ids travel) from the server's log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's arguments; never drop the record."""
        if isinstance(record.args, tuple):
            record.args = tuple(_without_query(arg) for arg in record.args)
        return True


def _without_query(value: Any) -> Any:
    if isinstance(value, str) and "?" in value:
        return value.split("?", 1)[0] + "?[redacted]"
    return value
