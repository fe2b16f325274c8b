"""Fixed opponents: a two-player game turned into a single-agent one against the game's own oracle.

:class:`VsFixedOpponent` seats the learning agent in one seat and lets the game's oracle
(optionally epsilon-random) play the other. Every draw, the seat included, comes from the
``rng`` the rules are given, so a seed fixes the whole episode.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import Field

from tsmg.core import AgentID, GameConfig, GameError, Invalid, RulesGame

StateT = TypeVar("StateT")
ActionT = TypeVar("ActionT")


class OpponentConfig(GameConfig):
    """Options of a game played against a fixed opponent."""

    learner_seat: Literal["random", "player_0", "player_1"] = Field(
        default="random",
        description="Seat of the learning agent; 'random' draws it from the seed (player_0 acts first).",
    )
    opponent_epsilon: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Probability that the opponent plays a uniformly random legal move."
    )


@dataclass(frozen=True, slots=True)
class VsState(Generic[StateT]):
    """State of the two-player game plus the seat the learner plays."""

    inner: StateT
    learner: AgentID


class VsFixedOpponent(RulesGame[VsState[StateT], ActionT]):
    """A single-agent view of a two-player game whose other seat plays the game's oracle.

    Subclasses set :attr:`Inner` (the two-player game class), :attr:`OPPONENT` (how the
    observation names the opponent) and :attr:`Config` (the inner game's config combined with
    :class:`OpponentConfig`). The opponent moves inside ``initial_state`` (when it is seated
    first) and right after each of the learner's moves, so the learner is always to act.
    """

    Inner: ClassVar[type[RulesGame[Any, Any]]]
    OPPONENT: ClassVar[str] = "a fixed opponent"
    Config: ClassVar[type[GameConfig]] = OpponentConfig
    #: Won, drawn or lost against the built-in opponent (the sign of the learner's return).
    outcome = "win_draw_loss"
    config: OpponentConfig
    AGENTS = ("player",)

    def __init__(self, config: GameConfig | None = None, **options: Any) -> None:
        """Build the wrapper and the inner two-player game from the shared options."""
        super().__init__(config, **options)
        own = set(self.Inner.Config.model_fields) - set(GameConfig.model_fields)
        self.inner: RulesGame[StateT, ActionT] = self.Inner(**{name: getattr(self.config, name) for name in own})

    # ----------------------------------------------------------------------------- rules
    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> VsState[StateT]:
        """Draw the learner's seat, start the inner game, and let the opponent open if it is first."""
        seats = self.inner.agents
        seat = self.config.learner_seat
        learner = seats[int(rng.integers(len(seats)))] if seat == "random" else seat
        inner, _ = self._opponents_play(self.inner.initial_state(rng, options), learner, rng)
        return VsState(inner, learner)

    def transition(
        self, state: VsState[StateT], actions: Mapping[AgentID, ActionT], rng: np.random.Generator
    ) -> tuple[VsState[StateT], Mapping[AgentID, float]]:
        """Play the learner's move (with the opponent's, if simultaneous), then the opponent's replies."""
        learner = state.learner
        moves = {
            agent: actions[self.AGENTS[0]] if agent == learner else self._opponent_move(state.inner, agent, rng)
            for agent in self.inner.current_agents(state.inner)
        }
        inner, rewards = self.inner.transition(state.inner, moves, rng)
        inner, later = self._opponents_play(inner, learner, rng)
        return VsState(inner, learner), {self.AGENTS[0]: float(rewards.get(learner, 0.0)) + later}

    def is_terminal(self, state: VsState[StateT]) -> bool:
        """The inner game has ended."""
        return self.inner.is_terminal(state.inner)

    def current_agents(self, state: VsState[StateT]) -> tuple[AgentID, ...]:
        """The learner, until the game ends."""
        return () if self.is_terminal(state) else self.AGENTS

    def legal_moves(self, state: VsState[StateT], agent: AgentID) -> Sequence[ActionT] | None:
        """The learner's legal moves in the inner game."""
        return self.inner.legal_moves(state.inner, state.learner)

    def oracle(self, state: VsState[StateT], agent: AgentID) -> ActionT | None:
        """The inner game's oracle for the learner's seat."""
        return self.inner.oracle(state.inner, state.learner)

    def success(self, state: VsState[StateT], agent: AgentID) -> bool | None:
        """Success of the learner's seat in the inner game."""
        return self.inner.success(state.inner, state.learner)

    def forfeit(self, state: VsState[StateT], agent: AgentID) -> Mapping[AgentID, float]:
        """What the inner game gives the learner's seat for a forfeit."""
        inner = self.inner.forfeit(state.inner, state.learner)
        return {self.AGENTS[0]: float(inner.get(state.learner, 0.0))}

    def key(self, state: VsState[StateT], agent: AgentID) -> Hashable:
        """The learner's seat and the inner key as the learner sees it."""
        return (state.learner, self.inner.key(state.inner, state.learner))

    @property
    def has_random_start(self) -> bool:
        """Starts vary with the seed when the seat or the opponent is random, or the inner start is."""
        config = self.config
        return config.learner_seat == "random" or config.opponent_epsilon > 0 or self.inner.has_random_start

    # ------------------------------------------------------------------------ text layer
    def render(self, state: VsState[StateT], agent: AgentID) -> str:
        """The inner observation of the learner's seat, after a line naming the opponent (none in a compact view)."""
        if getattr(self.config, "view", "full") == "compact":  # games.views: only what differs between decisions
            return self.inner.render(state.inner, state.learner)
        others = [seat for seat in self.inner.agents if seat != state.learner]
        header = f"You play against {self.OPPONENT} ({', '.join(others)}).\n"
        return header + self.inner.render(state.inner, state.learner)

    def parse_action(self, agent: AgentID, text: str, state: VsState[StateT] | None) -> ActionT | Invalid:
        """Parse as the learner's seat of the inner game."""
        if state is None:
            return self.inner.parse_action(self.inner.agents[0], text, None)
        return self.inner.parse_action(state.learner, text, state.inner)

    def action_text(self, agent: AgentID, action: ActionT) -> str:
        """The inner game's text of the move."""
        state = self.current_state
        return self.inner.action_text(self.inner.agents[0] if state is None else state.learner, action)

    # --------------------------------------------------------------------------- helpers
    def _opponent_move(self, inner: StateT, agent: AgentID, rng: np.random.Generator) -> ActionT:
        legal = list(self.inner.legal_moves(inner, agent) or ())
        epsilon = self.config.opponent_epsilon
        if legal and epsilon > 0 and rng.random() < epsilon:
            return legal[int(rng.integers(len(legal)))]
        move = self.inner.oracle(inner, agent)
        if move is None:
            if not legal:
                raise GameError(f"{type(self.inner).__name__} has neither an oracle nor legal moves for {agent}")
            return legal[int(rng.integers(len(legal)))]
        return move

    def _opponents_play(self, inner: StateT, learner: AgentID, rng: np.random.Generator) -> tuple[StateT, float]:
        """Let the opponent move until the learner must act or the game ends; the learner's reward."""
        reward = 0.0
        while not self.inner.is_terminal(inner):
            acting = self.inner.current_agents(inner)
            if not acting or learner in acting:
                break
            moves = {agent: self._opponent_move(inner, agent, rng) for agent in acting}
            inner, rewards = self.inner.transition(inner, moves, rng)
            reward += float(rewards.get(learner, 0.0))
        return inner, reward
