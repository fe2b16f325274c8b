"""The backend protocol and records (re-exported from :mod:`tsmg.lm`) plus shared helpers.

Every backend implements :class:`LanguageModel`: ``generate(requests, sampling)`` completes a
batch of :class:`GenerationRequest` and returns one :class:`Completion` per request. Local
backends (Hugging Face, vLLM) always fill ``prompt_token_ids``, ``token_ids`` and ``logprobs``:
training needs them. Every backend seeds a request by one rule (:func:`combine_seeds`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tsmg.lm import Completion, FinishReason, GenerationRequest, LanguageModel, SamplingParams
from tsmg.seeding import combine_seeds

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


def match_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice ``text`` stands for (surrounding space and case ignored), or None."""
    answer = text.strip()
    if answer in choices:
        return answer
    folded = {choice.casefold(): choice for choice in choices}
    return folded.get(answer.casefold())
