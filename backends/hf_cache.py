"""How to call a causal LM across transformers versions, and a KV cache that writes into reserved room.

:class:`ModelCalls` reads a model's forward signature once (the cache keyword, how to ask for
the logits of some positions only) for the decoding loop and the scoring forward alike.

A KV cache that writes into room reserved up front instead of concatenating at every step:

transformers' ``DynamicLayer`` grows its key and value tensors with ``torch.cat`` at every new
token, copying the whole cache each time: on CPU that was a third of a decoding step for a small
model. :class:`ReservedLayer` allocates ``(batch, heads, capacity, head_dim)`` once, writes each
step's keys and values in place and hands attention a view of the filled part. It also copies a
one-row cache to many rows (:func:`repeat_rows`), which is how a prompt prefix shared by the whole
batch is computed once and reused by every row.

Only full-attention layers are replaced; sliding-window or other special layers keep their own
class. With a transformers version whose caches have no ``layers``, the plain ``DynamicCache``
is used and prefix sharing is off.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """A full-attention cache layer with reserved room; grows (doubling) only if the room runs out.

    Args:
        capacity: Positions to reserve (prompt plus new tokens).
    """

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new keys and values after the filled part; return views of everything filled."""
        new = key_states.shape[-2]
        if self._keys is None or self._values is None:
            self.device = key_states.device
            batch, heads, _, dim = key_states.shape
            room = max(self.capacity, new)
            self._keys = key_states.new_empty((batch, heads, room, dim))
            self._values = value_states.new_empty((batch, heads, room, value_states.shape[-1]))
            self.is_initialized = True
        elif self.length + new > self._keys.shape[-2]:
            self._keys = _grow(self._keys, self.length + new)
            self._values = _grow(self._values, self.length + new)
        self._keys[:, :, self.length : self.length + new] = key_states
        self._values[:, :, self.length : self.length + new] = value_states
        self.length += new
        self._refresh()
        return self.keys, self.values  # type: ignore[return-value]

    def get_seq_length(self) -> int:
        """Positions filled so far."""
        return self.length

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the rows at ``indices``."""
        if self._keys is not None and self._values is not None:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._refresh()

    def repeat_rows(self, rows: int) -> None:
        """Turn a one-row cache into ``rows`` identical rows (keeping the reserved room)."""
        if self._keys is None or self._values is None:
            return
        self._keys = self._keys.expand(rows, -1, -1, -1).clone()
        self._values = self._values.expand(rows, -1, -1, -1).clone()
        self._refresh()

    def _refresh(self) -> None:
        assert self._keys is not None and self._values is not None
        self.keys = self._keys[:, :, : self.length]
        self.values = self._values[:, :, : self.length]


def _grow(buffer: torch.Tensor, needed: int) -> torch.Tensor:
    room = max(needed, 2 * buffer.shape[-2])
    grown = buffer.new_empty((*buffer.shape[:2], room, buffer.shape[-1]))
    grown[:, :, : buffer.shape[-2]] = buffer
    return grown


def new_cache(config: Any, capacity: int) -> tuple[Any, bool]:
    """A ``DynamicCache`` whose full-attention layers reserve ``capacity`` positions.

    Returns:
        ``(cache, reserved)``; ``reserved`` is False when this transformers version's cache could
        not take reserved layers (then rows cannot be repeated either).
    """
    try:
        cache = DynamicCache(config=config)
    except TypeError:  # transformers 4.x takes no config
        return DynamicCache(), False
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return cache, False
    cache.layers = [ReservedLayer(capacity) for _ in layers]
    return cache, True


def repeat_rows(cache: Any, rows: int) -> None:
    """Copy a one-row cache made by :func:`new_cache` (with reserved layers) to ``rows`` rows."""
    for layer in cache.layers:
        layer.repeat_rows(rows)


@dataclass(slots=True)
class ModelCalls:
    """How to call a causal LM's forward across transformers versions (and through PEFT).

    Attributes:
        cache_kwarg: ``cache`` (transformers >= 5.x) or ``past_key_values``.
        logits_kwarg: ``logits_to_keep``, ``num_logits_to_keep`` or None.
    """

    cache_kwarg: str
    logits_kwarg: str | None
    config: Any = field(repr=False, default=None)

    @classmethod
    def inspect(cls, model: Any) -> ModelCalls:
        """Read the forward signature of ``model`` (the base model under a PEFT or DistributedDataParallel wrapper)."""
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):  # the trainer's gradient pass
            model = model.module
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        parameters = inspect.signature(base.forward).parameters
        cache_kwarg = "cache" if "cache" in parameters else "past_key_values"
        logits_kwarg = next((name for name in ("logits_to_keep", "num_logits_to_keep") if name in parameters), None)
        return cls(cache_kwarg=cache_kwarg, logits_kwarg=logits_kwarg, config=base.config)

    def new_cache(self, capacity: int) -> tuple[Any, bool]:
        """An empty KV cache reserving ``capacity`` positions (see :func:`backends.hf_cache.new_cache`)."""
        return new_cache(self.config, capacity)

    def last_logits(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
    ) -> torch.Tensor:
        """Run one forward pass with the cache and return the float32 logits of the last position."""
        width = input_ids.shape[1]
        logits = self.logits_between(  # the prefill needs no logits but the last ones
            model,
            width - 1,
            width,
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **{self.cache_kwarg: cache, "use_cache": True},
        )
        return logits[:, -1, :].float()

    def logits_between(self, model: Any, start: int, stop: int, **inputs: Any) -> torch.Tensor:
        """The logits of input positions ``start`` to ``stop - 1`` only (as few positions as the model allows).

        The positions go to transformers as a tensor, not as a count: a count slices a strided view
        of the hidden states, and a bfloat16 matmul over a strided view takes a slow CPU path
        (bench/prefix_sharing.py: ×1,227 slower for SmolLM2's output layer over 64 rows, one thread).
        """
        width = inputs["input_ids"].shape[1]
        if self.logits_kwarg == "logits_to_keep":  # transformers >= 4.48 takes positions
            positions = torch.arange(start, stop, device=inputs["input_ids"].device)
            return model(**inputs, logits_to_keep=positions).logits
        if self.logits_kwarg is not None:  # older: a count of last positions
            return model(**inputs, **{self.logits_kwarg: width - start}).logits[:, : stop - start]
        return model(**inputs).logits[:, start:stop]
