"""The policy protocol and scripted policies (random-legal, fixed, oracle, any callable).

A policy decides for a *batch* of requests at once: the rollout engine gathers every pending
decision of every live episode into one call, which is what makes model backends fast. Scripted
policies draw randomness from a generator derived by :mod:`tsmg.seeding`'s rule from the policy
seed and the decision's plan position (game seed, index in the group, round, agent), so their
choices do not depend on how episodes happen to be batched, and a group's episodes differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from tsmg.core import AgentID, Game, Invalid
from tsmg.model_spec import ModelSpecError, parse_model_spec
from tsmg.seeding import seed_generator

if TYPE_CHECKING:
    from tsmg.lap import LAPConfig


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier decision of the same agent in the same episode (for prompt history)."""

    observation: str
    answer: str
    action: str | None
    valid: bool
    reason: str | None
    reward: float


@dataclass(slots=True)
class DecisionRequest:
    """Everything a policy may use to decide one agent's answer.

    Attributes:
        game: The live game (scripted policies may query it; model policies use the text).
        agent: The deciding agent.
        observation: Its observation text.
        legal_actions: Canonical texts of its legal actions (None if not enumerable).
        history: Its earlier turns in this episode, oldest first.
        episode_seed: Seed of the episode (None if unseeded).
        episode_index: Position of the episode in the rollout plan.
        round: Game round about to be played.
        group_index: The episode's index in its group (:attr:`tsmg.rollout.EpisodePlan.group_index`):
            with the episode seed, what makes a group's episodes sample differently.
    """

    game: Game
    agent: AgentID
    observation: str
    legal_actions: list[str] | None
    history: Sequence[Turn] = ()
    episode_seed: int | None = None
    episode_index: int = 0
    round: int = 0
    group_index: int = 0

    def rng(self, policy_seed: int) -> np.random.Generator:
        """A generator determined by the policy seed and the decision's plan position (one seeding rule)."""
        index = self.episode_index if self.episode_seed is None else None
        agent_index = self.game.agents.index(self.agent)
        return seed_generator(policy_seed, self.episode_seed, index, self.group_index, self.round, agent_index)


@dataclass(slots=True)
class Decision:
    """A policy's answer to one request.

    Attributes:
        action: Text to submit to the game, or :class:`Invalid` when the policy knows its
            answer is unusable (e.g. the model wrote no action tag).
        completion: Raw text the policy wrote (defaults to the action text).
        prompt: Chat messages sent to a model, if any.
        token_ids: Tokens the model wrote (local backends).
        logprobs: Log-probabilities of those tokens under the behaviour policy.
        prompt_tokens: Prompt length in tokens.
        completion_tokens: Completion length in tokens.
        attempts: Answers written for this decision (re-prompts included).
        latency_s: Wall time attributed to this decision.
        extra: Policy-specific details.
        reasoning: The model's thinking, kept apart from its answer (a separate field, or inline
            ``<think>...</think>``).
        reasoning_tokens: Tokens spent thinking, where the backend reports them (summed over attempts).
        tool_calls: The function calls of the last answer (``name``, ``arguments``, ``id``), for
            the tool-call action format.
        history_trimmed: Earlier turns left out of the prompt to fit the model's context window.
        error: Why no decision could be made (a failed model call, a spent budget): the episode
            fails with this message instead of playing ``action``.
        prompt_token_ids: The prompt's token ids as the model read them (local backends).
        choices: The answers a constrained decision allowed (None: free text).
    """

    action: str | Invalid
    completion: str | None = None
    prompt: list[dict[str, str]] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    latency_s: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    tool_calls: list[dict[str, str | None]] | None = None
    history_trimmed: int = 0
    error: str | None = None
    prompt_token_ids: list[int] | None = None
    choices: list[str] | None = None


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a batch of decision requests."""

    name: str

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """One decision per request, in the same order."""
        ...


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
        spec: ``random``, ``oracle``, ``fixed:TEXT``, ``openspiel-mcts`` or a language model
            (``hf:PATH``, ``smollm2``, ``openai:MODEL``, ``vllm:PATH``).
        seed: Seed of the random policy and of OpenSpiel's MCTS bot.
        lap: How a language model is prompted and its answers read (default :class:`~tsmg.lap.LAPConfig`).
        model_options: Keyword arguments of the backend (``base_url``, ``dtype``, ...), or of the
            MCTS bot (``simulations``, ``uct_c``, ``rollouts``).
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
    if parsed.kind == "openspiel-mcts":
        try:
            from tsmg.adapters.openspiel import MCTSPolicy  # imported only now: it loads pyspiel
        except ModuleNotFoundError as error:
            if error.name != "pyspiel":
                raise
            raise ModelSpecError("openspiel-mcts needs OpenSpiel: pip install 'tsmg[openspiel]'") from None
        return MCTSPolicy.from_options(seed, model_options or {})
    if scripted_only:
        raise ModelSpecError(f"{spec!r} is a language model; here use random, oracle or fixed:TEXT")
    from backends import load_model  # heavy: imported only when a model plays
    from tsmg import lap as lap_module

    model = load_model(spec, **dict(model_options or {}))
    return lap_module.LAP(model, lap or lap_module.LAPConfig(), name=spec)
