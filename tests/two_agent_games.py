"""Two tiny two-player games for the adapter tests: one turn-based, one simultaneous.

* :class:`Stones` (turn-based): a pile of stones (its size drawn from the seed); players take
  1 to 3 in turn, and whoever takes the last stone wins (+1, the other -1).
* :class:`MatchingPennies` (simultaneous): both players show heads or tails each round;
  ``player_0`` wins the round (+1, the other -1) when the coins match, ``player_1`` when they
  differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from tsmg.answers import MoveNames
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

PLAYERS = ("player_0", "player_1")
_COIN = MoveNames({"heads": "heads", "tails": "tails"})


class StonesConfig(GameConfig):
    """Options of Stones."""

    min_pile: int = Field(default=5, ge=1, description="Smallest starting pile.")
    max_pile: int = Field(default=12, ge=1, description="Largest starting pile.")
    max_take: int = Field(default=3, ge=1, description="Most stones one turn may take.")


@dataclass(frozen=True, slots=True)
class StonesState:
    pile: int
    turn: int  # index of the player to move
    winner: int | None = None


class Stones(RulesGame[StonesState, int]):
    """Take 1 to ``max_take`` stones in turn; whoever takes the last stone wins."""

    Config = StonesConfig
    config: StonesConfig
    AGENTS = PLAYERS

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> StonesState:
        pile = int(options.get("pile", rng.integers(self.config.min_pile, self.config.max_pile + 1)))
        return StonesState(pile=pile, turn=0)

    def transition(
        self, state: StonesState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[StonesState, Mapping[AgentID, float]]:
        mover = PLAYERS[state.turn]
        pile = state.pile - actions[mover]
        if pile == 0:
            return StonesState(0, state.turn, winner=state.turn), {mover: 1.0, PLAYERS[1 - state.turn]: -1.0}
        return StonesState(pile, 1 - state.turn), {}

    def is_terminal(self, state: StonesState) -> bool:
        return state.pile == 0

    def current_agents(self, state: StonesState) -> tuple[AgentID, ...]:
        return (PLAYERS[state.turn],)

    def legal_moves(self, state: StonesState, agent: AgentID) -> Sequence[int]:
        return list(range(1, min(self.config.max_take, state.pile) + 1))

    def success(self, state: StonesState, agent: AgentID) -> bool | None:
        return state.winner is not None and PLAYERS[state.winner] == agent

    def oracle(self, state: StonesState, agent: AgentID) -> int | None:
        # Leaving a multiple of (max_take + 1) wins; with none available take one and hope.
        return state.pile % (self.config.max_take + 1) or 1

    def render(self, state: StonesState, agent: AgentID) -> str:
        if state.winner is not None:
            outcome = "You took the last stone and won." if PLAYERS[state.winner] == agent else "You lost."
            return f"Stones: the pile is empty. {outcome}"
        most = min(self.config.max_take, state.pile)
        whose = "your turn" if PLAYERS[state.turn] == agent else f"{PLAYERS[state.turn]}'s turn"
        return (
            f"Stones: {state.pile} left. You are {agent}; it is {whose}. Whoever takes the last stone wins.\n"
            f"Answer with how many stones to take, from 1 to {most}."
        )

    def parse_action(self, agent: AgentID, text: str, state: StonesState | None) -> int | Invalid:
        most = self.config.max_take if state is None else min(self.config.max_take, state.pile)
        return MoveNames({str(take): take for take in range(1, most + 1)}).read(
            text, f"take a number of stones from 1 to {most}"
        )

    def action_text(self, agent: AgentID, action: int) -> str:
        return str(action)


class PenniesConfig(GameConfig):
    """Options of Matching Pennies."""

    rounds: int = Field(default=3, ge=1, description="Rounds per episode.")


@dataclass(frozen=True, slots=True)
class PenniesState:
    round: int = 0
    last: tuple[str, str] | None = None  # what each player showed in the previous round


class MatchingPennies(RulesGame[PenniesState, str]):
    """Both players show heads or tails; player_0 wants a match, player_1 a mismatch."""

    Config = PenniesConfig
    config: PenniesConfig
    AGENTS = PLAYERS

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> PenniesState:
        return PenniesState()

    def transition(
        self, state: PenniesState, actions: Mapping[AgentID, str], rng: np.random.Generator
    ) -> tuple[PenniesState, Mapping[AgentID, float]]:
        if len(actions) < 2:  # one coin missing (invalid answer under "penalize"): the round is void
            return PenniesState(state.round + 1, None), {}
        shown = (actions[PLAYERS[0]], actions[PLAYERS[1]])
        sign = 1.0 if shown[0] == shown[1] else -1.0
        return PenniesState(state.round + 1, shown), {PLAYERS[0]: sign, PLAYERS[1]: -sign}

    def is_terminal(self, state: PenniesState) -> bool:
        return state.round >= self.config.rounds

    def legal_moves(self, state: PenniesState, agent: AgentID) -> Sequence[str]:
        return ("heads", "tails")

    def render(self, state: PenniesState, agent: AgentID) -> str:
        goal = "match" if agent == PLAYERS[0] else "differ"
        text = f"Matching pennies, round {min(state.round + 1, self.config.rounds)} of {self.config.rounds}. "
        text += f"You are {agent}; you win a round when the coins {goal}."
        if state.last is not None:
            text += f" Last round: {PLAYERS[0]} showed {state.last[0]}, {PLAYERS[1]} showed {state.last[1]}."
        return text + "\nAnswer heads or tails."

    def parse_action(self, agent: AgentID, text: str, state: PenniesState | None) -> str | Invalid:
        return _COIN.read(text, "answer heads or tails")

    def action_text(self, agent: AgentID, action: str) -> str:
        return action
