"""The policies: scripted ones (random-legal, fixed, oracle, any callable) and the one a model spec names.

A policy decides for a *batch* of requests at once: the rollout engine gathers every pending
decision of every live episode into one call, which is what makes model backends fast. Scripted
policies draw randomness from a generator derived by :mod:`tsmg.seeding`'s rule from the policy
seed and the decision's plan position (game seed, index in the group, round, agent), so their
choices do not depend on how episodes happen to be batched, and a group's episodes differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tsmg import loading
from tsmg.core import Game
from tsmg.decisions import Decision, DecisionRequest, Policy, Turn
from tsmg.lap import LAP, LAPConfig
from tsmg.model_spec import ModelSpecError, parse_model_spec

__all__ = [
    "CallablePolicy",
    "Decision",
    "DecisionRequest",
    "FixedPolicy",
    "OraclePolicy",
    "Policy",
    "RandomPolicy",
    "Turn",
    "policy_from_spec",
]

#: The layers above that a model spec reaches, named by string (:mod:`tsmg.loading` imports each
#: only when such a player is made): the backends that load a language model, and OpenSpiel's
#: bots (MCTS, the exact best response) from the OpenSpiel adapter.
MODEL_LOADER = "backends:load_model"
OPENSPIEL_BOTS = {
    "openspiel-mcts": "tsmg.adapters.openspiel_bots:MCTSPolicy",
    "openspiel-br": "tsmg.adapters.openspiel_bots:BestResponsePolicy",
}


class RandomPolicy:
    """Plays a uniformly random legal action.

    Example:
        >>> import tsmg
        >>> from tsmg.rollout import rollout
        >>> episodes = rollout("FrozenLake-v0", RandomPolicy(seed=0), seeds=[0, 1])
        >>> [len(e.steps) > 0 for e in episodes]
        [True, True]
    """

    def __init__(self, seed: int = 0, name: str = "random") -> None:
        """Seed the policy; the same seed always makes the same choices."""
        self.seed = seed
        self.name = name

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Pick a legal action per request."""
        decisions = []
        for request in requests:
            if not request.legal_actions:
                raise ValueError(
                    f"{request.game.game_id} does not enumerate legal actions for {request.agent}; "
                    "a random policy needs legal_actions()"
                )
            choice = request.legal_actions[int(request.rng(self.seed).integers(len(request.legal_actions)))]
            decisions.append(Decision(action=choice))
        return decisions


class FixedPolicy:
    """Always answers the same text (useful for tests and as a trivial baseline)."""

    def __init__(self, text: str, name: str | None = None) -> None:
        """Answer ``text`` every time."""
        self.text = text
        self.name = name or f"fixed:{text}"

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """The fixed text for every request."""
        return [Decision(action=self.text) for _ in requests]


class OraclePolicy:
    """Plays the game's own oracle (optimal or strong heuristic) action."""

    def __init__(self, name: str = "oracle") -> None:
        """Name the policy."""
        self.name = name

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Ask each game for its oracle action."""
        decisions = []
        for request in requests:
            action = request.game.oracle_action(request.agent)
            if action is None:
                raise ValueError(f"{request.game.game_id} has no oracle for {request.agent}")
            decisions.append(Decision(action=action))
        return decisions

    @staticmethod
    def check_game(game: Game, seed: int | None = None) -> None:
        """Refuse, before anything is played, a game that has no oracle to play.

        Resets ``game`` with ``seed`` and asks for the oracle's move of each seat to move first.

        Raises:
            ValueError: No seat gets an oracle move (the message names the game and what to do).
        """
        game.reset(seed=seed)
        if not any(game.oracle_action(agent) is not None for agent in game.active_agents):
            raise ValueError(
                f"the oracle policy plays the game's own oracle, and {game.game_id} has none (its oracle gives no "
                "move at the start of an episode): give the game an oracle (RulesGame.oracle) or pick another policy"
            )


class CallablePolicy:
    """Wraps a function ``request -> answer text`` as a policy."""

    def __init__(self, function: Callable[[DecisionRequest], str], name: str | None = None) -> None:
        """Use ``function`` for every decision."""
        self.function = function
        self.name = name or getattr(function, "__name__", "callable")

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Call the function once per request."""
        return [Decision(action=self.function(request)) for request in requests]


def policy_from_spec(
    spec: str,
    seed: int = 0,
    *,
    lap: LAPConfig | None = None,
    model_options: Mapping[str, Any] | None = None,
    scripted_only: bool = False,
) -> Policy:
    """The policy a model spec names (:mod:`tsmg.model_spec`): a script, or a LAP over a backend.

    Args:
        spec: ``random``, ``oracle``, ``fixed:TEXT``, ``openspiel-mcts``, ``openspiel-br`` or a language model
            (``hf:PATH``, ``smollm2``, ``openai:MODEL``, ``vllm:PATH``).
        seed: Seed of the random policy and of OpenSpiel's bots.
        lap: How a language model is prompted and its answers read (default :class:`~tsmg.lap.LAPConfig`).
        model_options: Keyword arguments of the backend (``base_url``, ``dtype``, ...), or of the
            MCTS bot (``simulations``, ``uct_c``, ``rollouts``), or of the best response (``against``).
        scripted_only: Refuse language models (where only scripts make sense).

    Raises:
        ModelSpecError: The spec names no known kind of player (the message lists them).
        backends.BackendError: The model cannot be loaded (missing files, no API key, ...).
    """
    parsed = parse_model_spec(spec)
    if parsed.kind == "random":
        return RandomPolicy(seed=seed)
    if parsed.kind == "oracle":
        return OraclePolicy()
    if parsed.kind == "fixed":
        return FixedPolicy(parsed.target)
    if parsed.kind in OPENSPIEL_BOTS:
        try:
            bot: Any = loading.load(OPENSPIEL_BOTS[parsed.kind])  # imported only now: it loads pyspiel
        except ModuleNotFoundError as error:
            if error.name != "pyspiel":
                raise
            raise ModelSpecError(f"{parsed.kind} needs OpenSpiel: pip install 'tsmg[openspiel]'") from None
        return bot.from_options(seed, model_options or {})
    if scripted_only:
        raise ModelSpecError(f"{spec!r} is a language model; here use random, oracle or fixed:TEXT")
    load_model = loading.load(MODEL_LOADER)  # heavy: imported only when a model plays
    model = load_model(spec, **dict(model_options or {}))
    return LAP(model, lap or LAPConfig(), name=spec)
