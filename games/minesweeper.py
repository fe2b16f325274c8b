"""Minesweeper as a single-player text game.

Rules are in :mod:`games.minesweeper_rules`. The first reveal is always safe (mines are placed
then, avoiding the cell and, when there is room, its neighbours). Revealing every mine-free
cell wins (+1); revealing a mine loses (-1) and ends the episode; other moves score 0.

Coordinates are ``(x, y)``: x is the column counted from 0 at the left, y the row counted from
0 at the top; the grid is printed with both axes labelled. Answers are ``reveal x y`` (any
case, surrounding punctuation aside: the answer rule of :mod:`tsmg.answers`). With
``allow_flags`` the answer ``flag x y`` puts a flag on a hidden cell or takes it off again: a
note for the player, using a turn. Revealing a flagged cell is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from games import minesweeper_rules as rules
from tsmg.answers import normalize_answer, quote
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_ANSWER = re.compile(r"(reveal|flag) (0|[1-9][0-9]{0,2}) (0|[1-9][0-9]{0,2})", re.ASCII)
Move = tuple[str, int]  # ("reveal" or "flag", cell index y * width + x)


class MinesweeperConfig(GameConfig):
    """Options of Minesweeper."""

    width: int = Field(default=6, ge=2, le=30, description="Columns of the grid.")
    height: int = Field(default=6, ge=2, le=30, description="Rows of the grid.")
    mines: int = Field(default=5, ge=1, description="Number of mines (fewer than the cells).")
    allow_flags: bool = Field(default=False, description="Also accept 'flag x y' to mark or unmark a hidden cell.")

    @model_validator(mode="after")
    def _check_mines(self) -> MinesweeperConfig:
        if self.mines >= self.width * self.height:
            raise ValueError(f"mines must be fewer than the {self.width * self.height} cells")
        return self


@dataclass(frozen=True, slots=True)
class MinesweeperState:
    """The grid size, the hidden cell order the mines come from, and what has happened so far."""

    width: int
    height: int
    mine_count: int
    order: tuple[int, ...]
    mines: frozenset[int] | None = None  # placed at the first reveal
    revealed: frozenset[int] = frozenset()
    flagged: frozenset[int] = frozenset()
    exploded: int | None = None

    def won(self) -> bool:
        """Every mine-free cell is revealed."""
        return self.mines is not None and self.exploded is None and len(self.revealed) == self.size - self.mine_count

    @property
    def size(self) -> int:
        """Number of cells."""
        return self.width * self.height


class Minesweeper(RulesGame[MinesweeperState, Move]):
    """Find the mine-free cells of a grid from the numbers revealed cells show.

    Example:
        >>> game = Minesweeper()
        >>> _ = game.reset(seed=0)
        >>> game.step({"player": "reveal 2 3"}).infos["player"]["action"]
        'reveal 2 3'
        >>> game.parse("player", "reveal 2 3").reason
        'cell (2, 3) is already revealed; answer reveal x y for a hidden cell (#)'
    """

    Config = MinesweeperConfig
    config: MinesweeperConfig
    AGENTS = ("player",)

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> MinesweeperState:
        """A fully hidden grid; the random cell order that will place the mines is drawn now."""
        config = self.config
        order = rules.random_order(rng, config.width, config.height)
        return MinesweeperState(config.width, config.height, config.mines, order)

    def transition(
        self, state: MinesweeperState, actions: Mapping[AgentID, Move], rng: np.random.Generator
    ) -> tuple[MinesweeperState, Mapping[AgentID, float]]:
        """Reveal (placing the mines first if needed) or toggle a flag; +1 on clearing, -1 on a mine."""
        kind, cell = actions["player"]
        if kind == "flag":
            return replace(state, flagged=state.flagged ^ {cell}), {"player": 0.0}
        mines = state.mines
        if mines is None:
            mines = rules.place_mines(state.order, state.mine_count, cell, state.width, state.height)
        if cell in mines:
            return replace(state, mines=mines, exploded=cell), {"player": -1.0}
        revealed = rules.reveal(state.revealed, mines, cell, state.width, state.height)
        next_state = replace(state, mines=mines, revealed=revealed, flagged=state.flagged - revealed)
        return next_state, {"player": 1.0 if next_state.won() else 0.0}

    def is_terminal(self, state: MinesweeperState) -> bool:
        """A mine was revealed, or every mine-free cell was."""
        return state.exploded is not None or state.won()

    def legal_moves(self, state: MinesweeperState, agent: AgentID) -> Sequence[Move]:
        """Reveal any hidden cell (then, with flags allowed, flag any hidden cell), row by row."""
        if self.is_terminal(state):
            return ()
        hidden = [cell for cell in range(state.size) if cell not in state.revealed]
        moves = [("reveal", cell) for cell in hidden]
        if self.config.allow_flags:
            moves += [("flag", cell) for cell in hidden]
        return moves

    def success(self, state: MinesweeperState, agent: AgentID) -> bool:
        """Success means clearing the grid."""
        return state.won()

    def oracle(self, state: MinesweeperState, agent: AgentID) -> Move | None:
        """Logical deductions from the visible numbers, else the least risky guess."""
        if self.is_terminal(state):
            return None
        numbers = {cell: self._number(state, cell) for cell in state.revealed}
        return ("reveal", rules.solver_move(state.width, state.height, state.mine_count, numbers))

    def key(self, state: MinesweeperState, agent: AgentID) -> Hashable:
        """What the player sees: revealed cells with their numbers, and flags."""
        return (tuple(sorted((c, self._number(state, c)) for c in state.revealed)), tuple(sorted(state.flagged)))

    # ------------------------------------------------------------------ text layer
    def render(self, state: MinesweeperState, agent: AgentID) -> str:
        """Rules, coordinate convention, the labelled grid, and what to answer (or the result)."""
        width, height = state.width, state.height
        hidden = state.size - len(state.revealed)
        legend = "# = hidden, . = revealed with no mine around, 1-8 = mines among the 8 touching cells"
        if self.config.allow_flags:
            legend += ", F = flagged"
        if self.is_terminal(state):
            legend += ", * = mine" + (", X = the mine you revealed" if state.exploded is not None else "")
        lines = [
            f"Minesweeper on a {width}x{height} grid with {state.mine_count} mines. Reveal every cell without a mine "
            "to win; revealing a mine loses. Your first reveal is always safe.",
            f"Coordinates (x, y): x is the column, 0 to {width - 1} from the left; y is the row, 0 to {height - 1} "
            f"from the top. Grid ({legend}):",
            "",
            *self._grid(state),
            "",
        ]
        if state.exploded is not None:
            x, y = _xy(state, state.exploded)
            lines.append(f"Game over: you revealed the mine at ({x}, {y}).")
        elif state.won():
            lines.append("You cleared the grid: you won.")
        else:
            lines.append(f"Hidden cells: {hidden}, of which {state.mine_count} are mines.")
            answer = 'Answer "reveal x y" to reveal a hidden cell'
            if self.config.allow_flags:
                answer += ', or "flag x y" to flag or unflag one'
            lines.append(answer + ".")
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: MinesweeperState | None) -> Move | Invalid:
        """``reveal x y`` (``flag x y`` with flags allowed) naming a hidden cell."""
        config = self.config
        words = normalize_answer(text)
        match = None if words is None else _ANSWER.fullmatch(words)
        if match is None:
            expected = "reveal x y" + (" or flag x y" if config.allow_flags else "")
            return Invalid(
                f"expected {expected} (x = column from 0 at the left, y = row from 0 at the top); got {quote(text)}"
            )
        kind = match.group(1)
        x, y = int(match.group(2)), int(match.group(3))
        if kind == "flag" and not config.allow_flags:
            return Invalid("flags are not used in this game; answer reveal x y")
        if not (0 <= x < config.width and 0 <= y < config.height):
            return Invalid(f"({x}, {y}) is off the grid: x must be 0-{config.width - 1} and y 0-{config.height - 1}")
        cell = y * config.width + x
        if state is not None:
            if self.is_terminal(state):
                return Invalid("the game is over")
            if cell in state.revealed:
                return Invalid(f"cell ({x}, {y}) is already revealed; answer {kind} x y for a hidden cell (#)")
        return (kind, cell)

    def action_text(self, agent: AgentID, action: Move) -> str:
        """``reveal x y`` or ``flag x y``."""
        kind, cell = action
        return f"{kind} {cell % self.config.width} {cell // self.config.width}"

    # --------------------------------------------------------------------- helpers
    @staticmethod
    def _number(state: MinesweeperState, cell: int) -> int:
        mines = state.mines or frozenset()
        return rules.adjacent_mines(mines, cell, state.width, state.height)

    def _grid(self, state: MinesweeperState) -> list[str]:
        over = self.is_terminal(state)
        mines = state.mines or frozenset()
        pad = len(str(max(state.width, state.height) - 1))
        rows = [" " * (pad + 2) + "x " + " ".join(str(x).rjust(pad) for x in range(state.width)), "y"]
        for y in range(state.height):
            symbols = []
            for x in range(state.width):
                cell = y * state.width + x
                if cell == state.exploded:
                    symbol = "X"
                elif cell in state.revealed:
                    number = self._number(state, cell)
                    symbol = str(number) if number else "."
                elif over and cell in mines:
                    symbol = "*"
                else:
                    symbol = "F" if cell in state.flagged else "#"
                symbols.append(symbol.rjust(pad))
            rows.append(str(y).rjust(pad) + "    " + " ".join(symbols))
        return rows


def _xy(state: MinesweeperState, cell: int) -> tuple[int, int]:
    return cell % state.width, cell // state.width
