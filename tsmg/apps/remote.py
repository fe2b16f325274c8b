"""Play a served game over the wire: ``tsmg.make("http://HOST:PORT/GAME_ID")`` is a :class:`RemoteGame`.

A :class:`RemoteGame` is a whole :class:`~tsmg.core.Game` (every seat), so the checker, the
rollout engine, ``tsmg eval`` and ``tsmg train`` use it unchanged. Each instance is one session
of the server, held on OpenEnv's own WebSocket client; every reset and step is one round trip,
and what the game's methods return between steps (observations, legal actions, state keys,
success) comes with it. ``parse`` and ``oracle_action`` ask the server.

All clients of the process share one background event loop, so a thousand live games cost a
thousand sockets, not a thousand threads. A session is closed by :meth:`RemoteGame.close` or
when the game is garbage-collected. A server started with ``--token`` needs
``tsmg.make(URL, token=...)`` or ``TSMG_SERVE_TOKEN`` set. Needs ``tsmg[serve]``.

The server's refusals reach OpenEnv's client as error frames, which it raises as a
``RuntimeError`` whose text is the whole report (``Server error: MESSAGE (code: CODE)``);
:class:`RemoteGameError` carries that text as it is rather than parsing it.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tsmg.apps.serve.auth import client_token, token_headers
from tsmg.core import AgentID, ForkMode, Game, GameError, Invalid, StepResult, check_answers
from tsmg.registry import GameSpec, UnknownGameError

if TYPE_CHECKING:
    from tsmg.influence import InfluenceGraph
    from tsmg.tools import ToolSpec

ResultT = TypeVar("ResultT")


class RemoteGameError(GameError):
    """The game server refused a request, or the connection failed; the message says which and why."""


class UnreachableGameError(UnknownGameError):
    """No server answers at a game URL: like an unknown id, the URL names no game one can play."""


class _SharedLoop:
    """One event loop on a daemon thread, for every remote game of the process."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or not cls._loop.is_running():
                loop = asyncio.new_event_loop()
                started = threading.Event()
                thread = threading.Thread(target=cls._run, args=(loop, started), name="tsmg-remote", daemon=True)
                thread.start()
                started.wait()
                cls._loop = loop
            return cls._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()


_info_cache: dict[tuple[str, str | None], Any] = {}  # by URL and token
_info_lock = threading.Lock()


def http_base(url: str) -> str:
    """The game's HTTP base URL (``ws://`` and ``wss://`` become ``http://`` and ``https://``).

    >>> http_base("ws://127.0.0.1:8000/FrozenLake-v0/")
    'http://127.0.0.1:8000/FrozenLake-v0'
    """
    base = url.rstrip("/")
    if base.startswith(("ws://", "wss://")):
        base = "http" + base[2:]
    return base


def fetch_game_info(url: str, timeout_s: float = 10.0, token: str | None = None) -> Any:
    """The served game's :class:`~tsmg.apps.serve.models.GameInfo` (cached per URL for the process).

    ``token``: the server's ``--token`` (default: ``$TSMG_SERVE_TOKEN``).

    Raises:
        UnknownGameError: The server answers but serves no game there.
        UnreachableGameError: No server answers there.
        RemoteGameError: The server answers something else than a game's description.
    """
    import httpx

    from tsmg.apps.serve.models import GameInfo

    base = http_base(url)
    token = client_token(token)
    key = (base, token)
    with _info_lock:
        if key in _info_cache:
            return _info_cache[key]
    try:
        response = httpx.get(f"{base}/info", timeout=timeout_s, headers=token_headers(token))
    except httpx.HTTPError as error:
        raise UnreachableGameError(f"cannot reach {base} ({error}); is `tsmg serve` running there?") from None
    if response.status_code == 404:
        raise UnknownGameError(f"{base}: {_detail(response)}")
    if response.status_code != 200:
        raise RemoteGameError(f"{base}/info answered {response.status_code}: {_detail(response)}")
    info = GameInfo.model_validate(response.json())
    with _info_lock:
        _info_cache[key] = info
    return info


def _detail(response: Any) -> str:
    try:
        return str(response.json().get("detail", response.text))[:300]
    except ValueError:
        return response.text[:300]


async def _close_client(client: Any) -> None:
    try:
        await client.close()
    except Exception:  # the session ends with the socket anyway
        pass


def _close_in_background(client: Any) -> None:
    """Close a client's session without waiting (runs from ``weakref.finalize`` too)."""
    try:
        asyncio.run_coroutine_threadsafe(_close_client(client), _SharedLoop.get())
    except RuntimeError:  # the interpreter is shutting down: the socket closes with the process
        pass


class RemoteGame(Game):
    """A game served by ``tsmg serve``, played over OpenEnv's WebSocket client.

    Example:
        >>> game = tsmg.make("http://127.0.0.1:8000/FrozenLake-v0")   # doctest: +SKIP
        >>> observations, _ = game.reset(seed=0)                       # doctest: +SKIP
        >>> game.step({"player": "right"}).rewards                     # doctest: +SKIP
        {'player': 0.0}

    It has the members of a tool-using game (:class:`tsmg.tools.ToolGame`) whatever it serves: the
    tools and the influence graph are the served game's, None where it has none.
    """

    #: Whether the served game keeps its episodes' influence graphs (set per game from the server).
    provides_influence: ClassVar[bool] = False

    def __init__(
        self, url: str, *, message_timeout_s: float = 60.0, token: str | None = None, **game_options: Any
    ) -> None:
        """Connect lazily to the game at ``url`` (``http(s)://`` or ``ws(s)://HOST:PORT/GAME_ID``).

        Args:
            url: Where ``tsmg serve`` serves the game.
            message_timeout_s: How long to wait for the server's answer to one request.
            token: The server's ``--token``, if it has one (default: ``$TSMG_SERVE_TOKEN``).
            **game_options: Options to make the game with instead of the server's (checked by
                the server at the first reset).

        Raises:
            UnknownGameError: The server serves no game at ``url`` (:class:`UnreachableGameError`:
                no server answers there).
        """
        from tsmg.apps.serve.client import GameEnvClient

        self._token = client_token(token)
        self.info = fetch_game_info(url, token=self._token)
        self.game_id = url
        self._agents: tuple[AgentID, ...] = tuple(self.info.agents)
        # turn_based is a class-level attribute of Game; a remote game learns it from the server.
        setattr(self, "turn_based", self.info.turn_based)  # noqa: B010
        # So is provides_influence (ToolGame's): a served service game's finished episode carries its influence graph.
        setattr(self, "provides_influence", self.info.provides_influence)  # noqa: B010
        self._game_options = dict(game_options)
        self._message_timeout_s = message_timeout_s
        self._client = GameEnvClient(base_url=http_base(url), message_timeout_s=message_timeout_s, token=self._token)
        self._view: Any = None  # the GameObservation of the last reset or step
        # The episode's reset and answers, which a fork replays in a session of its own.
        self._replay: tuple[int | None, dict[str, Any], list[dict[AgentID, str | Invalid]]] = (None, {}, [])
        self._close = weakref.finalize(self, _close_in_background, self._client)

    # ---------------------------------------------------------------------- transport
    def _call(self, make_call: Callable[[], Awaitable[ResultT]]) -> ResultT:
        async def call() -> ResultT:
            return await make_call()

        future = asyncio.run_coroutine_threadsafe(call(), _SharedLoop.get())
        try:
            return future.result()
        except RuntimeError as error:  # OpenEnv reports the server's error frames as RuntimeError
            raise RemoteGameError(f"{self.game_id}: {error}") from None
        except (OSError, TimeoutError) as error:
            raise RemoteGameError(f"{self.game_id}: the connection failed ({error!r})") from None
        except Exception as error:  # websockets' ConnectionClosed and the like
            raise RemoteGameError(f"{self.game_id}: the connection failed ({error!r})") from None

    def _require_view(self) -> Any:
        if self._view is None:
            raise GameError("no episode in progress; call reset() first")
        return self._view

    def _seat(self, agent: AgentID) -> Any:
        """The server's view of ``agent`` (one-seat games have it at the top level)."""
        view = self._require_view()
        if view.seats is not None:
            return view.seats[agent]
        if agent != view.agent:
            raise GameError(f"{self.game_id} has no agent {agent!r}")
        return view

    # ---------------------------------------------------------------------- Game API
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """Every seat of the served game."""
        return self._agents

    @property
    def active_agents(self) -> tuple[AgentID, ...]:
        """The seats that answer next (as the server says)."""
        return tuple(self._require_view().active_agents)

    @property
    def done(self) -> bool:
        """Whether the current episode has ended."""
        return self._view is not None and bool(self._view.done)

    @property
    def has_random_start(self) -> bool:
        """As the served game declares it."""
        return bool(self.info.has_random_start)

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start an episode on the server with ``seed`` (the same seed gives the same episode as in-process).

        A session the server closed for idleness is replaced by a new one.
        """
        from tsmg.apps.serve.environment import SESSION_CLOSED

        fields: dict[str, Any] = {"seed": seed, "state_keys": True}
        if options:
            fields["options"] = dict(options)
        if self._game_options:
            fields["game_options"] = self._game_options
        try:
            result = self._call(lambda: self._client.reset(**fields))
        except RemoteGameError as error:
            if SESSION_CLOSED not in str(error):
                raise
            # The server closed this idle session; a new connection opens a new one.
            self._call(self._client.disconnect)
            result = self._call(lambda: self._client.reset(**fields))
        self._view = result.observation
        self._replay = (seed, dict(options or {}), [])
        return {agent: self._seat(agent).text for agent in self._agents}, {agent: {} for agent in self._agents}

    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Send the active seats' answers; see :meth:`tsmg.core.Game.step`."""
        from tsmg.apps.serve.models import GameAction

        view = self._require_view()
        if view.done:
            raise GameError("the episode is over; call reset() before step()")
        check_answers(view.active_agents, actions)
        answers: dict[str, str] = {}
        invalid: dict[str, str] = {}
        for agent, answer in actions.items():
            if isinstance(answer, Invalid):
                invalid[agent] = answer.reason
            elif isinstance(answer, str):
                answers[agent] = answer
            else:  # what Game.parse says of a non-text answer in-process
                invalid[agent] = f"expected text, got {type(answer).__name__}"
        if len(answers) == 1 and not invalid:
            ((agent, text),) = answers.items()
            action = GameAction(text=text, agent=agent)
        else:
            action = GameAction(answers=answers or None, invalid=invalid or None)
        result = self._call(lambda: self._client.step(action))
        self._view = view = result.observation
        self._replay[2].append(dict(actions))
        if view.seats is not None:
            seats = view.seats
            return StepResult(
                observations={agent: seat.text for agent, seat in seats.items()},
                rewards={agent: seat.reward for agent, seat in seats.items()},
                terminated={agent: seat.terminated for agent, seat in seats.items()},
                truncated={agent: seat.truncated for agent, seat in seats.items()},
                infos={agent: seat.info for agent, seat in seats.items()},
            )
        agent = view.agent
        return StepResult(
            observations={agent: view.text},
            rewards={agent: float(view.reward or 0.0)},
            terminated={agent: bool(view.done and not view.truncated)},
            truncated={agent: bool(view.truncated)},
            infos={agent: view.info},
        )

    @property
    def fork_mode(self) -> ForkMode:
        """``replay``: a server session cannot be copied, but a new one replays the seed and the answers."""
        return "replay"

    def fork(self) -> RemoteGame:
        """A new session of the same game, reset with this episode's seed and replaying every answer so far.

        Raises:
            GameError: No episode in progress, or one reset without a seed (its chance cannot be replayed).
        """
        self._require_view()
        seed, options, answers = self._replay
        if seed is None:
            raise GameError(
                f"{self.game_id}: a remote game forks by replaying the episode from its seed, and this episode was "
                "reset without one: reset(seed=...) to make it forkable"
            )
        twin = RemoteGame(
            self.game_id, message_timeout_s=self._message_timeout_s, token=self._token, **self._game_options
        )
        twin.reset(seed=seed, options=options or None)
        for round_answers in answers:
            twin.step(round_answers)
        return twin

    def observe(self, agent: AgentID) -> str:
        """The current observation text of ``agent``."""
        return str(self._seat(agent).text)

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Legal answers of ``agent`` now ([] when it is not to move)."""
        legal = self._seat(agent).legal_actions
        return None if legal is None else list(legal)

    def state_key(self, agent: AgentID) -> Hashable:
        """The server's state key of ``agent`` (as text), for seats to move."""
        return self._seat(agent).state_key

    def is_success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded, once the episode is over."""
        return self._seat(agent).success

    def parse(self, agent: AgentID, text: str) -> Any:
        """Ask the server whether ``text`` is a valid answer; returns its canonical text or :class:`Invalid`.

        Never raises: a failed request is an :class:`Invalid` that says so.
        """
        from tsmg.apps.serve.models import GameAction

        if not isinstance(text, str):
            return Invalid(f"expected text, got {type(text).__name__}")
        try:
            action = GameAction(query="parse", agent=agent, text=text)
            info = self._call(lambda: self._client.step(action)).observation.info
        except Exception as error:
            return Invalid(f"the game server could not parse the answer: {error}")
        return info["action"] if info.get("valid") else Invalid(str(info.get("reason")))

    def oracle_action(self, agent: AgentID) -> str | None:
        """The served game's oracle move for ``agent`` now (None without oracle)."""
        from tsmg.apps.serve.models import GameAction

        action = GameAction(query="oracle", agent=agent)
        oracle = self._call(lambda: self._client.step(action)).observation.info.get("oracle")
        return None if oracle is None else str(oracle)

    def tool_specs(self) -> Sequence[ToolSpec] | None:
        """The served game's tools (typed schemas), as the server describes them; None for other games."""
        from tsmg.tools import ToolSpec

        return None if self.info.tools is None else [ToolSpec.model_validate(tool) for tool in self.info.tools]

    def influence_graph(self) -> InfluenceGraph | None:
        """The served game's exact influence graph of the finished episode (None before the end or without one)."""
        from tsmg.influence import InfluenceGraph

        view = self._view
        if view is None or not view.done or view.influence is None:
            return None
        return InfluenceGraph.model_validate(view.influence)

    def close(self) -> None:
        """Close the session on the server."""
        self._close()

    def __repr__(self) -> str:
        """Show where the game is served."""
        return f"RemoteGame({self.game_id!r})"


def remote_spec(url: str) -> GameSpec:
    """The spec of a served game's URL: making it connects to the server (the ``http(s)://``, ``ws(s)://`` namespaces).

    Registered for those prefixes in pyproject.toml's ``tsmg.namespaces`` entry points, so that
    :func:`tsmg.make` plays ``http://HOST:PORT/GAME_ID`` without the registry naming this module.
    """
    import functools

    return GameSpec(id=url, entry_point=functools.partial(RemoteGame, url), description="a game served by tsmg serve")
