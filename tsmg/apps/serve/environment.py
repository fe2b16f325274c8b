"""A registered tsmg game as an OpenEnv ``Environment``: one instance per session.

A session plays either every seat of the game (``reset(agent=None)``, the default: what
:class:`tsmg.apps.remote.RemoteGame` uses, so a remote game is the whole game) or one seat
(``reset(agent="player_1")``), in which case the server plays the other seats with a policy it
offers (``opponent``: ``random``, ``oracle``, ``fixed:TEXT`` or a model its operator loaded at
start, :mod:`tsmg.apps.serve.limits`) before handing the turn back.

The top level of an observation describes one seat (``agent``): after a reset the seat to
move; after a step the seat that just answered (its reward, the game's info of its answer);
after a round in which several of the session's seats answered at once, none (``agent`` and
``reward`` are null) and ``seats`` carries each one's.

``reset(seed=S)`` calls the game's own ``reset(seed=S)``, so a seed over the wire gives the same
episode as in-process. Requests the game cannot honour raise :class:`RequestError` subclasses
carrying the HTTP status that says why; OpenEnv's WebSocket handler sends their message in an
error frame and keeps the session; so does a failure of the game's own code (:class:`GameFailed`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from tsmg.apps.serve.limits import (
    NotOffered,
    OptionRules,
    check_opponent,
    check_vs_bot,
    offered_opponents,
    scripted_opponents,
)
from tsmg.apps.serve.models import GameAction, GameObservation, GameState, SeatView
from tsmg.core import AgentID, Game, GameCodeError, GameError, Invalid, StepResult
from tsmg.episode import dumps_key
from tsmg.policies import Decision, DecisionRequest, Policy, policy_from_spec
from tsmg.registry import GameOptionsError, make, spec
from tsmg.rollout import final_state_key
from tsmg.tools import exact_influence

logger = logging.getLogger(__name__)

#: How a request to a closed session starts its refusal (clients reconnect when they see it).
SESSION_CLOSED = "this session was closed"
#: What ``reset`` takes.
RESET_FIELDS = ("seed", "episode_id", "agent", "opponent", "options", "game_options", "state_keys")


class RequestError(ValueError):
    """A request the server refuses; ``status`` is the HTTP status that says why."""

    status = 400


class EpisodeConflict(RequestError):
    """The request does not fit the episode's state (over, not started, not that seat's turn)."""

    status = 409


class AnswerTooLong(RequestError):
    """An answer longer than the server accepts."""

    status = 413


class SessionExpired(RequestError):
    """The session was closed (idle too long, or by its client)."""

    status = 410


class NotOfferedError(RequestError):
    """An opponent or game option the server does not offer to clients (:mod:`tsmg.apps.serve.limits`)."""

    status = 422


class GameFailed(RequestError):
    """The game's own code raised (:class:`~tsmg.core.GameCodeError`): 424, what the request depended on failed.

    Not a 5xx, which clients retry: the same request fails the same way until the game is fixed.
    """

    status = 424


@dataclass(frozen=True)
class ServeSettings:
    """How ``tsmg serve`` runs its games.

    Attributes:
        opponent: Default policy of the seats a one-seat session does not play (one of the
            scripted policies or of ``opponent_models``).
        opponent_models: Model specs (canonical) a one-seat session may also name; the server
            loads each once at start and its sessions share it.
        option_rules: Which game options a client may set at reset, and how large.
        max_answer_chars: Longest answer accepted (longer ones are refused with 413).
        max_sessions: Most sessions open at once, per game.
        idle_timeout_s: Sessions idle this long are closed (None: never).
        max_request_bytes: Largest HTTP request body accepted.
        token: The token clients must present (``Authorization: Bearer TOKEN``); None: none.
    """

    opponent: str = "random"
    opponent_models: tuple[str, ...] = ()
    option_rules: OptionRules = field(default_factory=OptionRules)
    max_answer_chars: int = 262_144
    max_sessions: int = 256
    idle_timeout_s: float | None = 300.0
    max_request_bytes: int = 4 * 1024 * 1024
    token: str | None = field(default=None, repr=False)


class SharedPolicy:
    """A policy that sessions share (a loaded model): one decision batch at a time, whichever session asks."""

    def __init__(self, policy: Policy) -> None:
        """Wrap ``policy``, already loaded."""
        self.policy = policy
        self.name = policy.name
        self._lock = threading.Lock()

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """The wrapped policy's decisions, one caller at a time."""
        with self._lock:
            return self.policy.act(requests)


def load_opponent_models(settings: ServeSettings) -> dict[str, Policy]:
    """Load each of ``settings.opponent_models`` once (the server does this at start, before it listens).

    Raises:
        backends.BackendError: A model cannot be loaded.
    """
    return {spec: SharedPolicy(policy_from_spec(spec, seed=0)) for spec in settings.opponent_models}


_UNSET = object()


def _config_values(game: Game) -> dict[str, Any]:
    """The options a game was made with, as its config holds them (what a client's options are bounded by)."""
    config = getattr(game, "config", None)
    dump = getattr(config, "model_dump", None)
    return dict(dump()) if callable(dump) else {}


def check_reset_fields(fields: Mapping[str, Any]) -> None:
    """Refuse reset fields nobody defined (a typo must not be silently ignored)."""
    unknown = sorted(str(name)[:40] for name in fields if name not in RESET_FIELDS)
    if unknown:
        raise RequestError(f"unknown reset field(s) {unknown}; reset takes {list(RESET_FIELDS)}")


class GameEnvironment(Environment[GameAction, GameObservation, GameState]):
    """One session's game behind OpenEnv's server."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        game_id: str,
        options: Mapping[str, Any],
        settings: ServeSettings,
        models: Mapping[str, Policy] | None = None,
        opponents: Sequence[str] | None = None,
    ) -> None:
        """Make the game with the server's options (each session has its own instance).

        Args:
            game_id: The registered game.
            options: The options the server makes it with.
            settings: The server's settings.
            models: The opponent models the server loaded at start, by spec (shared by sessions).
            opponents: The opponents offered (the served game's ``/info``); None: found here.
        """
        super().__init__()
        self._game_id = game_id
        self._server_options = dict(options)
        self._options = dict(options)
        self._settings = settings
        self._models = dict(models or {})
        self._game: Game = make(game_id, **options)
        self._served_values = _config_values(self._game)
        if opponents is None:
            opponents = offered_opponents(settings.opponent_models, scripted_opponents(make(game_id, **options)))
        self._offered = list(opponents)
        self._seats: tuple[AgentID, ...] = self._game.agents
        self._opponent_spec: str | None = None
        self._opponent: Policy | None = None
        self._policies: dict[str, Policy] = dict(self._models)  # the loaded models, then scripted ones as named
        self._seed: int | None = None
        self._episode_id: str | None = None
        self._started = False
        self._closed = False
        self._round = 0
        self._steps = 0
        self._returns: dict[AgentID, float] = {}
        self._state_keys = False
        self._lock = asyncio.Lock()  # one request at a time per session, whichever transport it came by
        #: Called once when the session closes (the app uses it to tell "expired" from "unknown").
        self.on_close: Callable[[], None] | None = None

    # ------------------------------------------------------------------ OpenEnv interface
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> GameObservation:
        """Start an episode.

        Args:
            seed: Passed to the game's ``reset`` (None continues its generator, as in-process).
            episode_id: Echoed in the state.
            **kwargs: ``agent`` (the one seat to play; default every seat), ``opponent``
                (policy of the other seats: one the server offers), ``options``
                (per-episode game options), ``game_options`` (options to make the game with,
                instead of the server's) and ``state_keys`` (send the game's state keys, which
                GiGPO-style credit needs; off by default because they cost a render per seat).

        Raises:
            RequestError: A field is unknown or of the wrong type, or names no seat.
            NotOfferedError: The opponent, or a game option, is not offered to clients.
            GameFailed: The game's own code raised (logged as one line; the session has no episode).
        """
        self._require_open()
        check_reset_fields(kwargs)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise RequestError(f"seed must be a non-negative integer or null, got {seed!r:.40}")
        if episode_id is not None and not isinstance(episode_id, str):
            raise RequestError("episode_id must be a string")
        # The operator's default was checked at start; what a client names is checked against what plays this game.
        opponent = self._settings.opponent
        if kwargs.get("opponent") is not None:
            try:  # before anything is made: a refused opponent or option costs nothing
                opponent = check_opponent(kwargs["opponent"], self._offered)
            except NotOffered as error:
                raise NotOfferedError(str(error)) from None
        options = kwargs.get("options")
        if options is not None and not isinstance(options, dict):
            raise RequestError("options must be an object of per-episode game options")
        self._check_client_options("options", options or {}, {})
        with self._game_code("reset"):
            self._remake(kwargs.get("game_options"))
            game = self._game
            agent = kwargs.get("agent")
            if agent is None:
                self._seats = game.agents
            elif agent in game.agents:
                self._seats = (agent,)
            else:
                raise RequestError(f"{self._game_id} has no seat {agent!r:.40}; seats: {', '.join(game.agents)}")
            self._choose_opponent(opponent)
            self._state_keys = bool(kwargs.get("state_keys", False))
            try:
                observations, _ = game.reset(seed=seed, options=options)
            except (GameError, ValueError, TypeError) as error:
                raise RequestError(f"the game refused the reset: {error}") from None
            self._seed, self._episode_id, self._started = seed, episode_id, True
            self._round = self._steps = 0
            self._returns = dict.fromkeys(game.agents, 0.0)
            rewards = dict.fromkeys(game.agents, 0.0)
            return self._observation(rewards, {}, self._play_others(rewards))

    def step(self, action: GameAction, timeout_s: float | None = None, **kwargs: Any) -> GameObservation:
        """Play the session's answers (then the other seats' policy), or answer a query.

        Raises:
            SessionExpired: The session was closed.
            EpisodeConflict: No episode, the episode is over, or a seat answered out of turn.
            AnswerTooLong: An answer is longer than ``max_answer_chars``.
            RequestError: The action names no seat of the game.
            GameFailed: The game's own code raised (logged as one line; the episode is over).
        """
        self._require_open()
        call = {"parse": "parse", "oracle": "oracle_action"}.get(action.query or "", "step")
        with self._game_code(call):
            if action.query is not None:
                return self._answer_query(action)
            game = self._game
            if not self._started:
                raise EpisodeConflict("no episode in progress: reset first")
            if game.done:
                raise EpisodeConflict("the episode is over: reset to start a new one")
            answers = self._answers_of(action)
            # In a simultaneous round the other seats answer with the session's seat, not after it.
            others = self._opponent_answers([agent for agent in game.active_agents if agent not in self._seats])
            try:
                result = game.step({**others, **answers})
            except GameError as error:
                raise EpisodeConflict(str(error)) from None
            self._round += 1
            self._steps += 1
            rewards = dict(result.rewards)
            for agent, reward in result.rewards.items():
                self._returns[agent] += reward
            infos = {agent: result.infos[agent] for agent in answers}
            if self._opponent is not None:
                result = self._play_others(rewards) or result
            return self._observation(rewards, infos, result, acted=tuple(answers))

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GameObservation:
        """Reset on a worker thread: making a start (e.g. generating a Sokoban level) may take a while."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, partial(self.reset, seed=seed, episode_id=episode_id, **kwargs))

    async def step_async(self, action: GameAction, timeout_s: float | None = None, **kwargs: Any) -> GameObservation:
        """Step on the event loop itself: a game step takes microseconds, a hop to a thread costs more.

        Steps that run a server-side policy (other seats, the oracle) may search, so they go to
        a worker thread instead.
        """
        async with self._lock:
            if action.query == "oracle" or self._opponent_spec == "oracle" or self._opponent_spec in self._models:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(None, partial(self.step, action))
            return self.step(action)

    @property
    def state(self) -> GameState:
        """The session's episode so far."""
        game = self._game
        return GameState(
            episode_id=self._episode_id,
            step_count=self._steps,
            game_id=self._game_id,
            seed=self._seed,
            agents=list(game.agents),
            seats=list(self._seats),
            opponent=self._opponent_spec,
            round=self._round,
            done=self._started and game.done,
            returns=dict(self._returns),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """Name and description of the served game."""
        description = spec(self._game_id).description or f"the tsmg game {self._game_id}"
        return EnvironmentMetadata(name=self._game_id, description=description, version="tsmg")

    def close(self) -> None:
        """Close the session: later requests are refused as expired."""
        if self._closed:
            return
        self._closed = True
        self._game.close()
        if self.on_close is not None:
            self.on_close()

    # ------------------------------------------------------------------------- helpers
    @contextmanager
    def _game_code(self, call: str) -> Iterator[None]:
        """Turn a failure of the game's own code in a request into :class:`GameFailed`, logged as one line.

        The episode ends with it (in-process, a game's failure stops the run). A game without the
        referee may raise anything: it is named by the request's ``call``, as the rollout engine
        names such a game's failure. The sentence is printable, and cut in the middle to about
        600 characters (the exception's message is the game's, and may quote a whole answer).
        """
        try:
            yield
        except RequestError:
            raise
        except Exception as error:
            self._started = False
            if not isinstance(error, GameCodeError):
                error = GameCodeError(self._game_id, call, error, self._seed)
            sentence = "".join(char if char.isprintable() else "?" for char in str(error))
            sentence = sentence if len(sentence) <= 600 else f"{sentence[:500]} [...] {sentence[-90:]}"
            debug = bool(os.environ.get("TSMG_DEBUG"))
            logger.error("%s%s", sentence, "" if debug else " (TSMG_DEBUG=1 logs its traceback)", exc_info=debug)
            advice = "this episode is over (reset starts a new one), and the server's operator has the error in its log"
            raise GameFailed(f"{sentence}; {advice}") from None

    def _require_open(self) -> None:
        if self._closed:
            raise SessionExpired(f"{SESSION_CLOSED} (idle too long, or closed by its client); open a new one")

    def _remake(self, game_options: Any) -> None:
        if game_options is None:
            game_options = self._server_options
        if not isinstance(game_options, dict):
            raise RequestError("game_options must be an object of game options")
        if game_options == self._options:
            return
        self._check_client_options("game_options", game_options, self._served_values)
        try:
            self._game = make(self._game_id, **{**self._server_options, **game_options})
        except GameOptionsError as error:
            raise RequestError(str(error)) from None
        self._options = dict(game_options)

    def _check_client_options(self, where: str, options: Mapping[str, Any], served: Mapping[str, Any]) -> None:
        # Options the server itself sets are not the client's asking (RemoteGame resends them).
        asked = {name: value for name, value in options.items() if self._server_options.get(name, _UNSET) != value}
        try:
            self._settings.option_rules.check(where, asked, served)
            check_vs_bot(where, asked, self._settings.opponent_models)
        except NotOffered as error:
            raise NotOfferedError(str(error)) from None

    def _choose_opponent(self, opponent: str) -> None:
        """Play the other seats with ``opponent`` (already checked: scripted, or a model loaded at start)."""
        if len(self._seats) == self._game.num_agents:
            self._opponent_spec, self._opponent = None, None
            return
        if opponent not in self._policies:
            self._policies[opponent] = policy_from_spec(opponent, seed=0, scripted_only=True)
        self._opponent_spec, self._opponent = opponent, self._policies[opponent]

    def _answers_of(self, action: GameAction) -> dict[AgentID, str | Invalid]:
        game = self._game
        answers: dict[AgentID, str | Invalid] = {}
        if action.text is not None:
            agent = action.agent
            if agent is None:
                to_move = [seat for seat in game.active_agents if seat in self._seats]
                if len(to_move) != 1:
                    raise EpisodeConflict(
                        f"seats {to_move} must answer: send `answers` with one answer per seat"
                        if to_move
                        else "none of this session's seats is to move"
                    )
                agent = to_move[0]
            answers[agent] = action.text
        answers.update(action.answers or {})
        for agent, reason in (action.invalid or {}).items():
            answers[agent] = Invalid(reason)
        if not answers:
            raise RequestError("the action holds no answer: send `text` (or `answers`, or `invalid`)")
        for agent, answer in answers.items():
            if agent not in self._seats:
                seats = ", ".join(self._seats)
                raise RequestError(f"{agent!r:.40} is not a seat of this session (it plays: {seats})")
            self._check_length(agent, answer.reason if isinstance(answer, Invalid) else answer)
        return answers

    def _check_length(self, agent: AgentID, text: str) -> None:
        limit = self._settings.max_answer_chars
        if len(text) > limit:
            raise AnswerTooLong(
                f"the answer of {agent} is {len(text)} characters; this server accepts at most {limit} "
                "(tsmg serve --max-answer-chars)"
            )

    def _play_others(self, rewards: dict[AgentID, float]) -> StepResult | None:
        """Let the opponent policy move until one of the session's seats is to move or the game ends.

        Returns the last step the policy played (None if it played none).
        """
        game = self._game
        last = None
        if self._opponent is None:
            return last
        while not game.done and not any(agent in self._seats for agent in game.active_agents):
            last = game.step(self._opponent_answers(game.active_agents))
            self._round += 1
            for agent, reward in last.rewards.items():
                rewards[agent] += reward
                self._returns[agent] += reward
        return last

    def _opponent_answers(self, agents: Sequence[AgentID]) -> dict[AgentID, str | Invalid]:
        """The opponent policy's answers for ``agents`` (seats the session does not play)."""
        game, opponent = self._game, self._opponent
        if opponent is None or not agents:
            return {}
        requests = [
            DecisionRequest(game, agent, game.observe(agent), game.legal_actions(agent), (), self._seed, 0, self._round)
            for agent in agents
        ]
        try:
            decisions = opponent.act(requests)
        except ValueError as error:  # e.g. the oracle policy on a game without an oracle
            raise RequestError(f"the {self._opponent_spec} policy cannot play the other seats: {error}") from None
        return {
            request.agent: Invalid(decision.error) if decision.error else decision.action
            for request, decision in zip(requests, decisions, strict=True)
        }

    def _answer_query(self, action: GameAction) -> GameObservation:
        game = self._game
        agent = action.agent or (self._seats[0] if len(self._seats) == 1 else None)
        if agent not in game.agents:
            raise RequestError(f"a query names a seat of the game in `agent`; seats: {', '.join(game.agents)}")
        if action.query == "parse":
            if action.text is None:
                raise RequestError("a parse query needs `text`")
            self._check_length(agent, action.text)
            parsed = game.parse(agent, action.text)
            if isinstance(parsed, Invalid):
                info: dict[str, Any] = {"valid": False, "reason": parsed.reason, "action": None}
            else:
                text_of = getattr(game, "action_text", None)
                info = {"valid": True, "reason": None, "action": text_of(agent, parsed) if text_of else action.text}
        else:
            if not self._started:
                raise EpisodeConflict("no episode in progress: reset first")
            info = {"oracle": game.oracle_action(agent)}
        # A query leaves the episode as it was; its answer is all the client reads.
        return GameObservation(agent=agent, info=info, done=self._started and game.done, round=self._round)

    def _observation(
        self,
        rewards: Mapping[AgentID, float],
        infos: Mapping[AgentID, dict[str, Any]],
        last: StepResult | None,
        acted: Sequence[AgentID] | None = None,
    ) -> GameObservation:
        """The session's view after a reset or step.

        Args:
            rewards: Each seat's reward since its previous answer.
            infos: The game's info of each answer this step.
            last: The step that led here (None after a reset).
            acted: The session's seats that answered this step (None after a reset).

        The top level describes one seat: after a reset the seat to move; after a step the seat
        that answered; after a round in which several answered at once none (``agent`` and
        ``reward`` null: ``seats`` has each one's).
        """
        game, seats = self._game, self._seats
        done = game.done
        active = [] if done else [agent for agent in game.active_agents if agent in seats]
        if acted is None:
            focus: AgentID | None = active[0] if active else seats[0]
        else:
            focus = acted[0] if len(acted) == 1 else None
        # The step's own texts save rendering every observation a second time.
        text_of = last.observations.__getitem__ if last is not None else game.observe
        # Seats to move get their state key (the record keys the state an answer was given in), and every
        # seat gets one once the episode is over (the state its last step led to: PGPO's and GRAFT's ends).
        keys = self._state_keys

        def key_of(agent: AgentID) -> str | None:
            if not keys or not (done or agent in active):
                return None
            return dumps_key(game.state_key(agent)) if not done else final_state_key(game, agent)

        # A finished episode of a game that keeps its own influence graph carries it, so a remote rollout's
        # record gets influence["exact"] as a local one does (RemoteGame.influence_graph).
        graph = exact_influence(game) if done else None
        influence = None if graph is None else graph.model_dump(mode="json")
        views = None
        if len(seats) > 1:
            views = {
                agent: SeatView(
                    text=text_of(agent),
                    reward=rewards.get(agent, 0.0),
                    terminated=last is not None and last.terminated[agent],
                    truncated=last is not None and last.truncated[agent],
                    info=infos.get(agent, {}),
                    legal_actions=game.legal_actions(agent) if agent in active else [],
                    state_key=key_of(agent),
                    success=game.is_success(agent) if done else None,
                )
                for agent in seats
            }
        if focus is None:  # several seats answered at once: no one seat to describe
            return GameObservation(
                active_agents=active,
                reward=None,
                done=done,
                truncated=last is not None and any(last.truncated[agent] for agent in seats),
                round=self._round,
                returns=dict(self._returns) if done else None,
                seats=views,
                influence=influence,
            )
        return GameObservation(
            text=text_of(focus),
            agent=focus,
            active_agents=active,
            legal_actions=game.legal_actions(focus) if focus in active else [],
            reward=rewards.get(focus, 0.0),
            done=done,
            truncated=last is not None and last.truncated[focus],
            state_key=key_of(focus),
            info=infos.get(focus, {}),
            round=self._round,
            success=game.is_success(focus) if done else None,
            returns=dict(self._returns) if done else None,
            seats=views,
            influence=influence,
        )
