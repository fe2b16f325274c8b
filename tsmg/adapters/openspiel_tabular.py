"""A policy's strategy in an OpenSpiel game as OpenSpiel's ``TabularPolicy``, and its exact exploitability.

What OpenSpiel's exact best responses take: the exploitability capability of the OpenSpiel games
(:meth:`tsmg.adapters.openspiel.OpenSpielGame.exploitability`, :func:`exploitability`: a
:class:`tsmg.exploitability.HasExploitability`) and the best-response bot against a given strategy
(:class:`tsmg.adapters.openspiel_bots.BestResponsePolicy`) both read a policy's table here.

The policy is asked, at every information state of the game (:func:`tabular_policy`), how likely
each legal move is, seeing the prompt it plays with there: the observation of the game as its
options make it (its ``view``: ``tsmg exploitability`` passes a training run's options and
``--option``), which the readable views make faithful to the information state
(:mod:`tsmg.adapters.openspiel_infostates`); those probabilities become an OpenSpiel
``TabularPolicy``, and OpenSpiel's best responses give each seat's best-response value and the
exploitability ``(BR_0 + BR_1) / 2`` (NashConv / 2). On Kuhn poker this is the figure of the
hand-written solver (``games.kuhn_poker_exploitability``), 0.4583 for random play.

Which probabilities: those :func:`tsmg.strategy.move_probabilities` reads (the random policy's,
a fixed answer's, a LAP with constrained choice, OpenSpiel's CFR ``openspiel-cfr:N``
(:mod:`tsmg.adapters.openspiel_cfr`) or any policy with a ``move_probabilities(request)``
method). Others are refused: their probabilities can only be sampled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyspiel

from tsmg.adapters.openspiel import OpenSpielGame
from tsmg.exploitability import ExploitabilityReport
from tsmg.policies import DecisionRequest, Policy
from tsmg.strategy import move_probabilities, policy_temperature

__all__ = [
    "MAX_INFORMATION_STATES",
    "exploitability",
    "move_probabilities",
    "openspiel_exploitability",
    "tabular_policy",
]

#: Information states beyond this are too many to ask a policy about one by one.
MAX_INFORMATION_STATES = 100_000


def exploitability(policy: Policy, game: OpenSpielGame) -> ExploitabilityReport:
    """The exact exploitability of ``policy`` in the OpenSpiel ``game`` (both seats played by it).

    Args:
        policy: A policy whose move probabilities can be read (:func:`move_probabilities`).
        game: A two-player zero-sum (or constant-sum) game small enough to enumerate; simultaneous
            moves are solved in OpenSpiel's turn-based form (:func:`tabular_policy`). Its options
            (its view) make the prompt the policy is asked with; they do not change OpenSpiel's rules.

    Returns:
        The report: exploitability, each seat's best-response value, and the strategy read
        (information-state string -> move -> probability).

    Raises:
        ValueError: Not two-player zero-sum, too large, or a policy whose probabilities cannot be read.
    """
    from open_spiel.python.algorithms import best_response

    spiel = game.pyspiel_game
    game_type = spiel.get_type()
    zero_sum = game_type.utility in (pyspiel.GameType.Utility.ZERO_SUM, pyspiel.GameType.Utility.CONSTANT_SUM)
    if spiel.num_players() != 2 or not zero_sum:
        raise ValueError(f"exploitability needs a two-player zero-sum game; {game.game_id} is not one")
    table, strategy = tabular_policy(policy, game)
    solved = table.game  # the game itself, or its turn-based form (simultaneous games)
    root = solved.new_initial_state()
    values = tuple(best_response.BestResponsePolicy(solved, seat, table).value(root) for seat in range(2))
    return ExploitabilityReport(
        exploitability=(sum(values) - spiel.utility_sum()) / 2,
        best_response=(float(values[0]), float(values[1])),
        strategy=strategy,
        temperature=policy_temperature(policy),
    )


def openspiel_exploitability(
    policy: Policy, game_id: str, *, game_options: Mapping[str, Any] | None = None
) -> ExploitabilityReport:
    """:func:`exploitability` in ``game_id`` (``openspiel:NAME(PARAMS)``, ``OpenSpiel/NAME-v0``) with ``game_options``.

    Raises:
        ValueError: Not a two-seat OpenSpiel game, or as :func:`exploitability`.
    """
    from tsmg.registry import make

    game = make(game_id, **dict(game_options or {}))
    if not isinstance(game, OpenSpielGame):
        raise ValueError(
            f"{game_id} is not a two-seat OpenSpiel game (without vs=): use openspiel:NAME or an OpenSpiel/NAME-v0 id"
        )
    return exploitability(policy, game)


def tabular_policy(policy: Policy, game: OpenSpielGame) -> tuple[Any, dict[str, dict[str, float]]]:
    """``policy``'s strategy in ``game`` as an OpenSpiel ``TabularPolicy``, asked at every information state.

    A simultaneous-move game is solved in OpenSpiel's turn-based form
    (``pyspiel.convert_to_turn_based``: the seats move one after the other, none seeing the
    others' pending moves); the policy is still asked at the simultaneous game's state, seeing
    what a seat sees there. The table's ``game`` is the game it is over.

    Returns:
        The table, and the strategy read (information-state string -> move -> probability).

    Raises:
        ValueError: No information-state strings, too many information states, or a policy whose
            probabilities cannot be read.
    """
    from open_spiel.python import policy as policy_lib

    spiel = game.pyspiel_game
    if not spiel.get_type().provides_information_state_string:
        raise ValueError(
            f"{game.game_id} gives no information-state strings: its information states cannot be enumerated"
        )
    solved = spiel if game.turn_based else pyspiel.convert_to_turn_based(spiel)
    table = policy_lib.TabularPolicy(solved)
    if len(table.states) > MAX_INFORMATION_STATES:
        raise ValueError(f"{game.game_id} has {len(table.states):,} information states, too many to ask a policy about")
    strategy: dict[str, dict[str, float]] = {}
    for index, state in enumerate(table.states):
        agent = game.agents[state.current_player()]
        game.reset_to(state if game.turn_based else _simultaneous_state(spiel, state))
        request = DecisionRequest(game, agent, game.observe(agent), game.legal_actions(agent))
        probabilities = move_probabilities(policy, request)
        row = table.action_probability_array[index]
        row[:] = 0.0
        for move, probability in probabilities.items():
            row[game.move_action(agent, move)] = probability
        strategy[state.information_state_string()] = probabilities
    return table, strategy


def _simultaneous_state(spiel: Any, turn_based: Any) -> Any:
    """The state of the simultaneous game ``spiel`` that a state of its turn-based form stands for.

    The turn-based history holds chance outcomes and each seat's move in seat order; a round's
    moves are played together once every seat has moved, and a round in progress is left pending
    (the seats still to move see the state before it).
    """
    state, pending = spiel.new_initial_state(), []
    for action in turn_based.history():
        if state.is_chance_node():
            state.apply_action(action)
            continue
        pending.append(action)
        if len(pending) == spiel.num_players():
            state.apply_actions(pending)
            pending = []
    return state
