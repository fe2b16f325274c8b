"""The Text-Mediated Stochastic Game (TSMG) interface and the referee every game shares.

(Past 600 lines, a third of them docstrings: the interface, its referee and RulesGame read as one,
as Gymnasium's core.py.)

A TSMG is a stochastic game (agents, states, chance, transitions, per-agent rewards) in which
every agent observes text and acts in text. Three layers live here:

* :class:`Game` is the public, environment-style interface every game offers: ``reset``,
  ``step`` with raw text per agent, ``observe``, ``legal_actions``, ``parse``.
* :class:`RefereedGame` is the referee: the one implementation of ``step`` that reads every
  answer (bad text is an invalid answer, never an exception; an exception raised by the game's
  own code is a :class:`GameCodeError`, a bug of the game), applies the invalid-answer rule
  (``on_invalid``, ``invalid_penalty``, forfeits), counts rounds against the step limit, keeps
  the returns and fills ``info``. Games feed it moves through a few hooks; :class:`RulesGame`
  and the Gymnasium and PettingZoo adapters (:mod:`tsmg.adapters`) are its subclasses.
* :class:`RulesGame` builds a game from *pure rules* over an explicit state (``initial_state``,
  ``transition``, ``is_terminal``, ...) plus a *text layer* (``render``, ``parse_action``,
  ``action_text``). Catalog games subclass it.

Every random draw comes from the game's own :class:`numpy.random.Generator`, created by
``reset(seed=...)``, so the same seed and the same actions always give the same episode.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

AgentID = str
StateT = TypeVar("StateT")
ActionT = TypeVar("ActionT")
MoveT = TypeVar("MoveT")
ConfigT = TypeVar("ConfigT", bound="GameConfig")

InvalidMode = Literal["default_action", "penalize", "terminate"]
#: How :meth:`Game.fork` copies an episode in progress (see :attr:`Game.fork_mode`).
ForkMode = Literal["snapshot", "replay", "none"]
#: What an episode's result is, seat by seat (see :attr:`Game.outcome`).
OutcomeKind = Literal["goal", "win_draw_loss", "win_draw_loss_by_success"]


class GameError(RuntimeError):
    """Raised when a game is used against its contract (e.g. stepping a finished episode)."""


class GameCodeError(RuntimeError):
    """The game's own code raised: a bug of the game, never an invalid answer charged to a player.

    The referee (:class:`RefereedGame`) raises it when a call into game code (``parse_action``,
    ``transition``, ``render``, ``legal_moves``...) raises, with that exception as its cause; the
    rollout engine then stops the run instead of playing on (``tsmg eval`` and ``tsmg train`` write
    the failure to the run folder's ``game_errors.jsonl`` and exit non-zero). Bad *text* is never
    one: parsers return :class:`Invalid` for it.

    Attributes:
        game_id: The game whose code raised.
        call: The game's method that raised, by the name its author wrote (e.g. ``parse_action``).
        error: The exception it raised (also ``__cause__``).
        seed: The seed of the episode in progress (None: unseeded or unknown).
        episode_id: The episode in progress, where the rollout engine knows it (else None).
        written_to: The file the failure and its traceback were written to (a run folder's
            ``game_errors.jsonl``, :func:`tsmg.rollout.record_game_error`), or None.
        note: What the run did about it and what to do next (e.g. the checkpoint a training run
            saved before stopping), or None.
        traceback_text: The game exception's traceback, formatted where it was raised, when that
            was another process (an asynchronous rollout worker; the traceback object itself does
            not cross processes), or None: then it is read from ``error``.
    """

    def __init__(self, game_id: str, call: str, error: BaseException, seed: int | None = None) -> None:
        """Record which game, which call and what it raised."""
        super().__init__(game_id, call, error)
        self.game_id = game_id
        self.call = call
        self.error = error
        self.seed = seed
        self.episode_id: str | None = None
        self.written_to: str | None = None
        self.note: str | None = None
        self.traceback_text: str | None = None

    def __str__(self) -> str:
        """One sentence: the game, the call, the exception, and whose bug it is."""
        if self.episode_id:
            where = f" (episode {self.episode_id})"
        else:
            where = "" if self.seed is None else f" (seed {self.seed})"
        raised = " ".join(f"{type(self.error).__name__}: {self.error}".split()).removesuffix(":")
        bug = "a bug in the game, not an invalid answer"
        return f"the game {self.game_id} raised in {self.call}{where}: {raised}; {bug}"


@dataclass(frozen=True, slots=True)
class Invalid:
    """An answer that does not name a legal action, with the reason why.

    Parsers return it for any text that names no legal move, so that whatever a model writes
    becomes an invalid answer with an explanation. A parser that raises instead has a bug: the
    referee raises :class:`GameCodeError` and the run stops, for an answer never causes an
    exception. A policy may also pass an ``Invalid``
    to :meth:`Game.step` when it already knows its answer is unusable (e.g. no ``<action>`` tag).
    """

    reason: str

    def __bool__(self) -> bool:
        """An invalid answer is falsy, so ``if action:`` reads naturally."""
        return False


@dataclass(slots=True)
class StepResult:
    """What :meth:`Game.step` returns; every dict is keyed by every agent of the game."""

    observations: dict[AgentID, str]
    rewards: dict[AgentID, float]
    terminated: dict[AgentID, bool]
    truncated: dict[AgentID, bool]
    infos: dict[AgentID, dict[str, Any]]

    def __iter__(self):  # type: ignore[no-untyped-def]
        """Unpack like Gymnasium/PettingZoo: ``obs, rew, term, trunc, info = game.step(...)``."""
        return iter((self.observations, self.rewards, self.terminated, self.truncated, self.infos))

    @property
    def done(self) -> bool:
        """Whether the episode is over for every agent."""
        return all(t or u for t, u in zip(self.terminated.values(), self.truncated.values(), strict=True))


class GameConfig(BaseModel):
    """Options every game accepts. Games extend it with their own fields.

    Unknown fields are rejected, so a typo in an option fails with the field's name instead of
    being silently ignored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int | None = Field(
        default=None, ge=1, description="Truncate the episode after this many rounds (None: no limit)."
    )
    on_invalid: InvalidMode = Field(
        default="penalize",
        description=(
            "What an invalid answer does: 'penalize' uses up the turn without effect (in a turn-based "
            "game the same seat answers again), 'default_action' plays the game's default action, "
            "'terminate' makes the seat forfeit at once. All three subtract invalid_penalty from the "
            "answering agent's reward."
        ),
    )
    invalid_penalty: float = Field(default=0.0, ge=0.0, description="Reward subtracted per invalid answer.")
    forfeit_after: int | None = Field(
        default=3,
        ge=1,
        description=(
            "A seat that answers invalidly this many times in a row forfeits: the episode ends "
            "(terminated) and the seat scores the game's forfeit reward and no success. None: never."
        ),
    )

    @classmethod
    def from_options(cls: type[ConfigT], config: GameConfig | None, options: Mapping[str, Any]) -> ConfigT:
        """The configuration a game is built with: ``config`` (or the defaults) with ``options`` laid over it.

        The one option-merging rule of every game, own and adapted: the whole is validated again, so an
        unknown name or a bad value fails as it would in ``cls(**options)``.

        Raises:
            pydantic.ValidationError: An option is unknown or has a bad value (the registry turns it into a
                :class:`~tsmg.registry.GameOptionsError` that names the valid options).
            TypeError: ``config`` is not a ``cls``.

        Example:
            >>> GameConfig.from_options(GameConfig(max_steps=5), {"on_invalid": "terminate"}).max_steps
            5
        """
        if config is None:
            return cls(**options)
        if options:
            config = cls.model_validate({**config.model_dump(), **options})
        if not isinstance(config, cls):
            raise TypeError(f"expected a {cls.__name__}, got {type(config).__name__}")
        return config


def check_answers(active: Sequence[AgentID], actions: Mapping[AgentID, object]) -> None:
    """Raise :class:`GameError` unless exactly the active agents answered (shared by every Game)."""
    if len(actions) == len(active) and all(agent in actions for agent in active):
        return
    missing = [agent for agent in active if agent not in actions]
    extra = [agent for agent in actions if agent not in active]
    problems = []
    if missing:
        problems.append(f"no answer from active agent(s) {missing}")
    if extra:
        problems.append(f"answer(s) from {extra}, whose turn it is not")
    raise GameError("; ".join(problems) + f" (active agents: {list(active)})")


class Game(ABC):
    """A text-mediated stochastic game: agents observe text and act in text.

    Single-agent games are the case with one agent. Turn-based games list, in
    :attr:`active_agents`, only the agent(s) whose turn it is; simultaneous games list every
    agent still playing.

    A tool-using game's own members (its tools, its episodes' influence graphs) are not part of
    this interface: they form :class:`tsmg.tools.ToolGame`, which such a game adds.
    """

    #: Identifier the game was made under (set by :func:`tsmg.make`).
    game_id: str = "unregistered"
    #: Whether at most one agent acts per step (a class attribute; the PettingZoo adapter sets it per env).
    turn_based: bool = True
    #: Builds a fresh game like this one (set by :func:`tsmg.make`; a replay fork needs it).
    factory: Callable[[], Game] | None = None
    #: What an episode's result is, seat by seat (:func:`tsmg.summary.seat_outcomes` decides it):
    #: ``"goal"``: the game's success or failure (:meth:`is_success`); ``"win_draw_loss"``: each
    #: seat wins, draws or loses, by comparing returns (a seat wins with a return above every other
    #: seat's; a single-agent game against a built-in opponent, which is zero-sum, by the sign of
    #: its return); ``"win_draw_loss_by_success"``: the seats the game calls successful win (draw
    #: when several are), the others lose, and nobody successful is a draw. Under either
    #: win/draw/loss rule a seat that forfeits (by invalid answers) loses and is counted as a
    #: forfeit. None: ``"win_draw_loss"`` for a game of several agents, ``"goal"`` for one.
    outcome: ClassVar[OutcomeKind | None] = None

    @property
    @abstractmethod
    def agents(self) -> tuple[AgentID, ...]:
        """Every agent of the game, in a fixed order."""

    @property
    @abstractmethod
    def active_agents(self) -> tuple[AgentID, ...]:
        """The agents that must answer in the next :meth:`step` (empty once the episode is over)."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """Whether the current episode has ended (terminated or truncated)."""

    @abstractmethod
    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start a new episode.

        Args:
            seed: Seeds the game's random generator. ``None`` continues the previous generator
                (or draws fresh entropy on the first reset), as in Gymnasium.
            options: Game-specific per-episode options.

        Returns:
            The observation text of every agent and an info dict per agent.
        """

    @abstractmethod
    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Apply the answers of the active agents.

        Args:
            actions: Raw answer text (or an :class:`Invalid`) for every active agent. Answers of
                agents that are not active are an error.

        Returns:
            A :class:`StepResult` keyed by every agent. ``infos[agent]`` holds ``action`` (the
            canonical text of what was played, or None), ``valid`` and ``reason`` for every
            agent that answered.

        Raises:
            GameError: The episode is over, an active agent did not answer, or an agent answered
                out of turn.
            GameCodeError: The game's own code raised (a bug of the game; no answer causes one).
        """

    @abstractmethod
    def observe(self, agent: AgentID) -> str:
        """The current observation text of ``agent``."""

    @abstractmethod
    def parse(self, agent: AgentID, text: str) -> Any:
        """Parse answer text into a game action, or return :class:`Invalid` with a reason.

        Bad text of any kind is :class:`Invalid`, never an exception: an exception means a bug of
        the game's parser (the referee raises it as :class:`GameCodeError`).
        """

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Canonical texts of the actions ``agent`` may play now, or None if not enumerable."""
        return None

    @property
    def observation_lists_moves(self) -> bool:
        """Whether the observation lists the legal moves itself, so the LAP's format line does not list them again.

        One place owns the list a model reads: a game whose text lists its moves unambiguously (one
        per line, say) sets this, and the LAP's format instructions then only say how to answer.
        The default is False: the format line lists them.
        """
        return False

    def answer_aliases(self, agent: AgentID) -> Mapping[str, str]:
        """Other names for moves that the game announces in ``agent``'s prompt: alias → canonical text.

        Under the answer rule (:mod:`tsmg.answers`) an answer is a move only when it names the
        move or one of these aliases; the checker verifies that each one appears in the
        observation. The default is none.
        """
        return {}

    def answer_spellings(self, agent: AgentID) -> Mapping[str, str]:
        """Other spellings of ``agent``'s legal moves in the game's own notation: spelling → canonical text.

        The forms in which the field writes the game's moves, read without being announced move by
        move: chess's ``Bxf7`` for ``Bxf7+`` or UCI ``e2e4`` for ``e4``, go's ``a1`` for ``B a1``
        (:mod:`tsmg.adapters.openspiel_answers`). Each names exactly one legal move now; the checker
        holds the game to reading an answer as a move only when it names or spells that move. The
        default is none.
        """
        return {}

    def state_key(self, agent: AgentID) -> Hashable:
        """A hashable key identifying what ``agent`` observes now (groups identical states).

        The default is the observation text itself, which is what GiGPO-style anchor grouping
        needs; games may return a cheaper structured key.
        """
        return self.observe(agent)

    def is_success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded in the finished episode (None where it is not defined)."""
        return None

    def oracle_action(self, agent: AgentID) -> str | None:
        """An optimal (or strong heuristic) action text for ``agent``, or None without oracle."""
        return None

    @property
    def has_random_start(self) -> bool:
        """Whether different seeds are expected to give different *first observations*.

        The checker verifies it. A game whose hidden start depends on the seed but whose first
        observation does not (Wordle's secret word, Minesweeper's mines) returns False.
        """
        return False

    @property
    def num_agents(self) -> int:
        """Number of agents."""
        return len(self.agents)

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately empty
        """Release resources held by the game (none by default)."""

    @property
    def fork_mode(self) -> ForkMode:
        """How :meth:`fork` copies the episode in progress.

        ``snapshot``: a copy of the state, the referee's tally and the random generator (cheap:
        rules games, whose states are immutable values); ``replay``: a fresh game (:attr:`factory`)
        reset with the episode's seed replays every answer so far (adapters around envs whose
        state cannot be copied); ``none``: the game cannot fork (tree rollouts refuse it).
        """
        return "none"

    def fork(self) -> Game:
        """An independent copy of the episode in progress, chance included.

        The copy continues exactly as this game would under the same answers (its random
        generator is in the same state), and stepping either never changes the other. Tree
        rollouts branch continuations from shared prefixes with it.

        Raises:
            GameError: The game cannot fork (:attr:`fork_mode` is ``none``; the message says why), or
                no episode is in progress.
        """
        raise GameError(
            f"{type(self).__name__} cannot fork an episode in progress: it copies no snapshot of its state and "
            "cannot replay one (implement fork() and fork_mode, or build it with tsmg.make from a seeded reset)"
        )


@dataclass(slots=True)
class _Tally:
    """The referee's record of the episode in progress (kept apart from the world's state)."""

    returns: dict[AgentID, float]
    invalid_streak: dict[AgentID, int]
    terminated: dict[AgentID, bool]
    truncated: dict[AgentID, bool]
    rounds: int = 0
    over: bool = False
    forfeited: tuple[AgentID, ...] = ()


class _GameCode:
    """A block of the referee's calls into a game's own hooks (``with _GameCode(game, "_read") as call:``).

    An exception the game's code raises leaves the block as a :class:`GameCodeError` naming the hook in
    progress, ``call.hook``, which a block calling several hooks sets before each; a GameCodeError
    already raised (a nested game's) passes as it is. The one home of that rule for every referee call.
    """

    __slots__ = ("game", "hook")

    def __init__(self, game: RefereedGame[Any], hook: str) -> None:
        self.game, self.hook = game, hook

    def __enter__(self) -> _GameCode:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        if isinstance(error, Exception) and not isinstance(error, GameCodeError):
            raise self.game._game_failure(self.hook, error) from error


class RefereedGame(Game, Generic[MoveT]):
    """A :class:`Game` whose answers go through the shared referee.

    The referee implements ``reset``, ``step``, ``parse`` and the episode bookkeeping once for
    every game: it reads each active agent's answer into a move (or :class:`Invalid`), applies the
    invalid-answer rule, asks the world to play the round, then counts the round against
    ``max_steps`` and adds the rewards to the returns. The rule for an invalid answer:

    * ``on_invalid="penalize"``: the turn is used up without effect (the world plays the round
      without that agent's move; in a turn-based game that means the same seat answers again);
    * ``"default_action"``: the world plays the game's default move for that agent;
    * ``"terminate"``: the agent forfeits at once;

    each subtracts ``invalid_penalty``. Whatever the mode, an agent whose answers are invalid
    ``forfeit_after`` times in a row forfeits: the episode terminates for everyone, the
    forfeiting agent gets the game's forfeit reward (:meth:`_forfeit_rewards`; by default -1, a
    loss) and no success. So a seat that cannot answer never holds the others up for long, and
    a policy that always answers invalidly cannot score above one that plays.

    An exception raised by the game's own code in any of these calls (a parser, the rules, the
    rendering) is never an invalid answer: the referee raises :class:`GameCodeError` naming the
    game and the call (by the name in :attr:`CALL_NAMES`), the original exception as its cause.
    The exception: ``reset`` with per-episode ``options`` lets the game's own error through, for
    a game may refuse options it cannot play (a ``ValueError`` saying why).

    Subclasses own the world (pure rules, or a wrapped env) and implement the hooks
    ``_start``, ``_to_move``, ``_read``, ``_advance``, ``_world_endings``, ``_legal_moves`` and
    ``_move_text``; ``_fallback_move``, ``_forfeit_rewards``, ``_success``, ``_oracle_move`` and
    ``_refresh`` have defaults.
    """

    Config: ClassVar[type[GameConfig]] = GameConfig
    config: GameConfig
    #: What a forfeiting agent scores by default: a loss, as PettingZoo scores an illegal move.
    FORFEIT_REWARD: ClassVar[float] = -1.0
    _tally: _Tally | None = None
    #: The seed and options of the episode's reset and every round's answers (what a replay fork plays again).
    _replay_start: tuple[int | None, dict[str, Any]] = (None, {})
    _replay_log: list[dict[AgentID, str | Invalid]]
    #: The names a game's author knows the referee's hooks by (RulesGame: its rules and text layer),
    #: so that a :class:`GameCodeError` names the method that raised; a hook not listed is named as it is.
    CALL_NAMES: ClassVar[Mapping[str, str]] = {}

    # ------------------------------------------------------------------ the world's hooks
    @abstractmethod
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        """Start the world's episode; the info dict of every agent."""

    @abstractmethod
    def _to_move(self) -> tuple[AgentID, ...]:
        """The agents the world waits for (asked only while the episode runs)."""

    @abstractmethod
    def _read(self, agent: AgentID, text: str) -> MoveT | Invalid:
        """Parse ``text`` into a move legal now, or :class:`Invalid` (an exception is a bug: :class:`GameCodeError`)."""

    @abstractmethod
    def _advance(self, moves: dict[AgentID, MoveT], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        """Play one round with the valid moves (possibly none); the world's rewards.

        May add world details to ``infos`` (the env's own info, say).
        """

    @abstractmethod
    def _world_endings(self) -> tuple[bool | Mapping[AgentID, bool], bool | Mapping[AgentID, bool]]:
        """Whether the world itself has terminated and truncated the episode (step limits aside).

        Each is one bool for every agent, or a mapping from agent to bool (absent agents: False).
        """

    @abstractmethod
    def _legal_moves(self, agent: AgentID) -> Sequence[MoveT] | None:
        """The moves ``agent`` may play now (None if not enumerable)."""

    @abstractmethod
    def _move_text(self, agent: AgentID, move: MoveT) -> str:
        """The canonical text of ``move``; :meth:`_read` maps it back to the move."""

    def _fallback_move(self, agent: AgentID) -> MoveT:
        """The move played for an invalid answer under ``on_invalid="default_action"``: the first legal one."""
        moves = self._legal_moves(agent)
        if not moves:
            raise GameError(
                f"{type(self).__name__} cannot enumerate the moves of {agent}; give it a default move "
                "or use on_invalid='penalize'"
            )
        return moves[0]

    def _forfeit_rewards(self, agent: AgentID) -> Mapping[AgentID, float]:
        """Rewards of the round in which ``agent`` forfeits (by default it scores :attr:`FORFEIT_REWARD`)."""
        return {agent: self.FORFEIT_REWARD}

    def _success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded, judged by the world (None where undefined)."""
        return None

    def _oracle_move(self, agent: AgentID) -> MoveT | None:
        """A strong move for ``agent`` now (None without oracle)."""
        return None

    def _refresh(self) -> None:  # noqa: B027 - optional hook, deliberately empty
        """Called after every reset and step, once the referee's bookkeeping is current (re-render caches)."""

    def _game_failure(self, hook: str, error: Exception) -> GameCodeError:
        """The :class:`GameCodeError` of ``error``, raised by the game's code in the referee's call of ``hook``."""
        return GameCodeError(self.game_id, self.CALL_NAMES.get(hook, hook), error, seed=self._replay_start[0])

    # ------------------------------------------------------------------ the referee
    @property
    def done(self) -> bool:
        """Whether the current episode has ended."""
        return self._tally is not None and self._tally.over

    @property
    def active_agents(self) -> tuple[AgentID, ...]:
        """Agents that must answer in the next step (none once the episode is over)."""
        tally = self._require_tally()
        if tally.over:
            return ()
        with _GameCode(self, "_to_move"):
            return self._to_move()

    @property
    def rounds(self) -> int:
        """Rounds played in the current episode (0 before the first reset)."""
        return 0 if self._tally is None else self._tally.rounds

    @property
    def forfeited(self) -> tuple[AgentID, ...]:
        """The agents that forfeited the current episode (by invalid answers)."""
        return () if self._tally is None else self._tally.forfeited

    def episode_returns(self) -> dict[AgentID, float]:
        """Cumulative reward of each agent in the current episode."""
        return dict(self._require_tally().returns)

    @property
    def fork_mode(self) -> ForkMode:
        """``replay`` when the game knows how to build a fresh copy of itself (:attr:`factory`), else ``none``.

        A game whose state can be copied says ``snapshot`` and copies its own parts in :meth:`_fork_parts`.
        """
        return "replay" if self.factory is not None else "none"

    def fork(self) -> Game:
        """An independent copy of the episode in progress, as :attr:`fork_mode` says.

        ``snapshot``: a shallow copy of this game with its own tally and replay log, to which
        :meth:`_fork_parts` (the game's hook) gives its own copy of whatever a step changes in place.
        ``replay``: a fresh game from :attr:`factory`, reset with this episode's seed, replaying
        every round's answers.

        Raises:
            GameError: No factory, an episode reset without a seed (its chance cannot be replayed),
                or no episode in progress.
        """
        if self.fork_mode == "snapshot":
            forked_tally = self._forked_tally()
            snapshot = copy.copy(self)
            snapshot._tally = forked_tally
            snapshot._replay_log = list(self._replay_log)
            self._fork_parts(snapshot)
            return snapshot
        self._require_tally()
        seed, options = self._replay_start
        if self.factory is None:
            return super().fork()
        if seed is None:
            raise GameError(
                f"{type(self).__name__} forks by replaying the episode from its seed, and this episode was reset "
                "without one: reset(seed=...) to make it forkable"
            )
        twin = self.factory()
        if not isinstance(twin, RefereedGame):
            raise GameError(f"the factory of {type(self).__name__} built a {type(twin).__name__}, which cannot replay")
        twin.reset(seed=seed, options=options)
        for actions in self._replay_log:
            twin.step(actions)
        return twin

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start a new episode; see :meth:`Game.reset`."""
        agents = self.agents
        self._tally = None  # the world starts without a stale record in view
        self._replay_start, self._replay_log = (seed, dict(options or {})), []
        try:
            infos = self._start(seed, options or {})
        except Exception as error:
            if options:  # the game may refuse the caller's per-episode options (a ValueError that says why)
                raise
            raise self._game_failure("_start", error) from error
        self._tally = _Tally(
            returns=dict.fromkeys(agents, 0.0),
            invalid_streak=dict.fromkeys(agents, 0),
            terminated=dict.fromkeys(agents, False),
            truncated=dict.fromkeys(agents, False),
        )
        observations = self._settle(self._tally)
        return observations, {agent: infos.get(agent, {}) for agent in agents}

    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Apply the active agents' answers; see :meth:`Game.step`."""
        tally = self._require_tally()
        if tally.over:
            raise GameError("the episode is over; call reset() before step()")
        active = self.active_agents  # the world's _to_move, a GameCodeError if it raises
        check_answers(active, actions)
        self._replay_log.append(dict(actions))
        config = self.config
        agents = self.agents
        rewards = dict.fromkeys(agents, 0.0)
        infos: dict[AgentID, dict[str, Any]] = {agent: {} for agent in agents}
        moves: dict[AgentID, MoveT] = {}
        forfeits: list[AgentID] = []
        with _GameCode(self, "_read") as call:  # call.hook: the hook in progress
            for agent in active:
                answer = actions[agent]
                move = answer if isinstance(answer, Invalid) else self.parse(agent, answer)
                if not isinstance(move, Invalid):
                    tally.invalid_streak[agent] = 0
                    moves[agent] = move
                    call.hook = "_move_text"
                    infos[agent] = {"valid": True, "reason": None, "action": self._move_text(agent, move)}
                    continue
                tally.invalid_streak[agent] += 1
                rewards[agent] -= config.invalid_penalty
                infos[agent] = {"valid": False, "reason": move.reason, "action": None}
                limit = config.forfeit_after
                if config.on_invalid == "terminate" or (limit is not None and tally.invalid_streak[agent] >= limit):
                    forfeits.append(agent)
                    infos[agent]["forfeit"] = True
                elif config.on_invalid == "default_action":
                    call.hook = "_fallback_move"
                    moves[agent] = self._fallback_move(agent)
                    call.hook = "_move_text"
                    infos[agent]["action"] = self._move_text(agent, moves[agent])
            if forfeits:
                call.hook = "_forfeit_rewards"
                tally.forfeited = tuple(forfeits)
                for agent in forfeits:
                    for other, reward in self._forfeit_rewards(agent).items():
                        rewards[other] += float(reward)
            else:
                call.hook = "_advance"
                for agent, reward in self._advance(moves, infos).items():
                    if agent in rewards:
                        rewards[agent] += float(reward)
        tally.rounds += 1
        for agent, reward in rewards.items():
            tally.returns[agent] += reward
        observations = self._settle(tally)
        return StepResult(observations, rewards, tally.terminated, tally.truncated, infos)  # fresh dicts every step

    def parse(self, agent: AgentID, text: str) -> MoveT | Invalid:
        """Parse ``text`` into a move, or :class:`Invalid` for text that names no legal move.

        Raises:
            GameCodeError: The game's parser raised: a bug of the game (bad text is never one).
        """
        if agent not in self.agents:
            return Invalid(f"unknown agent {agent!r}; agents are {list(self.agents)}")
        if not isinstance(text, str):
            return Invalid(f"expected text, got {type(text).__name__}")
        with _GameCode(self, "_read"):  # a parser that raises is a bug of the game, never the answer's fault
            return self._read(agent, text)

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Canonical texts of ``agent``'s legal moves now (empty when it is not its turn)."""
        if agent not in self.active_agents:
            return []
        with _GameCode(self, "_legal_moves") as call:
            moves = self._legal_moves(agent)
            call.hook = "_move_text"
            return None if moves is None else [self._move_text(agent, move) for move in moves]

    def is_success(self, agent: AgentID) -> bool | None:
        """The world's verdict; False for an agent that forfeited."""
        if self._tally is None:
            return None
        if agent in self._tally.forfeited:
            return False
        with _GameCode(self, "_success"):
            return self._success(agent)

    def oracle_action(self, agent: AgentID) -> str | None:
        """The oracle's move text for ``agent`` now (None when it is not its turn, or without oracle)."""
        if agent not in self.active_agents:
            return None
        with _GameCode(self, "_oracle_move") as call:
            move = self._oracle_move(agent)
            call.hook = "_move_text"
            return None if move is None else self._move_text(agent, move)

    def __repr__(self) -> str:
        """Show the id and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True)
        return f"{type(self).__name__}({self.game_id!r}, {options})"

    def _judge_endings(self, tally: _Tally) -> None:
        world_terminated, world_truncated = self._world_endings()
        max_steps = self.config.max_steps
        limit_reached = max_steps is not None and tally.rounds >= max_steps
        agents = self.agents
        if tally.forfeited or world_terminated is True:  # the common cases first: this runs every step
            tally.over = True
            tally.terminated, tally.truncated = dict.fromkeys(agents, True), dict.fromkeys(agents, False)
            return
        if world_terminated is False and world_truncated is False:
            tally.over = limit_reached
            tally.terminated, tally.truncated = dict.fromkeys(agents, False), dict.fromkeys(agents, limit_reached)
            return
        ended = _per_agent(world_terminated, agents)
        cut = _per_agent(world_truncated, agents)
        tally.over = limit_reached or all(ended[agent] or cut[agent] for agent in agents)
        tally.terminated = ended
        tally.truncated = {agent: not ended[agent] and (cut[agent] or tally.over) for agent in agents}

    def _require_tally(self) -> _Tally:
        if self._tally is None:
            raise GameError("no episode in progress; call reset() first")
        return self._tally

    def _settle(self, tally: _Tally) -> dict[AgentID, str]:
        """After a reset or a round: judge the endings, refresh the world's view, and observe every agent.

        Raises:
            GameCodeError: One of those calls into game code raised (named as the author wrote it).
        """
        with _GameCode(self, "_world_endings") as call:
            self._judge_endings(tally)
            call.hook = "_refresh"
            self._refresh()
            call.hook = "observe"
            return {agent: self.observe(agent) for agent in self.agents}

    def _fork_parts(self, twin: Any) -> None:  # noqa: B027 - optional hook, deliberately empty
        """Hook of a ``snapshot`` fork: give ``twin`` its own copy of each part of the game a step changes.

        ``twin`` is a shallow copy of this game that already has its own tally and replay log; what
        it still shares with this game is what the hook must copy (a random generator, a mutable
        state, caches keyed on it). Immutable parts (a rules game's state) stay shared.
        """

    def _forked_tally(self) -> _Tally:
        """A copy of the episode's tally that a fork can change without touching this game's.

        Raises:
            GameError: No episode in progress.
        """
        tally = self._require_tally()
        return replace(
            tally,
            returns=dict(tally.returns),
            invalid_streak=dict(tally.invalid_streak),
            terminated=dict(tally.terminated),
            truncated=dict(tally.truncated),
        )


def _per_agent(value: bool | Mapping[AgentID, bool], agents: Sequence[AgentID]) -> dict[AgentID, bool]:
    if isinstance(value, bool):
        return dict.fromkeys(agents, value)
    return {agent: bool(value.get(agent, False)) for agent in agents}


class RulesGame(RefereedGame[ActionT], Generic[StateT, ActionT]):
    """A :class:`Game` built from pure rules over an explicit state plus a text layer.

    Subclasses implement the rules (``initial_state``, ``transition``, ``is_terminal``,
    ``current_agents``, ``legal_moves``) and the text layer (``render``, ``parse_action``,
    ``action_text``). The rules must draw randomness only from the ``rng`` they are given.
    :class:`RefereedGame` does the bookkeeping: seeding, step limits, invalid answers, ``info``.

    ``parse_action(agent, text, state)`` sees the state in play, so a well-formed answer that
    names an illegal move (an occupied cell, a full column) becomes :class:`Invalid` with a
    reason there and never reaches ``transition``. ``transition`` receives the moves of the
    agents that answered validly; under ``on_invalid="penalize"`` an agent that answered
    invalidly is absent from the mapping. In a turn-based game with no valid answer the
    transition is skipped and the state stays the same (the same seat answers again); a
    simultaneous game (``turn_based = False``) still transitions, with the mapping possibly
    empty, so it must handle absent agents.
    """

    #: The agents of the game; override, or override :attr:`agents`.
    AGENTS: ClassVar[tuple[AgentID, ...]] = ("player",)
    CALL_NAMES: ClassVar[Mapping[str, str]] = {
        "_start": "initial_state",
        "_to_move": "current_agents",
        "_read": "parse_action",
        "_advance": "transition",
        "_world_endings": "is_terminal",
        "_legal_moves": "legal_moves",
        "_move_text": "action_text",
        "_fallback_move": "default_move",
        "_forfeit_rewards": "forfeit",
        "_success": "success",
        "_oracle_move": "oracle",
        "observe": "render",
    }

    def __init__(self, config: GameConfig | None = None, **options: Any) -> None:
        """Build the game from a config object or from keyword options (validated)."""
        self.config = self.Config.from_options(config, options)
        self._rng: np.random.Generator | None = None
        self._seed: int | None = None
        self._state: StateT | None = None

    # ----------------------------------------------------------------------------- rules
    @abstractmethod
    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> StateT:
        """The state an episode starts in (chance may be drawn from ``rng``)."""

    @abstractmethod
    def transition(
        self, state: StateT, actions: Mapping[AgentID, ActionT], rng: np.random.Generator
    ) -> tuple[StateT, Mapping[AgentID, float]]:
        """Next state and the rewards of this round (missing agents get 0)."""

    @abstractmethod
    def is_terminal(self, state: StateT) -> bool:
        """Whether the game has ended in ``state`` (never a step limit: that truncates)."""

    def current_agents(self, state: StateT) -> tuple[AgentID, ...]:
        """Agents that act in ``state``; the default is every agent (simultaneous moves)."""
        return self.agents

    def legal_moves(self, state: StateT, agent: AgentID) -> Sequence[ActionT] | None:
        """The actions ``agent`` may take in ``state`` (None if not enumerable)."""
        return None

    def default_move(self, state: StateT, agent: AgentID) -> ActionT:
        """The action played for an invalid answer under ``on_invalid="default_action"``.

        The default is the first legal move, as in the MS-GRPO authors' code.
        """
        moves = self.legal_moves(state, agent)
        if not moves:
            raise GameError(
                f"{type(self).__name__} has no enumerable legal moves; override default_move() "
                "or use on_invalid='penalize'"
            )
        return moves[0]

    def forfeit(self, state: StateT, agent: AgentID) -> Mapping[AgentID, float]:
        """Rewards of the round in which ``agent`` forfeits by invalid answers (see :class:`RefereedGame`).

        A forfeit should score as the game's worst outcome for that seat, so that answering
        nonsense never beats playing. The default, -1 to the forfeiting agent, is a loss in a
        game scored +1/-1; games on another scale override it (Snake: a death).
        """
        return {agent: self.FORFEIT_REWARD}

    def success(self, state: StateT, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded in the final ``state`` (None where undefined)."""
        return None

    def oracle(self, state: StateT, agent: AgentID) -> ActionT | None:
        """An optimal or strong action in ``state`` (None where the game has no oracle)."""
        return None

    def key(self, state: StateT, agent: AgentID) -> Hashable:
        """State key of ``state`` as seen by ``agent``; defaults to the rendered text."""
        return self.render(state, agent)

    # ------------------------------------------------------------------------ text layer
    @abstractmethod
    def render(self, state: StateT, agent: AgentID) -> str:
        """What ``agent`` observes in ``state``, as text."""

    @abstractmethod
    def parse_action(self, agent: AgentID, text: str, state: StateT | None) -> ActionT | Invalid:
        """Parse an answer into an action legal in ``state``, or :class:`Invalid` with the reason.

        ``state`` is the state in play (None before the first ``reset``: then check the form
        only). Follow the answer rule of :mod:`tsmg.answers`: accept a move's own name (any case,
        surrounding punctuation aside) or an alias the prompt announces, nothing else. Return
        :class:`Invalid` for bad text of every kind; never raise for it: an exception here is a
        bug of the game, which stops an evaluation or a training run (:class:`GameCodeError`).
        """

    @abstractmethod
    def action_text(self, agent: AgentID, action: ActionT) -> str:
        """The canonical text of ``action``; ``parse_action`` must map it back to ``action``."""

    # --------------------------------------------------------------- Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """Every agent of the game."""
        return self.AGENTS

    @property
    def state(self) -> StateT:
        """The current state (read-only by convention; rules return new states)."""
        if self._state is None:
            raise GameError("no episode in progress; call reset() first")
        return self._state

    @property
    def current_state(self) -> StateT | None:
        """The state in play, or None before the first ``reset``."""
        return self._state

    @property
    def seed(self) -> int | None:
        """The seed of the current episode, if one was given."""
        return self._seed

    @property
    def np_random(self) -> np.random.Generator:
        """The game's random generator (created on first use if no seed was ever given)."""
        if self._rng is None:
            self._rng = np.random.default_rng()
        return self._rng

    def observe(self, agent: AgentID) -> str:
        """The current observation text of ``agent``."""
        return self.render(self.state, agent)

    def state_key(self, agent: AgentID) -> Hashable:
        """Key of the current state as ``agent`` sees it."""
        return self.key(self.state, agent)

    @property
    def fork_mode(self) -> ForkMode:
        """``snapshot``: rules return new states, so a fork shares the state and copies the rest."""
        return "snapshot"

    def _fork_parts(self, twin: RulesGame[StateT, ActionT]) -> None:
        """A snapshot shares the (immutable) state and copies the random generator.

        Rules never mutate a state (they return new ones), so sharing it is safe; the random
        generator is copied with its state, so both games draw the same chance from here on,
        each on its own.
        """
        twin._rng = copy.deepcopy(self._rng)

    # ------------------------------------------------------------------ referee hooks
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._seed = seed
        self._state = self.initial_state(self.np_random, options)
        return {}

    def _to_move(self) -> tuple[AgentID, ...]:
        return self.current_agents(self.state)

    def _read(self, agent: AgentID, text: str) -> ActionT | Invalid:
        return self.parse_action(agent, text, self._state)

    def _advance(self, moves: dict[AgentID, ActionT], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        # A simultaneous game still advances when nobody answered validly (the world moves on:
        # e.g. snakes keep going); a turn-based game just loses the turn.
        if not moves and self.turn_based:
            return {}
        self._state, rewards = self.transition(self.state, moves, self.np_random)
        return rewards

    def _world_endings(self) -> tuple[bool, bool]:
        return self.is_terminal(self.state), False

    def _legal_moves(self, agent: AgentID) -> Sequence[ActionT] | None:
        return self.legal_moves(self.state, agent)

    def _move_text(self, agent: AgentID, move: ActionT) -> str:
        return self.action_text(agent, move)

    def _fallback_move(self, agent: AgentID) -> ActionT:
        return self.default_move(self.state, agent)

    def _forfeit_rewards(self, agent: AgentID) -> Mapping[AgentID, float]:
        return self.forfeit(self.state, agent)

    def _success(self, agent: AgentID) -> bool | None:
        return self.success(self.state, agent)

    def _oracle_move(self, agent: AgentID) -> ActionT | None:
        return self.oracle(self.state, agent)
