"""A backend for any OpenAI-compatible server (OpenAI itself, ``vllm serve``, ...) on the official ``openai`` SDK.

(Past 600 lines, a quarter of them docstrings: one backend, its wire format and its failure handling read together.)

The HTTP work is the SDK's (:class:`openai.AsyncOpenAI`): its retries with backoff on 408, 409,
429, 5xx, timeouts and dropped connections, its handling of ``Retry-After``, its timeouts and
``extra_body``. What this module adds is tsmg's layer on top:

- a batch goes out as concurrent requests under a concurrency bound (one slow request holds
  up no other) and an optional requests/tokens-per-minute pace (:mod:`backends.rate_limit`);
- each HTTP attempt is bounded as a whole (connect, send, wait and read together), so a server
  that trickles bytes cannot hold a request forever;
- a request that fails for good comes back as ``Completion(finish_reason="error")`` with the
  server's message, without failing the rest of the batch;
- constrained choice (vLLM's structured outputs) with a token budget that always fits a whole
  choice, and every answer checked against the choices;
- reasoning models: ``max_completion_tokens`` and no temperature where the model takes none,
  ``reasoning_effort``, the thinking (``reasoning_content`` / ``reasoning``) and its token count
  kept apart from the answer; tool calls returned as :class:`~tsmg.lm.ToolCall`;
- token usage and cost (``prices=``), and the API key kept out of reprs, logs and errors.

Point it at a server with ``base_url`` (or ``OPENAI_BASE_URL``, ending in ``/v1``) and ``api_key``
(or ``OPENAI_API_KEY``; a local server usually needs none), or hand it a client an engine made::

    from backends.openai_compat import OpenAIBackend
    model = OpenAIBackend("gpt-4o-mini", prices={"gpt-4o-mini": (0.15, 0.60)})
    local = OpenAIBackend("tiny", base_url="http://127.0.0.1:8000/v1", logprobs=True, token_ids=True)
    engine = OpenAIBackend("policy", client=AsyncOpenAI(base_url=..., api_key=...))  # e.g. ART, AReaL, verifiers

With vLLM, ``logprobs=True`` and ``token_ids=True`` return the sampled token ids and their
log-probabilities (and the prompt's token ids in ``extra["prompt_token_ids"]``), which training
needs; ``GenerationRequest.choices`` become ``"structured_outputs": {"choice": [...]}`` (older
servers take ``choice_param="guided_choice"``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeVar, cast, get_args

import httpx
import openai

from backends.base import (
    BackendError,
    Completion,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    choice_token_budget,
    combine_seeds,
    match_choice,
)
from backends.pricing import Price, PriceSpec, PriceTable, price_for
from backends.rate_limit import Pace
from tsmg.lm import ToolCall

__all__ = ["DEFAULT_BASE_URL", "ChoiceParam", "OpenAIBackend", "OpenAIOptions", "Usage", "is_reasoning_model_name"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"

ChoiceParam = Literal["structured_outputs", "guided_choice", "none"]
"""How allowed choices reach the server: vLLM >= 0.10 (``structured_outputs``), older vLLM
(``guided_choice``), or not at all (plain OpenAI: the answer is only checked)."""

_T = TypeVar("_T")
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")

# OpenAI's reasoning families take max_completion_tokens and no temperature: o1, o3, o4-mini, ...
# and gpt-5 (but not gpt-5-chat). A provider prefix ("openai/o3") is allowed.
_REASONING_NAME = re.compile(r"^(?:[\w.-]+/)?(?:o\d+(?:$|[-_.])|gpt-5(?!.*chat))", re.IGNORECASE)

# Counts the HTTP attempts of the request running in the current task (the transport increments it).
_ATTEMPTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("tsmg_openai_attempts", default=None)

# Before any answer has shown how the server tokenises, assume 2 characters per token: games'
# boards tokenise much worse than prose (about 4), and an estimate here should err on the long side.
_DEFAULT_TOKENS_PER_CHAR = 0.5
_MESSAGE_OVERHEAD_CHARS = 12


def is_reasoning_model_name(model: str) -> bool:
    """Whether ``model`` names one of OpenAI's reasoning families (max_completion_tokens, no temperature).

    >>> [is_reasoning_model_name(name) for name in ("o3", "o4-mini", "openai/o1-preview", "gpt-5-mini")]
    [True, True, True, True]
    >>> [is_reasoning_model_name(name) for name in ("gpt-4o", "gpt-5-chat-latest", "qwen3-8b", "omni")]
    [False, False, False, False]
    """
    return bool(_REASONING_NAME.match(model))


@dataclass(frozen=True, slots=True)
class Usage:
    """What a backend has spent so far (all calls added up).

    Attributes:
        requests: Requests completed (successfully or not).
        failed: Requests that ended in an error.
        attempts: HTTP attempts made, retries included.
        prompt_tokens: Prompt tokens the server reported.
        completion_tokens: Completion tokens the server reported (thinking included).
        cost_usd: Cost of the requests whose price is known.
        unpriced: Requests with tokens but no price in the table (their cost is not in ``cost_usd``).
        reasoning_tokens: The part of ``completion_tokens`` spent thinking, where the server said.
    """

    requests: int = 0
    failed: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    reasoning_tokens: int = 0

    @property
    def retries(self) -> int:
        """HTTP attempts beyond the first of each request."""
        return self.attempts - self.requests


@dataclass(slots=True)
class _Outcome:
    completion: Completion
    attempts: int
    unreachable: bool = False
    cost_usd: float | None = None


class _AttemptDeadline(httpx.AsyncBaseTransport):
    """A transport that bounds every HTTP attempt as a whole and counts the attempts.

    httpx's timeouts bound each phase (connect, each read), so a server that sends a byte every
    few seconds never trips them; here the whole attempt, body included, has ``deadline_s``. A
    late attempt raises httpx's ``ReadTimeout``, which the SDK retries like any timeout.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, deadline_s: float) -> None:
        self._inner = inner
        self._deadline_s = deadline_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        counter = _ATTEMPTS.get()
        if counter is not None:
            counter[0] += 1
        try:
            async with asyncio.timeout(self._deadline_s):
                response = await self._inner.handle_async_request(request)
                try:
                    await response.aread()
                except BaseException:
                    await response.aclose()
                    raise
        except TimeoutError:
            raise httpx.ReadTimeout(f"no complete answer within {self._deadline_s:g}s", request=request) from None
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass(frozen=True, kw_only=True)
class OpenAIOptions:
    """How an :class:`OpenAIBackend` talks to its server: every setting but the model name and a client.

    Attributes:
        base_url: Server URL ending in ``/v1``; default ``OPENAI_BASE_URL``, else OpenAI's.
        api_key: Bearer token; default ``OPENAI_API_KEY``. Required only for OpenAI's own URL.
            Never shown in a repr.
        concurrency: Most requests in flight at once.
        timeout_s: Limit on each HTTP attempt as a whole (connect, send, wait and read).
        max_retries: Retries after the first attempt of each request (0: never retry); the SDK
            backs off exponentially with jitter, or waits as long as ``Retry-After`` asks.
        prices: USD per million input/output tokens, for this model or as a table by model
            name (see :mod:`backends.pricing`); cost is reported in :attr:`OpenAIBackend.usage`.
            Thinking tokens are output tokens (they are part of ``completion_tokens``).
        logprobs: Ask for the log-probability of each sampled token.
        token_ids: Ask for the sampled token ids (vLLM's ``return_token_ids``; other servers
            reject unknown fields, so it is off by default).
        choice_param: How ``GenerationRequest.choices`` reaches the server (see :data:`ChoiceParam`).
        raise_on_unreachable: Raise :class:`BackendError` when no request of a batch could even
            connect (a dead server or wrong URL), instead of returning only error completions.
        name: Name in episode records (default ``openai:MODEL``).
        extra_body: Extra JSON fields sent with every request (server-specific options); they
            override the fields the backend sets.
        reasoning_model: Send the reasoning-model form of a request: ``max_completion_tokens``
            instead of ``max_tokens``, and no ``temperature`` or ``top_p`` (OpenAI's o-series and
            gpt-5 accept only their default). None: decided by the model name
            (:func:`is_reasoning_model_name`).
        max_completion_tokens: Token budget of every request to this model, thinking included,
            in place of the LAP's ``max_tokens`` (a reasoning model needs far more than an
            answer does); sent as ``max_completion_tokens``.
        reasoning_effort: Sent as ``reasoning_effort`` (e.g. ``low``, ``medium``, ``high``).
        requests_per_minute: Pace requests to stay inside this quota (None: no limit).
        tokens_per_minute: Pace requests so that prompt plus completion tokens stay inside this
            quota; a request books its estimated prompt plus its token budget, corrected by the
            usage the server reports.
        max_context: The model's context window in tokens. The LAP then trims prompt history to
            fit it (estimating prompt tokens from their length, calibrated on the token counts
            the server reports).

    Raises:
        ValueError: For an out-of-range option (the message names the valid values).

    Example:
        >>> OpenAIOptions(concurrency=4, logprobs=True).concurrency
        4
        >>> OpenAIOptions.from_keywords({"concurency": 4})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: the openai backend has no option 'concurency'; its options: api_key, base_url, choice_param, ...
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 16
    timeout_s: float = 60.0
    max_retries: int = 5
    prices: PriceSpec | PriceTable | None = None
    logprobs: bool = False
    token_ids: bool = False
    choice_param: ChoiceParam = "structured_outputs"
    raise_on_unreachable: bool = True
    name: str | None = None
    extra_body: Mapping[str, Any] | None = None
    reasoning_model: bool | None = None
    max_completion_tokens: int | None = None
    reasoning_effort: str | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_context: int | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.choice_param not in get_args(ChoiceParam):
            raise ValueError(f"choice_param must be one of {get_args(ChoiceParam)}, got {self.choice_param!r}")
        if self.max_completion_tokens is not None and self.max_completion_tokens < 1:
            raise ValueError(f"max_completion_tokens must be >= 1, got {self.max_completion_tokens}")
        if self.max_context is not None and self.max_context < 2:
            raise ValueError(f"max_context must be >= 2 tokens, got {self.max_context}")

    @classmethod
    def from_keywords(cls, keywords: Mapping[str, Any]) -> OpenAIOptions:
        """The options named one by one (``load_model``'s and ``--model-option``'s form).

        Raises:
            ValueError: For a name that is no option (the message lists them), or an out-of-range value.
        """
        known = sorted(option.name for option in fields(cls))
        for key in keywords:
            if key not in known:
                raise ValueError(f"the openai backend has no option {key!r}; its options: {', '.join(known)}")
        return cls(**keywords)


class OpenAIBackend:
    """Chat (or plain-prompt) completions from an OpenAI-compatible server, through the ``openai`` SDK.

    The batch runs on an event loop in a background thread that the backend owns, so
    :meth:`generate` works the same from plain code and from a thread that already runs an event
    loop (a notebook, an async app), and connections are reused across calls. Call :meth:`close`
    (or use the backend as a context manager) to release them early.

    Attributes:
        name: Name used in episode records (default ``openai:MODEL``).
        model: Model name sent to the server.
        base_url: Server URL, ending in ``/v1``.
        price: USD per million tokens for this model, or None if unknown.
        reasoning_model: Whether requests take the reasoning-model form (``max_completion_tokens``,
            no temperature or top_p).
        context_window: The model's context limit in tokens, if given (the LAP trims history to it).
    """

    #: The server batches concurrent requests itself, so rollouts let each episode advance on its
    #: own instead of in lock-step (a slow request then holds no other episode).
    prefers_independent_episodes = True

    def __init__(
        self,
        model: str,
        options: OpenAIOptions | None = None,
        *,
        client: openai.AsyncOpenAI | None = None,
        **keywords: Any,
    ) -> None:
        """Configure the client; nothing is sent until the first :meth:`generate`.

        Args:
            model: Model name the server knows (``--served-model-name`` for vLLM).
            options: Every other setting (:class:`OpenAIOptions`).
            client: An :class:`openai.AsyncOpenAI` to send requests with (e.g. one an RL engine
                hands out). Its own base URL, key, timeout and retries then apply, and it is not
                closed by :meth:`close`; ``base_url``, ``api_key``, ``timeout_s`` and
                ``max_retries`` must not be given with it. It is driven from this backend's event
                loop thread, so give the backend a client of its own.
            **keywords: The fields of :class:`OpenAIOptions` one by one, in place of ``options``
                (what ``load_model("openai:MODEL", key=value)`` and the CLI's ``--model-option`` pass).

        Raises:
            ValueError: For an unknown or out-of-range option (the message names the valid ones).
            BackendError: When OpenAI's own URL is used without an API key.
        """
        if options is not None and keywords:
            raise ValueError("give the options either as options=OpenAIOptions(...) or as keywords, not both")
        options = options if options is not None else OpenAIOptions.from_keywords(keywords)
        self.options = options
        base_url, api_key = options.base_url, options.api_key
        self.model = model
        self._injected = client
        if client is not None:
            if not isinstance(client, openai.AsyncOpenAI):
                raise ValueError(
                    f"client must be an openai.AsyncOpenAI, got {type(client).__name__}: "
                    "the backend sends a batch's requests concurrently"
                )
            if base_url is not None or api_key is not None:
                raise ValueError("give either client= or base_url=/api_key=, not both (the client has its own)")
            self.base_url = str(client.base_url).rstrip("/")
            self._api_key: str | None = client.api_key or None
        else:
            self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
            # Kept private and never formatted into any message: see _redact for server-echoed text.
            self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
            if not self._api_key and self.base_url == DEFAULT_BASE_URL:
                raise BackendError(
                    f"no API key for {DEFAULT_BASE_URL}: set OPENAI_API_KEY or pass api_key=; "
                    "for a local server (e.g. vllm serve) set OPENAI_BASE_URL or base_url="
                )
        self.concurrency = options.concurrency
        self.timeout_s = float(options.timeout_s)
        self.max_retries = options.max_retries
        self.price: Price | None = price_for(options.prices, model)
        self.logprobs = options.logprobs
        self.token_ids = options.token_ids
        self.choice_param: ChoiceParam = options.choice_param
        self.raise_on_unreachable = options.raise_on_unreachable
        self.name = options.name or f"openai:{model}"
        self.extra_body = dict(options.extra_body or {})
        reasoning_model = options.reasoning_model
        self.reasoning_model = is_reasoning_model_name(model) if reasoning_model is None else bool(reasoning_model)
        self.max_completion_tokens = options.max_completion_tokens
        self.reasoning_effort = options.reasoning_effort
        self.context_window: int | None = options.max_context
        quotas = {"requests": options.requests_per_minute, "tokens": options.tokens_per_minute}
        self._paces = {unit: Pace(limit) for unit, limit in quotas.items() if limit}
        self._tokens_per_char: float | None = None  # calibrated on the server's prompt token counts
        self._usage = Usage()
        self._usage_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._slots: asyncio.Semaphore | None = None
        self._loop_lock = threading.Lock()

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r}, api_key={key})"

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def usage(self) -> Usage:
        """Requests, retries, tokens and cost so far (a snapshot)."""
        with self._usage_lock:
            return self._usage

    def reset_usage(self) -> Usage:
        """Zero the counters and return what they held."""
        with self._usage_lock:
            previous, self._usage = self._usage, Usage()
        return previous

    # ------------------------------------------------------------------ public API

    def check_reachable(self, timeout_s: float = 5.0) -> None:
        """Refuse a server nobody answers at, in one connection attempt, before a run plays anything.

        Sends one ``GET {base_url}/models`` without the key (free; any HTTP answer, 401 or 404 included,
        shows that a server is there) through httpx, which honours the same proxy settings as the SDK.
        Only a failure to connect refuses: a slow or odd server is left to the requests' own
        timeouts and retries.

        Raises:
            BackendError: Nothing answers at ``base_url`` (the message names it and what to check).
        """
        url = f"{self.base_url}/models"
        try:
            httpx.get(url, timeout=timeout_s)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as error:
            raise BackendError(
                f"could not connect to the OpenAI-compatible server at {self.base_url} ({type(error).__name__}: "
                f"{error}); check that the server is running and that base_url / OPENAI_BASE_URL points at it"
            ) from None
        except httpx.HTTPError:
            return  # it connected: what the server makes of /models is no concern here

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """Complete every request concurrently; one :class:`Completion` per request, in order.

        Raises:
            BackendError: When ``raise_on_unreachable`` is set and no request could connect.
        """
        if not requests:
            return []
        return self._run(self._generate(list(requests), sampling))

    async def agenerate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        """:meth:`generate` for async code: awaits the batch without blocking the caller's loop."""
        if not requests:
            return []
        future = asyncio.run_coroutine_threadsafe(self._generate(list(requests), sampling), self._ensure_loop())
        return await asyncio.wrap_future(future)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        """An estimate of the prompt tokens of ``request`` (from its length; see ``max_context``).

        It errs on the long side: 2 characters per token until the server has reported a prompt's
        token count, then the most tokens per character seen so far, plus 10 %.
        """
        ratio = _DEFAULT_TOKENS_PER_CHAR if self._tokens_per_char is None else self._tokens_per_char * 1.1
        return math.ceil(_prompt_chars(request) * ratio)

    def close(self) -> None:
        """Close the connections (not those of an injected client) and stop the background loop."""
        with self._loop_lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None:
            return
        client, self._client, self._slots = self._client, None, None
        if client is not None and client is not self._injected:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        if not loop.is_running():  # a loop stuck in a callback is left to its daemon thread
            loop.close()

    # ------------------------------------------------------------------ event loop

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                # A daemon thread: a backend that is never closed must not keep the process alive.
                thread = threading.Thread(target=loop.run_forever, name=f"{self.name}-http", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("generate() was called from the backend's own event loop; await agenerate() instead")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def _client_and_slots(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        # Made on the backend's loop thread: connections and semaphores belong to one event loop.
        # One semaphore for the backend bounds requests in flight across concurrent batches.
        if self._client is None or self._slots is None:
            if self._injected is not None:
                self._client = self._injected
            else:
                limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
                http_client = httpx.AsyncClient(
                    transport=_AttemptDeadline(httpx.AsyncHTTPTransport(limits=limits), self.timeout_s),
                    timeout=httpx.Timeout(self.timeout_s),
                )
                self._client = openai.AsyncOpenAI(
                    # A local server needs no key, but the SDK insists on one; vLLM's docs use "EMPTY".
                    api_key=self._api_key or "EMPTY",
                    base_url=self.base_url,
                    max_retries=self.max_retries,
                    timeout=self.timeout_s,
                    # A plain httpx client: the SDK takes it whichever HTTP library it is built on.
                    http_client=cast(Any, http_client),
                )
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._client, self._slots

    # ------------------------------------------------------------------ one batch

    async def _generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        client, slots = self._client_and_slots()
        outcomes = await asyncio.gather(*(self._complete(client, slots, request, sampling) for request in requests))
        self._account(outcomes)
        if self.raise_on_unreachable and all(outcome.unreachable for outcome in outcomes):
            raise BackendError(outcomes[0].completion.error or f"could not connect to {self.base_url}")
        return [outcome.completion for outcome in outcomes]

    async def _complete(
        self, client: openai.AsyncOpenAI, slots: asyncio.Semaphore, request: GenerationRequest, sampling: SamplingParams
    ) -> _Outcome:
        try:
            endpoint, arguments, budget = self._arguments(request, sampling)
        except ValueError as error:
            return _Outcome(Completion(text="", finish_reason="error", error=str(error)), attempts=0)
        booked_tokens = await self._pace(request, budget)
        counter = [0]
        _ATTEMPTS.set(counter)  # this task's own context: the transport counts into it
        async with slots:
            started = time.perf_counter()
            try:
                create = client.chat.completions if endpoint == "chat" else client.completions
                raw = await create.with_raw_response.create(**arguments)
                data = raw.http_response.json()
            except openai.APIError as error:
                completion, unreachable = self._failure(error, counter[0])
                completion.latency_s = time.perf_counter() - started
                attempts = counter[0] or 1
                completion.extra["attempts"] = attempts
                return _Outcome(completion, attempts=attempts, unreachable=unreachable)
            except ValueError:  # a 200 whose body is not JSON
                reason = f"{self.base_url} answered 200 with a body that is not JSON"
                return _Outcome(Completion(text="", finish_reason="error", error=reason), attempts=counter[0] or 1)
            latency = time.perf_counter() - started
        attempts = counter[0] or int(getattr(raw, "retries_taken", 0)) + 1
        completion = self._completion(endpoint, data, request, budget)
        completion.latency_s = latency
        completion.extra["attempts"] = attempts
        self._learn(request, completion, booked_tokens)
        cost = None
        if self.price is not None:  # tokens an off-choice answer spent are billed too
            cost = self.price.cost(completion.prompt_tokens, completion.completion_tokens)
            completion.extra["cost_usd"] = cost
        return _Outcome(completion, attempts=attempts, cost_usd=cost)

    async def _pace(self, request: GenerationRequest, budget: int) -> float:
        """Wait until the request fits the per-minute quotas; returns the tokens booked for it."""
        if not self._paces:
            return 0.0
        tokens = float(self.count_prompt_tokens(request) + budget)
        units = {"requests": 1.0, "tokens": tokens}
        now = time.monotonic()
        start = max(pace.earliest(now) for pace in self._paces.values())
        for unit, pace in self._paces.items():
            pace.book(units[unit], start)
        if start > now:
            await asyncio.sleep(start - now)
        return tokens if "tokens" in self._paces else 0.0

    def _learn(self, request: GenerationRequest, completion: Completion, booked_tokens: float) -> None:
        """Calibrate the prompt-length estimate and settle the token pace on the reported usage."""
        if completion.prompt_tokens:
            ratio = completion.prompt_tokens / max(_prompt_chars(request), 1)
            self._tokens_per_char = max(self._tokens_per_char or 0.0, ratio)
            tokens = self._paces.get("tokens")
            if tokens is not None and booked_tokens:
                tokens.adjust(completion.prompt_tokens + completion.completion_tokens - booked_tokens)

    # ------------------------------------------------------------------ request and response

    def _arguments(self, request: GenerationRequest, sampling: SamplingParams) -> tuple[str, dict[str, Any], int]:
        """The endpoint, the SDK's ``create`` arguments, and the token budget of one request."""
        budget = request.max_tokens if request.max_tokens is not None else sampling.max_tokens
        if self.max_completion_tokens is not None:
            budget = self.max_completion_tokens
        if request.choices is not None:
            if not request.choices:
                raise ValueError("choices is empty: nothing could be answered")
            budget = choice_token_budget(budget, request.choices, self.name)
        arguments: dict[str, Any] = {"model": self.model}
        extra: dict[str, Any] = {}
        if request.messages is not None:
            endpoint = "chat"
            arguments["messages"] = request.messages
            if self.reasoning_model or self.max_completion_tokens is not None:
                arguments["max_completion_tokens"] = budget
            else:
                arguments["max_tokens"] = budget
            if self.logprobs:
                arguments["logprobs"] = True
            if self.reasoning_effort is not None:
                arguments["reasoning_effort"] = self.reasoning_effort
            if request.tools:
                arguments["tools"] = request.tools
                if request.tool_choice is not None:
                    arguments["tool_choice"] = request.tool_choice
                if not self.reasoning_model:  # (some reasoning models reject the parameter)
                    # One call per answer, as a move per turn wants: a server that would otherwise
                    # repeat calls until the budget runs out (vLLM's tool_choice="required") stops.
                    arguments["parallel_tool_calls"] = False
        elif request.prompt is not None:
            endpoint = "completions"
            arguments["prompt"] = request.prompt
            arguments["max_tokens"] = budget  # the legacy endpoint knows no max_completion_tokens
            if self.logprobs:
                arguments["logprobs"] = 0  # the sampled token only
        else:
            raise ValueError("a GenerationRequest needs messages or a prompt")
        if not self.reasoning_model:  # reasoning models accept only their default temperature
            arguments["temperature"] = sampling.temperature
            arguments["top_p"] = sampling.top_p
        stop = request.stop if request.stop is not None else sampling.stop
        if stop:
            arguments["stop"] = list(stop)
        seed = combine_seeds(sampling.seed, request.seed)
        if seed is not None:
            arguments["seed"] = seed
        if self.token_ids:
            extra["return_token_ids"] = True
        if request.choices is not None:
            if self.choice_param == "structured_outputs":
                extra["structured_outputs"] = {"choice": list(request.choices)}
            elif self.choice_param == "guided_choice":
                extra["guided_choice"] = list(request.choices)
        extra.update(self.extra_body)
        if extra:
            arguments["extra_body"] = extra
        return endpoint, arguments, budget

    def _completion(self, endpoint: str, data: Any, request: GenerationRequest, budget: int) -> Completion:
        if not isinstance(data, dict) or not data.get("choices"):
            return Completion(
                text="", finish_reason="error", error=f"{self.base_url} answered 200 without choices: {str(data)[:200]}"
            )
        choice = data["choices"][0]
        reasoning: str | None = None
        tool_calls: list[ToolCall] | None = None
        if endpoint == "chat":
            message = choice.get("message") or {}
            text = message.get("content") or ""
            # DeepSeek and most providers say reasoning_content; vLLM >= 0.10 and OpenRouter say reasoning.
            thought = message.get("reasoning_content") or message.get("reasoning")
            reasoning = thought if isinstance(thought, str) and thought else None
            tool_calls = _tool_calls(message.get("tool_calls"))
            entries = (choice.get("logprobs") or {}).get("content") or []
            tokens = [entry.get("token", "") for entry in entries]
            logprobs = [float(entry["logprob"]) for entry in entries] if entries else None
        else:
            text = choice.get("text") or ""
            legacy = choice.get("logprobs") or {}
            tokens = list(legacy.get("tokens") or [])
            raw = legacy.get("token_logprobs")
            logprobs = [float(value) for value in raw] if raw else None
        token_ids = choice.get("token_ids")
        if token_ids is None and tokens:
            # vLLM's return_tokens_as_token_ids writes each token as "token_id:N".
            matches = [_TOKEN_ID.match(token) for token in tokens]
            if all(matches):
                token_ids = [int(match.group(1)) for match in matches if match]
        usage = data.get("usage") or {}
        details = usage.get("completion_tokens_details") or {}
        reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        completion = Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or (len(logprobs) if logprobs else 0)),
            token_ids=[int(token) for token in token_ids] if token_ids is not None else None,
            logprobs=logprobs,
            reasoning=reasoning,
            reasoning_tokens=int(reasoning_tokens) if reasoning_tokens is not None else None,
            tool_calls=tool_calls,
        )
        prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
        if prompt_ids:  # vLLM with return_token_ids: what the server actually tokenised
            completion.prompt_token_ids = [int(token) for token in prompt_ids]
        if request.choices is not None and match_choice(text, request.choices) is None:
            reason = self._off_choice(text, request, finish, budget)
            completion = replace(completion, finish_reason="error", error=reason)
        return completion

    def _off_choice(self, text: str, request: GenerationRequest, finish: FinishReason, budget: int) -> str:
        """Why an answer under constrained choice is not one of the choices."""
        choices = list(request.choices or ())
        answer = text.strip()
        if finish == "length" and any(choice.startswith(answer) for choice in choices):
            return (
                f"the answer {text!r} was cut short by the token budget ({budget}) before it completed "
                f"one of the choices {choices}"
            )
        if self.choice_param == "none":
            return (
                f"the answer {text!r} is not one of the choices {choices}; "
                "the server was not asked to constrain it (choice_param='none')"
            )
        return (
            f"the answer {text!r} is not one of the choices {choices}: the server did not apply "
            f"{self.choice_param!r} (older vLLM takes choice_param='guided_choice', other servers choice_param='none')"
        )

    def _failure(self, error: openai.APIError, attempts: int) -> tuple[Completion, bool]:
        """The error completion of a request that failed for good, and whether the server was unreachable."""
        url = str(error.request.url) if getattr(error, "request", None) is not None else self.base_url
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        unreachable = False
        if isinstance(error, openai.APIStatusError):
            message = f"HTTP {error.status_code} from {url}: {_server_message(error)}{tries}{self._hint(error)}"
        elif isinstance(error, openai.APITimeoutError):
            message = f"no answer from {url} within timeout_s={self.timeout_s:g}{tries}"
        elif isinstance(error, openai.APIConnectionError):
            cause = error.__cause__
            unreachable = type(cause).__name__ == "ConnectError"
            if unreachable:
                message = (
                    f"could not connect to the OpenAI-compatible server at {self.base_url} ({type(cause).__name__}: "
                    f"{cause}){tries}; check that the server is running and that base_url / OPENAI_BASE_URL "
                    "points at it"
                )
            else:
                detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
                message = f"connection to {url} failed ({detail}){tries}"
        else:
            message = f"{type(error).__name__} from {url}: {error}{tries}"
        message = self._redact(message)
        logger.warning("%s: request failed: %s", self.name, message)
        return Completion(text="", finish_reason="error", error=message), unreachable

    def _hint(self, error: openai.APIStatusError) -> str:
        """What to do about a refused request, where the status or the message says it."""
        status = error.status_code
        if status in (401, 403):
            return " (check the API key: OPENAI_API_KEY or api_key=)"
        if status == 404:
            return f" (check the model name {self.model!r} and that base_url ends in /v1)"
        if status == 400 and not self.reasoning_model:
            text = f"{getattr(error, 'param', '')} {_server_message(error)}"
            if re.search(r"max_tokens|temperature|top_p", text):
                return (
                    f" (a reasoning model? --model-option {self.name}:reasoning_model=true sends "
                    "max_completion_tokens and no temperature)"
                )
        return ""

    # ------------------------------------------------------------------ bookkeeping

    def _account(self, outcomes: Sequence[_Outcome]) -> None:
        prompt = sum(outcome.completion.prompt_tokens for outcome in outcomes)
        written = sum(outcome.completion.completion_tokens for outcome in outcomes)
        thinking = sum(outcome.completion.reasoning_tokens or 0 for outcome in outcomes)
        cost = sum(outcome.cost_usd or 0.0 for outcome in outcomes)
        unpriced = 0
        if self.price is None:
            unpriced = sum(1 for o in outcomes if o.completion.prompt_tokens or o.completion.completion_tokens)
        with self._usage_lock:
            usage = self._usage
            self._usage = Usage(
                requests=usage.requests + len(outcomes),
                failed=usage.failed + sum(outcome.completion.finish_reason == "error" for outcome in outcomes),
                attempts=usage.attempts + sum(outcome.attempts for outcome in outcomes),
                prompt_tokens=usage.prompt_tokens + prompt,
                completion_tokens=usage.completion_tokens + written,
                cost_usd=usage.cost_usd + cost,
                unpriced=usage.unpriced + unpriced,
                reasoning_tokens=usage.reasoning_tokens + thinking,
            )

    def _redact(self, text: str) -> str:
        """``text`` with the API key replaced, in case a server or library echoed it."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text


def _prompt_chars(request: GenerationRequest) -> int:
    """The length of a request's prompt in characters: messages with a little each for their framing, and tools."""
    if request.messages is None:
        return len(request.prompt or "")
    chars = sum(len(str(message.get("content") or "")) + _MESSAGE_OVERHEAD_CHARS for message in request.messages)
    return chars + (len(json.dumps(request.tools)) if request.tools else 0)


def _tool_calls(entries: Any) -> list[ToolCall] | None:
    """OpenAI's ``message.tool_calls`` as :class:`ToolCall` records (None when there are none)."""
    if not entries:
        return None
    calls = []
    for entry in entries:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            if not isinstance(arguments, str):  # some servers send an object instead of a JSON string
                arguments = json.dumps(arguments)
            calls.append(ToolCall(name=str(function.get("name") or ""), arguments=arguments, id=entry.get("id")))
    return calls or None


def _server_message(error: openai.APIStatusError) -> str:
    """The error message in a server's answer (OpenAI's ``{"error": {"message": ...}}``, vLLM's, or the raw text)."""
    body = error.body
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, dict) and value.get("message"):
                return str(value["message"])[:300]
            if value:
                return str(value)[:300]
        return str(body)[:300]
    if isinstance(body, str) and body:
        return body[:300]
    try:
        text = error.response.text
    except httpx.ResponseNotRead:
        text = ""
    return text[:300] or error.response.reason_phrase
