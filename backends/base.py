"""The backend protocol and records (re-exported from :mod:`tsmg.lm`) plus shared helpers.

Every backend implements :class:`LanguageModel`: ``generate(requests, sampling)`` completes a
batch of :class:`GenerationRequest` and returns one :class:`Completion` per request. Local
backends (Hugging Face, vLLM) always fill ``token_ids`` and ``logprobs``: training needs them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tsmg.lm import Completion, FinishReason, GenerationRequest, LanguageModel, SamplingParams

__all__ = [
    "BackendError",
    "combine_seeds",
    "match_choice",
    "Completion",
    "FinishReason",
    "GenerationRequest",
    "LanguageModel",
    "ModelNotFoundError",
    "SamplingParams",
]


class BackendError(RuntimeError):
    """A backend could not be built or used; the message says what to do."""


class ModelNotFoundError(BackendError):
    """The model named by the user could not be found (the message names what was looked for)."""


def combine_seeds(base: int | None, own: int | None) -> int | None:
    """The seed of one request: its own seed mixed with the batch's base seed (either may be None).

    Every backend uses this rule, so a request's sample does not depend on which batch it is in.

    >>> combine_seeds(None, 7), combine_seeds(3, None), combine_seeds(None, None)
    (7, 3, None)
    >>> combine_seeds(1, 7) != combine_seeds(2, 7)
    True
    """
    if base is None:
        return own
    if own is None:
        return base
    return (base * 1_000_003 + own) % 2**31


def match_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice ``text`` stands for (surrounding space and case ignored), or None."""
    answer = text.strip()
    if answer in choices:
        return answer
    folded = {choice.casefold(): choice for choice in choices}
    return folded.get(answer.casefold())
