"""The Text-Mediated Stochastic Game (TSMG) interface.

A TSMG is a stochastic game (agents, states, chance, transitions, per-agent rewards) in which
every agent observes text and acts in text. Two layers live here:

* :class:`Game` is the public, environment-style interface every game offers: ``reset``,
  ``step`` with raw text per agent, ``observe``, ``legal_actions``, ``parse``. Adapters around
  Gymnasium and PettingZoo environments implement it directly.
* :class:`RulesGame` implements :class:`Game` from *pure rules* over an explicit state
  (``initial_state``, ``transition``, ``is_terminal``, ...) plus a *text layer*
  (``render``, ``parse_action``, ``action_text``). Catalog games subclass it; the base class does
  the bookkeeping that every game would otherwise repeat: seeding, step limits (truncation),
  invalid-answer handling and per-agent ``info``.

Every random draw comes from the game's own :class:`numpy.random.Generator`, created by
``reset(seed=...)``, so the same seed and the same actions always give the same episode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

AgentID = str
StateT = TypeVar("StateT")
ActionT = TypeVar("ActionT")

InvalidMode = Literal["default_action", "penalize", "terminate"]


class GameError(RuntimeError):
    """Raised when a game is used against its contract (e.g. stepping a finished episode)."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """An answer that does not name a legal action, with the reason why.

    Parsers return it instead of raising, so that any string a model writes becomes an invalid
    answer with an explanation rather than an exception. A policy may also pass an ``Invalid``
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
            "What an invalid answer does: 'default_action' plays the game's default action, "
            "'penalize' uses up the turn without effect, 'terminate' ends the episode. All three "
            "subtract invalid_penalty from the answering agent's reward."
        ),
    )
    invalid_penalty: float = Field(default=0.0, ge=0.0, description="Reward subtracted per invalid answer.")


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
    """

    #: Identifier the game was made under (set by :func:`tsmg.make`).
    game_id: str = "unregistered"
    #: Whether at most one agent acts per step.
    turn_based: ClassVar[bool] = True

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
        """

    @abstractmethod
    def observe(self, agent: AgentID) -> str:
        """The current observation text of ``agent``."""

    @abstractmethod
    def parse(self, agent: AgentID, text: str) -> Any:
        """Parse answer text into a game action, or return :class:`Invalid` with a reason.

        Never raises, whatever the text.
        """

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Canonical texts of the actions ``agent`` may play now, or None if not enumerable."""
        return None

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


@dataclass(slots=True)
class _Episode(Generic[StateT]):
    """Mutable bookkeeping of the episode in progress (kept apart from the pure state)."""

    state: StateT
    rounds: int = 0
    terminated: bool = False
    truncated: bool = False
    forced_end: bool = False  # ended by on_invalid="terminate"
    returns: dict[AgentID, float] = field(default_factory=dict)


class RulesGame(Game, Generic[StateT, ActionT]):
    """A :class:`Game` built from pure rules over an explicit state plus a text layer.

    Subclasses implement the rules (``initial_state``, ``transition``, ``is_terminal``,
    ``current_agents``, ``legal_moves``) and the text layer (``render``, ``parse_action``,
    ``action_text``). The rules must draw randomness only from the ``rng`` they are given.

    ``transition`` receives the actions of the agents that answered validly; under
    ``on_invalid="penalize"`` an agent that answered invalidly is simply absent from the
    mapping (its turn is used up without effect). In a turn-based game with no valid answer the
    transition is skipped and the state stays the same; a simultaneous game (``turn_based =
    False``) still transitions, with the mapping possibly empty, so it must handle absent agents.
    """

    Config: ClassVar[type[GameConfig]] = GameConfig
    #: The agents of the game; override, or override :attr:`agents`.
    AGENTS: ClassVar[tuple[AgentID, ...]] = ("player",)

    def __init__(self, config: GameConfig | None = None, **options: Any) -> None:
        """Build the game from a config object or from keyword options (validated)."""
        if config is None:
            config = self.Config(**options)
        elif options:
            config = config.model_copy(update=options)
            config = self.Config.model_validate(config.model_dump())
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} expects a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config
        self._rng: np.random.Generator | None = None
        self._seed: int | None = None
        self._episode: _Episode[StateT] | None = None

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
    def parse_action(self, agent: AgentID, text: str) -> ActionT | Invalid:
        """Parse an answer into an action or :class:`Invalid`; must never raise."""

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
        return self._require_episode().state

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

    @property
    def rounds(self) -> int:
        """Rounds played in the current episode."""
        return self._require_episode().rounds

    @property
    def done(self) -> bool:
        """Whether the current episode has ended."""
        episode = self._episode
        return episode is not None and (episode.terminated or episode.truncated)

    @property
    def active_agents(self) -> tuple[AgentID, ...]:
        """Agents that must answer in the next step."""
        episode = self._require_episode()
        if episode.terminated or episode.truncated:
            return ()
        return self.current_agents(episode.state)

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start a new episode; see :meth:`Game.reset`."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._seed = seed
        state = self.initial_state(self.np_random, options or {})
        self._episode = _Episode(state=state, returns=dict.fromkeys(self.agents, 0.0))
        observations = {agent: self.render(state, agent) for agent in self.agents}
        return observations, {agent: {} for agent in self.agents}

    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Apply the active agents' answers; see :meth:`Game.step`."""
        episode = self._require_episode()
        if episode.terminated or episode.truncated:
            raise GameError("the episode is over; call reset() before step()")
        state = episode.state
        active = self.current_agents(state)
        check_answers(active, actions)
        config = self.config
        moves: dict[AgentID, ActionT] = {}
        infos: dict[AgentID, dict[str, Any]] = {agent: {} for agent in self.agents}
        penalties: dict[AgentID, float] = {}
        force_end = False
        for agent in active:
            answer = actions[agent]
            parsed = answer if isinstance(answer, Invalid) else self.parse(agent, answer)
            if isinstance(parsed, Invalid):
                penalties[agent] = config.invalid_penalty
                info: dict[str, Any] = {"valid": False, "reason": parsed.reason}
                if config.on_invalid == "default_action":
                    move = self.default_move(state, agent)
                    moves[agent] = move
                    info["action"] = self.action_text(agent, move)
                else:
                    info["action"] = None
                    force_end = force_end or config.on_invalid == "terminate"
                infos[agent] = info
            else:
                moves[agent] = parsed
                infos[agent] = {"valid": True, "reason": None, "action": self.action_text(agent, parsed)}

        rewards = dict.fromkeys(self.agents, 0.0)
        # A simultaneous game still advances when nobody answered validly (the world moves on:
        # e.g. snakes keep going); a turn-based game just loses the turn.
        if (moves or not self.turn_based) and not force_end:
            state, round_rewards = self.transition(state, moves, self.np_random)
            for agent, reward in round_rewards.items():
                rewards[agent] += float(reward)
        for agent, penalty in penalties.items():
            rewards[agent] -= penalty
        episode.state = state
        episode.rounds += 1
        for agent, reward in rewards.items():
            episode.returns[agent] += reward
        episode.terminated = force_end or self.is_terminal(state)
        episode.forced_end = force_end
        max_steps = config.max_steps
        episode.truncated = not episode.terminated and max_steps is not None and episode.rounds >= max_steps
        observations = {agent: self.render(state, agent) for agent in self.agents}
        terminated = dict.fromkeys(self.agents, episode.terminated)
        truncated = dict.fromkeys(self.agents, episode.truncated)
        return StepResult(observations, rewards, terminated, truncated, infos)

    def observe(self, agent: AgentID) -> str:
        """The current observation text of ``agent``."""
        return self.render(self._require_episode().state, agent)

    def parse(self, agent: AgentID, text: str) -> ActionT | Invalid:
        """Parse ``text`` into an action or :class:`Invalid`; never raises."""
        if not isinstance(text, str):
            return Invalid(f"expected text, got {type(text).__name__}")
        try:
            return self.parse_action(agent, text)
        except Exception as error:  # a parser bug must not crash a rollout
            return Invalid(f"parser error: {error!r}")

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Canonical texts of the legal actions of ``agent`` now (empty if not its turn)."""
        episode = self._require_episode()
        if agent not in self.active_agents:
            return []
        moves = self.legal_moves(episode.state, agent)
        if moves is None:
            return None
        return [self.action_text(agent, move) for move in moves]

    def state_key(self, agent: AgentID) -> Hashable:
        """Key of the current state as ``agent`` sees it."""
        return self.key(self._require_episode().state, agent)

    def is_success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded (evaluated on the current state)."""
        episode = self._require_episode()
        if episode.forced_end:
            return False
        return self.success(episode.state, agent)

    def oracle_action(self, agent: AgentID) -> str | None:
        """The oracle's action text for ``agent`` now, or None without oracle."""
        move = self.oracle(self._require_episode().state, agent)
        return None if move is None else self.action_text(agent, move)

    def episode_returns(self) -> dict[AgentID, float]:
        """Cumulative reward of each agent in the current episode."""
        return dict(self._require_episode().returns)

    # ------------------------------------------------------------------------- helpers
    def _require_episode(self) -> _Episode[StateT]:
        if self._episode is None:
            raise GameError("no episode in progress; call reset() first")
        return self._episode

    def __repr__(self) -> str:
        """Show the id and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True)
        return f"{type(self).__name__}({self.game_id!r}, {options})"
