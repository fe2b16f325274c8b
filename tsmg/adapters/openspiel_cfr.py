"""OpenSpiel's CFR as a player: the average policy after N iterations (model spec ``openspiel-cfr:N``).

Counterfactual regret minimisation (OpenSpiel's C++ ``pyspiel.CFRSolver``) is run for N
iterations on the whole game tree, once per game and N in a process; the player then plays the
solver's **average policy**, the strategy whose exploitability falls towards 0 as N grows. Its move
probabilities at a decision are the average policy's at the acting seat's information state, so
``tsmg exploitability --model openspiel-cfr:1000`` measures, through tsmg's own path (every
information state reset to and asked, :meth:`~tsmg.adapters.openspiel.OpenSpielGame.exploitability`), the policy
OpenSpiel's ``exploitability`` measures directly; the two agree to 1e-6 (``tests/test_openspiel_cfr.py``).

It plays turn-based OpenSpiel games with information-state strings and at most
:data:`~tsmg.adapters.openspiel_bots.MAX_HISTORIES` histories (Kuhn and Leduc poker, Liar's Dice
with one die each, small phantom games); others are refused in one sentence. Each move is drawn
from the average policy with the decision's generator (:meth:`tsmg.policies.DecisionRequest.rng`),
so an evaluation replays exactly.

Example:
    >>> import tsmg
    >>> from tsmg.policies import policy_from_spec
    >>> cfr = policy_from_spec("openspiel-cfr:50")
    >>> cfr.name, cfr.iterations
    ('openspiel-cfr:50', 50)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pyspiel

from tsmg.adapters.openspiel import OpenSpielGame
from tsmg.adapters.openspiel_bots import refuse_unsolvable
from tsmg.policies import Decision, DecisionRequest

__all__ = ["DEFAULT_ITERATIONS", "CFRPolicy", "average_policy"]

#: The iterations of ``openspiel-cfr`` without ``:N``.
DEFAULT_ITERATIONS = 1000
#: The iterations above which a spec is refused (a typo such as 10000000 would run for hours).
MAX_ITERATIONS = 1_000_000

#: OpenSpiel's average policies by (game string, iterations), shared by every player of the process.
_SOLVED: dict[tuple[str, int], Any] = {}
_SOLVED_LOCK = threading.Lock()


def average_policy(spiel_game: Any, iterations: int) -> Any:
    """OpenSpiel's CFR average policy (a ``pyspiel.Policy``) of ``spiel_game`` after ``iterations`` (cached)."""
    key = (str(spiel_game), iterations)
    with _SOLVED_LOCK:  # one solve per key, even when the threads of a rollout ask together
        if key not in _SOLVED:
            solver = pyspiel.CFRSolver(spiel_game)
            for _ in range(iterations):
                solver.evaluate_and_update_policy()
            _SOLVED[key] = solver.tabular_average_policy()  # a copy: average_policy() points into the solver
        return _SOLVED[key]


class CFRPolicy:
    """OpenSpiel's CFR average policy after ``iterations`` iterations, as a policy (see the module docstring).

    Args:
        seed: The policy seed (each move is drawn from the average policy with the decision's generator).
        iterations: CFR iterations before play.
        name: The policy's name in reports (``openspiel-cfr:N``).
    """

    #: The model options the player takes, with their defaults (``openspiel-cfr:N`` sets iterations too).
    DEFAULTS: ClassVar[dict[str, int]] = {"iterations": DEFAULT_ITERATIONS}

    def __init__(self, seed: int = 0, *, iterations: int = DEFAULT_ITERATIONS, name: str | None = None) -> None:
        """Keep the iteration count; the game is solved when the player first meets it."""
        if not 1 <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"openspiel-cfr needs 1 to {MAX_ITERATIONS:,} iterations, got {iterations}")
        self.seed = seed
        self.iterations = int(iterations)
        self.name = name or f"openspiel-cfr:{self.iterations}"
        self._playable: set[str] = set()

    @classmethod
    def from_options(cls, seed: int, options: Mapping[str, Any], *, target: str = "") -> CFRPolicy:
        """The player a model spec asks for: ``openspiel-cfr:N`` or ``--model-option openspiel-cfr:iterations=N``.

        Raises:
            ValueError: An unknown option, a count that is not a positive integer, or two different counts.
        """
        unknown = sorted(set(options) - set(cls.DEFAULTS))
        if unknown:
            raise ValueError(f"openspiel-cfr has no model option {', '.join(unknown)}; its option: iterations")
        counts = []
        if target:
            if not target.strip().isdigit():
                raise ValueError(f"openspiel-cfr:N needs N, its iterations, as a whole number, got {target!r}")
            counts.append(int(target))
        if "iterations" in options:
            value = options["iterations"]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"openspiel-cfr option iterations must be a whole number, got {value!r}")
            counts.append(value)
        if len(set(counts)) > 1:
            raise ValueError(f"openspiel-cfr was given two iteration counts ({counts[0]} and {counts[1]}): give one")
        return cls(seed, iterations=counts[0] if counts else DEFAULT_ITERATIONS)

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """A move per request, drawn from the average policy with the decision's generator."""
        decisions = []
        for request in requests:
            probabilities = self.move_probabilities(request)
            moves = list(probabilities)
            weights = [probabilities[move] for move in moves]
            index = int(request.rng(self.seed).choice(len(moves), p=[weight / sum(weights) for weight in weights]))
            decisions.append(Decision(action=moves[index]))
        return decisions

    def move_probabilities(self, request: DecisionRequest) -> dict[str, float]:
        """The average policy's probability of each legal move, at the acting seat's information state.

        Raises:
            ValueError: Not an OpenSpiel game, or one CFR cannot solve here (the message says why).
        """
        game = request.game
        if not isinstance(game, OpenSpielGame):
            raise ValueError(
                f"openspiel-cfr plays OpenSpiel games only (openspiel:NAME or OpenSpiel/NAME-v0), not {game.game_id}"
            )
        self.check_playable(game)
        player = game.player(request.agent)
        table = average_policy(game.pyspiel_game, self.iterations)
        by_action = table.action_probabilities(game.state.information_state_string(player))
        legal = list(request.legal_actions or game.legal_actions(request.agent) or ())
        return {move: float(by_action.get(game.move_action(request.agent, move), 0.0)) for move in legal}

    def check_playable(self, game: OpenSpielGame) -> None:
        """Refuse, in one sentence, a game CFR cannot solve here (checked once per OpenSpiel game).

        Raises:
            ValueError: Simultaneous moves, no information-state strings, or too many histories.
        """
        key = str(game.pyspiel_game)
        if key in self._playable:
            return
        refuse_unsolvable(game, "openspiel-cfr")
        self._playable.add(key)
