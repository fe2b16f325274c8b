"""PEFT LoRA adapters for the Hugging Face backend: add, load, save, enable/disable, merge.

:class:`AdapterMixin` is mixed into :class:`backends.hf.HFBackend`; it works on ``self.model``,
which becomes a ``peft.PeftModel`` once an adapter is added or loaded and a plain model again
after :meth:`AdapterMixin.merge_adapter`. :class:`MergedAdapter` keeps a separate generation copy
with the adapter folded in, leaving the trained model unmerged.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from backends.base import BackendError, ModelNotFoundError


class AdapterMixin:
    """LoRA adapter management over ``self.model`` (see the module docstring)."""

    model: Any
    _adapter_active: bool = True

    @property
    def has_adapter(self) -> bool:
        """Whether the model carries a PEFT adapter."""
        return hasattr(self.model, "peft_config")

    def add_lora(
        self,
        r: int = 8,
        alpha: float = 16,
        target_modules: Sequence[str] | str = "all-linear",
        dropout: float = 0.0,
        adapter_name: str = "default",
    ) -> None:
        """Add a fresh trainable LoRA adapter and make it the active one.

        A fresh adapter starts as the identity (PEFT initialises ``B`` to zero), so outputs only
        change once it is trained.

        Args:
            r: Rank of the update matrices.
            alpha: Scaling numerator (the update is scaled by ``alpha / r``).
            target_modules: Module names to adapt, or ``"all-linear"`` (every linear layer but the head).
            dropout: LoRA dropout (active only in train mode).
            adapter_name: Name of the adapter.
        """
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            r=r,
            lora_alpha=alpha,  # type: ignore[arg-type]  # PEFT annotates int; it scales by alpha / r in floats
            target_modules=target_modules if isinstance(target_modules, str) else list(target_modules),
            lora_dropout=dropout,
            task_type="CAUSAL_LM",
        )
        if self.has_adapter:
            self.model.add_adapter(adapter_name, config)
            self.model.set_adapter(adapter_name)
        else:
            self.model = get_peft_model(self.model, config, adapter_name=adapter_name)
        self._adapter_active = True

    def load_adapter(
        self, path: str | os.PathLike[str], adapter_name: str = "default", trainable: bool = False
    ) -> None:
        """Load a saved PEFT adapter from a local folder and make it the active one.

        Raises:
            ModelNotFoundError: when the folder holds no ``adapter_config.json``.
        """
        from peft import PeftModel

        folder = os.fspath(path)
        if not os.path.isfile(os.path.join(folder, "adapter_config.json")):
            raise ModelNotFoundError(f"no PEFT adapter in {os.path.abspath(folder)!r} (looked for adapter_config.json)")
        if self.has_adapter:
            self.model.load_adapter(folder, adapter_name=adapter_name, is_trainable=trainable)
            self.model.set_adapter(adapter_name)
        else:
            self.model = PeftModel.from_pretrained(
                self.model, folder, adapter_name=adapter_name, is_trainable=trainable
            )
        self._adapter_active = True

    def save_adapter(self, path: str | os.PathLike[str]) -> None:
        """Save the adapter weights and config (not the base model) into ``path``."""
        self._require_adapter()
        self.model.save_pretrained(os.fspath(path))

    def enable_adapter(self) -> None:
        """Use the active adapter in later calls."""
        self._require_adapter()
        self.model.base_model.enable_adapter_layers()
        self._adapter_active = True

    def disable_adapter(self) -> None:
        """Use the base model alone in later calls (the adapter is kept)."""
        self._require_adapter()
        self.model.base_model.disable_adapter_layers()
        self._adapter_active = False

    @contextmanager
    def adapter_enabled(self, enabled: bool = True) -> Iterator[None]:
        """Enable (or disable) the adapter inside a ``with`` block, then restore the previous state.

        Example: ``with backend.adapter_enabled(False): reference = backend.generate(...)``.
        """
        self._require_adapter()
        previous = self._adapter_active
        if enabled:
            self.enable_adapter()
        else:
            self.disable_adapter()
        try:
            yield
        finally:
            if previous:
                self.enable_adapter()
            else:
                self.disable_adapter()

    def merge_adapter(self) -> None:
        """Fold the active adapter into the base weights; ``self.model`` becomes a plain model again."""
        self._require_adapter()
        if not self._adapter_active:
            self.enable_adapter()
        self.model = self.model.merge_and_unload()

    def _require_adapter(self) -> None:
        if not self.has_adapter:
            raise BackendError("the model has no adapter: call add_lora() or load_adapter() first")


class MergedAdapter:
    """A separate generation copy of a LoRA model's weights, with its active adapter folded in.

    Generation through an unmerged adapter runs two extra small matmuls per adapted layer and
    token; through folded weights it runs none. The trained model is never merged in place
    (a merge and unmerge in floating point would drift the base weights, which are also the KL
    reference): the copy's adapted weights are rewritten from the untouched base as
    ``W_base + B @ A * scale`` by :meth:`refresh`, after every optimizer step. In float32 its
    log-probabilities match the trainer's (the same sum, grouped differently) to float rounding.

    Args:
        peft_model: The PEFT model being trained (its active adapter is folded in).

    Attributes:
        model: The plain transformers model that generates (eval mode, no gradients).
        refresh_s: Seconds the last :meth:`refresh` took.
    """

    def __init__(self, peft_model: Any) -> None:
        import copy

        from peft.tuners.lora import LoraLayer

        self.source = peft_model
        plain = copy.deepcopy(peft_model).merge_and_unload()
        plain.eval().requires_grad_(False)
        self.model = plain
        prefix = "base_model.model."
        self.pairs: list[tuple[Any, Any]] = [  # (LoRA layer of the trained model, linear layer of the copy)
            (layer, plain.get_submodule(name.removeprefix(prefix)))
            for name, layer in peft_model.named_modules()
            if isinstance(layer, LoraLayer)
        ]
        self.refresh_s = 0.0
        self.refresh()

    def refresh(self) -> None:
        """Rewrite the copy's adapted weights from the trained model's base weights and current adapter."""
        import time

        import torch

        began = time.perf_counter()
        adapter = self.source.active_adapter
        with torch.no_grad():
            for layer, target in self.pairs:
                target.weight.copy_(layer.get_base_layer().weight + layer.get_delta_weight(adapter))
        self.refresh_s = time.perf_counter() - began
