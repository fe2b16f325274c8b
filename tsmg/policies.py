"""The policies: scripted ones (random-legal, fixed, oracle, any callable) and the one a model spec names.

A policy decides for a *batch* of requests at once: the rollout engine gathers every pending
decision of every live episode into one call, which is what makes model backends fast. Scripted
policies draw randomness from a generator derived by :mod:`tsmg.seeding`'s rule from the policy
seed and the decision's plan position (game seed, index in the group, round, agent), so their
choices do not depend on how episodes happen to be batched, and a group's episodes differ.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
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
    "register_model_kind",
    "register_player_kind",
]

#: Entry-point groups of the kinds of players the layers above provide, each entry named by its
#: model-spec kind: ``tsmg.players`` a factory ``(seed, options) -> Policy`` (OpenSpiel's bots),
#: ``tsmg.models`` a loader ``(spec, **options) -> LanguageModel`` that a LAP then prompts (the
#: backends). Read the first time a kind is not found; each factory imported only when it plays.
PLAYER_GROUP = "tsmg.players"
MODEL_GROUP = "tsmg.models"


_player_kinds: dict[str, str | Callable[..., Any]] = {}
_model_kinds: dict[str, str | Callable[..., Any]] = {}
_kind_entries_read = False
_kind_lock = threading.Lock()


def register_player_kind(kind: str, factory: str | Callable[..., Policy]) -> None:
    """Make the players of model-spec kind ``kind`` (a script or a bot) by ``factory(seed, options)``.

    Args:
        kind: The model-spec kind (``openspiel-mcts``).
        factory: ``"module:attribute"`` (imported when such a player is made) or a function
            ``(seed, options) -> Policy``; a kind whose spec may carry a target
            (``openspiel-cfr:1000``) is called with it as ``target=...`` too.
    """
    _player_kinds[kind] = factory


def register_model_kind(kind: str, loader: str | Callable[..., Any]) -> None:
    """Make the language models of model-spec kind ``kind`` by ``loader(spec, **options)``; a LAP prompts them.

    Args:
        kind: The model-spec kind (``hf``, ``openai``).
        loader: ``"module:attribute"`` (imported when such a model plays) or a function returning a
            :class:`tsmg.lm.LanguageModel`.
    """
    _model_kinds[kind] = loader


def _registered(kind: str) -> tuple[str, str | Callable[..., Any]] | None:
    """``("player" | "model", its registration)`` for ``kind``, reading the entry points the first time."""
    global _kind_entries_read
    if kind not in _player_kinds and kind not in _model_kinds and not _kind_entries_read:
        with _kind_lock:
            if not _kind_entries_read:
                for group, table in ((PLAYER_GROUP, _player_kinds), (MODEL_GROUP, _model_kinds)):
                    for entry in loading.plugin_entries(group):
                        table.setdefault(entry.name, entry.reference)
                _kind_entries_read = True
    if kind in _player_kinds:
        return "player", _player_kinds[kind]
    if kind in _model_kinds:
        return "model", _model_kinds[kind]
    return None


def _factory(kind: str, registration: str | Callable[..., Any]) -> Any:
    """The registered factory itself (imported now if named by string); a missing library said in one sentence."""
    if not isinstance(registration, str):
        return registration
    try:
        return loading.load(registration)
    except ModuleNotFoundError as error:
        own = registration.partition(":")[0]
        if error.name is None or own == error.name or own.startswith(error.name + "."):
            raise  # the factory's own module is missing: a broken registration, not a missing library
        raise ModelSpecError(f"{kind} needs {error.name}, which is not installed{loading.install_hint(kind)}") from None


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
    found = _registered(parsed.kind)
    if found is None:
        raise ModelSpecError(f"no player of kind {parsed.kind!r} is installed (no tsmg.players or tsmg.models entry)")
    role, registration = found
    if role == "player":
        factory = _factory(parsed.kind, registration)
        if parsed.target:  # a kind that takes one (openspiel-cfr:1000): the factory reads it
            return factory(seed, model_options or {}, target=parsed.target)
        return factory(seed, model_options or {})
    if scripted_only:
        raise ModelSpecError(f"{spec!r} is a language model; here use random, oracle or fixed:TEXT")
    load_model = _factory(parsed.kind, registration)  # heavy: imported only when a model plays
    model = load_model(spec, **dict(model_options or {}))
    return LAP(model, lap or LAPConfig(), name=spec)


def compact_observation(text: str, pattern: str | None) -> str:
    r"""The lines of ``text`` that fully match ``pattern`` (all of ``text`` when None or none match).

    Example:
        >>> compact_observation("Board:\nP_\n_G\nGo.", "[_OPG]+")
        'P_\n_G'
    """
    if pattern is None:
        return text
    regex = re.compile(pattern)
    kept = [line for line in text.splitlines() if regex.fullmatch(line)]
    return "\n".join(kept) if kept else text


class CompactView:
    """A policy that shows another one only the observation lines matching a pattern (``rollout.observation_lines``).

    Args:
        policy: The policy that decides (the model's LAP).
        pattern: The lines kept (None: the whole observation).
    """

    def __init__(self, policy: Policy, pattern: str | None) -> None:
        self.policy = policy
        self.pattern = pattern
        self.name = policy.name

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """The wrapped policy's decisions on the compact observations."""
        if self.pattern is None:
            return self.policy.act(requests)
        return self.policy.act([self.shown(request) for request in requests])

    def shown(self, request: DecisionRequest) -> DecisionRequest:
        """``request`` as the wrapped policy sees it: the compact observation, of its history turns too."""
        history = [
            replace(turn, observation=compact_observation(turn.observation, self.pattern)) for turn in request.history
        ]
        return replace(request, observation=compact_observation(request.observation, self.pattern), history=history)
