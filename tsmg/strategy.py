"""A policy's strategy read exactly: the probability a LAP with constrained choice gives each legal move.

Whoever measures a strategy (the Kuhn-poker solver of :mod:`tsmg.apps.evaluation.exploitability`, the
OpenSpiel tables of :mod:`tsmg.adapters.openspiel_tabular`) asks here, so the reading has one home
below both.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tsmg.policies import DecisionRequest, Policy

__all__ = ["choice_probabilities", "lap_of"]


def choice_probabilities(lap: Any, request: DecisionRequest) -> dict[str, float]:
    """The exact probability a LAP with constrained choice gives each legal move of ``request``.

    The same distribution the backend samples from: each choice tokenised as its trie writes it
    (plus the end token where it is a prefix of another choice), scored under
    ``log_softmax(logits / T)`` restricted to the allowed tokens (the backend's
    ``sequence_logprobs``). The probabilities must add up to 1; anything else means the
    tokenisation differs from the trie's, and is refused.

    Raises:
        ValueError: Not a LAP with constrained choice over a backend that scores tokens.
    """
    model: Any = getattr(lap, "model", None)
    action_format = getattr(getattr(lap, "config", None), "action_format", None)
    if action_format is None or action_format.kind != "choice":
        raise ValueError("exact move probabilities need a LAP with constrained choice (action_format kind 'choice')")
    if not all(hasattr(model, name) for name in ("encode_prompts", "sequence_logprobs", "tokenizer")):
        raise ValueError(f"{getattr(model, 'name', model)!r} cannot score tokens; use a local model (hf:PATH, smollm2)")
    from tsmg.lm import GenerationRequest

    choices = list(request.legal_actions or ())
    if not choices:
        raise ValueError(f"{request.agent} has no legal moves to score")
    [prompt] = model.encode_prompts([GenerationRequest(messages=lap.messages(request), choices=choices)])
    sequences = [list(ids) for ids in model.tokenizer(choices, add_special_tokens=False)["input_ids"]]
    end = getattr(getattr(model, "choice_tries", None), "end_token", None)

    def is_prefix(tokens: list[int]) -> bool:  # then the trie ends it with the end token
        return any(other[: len(tokens)] == tokens and other != tokens for other in sequences)

    completions = [tokens + [end] if end is not None and is_prefix(tokens) else tokens for tokens in sequences]
    rows = len(choices)
    temperature = lap.config.temperature or 1.0
    scores = model.sequence_logprobs([prompt] * rows, completions, temperature, choices=[choices] * rows)
    probabilities = {choice: math.exp(float(score.sum())) for choice, score in zip(choices, scores, strict=True)}
    total = sum(probabilities.values())
    if abs(total - 1.0) > 1e-3:
        raise ValueError(f"the choice probabilities add up to {total:.6f}, not 1: the choices tokenise unlike the trie")
    return {choice: value / total for choice, value in probabilities.items()}


def lap_of(policy: Policy, views: list[Callable[..., Any]] | None = None) -> Any:
    """The LAP behind ``policy``: a LAP, or a wrapper holding one as ``.policy`` (its ``shown`` joins ``views``)."""
    inner: Any = policy
    while not hasattr(inner, "messages") and hasattr(inner, "policy"):
        if views is not None and hasattr(inner, "shown"):
            views.append(inner.shown)
        inner = inner.policy
    if not hasattr(inner, "messages"):
        raise ValueError(
            f"the move probabilities of {policy.name!r} cannot be read: use a LAP over a local model, or 'random'"
        )
    return inner
