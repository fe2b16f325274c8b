"""The backend protocol and records (re-exported from :mod:`tsmg.lm`) plus shared helpers.

Every backend implements :class:`LanguageModel`: ``generate(requests, sampling)`` completes a
batch of :class:`GenerationRequest` and returns one :class:`Completion` per request. Local
backends (Hugging Face, vLLM) always fill ``prompt_token_ids``, ``token_ids`` and ``logprobs``:
training needs them. Every backend seeds a request by one rule (:func:`combine_seeds`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from tsmg.lm import Completion, FinishReason, GenerationRequest, LanguageModel, SamplingParams
from tsmg.seeding import combine_seeds

__all__ = [
    "BackendError",
    "choice_token_budget",
    "combine_seeds",
    "match_choice",
    "Completion",
    "FinishReason",
    "GenerationRequest",
    "LanguageModel",
    "ModelNotFoundError",
    "SamplingParams",
]


logger = logging.getLogger(__name__)

_warned_budgets: set[tuple[str, int, int]] = set()
_warned_lock = threading.Lock()


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


def choice_token_budget(budget: int, choices: Sequence[str], owner: str, needed: int | None = None) -> int:
    """A token budget for constrained choice that always fits a whole choice: ``budget``, or more.

    Cut short, a constrained answer is a prefix of a choice ("dow"), not a choice. ``needed`` is
    the most tokens a choice can take in the backend's tokenizer; by default the longest choice in
    UTF-8 bytes, which bounds it in any tokenizer (every token spells at least one byte, and
    structured outputs accept any spelling of a choice: "d" + "own" as well as "down"). A smaller
    budget is raised to ``needed``, with a warning the first time for each (owner, budget, needed).

    >>> choice_token_budget(64, ["left", "down"], "m"), choice_token_budget(1, ["rock", "scissors"], "m")
    (64, 8)
    """
    if needed is None:
        needed = max((len(choice.encode()) for choice in choices), default=1)
    if budget >= needed:
        return budget
    with _warned_lock:
        first = (owner, budget, needed) not in _warned_budgets
        _warned_budgets.add((owner, budget, needed))
    if first:
        longest = max(choices, key=lambda choice: len(choice.encode()))
        logger.warning(
            "%s: a token budget of %d cannot hold every choice whole (%r may take %d tokens); "
            "raised to %d for constrained choice",
            owner,
            budget,
            longest,
            needed,
            needed,
        )
    return needed
