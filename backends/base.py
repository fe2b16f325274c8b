"""The backend protocol and records (re-exported from :mod:`tsmg.lm`) plus shared helpers.

Every backend implements :class:`LanguageModel`: ``generate(requests, sampling)`` completes a
batch of :class:`GenerationRequest` and returns one :class:`Completion` per request. Local
backends (Hugging Face, vLLM) always fill ``prompt_token_ids``, ``token_ids`` and ``logprobs``:
training needs them. Every backend seeds a request by one rule (:func:`combine_seeds`).

:class:`TrainableModel` is the boundary between training and backends: exactly what
``training`` uses of the model it trains (:class:`backends.hf.HFBackend` satisfies it
structurally), so that training's type hints name it instead of ``Any``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tsmg.lm import Completion, FinishReason, GenerationRequest, LanguageModel, SamplingParams
from tsmg.seeding import combine_seeds

if TYPE_CHECKING:  # torch only for the checker: importing backends.base stays light
    import torch

    from backends.hf_constraints import ChoiceTries

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
    "TrainableModel",
]


logger = logging.getLogger(__name__)

_warned_budgets: set[tuple[str, int, int]] = set()
_warned_lock = threading.Lock()


class BackendError(RuntimeError):
    """A backend could not be built or used; the message says what to do."""


class ModelNotFoundError(BackendError):
    """The model named by the user could not be found (the message names what was looked for)."""


@runtime_checkable
class TrainableModel(LanguageModel, Protocol):
    """What training needs from the model it trains: weights, tokenizer, LoRA adapters, and generation.

    :class:`backends.hf.HFBackend` is the one implementation; training reaches the backend only
    through these members (``mypy`` checks it), so another trainable backend knows what to offer.

    Attributes:
        model: The ``transformers`` causal LM (a ``peft.PeftModel`` once an adapter is added).
        tokenizer: Its ``transformers`` tokenizer.
        device: ``"cpu"`` or ``"cuda"``.
        dtype: The weights' dtype.
        pad_id: The token that pads batches.
        eos_ids: The tokens that end a completion (the first one ends a supervised answer).
        choice_tries: The tries of constrained choices, shared by generation and scoring.
    """

    model: Any
    tokenizer: Any
    device: str
    dtype: torch.dtype
    pad_id: int
    eos_ids: tuple[int, ...]
    choice_tries: ChoiceTries

    def encode_prompts(self, requests: Sequence[GenerationRequest]) -> list[list[int]]:
        """The prompt token ids of each request, as generation lays them out."""
        ...

    def add_lora(
        self,
        r: int = 8,
        alpha: float = 16,
        target_modules: Sequence[str] | str = "all-linear",
        dropout: float = 0.0,
        adapter_name: str = "default",
    ) -> None:
        """Add a fresh trainable LoRA adapter and make it the active one."""
        ...

    def load_adapter(
        self, path: str | os.PathLike[str], adapter_name: str = "default", trainable: bool = False
    ) -> None:
        """Load a saved adapter from a local folder and make it the active one."""
        ...

    def save_adapter(self, path: str | os.PathLike[str]) -> None:
        """Save the adapter (not the base weights) to ``path``."""
        ...

    def merge_adapter(self) -> None:
        """Fold the adapter into the base weights (the model is a plain model afterwards)."""
        ...

    def adapter_enabled(self, enabled: bool = True) -> AbstractContextManager[None]:
        """A context in which the adapter is on (or off: the base model, e.g. as the KL reference)."""
        ...


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
