"""A policy's strategy read exactly: the probability it gives each legal move of a decision.

Whoever measures a strategy (a game with exploitability, :mod:`tsmg.exploitability`: the
Kuhn-poker solver of ``games.kuhn_poker_exploitability``, the OpenSpiel tables of
:mod:`tsmg.adapters.openspiel_tabular`, a game of one's own) asks here, so the reading has one
home below all of them.

Which probabilities can be read (:func:`move_probabilities`): a policy's own
``move_probabilities(request) -> {move: probability}`` method (OpenSpiel's CFR has one); the
random policy's (uniform); a fixed answer's (all on the move it names, which must be legal at
every decision asked); a LAP with constrained choice over a local model (its exact choice
probabilities at its temperature, :func:`choice_probabilities`, or its greedy move at 0). Others
are refused: their probabilities can only be sampled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tsmg.core import Invalid
from tsmg.policies import DecisionRequest, FixedPolicy, OraclePolicy, Policy, RandomPolicy

__all__ = ["at_temperature", "choice_probabilities", "lap_of", "move_probabilities", "policy_temperature"]


def move_probabilities(policy: Policy, request: DecisionRequest) -> dict[str, float]:
    """The probability ``policy`` gives each legal move of ``request`` (see the module docstring for which policies).

    Raises:
        ValueError: The policy's probabilities cannot be read, or they are no distribution over the legal moves.
    """
    legal = list(request.legal_actions or ())
    reader = getattr(policy, "move_probabilities", None)
    if callable(reader):
        probabilities: dict[str, float] = dict(reader(request))
    elif isinstance(policy, RandomPolicy):
        probabilities = dict.fromkeys(legal, 1 / len(legal))
    elif isinstance(policy, FixedPolicy):  # all on the move its text names, which must be legal here
        move = request.game.parse(request.agent, policy.text)
        if isinstance(move, Invalid):
            raise ValueError(
                f"{policy.name!r} names no legal move of {request.agent} at some information state "
                f"({move.reason}): it is no strategy of this game"
            )
        probabilities = {text: float(request.game.parse(request.agent, text) == move) for text in legal}
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


def policy_temperature(policy: Policy) -> float:
    """The temperature ``policy``'s move probabilities are for: its LAP's (0: greedy); 1 for scripted policies.

    Scripted policies (random play, the oracle, a fixed answer, OpenSpiel's CFR) are reported at 1,
    the temperature at which their probabilities are what they play.
    """
    if isinstance(policy, RandomPolicy | OraclePolicy):
        return 1.0
    inner: Any = policy
    while not hasattr(inner, "config") and hasattr(inner, "policy"):  # a wrapper around a LAP
        inner = inner.policy
    config = getattr(inner, "config", None)
    return float(getattr(config, "temperature", 1.0)) if config is not None else 1.0


def at_temperature(lap: Any, temperature: float) -> Any:
    """A copy of ``lap`` that samples at ``temperature`` (0: greedy)."""
    from tsmg.lap import LAP

    return LAP(lap.model, lap.config.model_copy(update={"temperature": temperature}), name=lap.name)


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
