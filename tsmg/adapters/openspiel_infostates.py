"""Is an adapted game's text faithful to OpenSpiel's information states? A sweep of the game tree says.

A seat decides on what it is shown. Two decisions with different OpenSpiel information states
must get different prompts (else no policy a model can express tells them apart: a game's
exploitability through the text has a floor that is not the model's), and two with the same
information state the same prompt (else the text leaks what the seat should not know).
:func:`sweep` walks the history tree of a two-player game depth first, every chance outcome
included, asks :class:`~tsmg.adapters.openspiel.OpenSpielGame` for the acting seat's prompt at each
decision (through :meth:`~tsmg.adapters.openspiel.OpenSpielGame.reset_to`, the path exploitability
takes), and counts information states, prompts and the pairs that break the rule. A seat's information
state is OpenSpiel's information-state string in a game of hidden information, and the history
itself in a game of perfect information (a seat that remembers its game knows the move order;
twixt's string is only the position).

Its own module: it builds the game of :mod:`.openspiel` and is used by tests and
``bench/openspiel_infostate_sweep.py``, never by the game.

Example:
    >>> from tsmg.adapters.openspiel_infostates import sweep
    >>> result = sweep("kuhn_poker")
    >>> result.information_states, result.prompts, result.faithful
    (12, 12, True)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SweepResult", "sweep"]


@dataclass
class SweepResult:
    """What one sweep found.

    Attributes:
        game: The OpenSpiel game string.
        view: The text view swept.
        histories: The histories (tree nodes, chance nodes included) visited.
        complete: Whether the whole tree was visited (False when ``max_histories`` stopped the walk).
        decisions: The decision nodes whose prompt was read.
        information_states: The distinct (seat, information state) pairs met.
        prompts: The distinct (seat, prompt) pairs met.
        merged: Examples of two information states of a seat that got one prompt (at most 3).
        split: Examples of one information state that got two prompts (at most 3).
    """

    game: str
    view: str
    histories: int = 0
    complete: bool = True
    decisions: int = 0
    information_states: int = 0
    prompts: int = 0
    merged: list[tuple[str, str]] = field(default_factory=list)
    split: list[tuple[str, str]] = field(default_factory=list)

    @property
    def faithful(self) -> bool:
        """Different information states got different prompts, and equal ones equal prompts."""
        return not self.merged and not self.split

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data (with ``faithful``), for a JSON line."""
        return {**asdict(self), "faithful": self.faithful}


def sweep(game: str, view: str = "full", max_histories: int | None = None) -> SweepResult:
    """Walk ``game``'s history tree and compare the acting seat's prompts with its information states.

    Args:
        game: An OpenSpiel game string (``leduc_poker``, ``goofspiel(num_cards=3)``) of a
            turn-based game.
        view: The adapter's text view to check (``full``, ``compact`` or ``raw``).
        max_histories: Stop after visiting this many histories (``complete`` is then False); None: the whole tree.

    Raises:
        ValueError: The game has simultaneous moves (a decision is a joint one: not swept here), or
            hidden information without an information-state string (nothing to compare with).
    """
    import pyspiel

    from tsmg.adapters.openspiel import OpenSpielGame

    adapted = OpenSpielGame(game=game, view=view)
    pyspiel_game = adapted.pyspiel_game
    if not adapted.turn_based:
        raise ValueError(f"{game} has simultaneous moves: the sweep walks turn-based games only")
    perfect = adapted.game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
    if not perfect and not adapted.game_type.provides_information_state_string:
        raise ValueError(f"{game} gives no information-state string: its information states cannot be told apart")
    result = SweepResult(game=game, view=view)
    prompts_of: dict[tuple[int, str], set[str]] = defaultdict(set)
    states_of: dict[tuple[int, str], set[str]] = defaultdict(set)
    stack = [pyspiel_game.new_initial_state()]
    while stack:
        if max_histories is not None and result.histories >= max_histories:
            result.complete = False
            break
        state = stack.pop()
        result.histories += 1
        if state.is_terminal():
            continue
        if state.is_chance_node():
            actions = [action for action, _ in state.chance_outcomes()]
        else:
            player = state.current_player()
            # A perfect-information seat's information state is the history (OpenSpiel's string is
            # the position in some games, twixt's: two move orders of one position are two histories).
            information = (
                str([(item.player, item.action) for item in state.full_history()])
                if perfect
                else str(state.information_state_string(player))
            )
            adapted.reset_to(state)
            prompt = adapted.observe(adapted.agents[player])
            prompts_of[(player, information)].add(prompt)
            states_of[(player, prompt)].add(information)
            result.decisions += 1
            actions = list(state.legal_actions())
        for action in reversed(actions):
            stack.append(state.child(action))
    result.information_states, result.prompts = len(prompts_of), len(states_of)
    result.split = [(key[1], "\n---\n".join(sorted(found)[:2])) for key, found in prompts_of.items() if len(found) > 1][
        :3
    ]
    result.merged = [(key[1], " | ".join(sorted(found)[:2])) for key, found in states_of.items() if len(found) > 1][:3]
    return result
