"""Iterated rock-paper-scissors as a simultaneous-move text game, and a single-agent variant.

Rules are in :mod:`games.rps_rules`. Both players answer every round at the same time; a round
won scores +1, lost -1, tied 0, for ``rounds`` rounds (5 by default). Each observation shows the
full history of both players' moves and the score. Answers are ``rock``, ``paper`` or
``scissors`` (any case, surrounding punctuation aside).

A player whose answer is invalid under ``on_invalid="penalize"`` loses the round: it is
recorded as no move, which loses to any move (two missing moves tie). Invalid answers
``forfeit_after`` times in a row forfeit the game.

The oracle is the counter-strategy of :func:`games.rps_rules.counter_move` (beat the opponent's
most frequent move); it is deterministic, hence exploitable: a baseline, not an equilibrium.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from games import rps_rules as rules
from games.opponents import OpponentConfig, VsFixedOpponent
from tsmg.answers import MoveNames
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_MOVES = MoveNames.indexed(rules.MOVE_NAMES)
_OUTCOME_TEXT = {1: "you won the round", -1: "you lost the round", 0: "tie"}


class RockPaperScissorsConfig(GameConfig):
    """Options of iterated rock-paper-scissors."""

    rounds: int = Field(default=5, ge=1, le=100, description="Number of rounds played.")


@dataclass(frozen=True, slots=True)
class RockPaperScissorsState:
    """The rounds played so far, as (player_0 move, player_1 move) pairs."""

    history: tuple[rules.Round, ...] = ()


class RockPaperScissors(RulesGame[RockPaperScissorsState, int]):
    """Iterated rock-paper-scissors for two players moving simultaneously.

    Example:
        >>> game = RockPaperScissors(rounds=3)
        >>> _ = game.reset(seed=0)
        >>> game.step({"player_0": "Rock!", "player_1": "paper"}).rewards
        {'player_0': -1.0, 'player_1': 1.0}
        >>> game.oracle_action("player_0")
        'scissors'
    """

    turn_based = False
    Config = RockPaperScissorsConfig
    outcome = "win_draw_loss"
    config: RockPaperScissorsConfig
    AGENTS = ("player_0", "player_1")

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> RockPaperScissorsState:
        """No rounds played."""
        return RockPaperScissorsState()

    def transition(
        self, state: RockPaperScissorsState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[RockPaperScissorsState, Mapping[AgentID, float]]:
        """Record the round (a missing answer forfeits it); +1 to its winner, -1 to its loser."""
        played = (actions.get(self.AGENTS[0]), actions.get(self.AGENTS[1]))
        result = float(rules.outcome(*played))
        return RockPaperScissorsState(state.history + (played,)), {self.AGENTS[0]: result, self.AGENTS[1]: -result}

    def is_terminal(self, state: RockPaperScissorsState) -> bool:
        """All rounds played."""
        return len(state.history) >= self.config.rounds

    def current_agents(self, state: RockPaperScissorsState) -> tuple[AgentID, ...]:
        """Both players, every round, until the last round is played."""
        return () if self.is_terminal(state) else self.AGENTS

    def legal_moves(self, state: RockPaperScissorsState, agent: AgentID) -> Sequence[int]:
        """Rock, paper and scissors while the game lasts."""
        return () if self.is_terminal(state) else (rules.ROCK, rules.PAPER, rules.SCISSORS)

    def success(self, state: RockPaperScissorsState, agent: AgentID) -> bool:
        """Success means winning more rounds than the opponent."""
        own, other = self._scores(state, agent)
        return own > other

    def oracle(self, state: RockPaperScissorsState, agent: AgentID) -> int | None:
        """Beat the opponent's most frequent move so far (paper first); see the module docstring."""
        if self.is_terminal(state):
            return None
        return rules.counter_move([pair[1 - self._seat(agent)] for pair in state.history])

    def key(self, state: RockPaperScissorsState, agent: AgentID) -> Hashable:
        """The history seen from ``agent``'s side: (own move, opponent move) per round."""
        seat = self._seat(agent)
        return tuple((pair[seat], pair[1 - seat]) for pair in state.history)

    # ------------------------------------------------------------------ text layer
    def render(self, state: RockPaperScissorsState, agent: AgentID) -> str:
        """Rules, every past round with both moves and its result, the score, and what to answer."""
        seat = self._seat(agent)
        total = self.config.rounds
        lines = [
            f"Iterated rock-paper-scissors, {total} rounds. You are {agent}; your opponent is {self.AGENTS[1 - seat]}.",
            "Each round both players choose at the same time. Rock beats scissors, scissors beats paper, "
            "paper beats rock. A round won scores +1, a round lost -1, a tie 0.",
        ]
        if state.history:
            lines.append("History:")
        for number, pair in enumerate(state.history, start=1):
            own, other = pair[seat], pair[1 - seat]
            result = _OUTCOME_TEXT[rules.outcome(own, other)]
            lines.append(f"  Round {number}: you {_name(own)}, opponent {_name(other)} ({result}).")
        own_score, other_score = self._scores(state, agent)
        lines.append(f"Rounds won: you {own_score}, opponent {other_score}.")
        if self.is_terminal(state):
            verdict = "you won" if own_score > other_score else "you lost" if own_score < other_score else "a draw"
            lines.append(f"Game over after {len(state.history)} rounds: {verdict}.")
        else:
            lines.append(f"Round {len(state.history) + 1} of {total}: answer rock, paper or scissors.")
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: RockPaperScissorsState | None) -> int | Invalid:
        """Rock, paper or scissors; any of them while the game lasts."""
        move = _MOVES.read(text)
        if isinstance(move, Invalid):
            return move
        if state is not None and self.is_terminal(state):
            return Invalid("the game is over")
        return move

    def action_text(self, agent: AgentID, action: int) -> str:
        """The move's name."""
        return rules.MOVE_NAMES[action]

    # --------------------------------------------------------------------- helpers
    def _seat(self, agent: AgentID) -> int:
        return self.AGENTS.index(agent)

    def _scores(self, state: RockPaperScissorsState, agent: AgentID) -> tuple[int, int]:
        first, second = rules.scores(state.history)
        return (first, second) if self._seat(agent) == 0 else (second, first)


def _name(move: int | None) -> str:
    return "gave no valid answer" if move is None else f"played {rules.MOVE_NAMES[move]}"


class RockPaperScissorsVsConfig(RockPaperScissorsConfig, OpponentConfig):
    """Options of rock-paper-scissors against a fixed opponent."""


class RockPaperScissorsVsCounter(VsFixedOpponent[RockPaperScissorsState, int]):
    """Rock-paper-scissors for one agent against the frequency counter-strategy (exploitable).

    Example:
        >>> game = RockPaperScissorsVsCounter()
        >>> _ = game.reset(seed=0)
        >>> game.step({"player": "scissors"}).rewards
        {'player': 1.0}
    """

    Inner = RockPaperScissors
    OPPONENT = "a fixed strategy that plays what beats your most frequent move so far"
    Config = RockPaperScissorsVsConfig
    config: RockPaperScissorsVsConfig
