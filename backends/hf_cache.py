"""A KV cache that writes into room reserved up front instead of concatenating at every step.

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
