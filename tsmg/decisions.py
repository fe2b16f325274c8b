"""What a policy is asked and what it answers: :class:`DecisionRequest`, :class:`Decision`, :class:`Policy`.

These are the words the rollout engine, the LAP and every policy share; the policies themselves
(scripts, and a language model behind a LAP) are in :mod:`tsmg.policies`, which re-exports these
names. They live apart so that the LAP, which a model policy is built from, needs nothing of the
policies above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tsmg.core import AgentID, Game, Invalid
from tsmg.seeding import seed_generator


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
        tools: The function schemas the model was offered with the prompt (the ``tool`` action
            format; None: none).
        votes: With a majority vote (:attr:`tsmg.lap.LAPConfig.votes`), one record per attempt: the
            answers, the move each names (None: invalid), why the invalid ones are, the tally and
            the move played (see :attr:`tsmg.episode.StepRecord.votes`). None without a vote.
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
    tools: list[dict[str, Any]] | None = None
    votes: list[dict[str, Any]] | None = None


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a batch of decision requests."""

    name: str

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """One decision per request, in the same order."""
        ...
