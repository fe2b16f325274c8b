"""The decoding loop of the Hugging Face backend: batched, left-padded, KV-cached, seed-reproducible.

A prefill, then one forward step per new token. The prefill computes a token prefix that every
prompt of the batch shares (a game's system prompt and rules) once, on one row, and copies its
KV cache to all rows before the rows' own suffixes run (see :func:`_prefill`). The KV cache keeps
reserved room instead of growing by concatenation (:mod:`backends.hf_cache`). Rows that finish
are dropped from the batch, with their cache rows, once enough have finished to pay for the
copy. Per step, everything that tensors can do is one batched operation; Python touches only the
rows that need it (constrained choices, stop strings).

**Sampling.** Each row draws one uniform number per step from a counter-based hash of
``(row seed, step)`` and picks its token by inverse-CDF over its own distribution. No random
generator is shared between rows, so a request samples the same tokens alone or inside any
batch. The one caveat is floating point: a different batch shape (or a shared prefix computed
apart) changes logits in the last bits (about 1e-5 for SmolLM2-135M), which flips a token only
when the row's uniform number falls that close to a boundary of the cumulative distribution;
tiny models never showed it, a 135M model did about once in a few thousand tokens. Temperature
0 is greedy.

**Logprobs.** The log-probability of each sampled token under the distribution the model gives
at temperature ``T`` *before* top-p truncation: ``log_softmax(logits / T)``, which is what a
PPO-style ratio recomputes (:mod:`backends.scoring` scores given tokens the same way). For
greedy decoding ``T`` is taken as 1. For a constrained-choice row, the distribution is the one
actually sampled from: the logits of disallowed tokens are set to -inf and the rest renormalised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from backends.hf_cache import ModelCalls, repeat_rows
from backends.hf_constraints import ChoiceTrie
from backends.scoring import MIN_SHARED_PREFIX, shared_prefix_length

# Drop finished rows from the batch once they are at least this fraction of it: copying the KV
# cache costs about as much as a step, so dropping one row at a time would not pay.
_PRUNE_FRACTION = 0.25


@dataclass(slots=True)
class RowSpec:
    """One prompt to decode.

    Attributes:
        prompt_ids: Token ids of the prompt.
        max_new_tokens: Most tokens to write (at least 1).
        seed: Seed of this row's sampling stream.
        stop: Strings that end the completion (cut from the text).
        trie: Constrained choice (None: free text).
    """

    prompt_ids: list[int]
    max_new_tokens: int
    seed: int
    stop: tuple[str, ...] = ()
    trie: ChoiceTrie | None = None


@dataclass(slots=True)
class RowOutput:
    """What was written for one row.

    Attributes:
        token_ids: Every sampled token (an end-of-sequence token or the token that completed a
            stop string included).
        logprobs: Log-probability of each sampled token (see the module docstring).
        text: Decoded text without special tokens, cut before the first stop string; for a
            constrained row, exactly the chosen choice.
        finish_reason: ``stop`` (EOS, stop string or complete choice) or ``length``.
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: Literal["stop", "length"]


@dataclass(frozen=True, slots=True)
class DecodeSettings:
    """Settings shared by the whole batch.

    Attributes:
        temperature: 0 means greedy.
        top_p: Nucleus mass (1: no truncation).
        eos_ids: Tokens that end a completion.
        pad_id: Token used for left padding.
    """

    temperature: float
    top_p: float
    eos_ids: tuple[int, ...]
    pad_id: int


def uniforms(seeds: np.ndarray, step: int) -> np.ndarray:
    """One uniform number in (0, 1) per seed for ``step``: splitmix64 of (seed, step).

    A counter-based draw needs no generator state, so a row's numbers depend on its seed and the
    step only, never on the other rows of the batch.

    Example:
        >>> seeds = np.array([1, 2], dtype=np.uint64)
        >>> bool((uniforms(seeds, 0) == uniforms(seeds[::-1], 0)[::-1]).all())
        True
    """
    with np.errstate(over="ignore"):
        mixed = _splitmix64(_splitmix64(seeds.astype(np.uint64)) + np.uint64(step))
    return ((mixed >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def choose_tokens(
    logits: torch.Tensor, noise: torch.Tensor, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row and return it with its log-probability (see the module docstring).

    Args:
        logits: ``(rows, vocab)`` float logits, disallowed tokens already at -inf.
        noise: ``(rows,)`` uniform numbers in (0, 1), one per row.
        temperature: 0 for greedy.
        top_p: Nucleus mass; sampling is restricted to it, the logprobs are not.

    Returns:
        ``(tokens, logprobs)``, both of shape ``(rows,)``.
    """
    if temperature <= 0:
        logprobs = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
    else:
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
        probs = logprobs.exp()
        if top_p < 1.0:
            # stable sort: equal probabilities keep their order whatever the batch looks like
            sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
            mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
            sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
            picks = _inverse_cdf(sorted_probs, noise)
            tokens = order.gather(-1, picks[:, None]).squeeze(-1)
        else:
            tokens = _inverse_cdf(probs, noise)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def _inverse_cdf(probs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    cdf = probs.cumsum(dim=-1)
    # The first index whose cumulative mass reaches u * total: a zero-probability token can never
    # be that index because u > 0.
    targets = (noise.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1)
    return torch.searchsorted(cdf, targets).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


def decode_batch(
    model: Any, tokenizer: Any, rows: Sequence[RowSpec], settings: DecodeSettings, calls: ModelCalls
) -> list[RowOutput]:
    """Decode every row in one batch; rows end independently.

    Args:
        model: A causal LM (``transformers`` or a PEFT wrapper), in eval mode.
        tokenizer: Its tokenizer (used to decode texts and check stop strings).
        rows: The prompts and their options; every prompt must fit the context window with
            ``max_new_tokens`` more tokens.
        settings: Temperature, top-p, EOS and pad tokens.
        calls: How to call ``model`` (from :meth:`ModelCalls.inspect`).

    Returns:
        One :class:`RowOutput` per row, in order.
    """
    device = next(model.parameters()).device
    batch = _Batch(rows, settings, device)
    logits, attention, next_position, cache = _prefill(model, rows, settings, calls, device, batch.steps)
    for step in range(batch.steps):
        if batch.constrained:
            logits = batch.mask_choices(logits)
        noise = torch.from_numpy(uniforms(batch.seeds[batch.present_list], step)).to(device)
        tokens, logprobs = choose_tokens(logits, noise, settings.temperature, settings.top_p)
        if not batch.record(step, tokens, logprobs, tokenizer):
            break
        keep = batch.prune()
        if keep is not None:
            cache.batch_select_indices(keep)
            attention, next_position, tokens = attention[keep], next_position[keep], tokens[keep]
        attention = torch.cat([attention, attention.new_ones((len(batch.present_list), 1))], dim=-1)
        logits = calls.last_logits(model, tokens[:, None], attention, next_position, cache)
        next_position = next_position + 1
    return batch.outputs(tokenizer)


def _prefill(
    model: Any, rows: Sequence[RowSpec], settings: DecodeSettings, calls: ModelCalls, device: torch.device, steps: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
    """Run the prompts through the model; return last logits, attention mask, next positions and the cache.

    A token prefix that every prompt shares (a game's system prompt and rules, typically) is
    computed once on one row and its cache copied to every row; each row's own suffix is then
    left-padded after it: ``[shared prefix][padding][suffix]``, positions running on from the
    prefix. Attention ignores the padding, so this is the same computation as left-padding the
    whole prompts, with far less of it.

    Identical prompts (the episodes of a group standing in the same state, typically) are run
    once, and their cache, logits and masks copied to every row that asked for them.
    """
    prompts = [row.prompt_ids for row in rows]
    shared = shared_prefix_length(prompts) if len(rows) > 1 else 0
    width = max(len(prompt) for prompt in prompts) - shared
    cache, reserved = calls.new_cache(shared + width + steps)
    if shared < MIN_SHARED_PREFIX or not reserved:
        shared, width = 0, width + shared
    row_of_suffix: dict[tuple[int, ...], int] = {}
    computed_row = [row_of_suffix.setdefault(tuple(prompt[shared:]), len(row_of_suffix)) for prompt in prompts]
    suffixes = [list(suffix) for suffix in row_of_suffix]  # the distinct ones, in order of first appearance
    if shared:
        prefix = torch.tensor([prompts[0][:shared]], device=device)
        ones = torch.ones_like(prefix)
        calls.last_logits(model, prefix, ones, torch.arange(shared, device=device)[None], cache)
        repeat_rows(cache, len(suffixes))
    padded = [[settings.pad_id] * (width - len(suffix)) + suffix for suffix in suffixes]
    masks = [[1] * shared + [0] * (width - len(suffix)) + [1] * len(suffix) for suffix in suffixes]
    attention = torch.tensor(masks, dtype=torch.long, device=device)
    positions = (attention.cumsum(-1) - 1).clamp_(min=0)[:, shared:]
    logits = calls.last_logits(model, torch.tensor(padded, device=device), attention, positions, cache)
    if len(suffixes) < len(rows):  # copy each distinct prompt's results to the rows that share it
        index = torch.tensor(computed_row, device=device)
        cache.batch_select_indices(index)
        logits, attention, positions = logits[index], attention[index], positions[index]
    return logits, attention, positions[:, -1:] + 1, cache


class _Batch:
    """Bookkeeping of one decoding batch: which rows are still in it, what each has written."""

    def __init__(self, rows: Sequence[RowSpec], settings: DecodeSettings, device: torch.device) -> None:
        count = len(rows)
        self.rows = rows
        self.steps = max(row.max_new_tokens for row in rows)
        self.seeds = np.array([row.seed % 2**64 for row in rows], dtype=np.uint64)
        self.max_new = torch.tensor([row.max_new_tokens for row in rows], device=device)
        self.eos = torch.tensor(settings.eos_ids or (-1,), device=device)
        self.tokens = torch.full((count, self.steps), settings.pad_id, dtype=torch.long, device=device)
        self.logprobs = torch.zeros((count, self.steps), dtype=torch.float32, device=device)
        self.lengths = torch.zeros(count, dtype=torch.long, device=device)
        self.stopped = torch.zeros(count, dtype=torch.bool, device=device)
        self.alive = torch.ones(count, dtype=torch.bool, device=device)
        self.present = torch.arange(count, device=device)  # original index of each batch row
        self.present_list = list(range(count))
        self.nodes = {index: ChoiceTrie.ROOT for index, row in enumerate(rows) if row.trie is not None}
        self.constrained = bool(self.nodes)
        self.cuts: dict[int, int] = {}  # row -> text position of its first stop string
        self.watched = {index for index, row in enumerate(rows) if row.trie is not None or row.stop}

    def mask_choices(self, logits: torch.Tensor) -> torch.Tensor:
        """Set the logits of every token a constrained row may not write to -inf."""
        alive = self.alive.tolist()
        batch_rows: list[int] = []
        allowed_rows: list[int] = []
        allowed_tokens: list[int] = []
        for position, index in enumerate(self.present_list):
            trie = self.rows[index].trie
            # finished rows stay in the batch until pruned; masking all their tokens would give NaNs
            if trie is None or not alive[index]:
                continue
            allowed = trie.allowed(self.nodes[index])
            allowed_rows.extend([len(batch_rows)] * len(allowed))
            allowed_tokens.extend(allowed)
            batch_rows.append(position)
        if not batch_rows:
            return logits
        device = logits.device
        mask = torch.full((len(batch_rows), logits.shape[-1]), -math.inf, device=device)
        mask[torch.tensor(allowed_rows, device=device), torch.tensor(allowed_tokens, device=device)] = 0.0
        logits = logits.clone()
        logits[torch.tensor(batch_rows, device=device)] += mask
        return logits

    def record(self, step: int, tokens: torch.Tensor, logprobs: torch.Tensor, tokenizer: Any) -> bool:
        """Store the step's tokens for the live rows and end the rows that finished; False when all have."""
        live = self.alive[self.present]
        written = self.present[live]
        self.tokens[written, step] = tokens[live]
        self.logprobs[written, step] = logprobs[live]
        at_eos = live & torch.isin(tokens, self.eos)
        ending = at_eos | (live & (self.max_new[self.present] <= step + 1))
        stopping = at_eos
        extra = self._watch(step, tokens, live, tokenizer) if self.watched else []
        if extra:
            ending, stopping = ending.clone(), stopping.clone()
            ending[extra] = True
            stopping[extra] = True
        ended = self.present[ending]
        self.lengths[ended] = step + 1
        self.stopped[self.present[stopping]] = True
        self.alive[ended] = False
        return bool(self.alive.any())

    def _watch(self, step: int, tokens: torch.Tensor, live: torch.Tensor, tokenizer: Any) -> list[int]:
        """Advance constrained rows in their tries and look for stop strings; the batch rows that end."""
        token_list, live_list = tokens.tolist(), live.tolist()
        ends = []
        for position, index in enumerate(self.present_list):
            if index not in self.watched or not live_list[position]:
                continue
            row = self.rows[index]
            if row.trie is not None:
                self.nodes[index] = row.trie.advance(self.nodes[index], token_list[position])
                if row.trie.finished(self.nodes[index]):
                    ends.append(position)
            elif row.stop:
                text = tokenizer.decode(self.tokens[index, : step + 1].tolist(), skip_special_tokens=True)
                found = [at for at in (text.find(stop) for stop in row.stop) if at >= 0]
                if found:
                    self.cuts[index] = min(found)
                    ends.append(position)
        return ends

    def prune(self) -> torch.Tensor | None:
        """Batch rows to keep when enough rows have finished to pay for dropping them (else None)."""
        live = self.alive[self.present]
        finished = len(self.present_list) - int(live.sum())
        if finished == 0 or finished < _PRUNE_FRACTION * len(self.present_list):
            return None
        keep = live.nonzero().squeeze(-1)
        self.present = self.present[keep]
        self.present_list = self.present.tolist()
        return keep

    def outputs(self, tokenizer: Any) -> list[RowOutput]:
        """The rows' token ids, logprobs, texts and finish reasons."""
        length_list = self.lengths.tolist()
        token_lists = [ids[:length] for ids, length in zip(self.tokens.tolist(), length_list, strict=True)]
        logprob_lists = [lps[:length] for lps, length in zip(self.logprobs.tolist(), length_list, strict=True)]
        texts = tokenizer.batch_decode(token_lists, skip_special_tokens=True)
        stopped = self.stopped.tolist()
        outputs = []
        for index, row in enumerate(self.rows):
            text = texts[index]
            if row.trie is not None:
                text = row.trie.choice_at(self.nodes[index]) or text
            elif index in self.cuts:
                text = text[: self.cuts[index]]
            reason: Literal["stop", "length"] = "stop" if stopped[index] else "length"
            outputs.append(RowOutput(token_lists[index], logprob_lists[index], text, reason))
        return outputs
