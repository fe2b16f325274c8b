"""A scripted stand-in for a language model: what the LAP sends and reads, pinned exactly.

The backends' own tests run real models; this one answers every request with ``answer(messages,
request)`` and records each batch it is sent, so a test can check the prompts, the batching and
how the answers are read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tsmg.lm import Completion


class ScriptedModel:
    """Answers with ``answer(messages, request)``; records every batch (``batches``).

    Each answer counts ``completion_tokens`` and ``prompt_tokens`` tokens, for the tests of the accounting.
    """

    name = "scripted"

    def __init__(self, answer: Callable[[Any, Any], str], completion_tokens: int = 3, prompt_tokens: int = 10) -> None:
        self.answer = answer
        self.completion_tokens = completion_tokens
        self.prompt_tokens = prompt_tokens
        self.batches: list[list[Any]] = []

    def generate(self, requests: Sequence[Any], sampling: Any) -> list[Completion]:
        """One completion per request, in order."""
        self.batches.append(list(requests))
        return [
            Completion(
                text=self.answer(r.messages, r),
                completion_tokens=self.completion_tokens,
                prompt_tokens=self.prompt_tokens,
            )
            for r in requests
        ]
