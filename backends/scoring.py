"""Scoring given tokens under a causal LM: log-probabilities and entropies of completion tokens.

One public module over plain token lists, for the trainer (its forward pass, pi_old, the
reference), the HF backend (:meth:`backends.hf.HFBackend.sequence_logprobs`) and the tests:

* :func:`score_completions`: the log-probability (and, if asked, the entropy) at every completion
  token under ``log_softmax(logits / T)`` (T = 0 counts as 1), restricted to the tokens a
  constrained choice allowed, as right-aligned ``(rows, tail)`` tensors with a mask. That is the
  distribution :mod:`backends.hf_generation` samples from and reports, so the log-probabilities a
  rollout recorded and a scoring forward agree token for token.
  :meth:`TokenScores.rows` gives one 1-D tensor per completion.
* :func:`tail_logits`: the logits that predict the last ``tail`` tokens of each row.
* :func:`shared_prefix_length` with :data:`MIN_SHARED_PREFIX`: the prompt prefix every row shares,
  computed once (one rule for the decoding loop's prefill and for scoring).
* :class:`ChoiceMasks`: the tokens each position of a constrained answer could take, from the very
  tries generation used (:class:`backends.hf_constraints.ChoiceTries`).

Gradients flow where the caller enables them (the trainer's forward pass); entropies carry
them only when asked (``entropy_grad``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from backends.hf_cache import ModelCalls
from backends.hf_constraints import ChoiceTries

#: A prompt prefix shared by every row is run once when it is at least this long; shorter, the
#: extra forward pass costs more than it saves. The decoding loop and scoring use this one value.
MIN_SHARED_PREFIX = 8


@dataclass
class TokenScores:
    """Per-token scores of a batch of completions, right-aligned in ``(rows, tail)``.

    Attributes:
        logprobs: Log-probability of each completion token (padding on the left holds junk).
        mask: True on real completion tokens.
        entropy: Entropy of the distribution at each completion token (None unless asked for).
    """

    logprobs: torch.Tensor
    mask: torch.Tensor
    entropy: torch.Tensor | None = None

    def rows(self) -> list[torch.Tensor]:
        """Each row's log-probabilities, as long as its completion."""
        return [self.logprobs[row][self.mask[row]] for row in range(self.mask.shape[0])]


def shared_prefix_length(prompts: Sequence[Sequence[int]], minimum: int = 0) -> int:
    """Length of the token prefix all prompts share, leaving every prompt at least one token of its own.

    Args:
        prompts: Token ids of each prompt.
        minimum: A shorter common prefix counts as none (0); :data:`MIN_SHARED_PREFIX` where the
            prefix would be run apart.

    Example:
        >>> shared_prefix_length([[1, 2, 3, 4], [1, 2, 5]]), shared_prefix_length([[1, 2], [1, 2]])
        (2, 1)
        >>> shared_prefix_length([[1, 2, 3, 4], [1, 2, 5]], minimum=3)
        0
    """
    if not prompts:
        return 0
    first = prompts[0]
    limit = min(len(prompt) for prompt in prompts) - 1
    length = 0
    while length < limit and all(prompt[length] == first[length] for prompt in prompts):
        length += 1
    return length if length >= minimum else 0


def tail_logits(
    model: Any,
    rows: Sequence[Sequence[int]],
    tail: int,
    pad_id: int,
    *,
    shared: int = 0,
    cache: Any = None,
    calls: ModelCalls | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits predicting the last ``tail`` tokens of each row, and the left-padded input ids.

    Rows are left-padded to one width. With ``cache`` holding ``shared`` positions already run
    (a prefix common to every row, repeated per row), the rows are what follows that prefix and
    their positions run on from it.

    Returns:
        ``(logits, input_ids)``: logits of shape ``(rows, tail, vocab)``, where ``logits[:, j]``
        predicts ``input_ids[:, j - tail]``.
    """
    calls = calls or ModelCalls.inspect(model)
    device = next(model.parameters()).device
    width = max(len(ids) for ids in rows)
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + list(ids) for ids in rows], device=device)
    masks = [[1] * shared + [0] * (width - len(ids)) + [1] * len(ids) for ids in rows]
    attention = torch.tensor(masks, device=device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, shared:]
    inputs: dict[str, Any] = {"use_cache": False} if cache is None else {"use_cache": True, calls.cache_kwarg: cache}
    # The logits at position j predict the token after j: the `tail` positions before the last one.
    logits = calls.logits_between(
        model,
        width - tail - 1,
        width - 1,
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        **inputs,
    )
    return logits, input_ids


class ChoiceMasks:
    """Which tokens each position of a constrained answer could take (the tries generation used).

    Args:
        tries: The tries of the model's tokenizer (:attr:`backends.hf.HFBackend.choice_tries`).

    Attributes:
        mismatches: Completions that left their trie (counted, and scored unconstrained).
    """

    def __init__(self, tries: ChoiceTries) -> None:
        self.tries = tries
        self.mismatches = 0

    def allowed(self, choices: Sequence[str], completion: Sequence[int]) -> list[list[int]] | None:
        """Allowed tokens at each completion position; None if the completion leaves the trie."""
        trie = self.tries.get(choices)
        node, allowed = trie.ROOT, []
        for token in completion:
            allowed.append(trie.allowed(node))
            try:
                node = trie.advance(node, token)
            except KeyError:
                self.mismatches += 1
                return None
        return allowed

    def mask(
        self,
        choices: Sequence[Sequence[str] | None],
        completions: Sequence[Sequence[int]],
        tail: int,
        vocab: int,
        device: torch.device,
    ) -> torch.Tensor | None:
        """A right-aligned ``(rows, tail, vocab)`` bool mask of allowed tokens; None when no row is constrained."""
        if all(row_choices is None for row_choices in choices):
            return None
        allowed = torch.ones(len(completions), tail, vocab, dtype=torch.bool, device=device)
        for row, (row_choices, completion) in enumerate(zip(choices, completions, strict=True)):
            if row_choices is None:
                continue
            per_position = self.allowed(row_choices, completion)
            if per_position is None:
                continue  # could not follow the trie: the row stays unconstrained (counted in mismatches)
            offset = tail - len(completion)
            for position, tokens in enumerate(per_position):
                allowed[row, offset + position] = False
                allowed[row, offset + position, tokens] = True
        return allowed


def score_completions(
    model: Any,
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float = 1.0,
    choices: Sequence[Sequence[str] | None] | None = None,
    choice_masks: ChoiceMasks | None = None,
    entropy: bool = False,
    entropy_grad: bool = False,
    share_prefix: bool = True,
) -> TokenScores:
    """Log-probabilities (and entropies) of the completion tokens under ``model``'s current weights.

    The distribution is ``log_softmax(logits / T)`` (T = 0 counts as 1), restricted to the
    allowed tokens where a row is a constrained choice: what the backend sampled from. With
    ``share_prefix`` a prompt prefix common to every row (a chat model's system prompt and game
    rules: most of each prompt) is run once and its keys and values repeated for every row; the
    numbers are those of the unshared computation (a test compares them, gradients included).

    Args:
        model: A causal LM (transformers, or a PEFT wrapper).
        prompts: Token ids of each prompt (at least one token each).
        completions: Token ids of each completion.
        pad_id: Token used for left padding.
        temperature: The sampling temperature.
        choices: Per row, the choices of a constrained answer (None: free text).
        choice_masks: Required with ``choices``: the tries the answers were sampled from.
        entropy: Also compute the entropy at each completion token.
        entropy_grad: Let gradients flow through the entropy (when they are enabled at all).
        share_prefix: Run the prompt prefix every row shares once.

    Returns:
        Right-aligned scores; ``mask`` marks the real completion tokens.

    Raises:
        ValueError: Mismatched lengths, an empty prompt, or choices without ``choice_masks``.
    """
    if len(prompts) != len(completions) or (choices is not None and len(choices) != len(prompts)):
        raise ValueError("one completion (and one choice list, if any) per prompt")
    if any(not prompt for prompt in prompts):
        raise ValueError("every prompt needs at least one token (the first completion token is predicted from it)")
    if choices is not None and choice_masks is None and any(row is not None for row in choices):
        raise ValueError("constrained rows need choice_masks (the tries their answers were sampled from)")
    device = next(model.parameters()).device
    tail = max((len(completion) for completion in completions), default=0)
    if tail == 0:
        empty = torch.zeros(len(prompts), 0, device=device)
        return TokenScores(empty, empty.bool(), empty.clone() if entropy else None)
    calls = ModelCalls.inspect(model)
    shared = shared_prefix_length(prompts, MIN_SHARED_PREFIX) if share_prefix and len(prompts) > 1 else 0
    cache = None
    if shared:
        # The shared prefix runs once, with gradients; its keys and values are repeated per row.
        prefix = torch.tensor([list(prompts[0][:shared])], device=device)
        output = model(
            input_ids=prefix,
            attention_mask=torch.ones_like(prefix),
            position_ids=torch.arange(shared, device=device)[None],
            use_cache=True,
            **({"logits_to_keep": 1} if calls.logits_kwarg == "logits_to_keep" else {}),
        )
        cache = output.cache if calls.cache_kwarg == "cache" else output.past_key_values
        cache.batch_repeat_interleave(len(prompts))
    rows = [(list(prompt) + list(completion))[shared:] for prompt, completion in zip(prompts, completions, strict=True)]
    logits, input_ids = tail_logits(model, rows, tail, pad_id, shared=shared, cache=cache, calls=calls)
    logits = logits.float() / (temperature if temperature > 0 else 1.0)
    lengths = torch.tensor([len(completion) for completion in completions], device=device)
    mask = torch.arange(tail, device=device)[None, :] >= (tail - lengths)[:, None]
    allowed = None
    if choices is not None and choice_masks is not None:
        allowed = choice_masks.mask(choices, completions, tail, logits.shape[-1], device)
    if allowed is not None:
        logits = logits.masked_fill(~allowed, -math.inf)
    logprobs_all = torch.log_softmax(logits, dim=-1)
    picked = logprobs_all.gather(-1, input_ids[:, -tail:, None]).squeeze(-1)
    entropies = None
    if entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            finite = logprobs_all.masked_fill(~torch.isfinite(logprobs_all), 0.0)  # -inf * 0 would be NaN
            entropies = -(logprobs_all.exp() * finite).sum(-1)
    return TokenScores(picked, mask, entropies)
