"""The language-model protocol every backend implements, kept import-light.

The records live in ``tsmg`` (not in ``backends``) so that a Language-Agent Policy can speak to
any backend without ``tsmg`` importing torch, transformers or an HTTP client. ``backends.base``
re-exports them for backend authors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call a model made (OpenAI's ``tool_calls`` entry, or one parsed from its text).

    Attributes:
        name: The function called.
        arguments: Its arguments as the model wrote them (a JSON object, as text; may be malformed).
        id: The call id the server gave, if any.
    """

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to sample, shared by a whole batch (per-request fields override where given).

    Attributes:
        temperature: 0 means greedy.
        top_p: Nucleus sampling mass.
        max_tokens: Most tokens to write.
        stop: Strings that end the completion (not included in the text).
        seed: Base seed; backends combine it with each request's own seed
            (:func:`tsmg.seeding.combine_seeds`).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(slots=True)
class GenerationRequest:
    """One prompt to complete.

    Attributes:
        messages: Chat messages (``{"role": ..., "content": ...}``); used when ``prompt`` is None.
        prompt: A raw text prompt (plain-prompt mode, for models without a chat template).
        max_tokens: Overrides the batch's ``max_tokens``.
        stop: Overrides the batch's stop strings.
        choices: Constrained decoding: the completion must be exactly one of these strings.
        seed: Per-request sampling seed (reproducible sampling independent of batching; the LAP
            derives it from the decision's plan position, :func:`tsmg.seeding.decision_seed`).
        tools: Functions the model may call, as OpenAI-style tool schemas
            (``{"type": "function", "function": {"name", "description", "parameters"}}``).
        tool_choice: ``"auto"`` (the model decides), ``"required"`` (it must call one), or a
            named function; None leaves it to the server.
        prompt_token_ids: The prompt as token ids, fed to the model as they are (no template, no
            tokenising); takes precedence over ``messages`` and ``prompt``. Local backends only
            (:class:`backends.hf.HFBackend`): it keeps a multi-turn episode token-exact
            (:mod:`tsmg.apps.integrations.conversation`).
    """

    messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    choices: list[str] | None = None
    seed: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    prompt_token_ids: list[int] | None = None


@dataclass(slots=True)
class Completion:
    """What a backend wrote for one request.

    Attributes:
        text: The completion text.
        finish_reason: ``stop`` (natural end or stop string), ``length`` or ``error``.
        prompt_tokens: Prompt length in tokens (0 if unknown).
        completion_tokens: Completion length in tokens.
        latency_s: Wall time attributed to this request.
        token_ids: Ids of the sampled tokens (local backends always fill it).
        logprobs: Log-probability of each sampled token under the sampling distribution.
        error: What went wrong when ``finish_reason == "error"``.
        extra: Backend-specific details (attempts, cost).
        reasoning: Thinking the model returned apart from its answer (a ``reasoning_content`` or
            ``reasoning`` field); thinking written inline as ``<think>...</think>`` stays in ``text``.
        reasoning_tokens: Tokens spent thinking, where the server reports them
            (``usage.completion_tokens_details.reasoning_tokens``); they are part of
            ``completion_tokens``.
        tool_calls: Function calls the model made (None: no tool calls were reported).
        prompt_token_ids: The prompt exactly as the model read it (local backends, and vLLM's
            server), so that a trainer scores the very tokens that were sampled from.
    """

    text: str
    finish_reason: FinishReason = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    error: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    tool_calls: list[ToolCall] | None = None
    prompt_token_ids: list[int] | None = None


@runtime_checkable
class LanguageModel(Protocol):
    """A batched text generator: one call completes many requests."""

    name: str

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """Complete every request; one :class:`Completion` per request, in order.

        A request that fails is returned with ``finish_reason="error"`` and ``error`` set; it does
        not fail the others.
        """
        ...
