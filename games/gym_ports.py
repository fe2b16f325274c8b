"""Catalog games played through the adapters: Gymnasium's Taxi, Cliff Walking, Blackjack; PettingZoo's Tic-Tac-Toe.

The envs' own rules run unchanged (built directly, without Gymnasium's ``TimeLimit``: the step
limit is the tsmg ``max_steps`` option); this module adds what a language model needs on top:
text observations that spell out positions in words, action names, an oracle and a success
test. Coordinates are (row, column) with row 0 at the top, as in the envs' own maps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import pettingzoo
from gymnasium.envs.toy_text.blackjack import BlackjackEnv
from gymnasium.envs.toy_text.cliffwalking import CliffWalkingEnv
from gymnasium.envs.toy_text.taxi import MAP as TAXI_MAP
from gymnasium.envs.toy_text.taxi import TaxiEnv
from pydantic import Field

from games import tictactoe_rules as ttt
from games.tictactoe import read_cell
from tsmg.adapters.gymnasium import GymnasiumGame
from tsmg.adapters.pettingzoo import PettingZooGame
from tsmg.core import AgentID, GameConfig, Invalid
from tsmg.registry import DEFAULT_MAX_STEPS

Transitions = Mapping[int, Mapping[int, list[tuple[float, int, float, bool]]]]


def shortest_path_policy(transitions: Transitions, avoid_reward: float | None = None) -> dict[int, tuple[int, int]]:
    """Fewest-steps policy to a terminating transition in a deterministic tabular env (``env.P``).

    Transitions whose reward is at most ``avoid_reward`` (falling off the cliff) are never used.

    Returns:
        For every state, ``(steps, action)``: the fewest steps to termination and the first action
        of such a path (the lowest action index on ties); ``(-1, 0)`` where termination is
        unreachable.
    """
    steps = dict.fromkeys(transitions, -1)
    predecessors: dict[int, list[int]] = {state: [] for state in transitions}
    queue: deque[int] = deque()
    for state, by_action in transitions.items():
        for outcomes in by_action.values():
            _, following, reward, terminated = outcomes[0]
            if avoid_reward is not None and reward <= avoid_reward:
                continue
            if terminated:
                if steps[state] < 0:
                    steps[state] = 1
                    queue.append(state)
            elif following != state:
                predecessors[following].append(state)
    while queue:  # breadth-first search backwards from the states one step from the end
        state = queue.popleft()
        for previous in predecessors[state]:
            if steps[previous] < 0:
                steps[previous] = steps[state] + 1
                queue.append(previous)
    policy = {}
    for state, by_action in transitions.items():
        best, best_cost = 0, None
        for action, outcomes in sorted(by_action.items()):
            _, following, reward, terminated = outcomes[0]
            if avoid_reward is not None and reward <= avoid_reward:
                continue
            cost = 1 if terminated else (1 + steps[following] if steps[following] >= 0 else None)
            if cost is not None and (best_cost is None or cost < best_cost):
                best, best_cost = action, cost
        policy[state] = (steps[state], best)
    return policy


def _step_limit(game: GymnasiumGame) -> int:
    """The game's step limit (the registry's default where a game was built without one)."""
    return game.config.max_steps or DEFAULT_MAX_STEPS


# ------------------------------------------------------------------------------ Taxi
TAXI_ACTIONS = ("south", "north", "east", "west", "pickup", "dropoff")
_STANDS = ("R", "G", "Y", "B")  # stand names in the env's location order
_STAND_CELLS = ((0, 0), (0, 4), (4, 0), (4, 3))  # (row, column) of each stand


@lru_cache(maxsize=1)
def _taxi_policy() -> dict[int, tuple[int, int]]:
    return shortest_path_policy(TaxiEnv().P)


class Taxi(GymnasiumGame):
    """Gymnasium's Taxi: pick the passenger up at one stand and drop them off at another.

    Each move costs 1, delivering earns 20, a wrong pickup or dropoff costs 10. The oracle is
    the shortest delivery (breadth-first search over the env's transition table). A forfeit
    scores the worst return the step limit allows: a wrong dropoff on every step.
    """

    def __init__(self, config: GameConfig | None = None, **options: Any) -> None:
        """Build the env; options are those of :class:`~tsmg.core.GameConfig`."""
        super().__init__(
            TaxiEnv(),
            action_names=TAXI_ACTIONS,
            has_random_start=True,
            config=config,
            **options,
        )

    def render_observation(self, observation: Any) -> str:
        """The map with the taxi, then the taxi, passenger and destination in words."""
        row, col, passenger, destination = self._decode(observation)
        grid = [list(line) for line in TAXI_MAP]
        grid[1 + row][1 + 2 * col] = "T"
        stand_row, stand_col = _STAND_CELLS[destination]
        lines = [
            "Taxi on a 5x5 grid; rows 0-4 from the top, columns 0-4 from the left.",
            "Map (T = taxi; R, G, Y, B = stands; | = wall the taxi cannot cross; : = open road):",
            *("".join(line) for line in grid),
            f"The taxi is at row {row}, column {col}.",
        ]
        if passenger == 4:
            lines.append("The passenger is in the taxi.")
        else:
            p_row, p_col = _STAND_CELLS[passenger]
            lines.append(f"The passenger is waiting at stand {_STANDS[passenger]} (row {p_row}, column {p_col}).")
        lines.append(f"The destination is stand {_STANDS[destination]} (row {stand_row}, column {stand_col}).")
        if self.env_terminated:
            lines.append("The passenger has been delivered.")
        else:
            lines.append(
                "Pick the passenger up, drive to the destination and drop them off. Each move costs 1, "
                "delivering earns 20, a wrong pickup or dropoff costs 10."
            )
            lines.append(f"Actions: {', '.join(TAXI_ACTIONS)} (south is down the map).")
        return "\n".join(lines)

    def forfeit_reward(self) -> float:
        """A wrong pickup or dropoff (-10) on every step of the limit."""
        return -10.0 * _step_limit(self)

    def success(self) -> bool:
        """Delivered: the env terminates only on a successful dropoff."""
        return self.env_terminated

    def oracle(self) -> int:
        """First move of a shortest delivery."""
        return _taxi_policy()[int(self.observation)][1]

    def _decode(self, observation: Any) -> tuple[int, int, int, int]:
        row, col, passenger, destination = self.env.unwrapped.decode(int(observation))  # type: ignore[attr-defined]
        return int(row), int(col), int(passenger), int(destination)


# ------------------------------------------------------------------------------ Cliff Walking
CLIFF_ACTIONS = ("up", "right", "down", "left")
_CLIFF_ROWS, _CLIFF_COLS = 4, 12


@lru_cache(maxsize=1)
def _cliff_policy() -> dict[int, tuple[int, int]]:
    return shortest_path_policy(CliffWalkingEnv().P, avoid_reward=-100)


class CliffWalking(GymnasiumGame):
    """Gymnasium's Cliff Walking: walk along a cliff to the goal; each step costs 1.

    Stepping onto the cliff costs 100 and sends the player back to the start. The oracle walks
    the shortest path that never touches the cliff (13 steps from the start). A forfeit scores
    the worst return the step limit allows: a fall on every step.
    """

    def __init__(self, config: GameConfig | None = None, **options: Any) -> None:
        """Build the env; options are those of :class:`~tsmg.core.GameConfig`."""
        super().__init__(CliffWalkingEnv(), action_names=CLIFF_ACTIONS, config=config, **options)

    def render_observation(self, observation: Any) -> str:
        """Position, goal and cliff in words, then the grid."""
        return _cliff_text(int(observation), self.env_terminated)

    def forfeit_reward(self) -> float:
        """A fall off the cliff (-100) on every step of the limit."""
        return -100.0 * _step_limit(self)

    def success(self) -> bool:
        """Reached the goal: the env terminates only there."""
        return self.env_terminated

    def oracle(self) -> int:
        """First move of the shortest path that avoids the cliff."""
        return _cliff_policy()[int(self.observation)][1]


@lru_cache(maxsize=2 * _CLIFF_ROWS * _CLIFF_COLS)
def _cliff_text(observation: int, reached_goal: bool) -> str:
    """The observation text of a tile (rendered once per tile, so the step loop stays cheap)."""
    row, col = divmod(observation, _CLIFF_COLS)
    grid = [["_"] * _CLIFF_COLS for _ in range(_CLIFF_ROWS)]
    for cliff_col in range(1, _CLIFF_COLS - 1):
        grid[_CLIFF_ROWS - 1][cliff_col] = "C"
    grid[_CLIFF_ROWS - 1][_CLIFF_COLS - 1] = "G"
    grid[row][col] = "P"
    last_row, last_col = _CLIFF_ROWS - 1, _CLIFF_COLS - 1
    lines = [
        f"Cliff Walking on a {_CLIFF_ROWS}x{_CLIFF_COLS} grid; rows 0-{last_row} from the top, "
        f"columns 0-{last_col} from the left.",
        f"You are at row {row}, column {col}. The goal is at row {last_row}, column {last_col}.",
        f"The cliff fills row {last_row} from column 1 to column {last_col - 1}: stepping onto it costs 100 "
        f"and sends you back to the start (row {last_row}, column 0).",
        "Grid (P = you, C = cliff, G = goal, _ = safe ground):",
        *("".join(line) for line in grid),
    ]
    if reached_goal:
        lines.append("You reached the goal.")
    else:
        lines.append(f"Each step costs 1. Actions: {', '.join(CLIFF_ACTIONS)}.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ Blackjack
BLACKJACK_ACTIONS = ("stick", "hit")
_BLACKJACK_ALIASES = {"stand": "stick"}  # announced in the prompt


class BlackjackConfig(GameConfig):
    """Options of Blackjack (those of Gymnasium's ``Blackjack-v1``)."""

    natural: bool = Field(default=False, description="A natural blackjack pays 1.5 (only without sab).")
    sab: bool = Field(
        default=True, description="Sutton & Barto rules: a natural wins outright unless the dealer has one."
    )


def _card(value: int) -> str:
    return "A" if value == 1 else str(value)


def basic_strategy(player_sum: int, dealer_card: int, usable_ace: bool) -> int:
    """Basic strategy for hit/stick against a dealer who stands on 17 (0 = stick, 1 = hit).

    Example:
        >>> basic_strategy(16, 10, False), basic_strategy(13, 4, False), basic_strategy(18, 9, True)
        (1, 0, 1)
    """
    dealer = 11 if dealer_card == 1 else dealer_card
    if usable_ace:
        if player_sum >= 19:
            return 0
        if player_sum == 18:
            return 0 if dealer <= 8 else 1
        return 1
    if player_sum >= 17:
        return 0
    if player_sum >= 13:
        return 0 if dealer <= 6 else 1
    if player_sum == 12:
        return 0 if 4 <= dealer <= 6 else 1
    return 1


class Blackjack(GymnasiumGame):
    """Gymnasium's Blackjack against a dealer who draws to 17: win +1, draw 0, lose -1.

    The oracle is the basic hit/stick strategy; success means winning the hand.
    """

    Config = BlackjackConfig
    outcome = "win_draw_loss"  # against the dealer: a push is a draw
    config: BlackjackConfig

    def __init__(self, config: BlackjackConfig | None = None, **options: Any) -> None:
        """Build the env with the ``natural`` and ``sab`` rules of the config."""
        checked = BlackjackConfig.from_options(config, options)
        env = BlackjackEnv(natural=checked.natural, sab=checked.sab)
        super().__init__(
            env,
            action_names=BLACKJACK_ACTIONS,
            action_aliases=_BLACKJACK_ALIASES,
            has_random_start=True,
            config=checked,
        )

    def render_observation(self, observation: Any) -> str:
        """Your cards and sum, whether you hold a usable ace, and the dealer's card (all, at the end)."""
        player_sum, dealer_card, usable_ace = (int(value) for value in observation)
        env: Any = self.env.unwrapped
        cards = ", ".join(_card(card) for card in env.player)
        ace = "a usable ace counted as 11" if usable_ace else "no usable ace"
        lines = [f"Blackjack. Your cards: {cards} (sum {player_sum}, {ace}). The dealer shows {_card(dealer_card)}."]
        if self.env_terminated:
            dealer_cards = ", ".join(_card(card) for card in env.dealer)
            outcome = "You won." if self.last_reward > 0 else ("It's a draw." if self.last_reward == 0 else "You lost.")
            lines.append(f"Hand over. The dealer's cards: {dealer_cards}. {outcome}")
        else:
            lines.append(
                "Get closer to 21 than the dealer without going over; the dealer draws until 17 or more. "
                "Actions: stick (or stand: stop and let the dealer play), hit (take another card)."
            )
        return "\n".join(lines)

    def success(self) -> bool:
        """Won the hand."""
        return self.env_terminated and self.last_reward > 0

    def oracle(self) -> int:
        """Basic strategy on the current hand."""
        player_sum, dealer_card, usable_ace = (int(value) for value in self.observation)
        return basic_strategy(player_sum, dealer_card, bool(usable_ace))


# ------------------------------------------------------------------------------ Tic-Tac-Toe
def _cell_to_action(cell: int) -> int:
    # Cells are numbered 1-9 row by row; PettingZoo numbers its actions column by column.
    row, col = divmod(cell - 1, 3)
    return 3 * col + row


def _action_to_cell(action: int) -> int:
    col, row = divmod(int(action), 3)
    return 3 * row + col + 1


class TicTacToePZ(PettingZooGame):
    """PettingZoo's ``tictactoe_v3`` with a text board; cells are numbered 1-9 row by row.

    ``player_1`` plays X and moves first. A win scores +1 (the loser -1). The rules behind the
    oracle (perfect play) and the success test are :mod:`games.tictactoe_rules`, shared with
    :class:`games.tictactoe.TicTacToe`; so is the reading of answers (a cell number).
    """

    outcome = "win_draw_loss"

    def __init__(self, config: GameConfig | None = None, **options: Any) -> None:
        """Build the env; options are those of :class:`~tsmg.core.GameConfig`."""
        super().__init__(_make_tictactoe, config=config, **options)

    def board(self, agent: AgentID) -> tuple[int, ...]:
        """Cells 1-9 (index 0-8, row by row) as ``agent`` last saw them: 0 empty, 1 X, 2 O."""
        return self._board(agent, self.observations[agent])

    def render_observation(self, agent: AgentID, observation: Any) -> str:
        """The board with X, O and the numbers of the free cells, then whose turn it is."""
        board = self._board(agent, observation)
        marks = [" XO"[value] if value else str(cell + 1) for cell, value in enumerate(board)]
        rows = "\n--+---+--\n".join(" | ".join(marks[row * 3 : row * 3 + 3]) for row in range(3))
        mark = "X" if agent == self.agents[0] else "O"
        lines = [f"Tic-Tac-Toe. You are {agent} and play {mark}.", "", rows, ""]
        legal = [] if self.done else self.legal_actions(agent)
        winner = ttt.winner(board)
        if winner:
            lines.append("Game over: you won." if winner == _mark_of(self, agent) else "Game over: you lost.")
        elif self.done:
            lines.append("Game over: a draw." if all(board) else "Game over.")
        elif legal:
            lines.append(f"Your move: answer with the number of a free cell ({', '.join(legal)}).")
        else:
            lines.append("Wait for the other player's move.")
        return "\n".join(lines)

    def parse_text(self, agent: AgentID, text: str) -> int | Invalid:
        """A cell number from 1 to 9 (free cells only, checked against the env's action mask)."""
        cell = read_cell(text)
        return cell if isinstance(cell, Invalid) else _cell_to_action(cell + 1)

    def action_to_text(self, agent: AgentID, action: Any) -> str:
        """The cell number."""
        return str(_action_to_cell(action))

    def legal_moves(self, agent: AgentID) -> list[Any] | None:
        """Free cells in the order of their numbers (the env's mask lists them column by column)."""
        moves = super().legal_moves(agent)
        return None if moves is None else sorted(moves, key=_action_to_cell)

    def success(self, agent: AgentID) -> bool:
        """Won the game (three in a row)."""
        return ttt.winner(self.board(agent)) == _mark_of(self, agent)

    def oracle(self, agent: AgentID) -> int:
        """Perfect play."""
        return _cell_to_action(ttt.best_move(self.board(agent)) + 1)

    def _board(self, agent: AgentID, observation: Any) -> tuple[int, ...]:
        planes = observation["observation"]  # indexed [column, row, (own marks, other marks)]
        own = _mark_of(self, agent)
        cells = []
        for cell in range(9):
            row, col = divmod(cell, 3)
            cells.append(own if planes[col, row, 0] else (3 - own if planes[col, row, 1] else 0))
        return tuple(cells)


def _make_tictactoe() -> Any:
    # PettingZoo's classic envs import pygame, so they load when the game is made, not with this module.
    # Without it the game raises an ImportError that names the extra, which `tsmg games` lists as a
    # missing dependency (PettingZoo's registry wraps the ImportError in its own FailedToImport).
    try:
        if hasattr(pettingzoo, "make"):  # PettingZoo >= 1.27 builds envs from its registry
            return pettingzoo.make("aec", "classic/tictactoe-v3")
        from pettingzoo.classic import tictactoe_v3

        return tictactoe_v3.env()
    except Exception as error:
        missing = error if isinstance(error, ImportError) else error.__cause__
        if not isinstance(missing, ImportError):
            raise
        name = missing.name or "a dependency"
        raise ImportError(f"PettingZoo's tic-tac-toe needs {name}: pip install 'tsmg[classic]'") from error


def _mark_of(game: TicTacToePZ, agent: AgentID) -> int:
    return 1 if agent == game.agents[0] else 2
