"""A policy's strategy in an OpenSpiel game as OpenSpiel's ``TabularPolicy``, asked at every information state.

What OpenSpiel's exact best responses take: the exploitability measurement
(:mod:`tsmg.apps.openspiel_exploitability`) and the best-response bot against a given strategy
(:class:`tsmg.adapters.openspiel_bots.BestResponsePolicy`) both read a policy's table here.

Which probabilities (:func:`move_probabilities`): the random policy's (uniform); a fixed answer's
(all on the move it names, which must be legal at every information state); a LAP with
constrained choice (its exact choice probabilities at its temperature, or its greedy move at 0);
or any policy with a ``move_probabilities(request) -> {move: probability}`` method. Others are
refused: their probabilities can only be sampled.
"""

from __future__ import annotations

from typing import Any

import pyspiel

from tsmg.adapters.openspiel import OpenSpielGame
from tsmg.core import Invalid
from tsmg.policies import DecisionRequest, FixedPolicy, Policy, RandomPolicy
from tsmg.strategy import choice_probabilities, lap_of

__all__ = ["MAX_INFORMATION_STATES", "move_probabilities", "tabular_policy"]

#: Information states beyond this are too many to ask a policy about one by one.
MAX_INFORMATION_STATES = 100_000


def move_probabilities(policy: Policy, request: DecisionRequest) -> dict[str, float]:
    """The probability ``policy`` gives each legal move of ``request`` (see the module docstring for which policies).

    Raises:
        ValueError: The policy's probabilities cannot be read, or a fixed answer names no legal move.
    """
    legal = list(request.legal_actions or ())
    reader = getattr(policy, "move_probabilities", None)
    if callable(reader):
        probabilities: dict[str, float] = dict(reader(request))
    elif isinstance(policy, RandomPolicy):
        probabilities = dict.fromkeys(legal, 1 / len(legal))
    elif isinstance(policy, FixedPolicy):
        move = request.game.parse(request.agent, policy.text)
        if isinstance(move, Invalid) or not isinstance(request.game, OpenSpielGame):
            raise ValueError(
                f"{policy.name!r} names no legal move of {request.agent} at some information state "
                f"({getattr(move, 'reason', 'not an OpenSpiel game')}): it is no strategy of this game"
            )
        named = request.game.move_name(request.agent, int(move))
        probabilities = {text: float(text == named) for text in legal}
    else:
        lap = lap_of(policy)
        if lap.config.temperature == 0:
            [decision] = lap.act([request])
            probabilities = {text: float(text == decision.action) for text in legal}
        else:
            probabilities = choice_probabilities(lap, request)
    if set(probabilities) != set(legal) or abs(sum(probabilities.values()) - 1) > 1e-6:
        raise ValueError(f"{policy.name!r} gave probabilities {probabilities} over the legal moves {legal}")
    return probabilities


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
