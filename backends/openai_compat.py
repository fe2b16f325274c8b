"""A backend for any OpenAI-compatible server: OpenAI itself, ``vllm serve``, and the like.

A batch is sent as concurrent HTTP requests (asyncio + ``httpx``) under a concurrency bound, so one
slow request never holds up the others and the server batches them as it sees fit. Each request
is retried with exponential backoff and full jitter on 429, 5xx, connection errors and timeouts
(``Retry-After`` is honoured), a bounded number of times; a request that still fails comes back
as ``Completion(finish_reason="error")`` without failing the rest of the batch.

Point it at a server with ``base_url`` (or ``OPENAI_BASE_URL``), ending in ``/v1`` as in the
OpenAI SDK, and ``api_key`` (or ``OPENAI_API_KEY``; a local server usually needs none)::

    from backends.openai_compat import OpenAIBackend
    model = OpenAIBackend("gpt-4o-mini", prices={"gpt-4o-mini": (0.15, 0.60)})
    local = OpenAIBackend("tiny", base_url="http://127.0.0.1:8000/v1", logprobs=True, token_ids=True)

With a vLLM server, ``GenerationRequest.choices`` becomes constrained decoding through vLLM's
structured outputs (``"structured_outputs": {"choice": [...]}``; older servers take
``choice_param="guided_choice"``). Every answer is checked against the choices whatever the
server did. The API key is sent only in the ``Authorization`` header: it is kept out of reprs,
logs, errors and completions (error text from the server is scrubbed of it too).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import re
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, get_args

import httpx

from backends.base import (
    BackendError,
    Completion,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    combine_seeds,
    match_choice,
)
from backends.pricing import Price, PriceSpec, PriceTable, price_for

__all__ = ["DEFAULT_BASE_URL", "ChoiceParam", "OpenAIBackend", "Usage"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"

ChoiceParam = Literal["structured_outputs", "guided_choice", "none"]
"""How allowed choices reach the server: vLLM >= 0.10 (``structured_outputs``), older vLLM
(``guided_choice``), or not at all (plain OpenAI: the answer is only checked)."""

_T = TypeVar("_T")
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")


@dataclass(frozen=True, slots=True)
class Usage:
    """What a backend has spent so far (all calls added up).

    Attributes:
        requests: Requests completed (successfully or not).
        failed: Requests that ended in an error.
        attempts: HTTP attempts made, retries included.
        prompt_tokens: Prompt tokens the server reported.
        completion_tokens: Completion tokens the server reported.
        cost_usd: Cost of the requests whose price is known.
        unpriced: Requests with tokens but no price in the table (their cost is not in ``cost_usd``).
    """

    requests: int = 0
    failed: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0

    @property
    def retries(self) -> int:
        """HTTP attempts beyond the first of each request."""
        return self.attempts - self.requests


class _AttemptFailed(Exception):
    """One HTTP attempt failed; ``retryable`` says whether another attempt may succeed."""

    def __init__(
        self, message: str, *, retryable: bool, retry_after: float | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.unreachable = unreachable


@dataclass(slots=True)
class _Outcome:
    completion: Completion
    attempts: int
    unreachable: bool = False
    cost_usd: float | None = None


class OpenAIBackend:
    """Chat (or plain-prompt) completions from an OpenAI-compatible HTTP server.

    The batch runs on an event loop in a background thread that the backend owns, so
    :meth:`generate` works the same from plain code and from a thread that already runs an event
    loop (a notebook, an async app), and HTTP connections are reused across calls. Call
    :meth:`close` (or use the backend as a context manager) to release them early.

    Attributes:
        name: Name used in episode records (default ``openai:MODEL``).
        model: Model name sent to the server.
        base_url: Server URL, ending in ``/v1``.
        price: USD per million tokens for this model, or None if unknown.
    """

    #: The server batches concurrent requests itself, so rollouts let each episode advance on its
    #: own instead of in lock-step (a slow request then holds no other episode).
    prefers_independent_episodes = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        prices: PriceSpec | PriceTable | None = None,
        logprobs: bool = False,
        token_ids: bool = False,
        choice_param: ChoiceParam = "structured_outputs",
        raise_on_unreachable: bool = True,
        name: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        """Configure the client; nothing is sent until the first :meth:`generate`.

        Args:
            model: Model name the server knows (``--served-model-name`` for vLLM).
            base_url: Server URL ending in ``/v1``; default ``OPENAI_BASE_URL``, else OpenAI's.
            api_key: Bearer token; default ``OPENAI_API_KEY``. Required only for OpenAI's own URL.
            concurrency: Most requests in flight at once.
            timeout_s: Hard limit on each HTTP attempt (connect, send, wait and read together).
            max_retries: Retries after the first attempt of each request (0: never retry).
            backoff_s: Base of the exponential backoff; attempt k waits up to ``backoff_s * 2**(k-1)``.
            max_backoff_s: Longest wait between two attempts (``Retry-After`` included).
            prices: USD per million input/output tokens, for this model or as a table by model
                name (see :mod:`backends.pricing`); cost is reported in :attr:`usage`.
            logprobs: Ask for the log-probability of each sampled token.
            token_ids: Ask for the sampled token ids (vLLM's ``return_token_ids``; other servers
                reject unknown fields, so it is off by default).
            choice_param: How ``GenerationRequest.choices`` reaches the server (see :data:`ChoiceParam`).
            raise_on_unreachable: Raise :class:`BackendError` when no request of a batch could even
                connect (a dead server or wrong URL), instead of returning only error completions.
            name: Name in episode records.
            extra_body: Extra JSON fields sent with every request (server-specific options);
                they override the fields this backend sets.

        Raises:
            ValueError: For an out-of-range option (the message names the valid values).
            BackendError: When OpenAI's own URL is used without an API key.
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if backoff_s < 0 or max_backoff_s < 0:
            raise ValueError(f"backoff_s and max_backoff_s must be >= 0, got {backoff_s} and {max_backoff_s}")
        if choice_param not in get_args(ChoiceParam):
            raise ValueError(f"choice_param must be one of {get_args(ChoiceParam)}, got {choice_param!r}")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        # Kept private and never formatted into any message: see _redact for server-echoed text.
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not self._api_key and self.base_url == DEFAULT_BASE_URL:
            raise BackendError(
                f"no API key for {DEFAULT_BASE_URL}: set OPENAI_API_KEY or pass api_key=; "
                "for a local server (e.g. vllm serve) set OPENAI_BASE_URL or base_url="
            )
        self.concurrency = concurrency
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.price: Price | None = price_for(prices, model)
        self.logprobs = logprobs
        self.token_ids = token_ids
        self.choice_param: ChoiceParam = choice_param
        self.raise_on_unreachable = raise_on_unreachable
        self.name = name or f"openai:{model}"
        self.extra_body = dict(extra_body or {})
        self._usage = Usage()
        self._usage_lock = threading.Lock()
        # Jitter needs no reproducibility, but it must not touch the global RNG.
        self._jitter = random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: httpx.AsyncClient | None = None
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

    def close(self) -> None:
        """Close the HTTP connections and stop the background loop (a later call starts them again)."""
        with self._loop_lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None:
            return
        client, self._client, self._slots = self._client, None, None
        if client is not None:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=10)
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

    def _http_client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        # Created on the backend's loop thread: httpx clients and semaphores belong to one event
        # loop. One semaphore for the backend bounds requests in flight across concurrent batches.
        if self._client is None or self._slots is None:
            headers = {"Content-Type": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(
                base_url=self.base_url + "/",
                headers=headers,
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
            )
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._client, self._slots

    # ------------------------------------------------------------------ one batch

    async def _generate(self, requests: list[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        client, slots = self._http_client()
        outcomes = await asyncio.gather(*(self._complete(client, slots, request, sampling) for request in requests))
        self._account(outcomes)
        if self.raise_on_unreachable and all(outcome.unreachable for outcome in outcomes):
            raise BackendError(outcomes[0].completion.error or f"could not connect to {self.base_url}")
        return [outcome.completion for outcome in outcomes]

    async def _complete(
        self, client: httpx.AsyncClient, slots: asyncio.Semaphore, request: GenerationRequest, sampling: SamplingParams
    ) -> _Outcome:
        try:
            path, body = self._body(request, sampling)
        except ValueError as error:
            return _Outcome(Completion(text="", finish_reason="error", error=str(error)), attempts=0)
        started: float | None = None
        attempt = 0
        while True:
            attempt += 1
            async with slots:
                if started is None:
                    started = time.perf_counter()
                try:
                    # httpx's timeout covers each phase; wait_for bounds the whole attempt, so a
                    # server that trickles bytes cannot hold a request forever either.
                    data = await asyncio.wait_for(self._post(client, path, body), timeout=self.timeout_s)
                    break
                except TimeoutError:
                    failure = _AttemptFailed(
                        f"no answer from {self.base_url} within timeout_s={self.timeout_s:g}", retryable=True
                    )
                except _AttemptFailed as error:
                    failure = error
            if not failure.retryable or attempt > self.max_retries:
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                message = self._redact(f"{failure.message}{tries}")
                logger.warning("%s: request failed: %s", self.name, message)
                completion = Completion(
                    text="",
                    finish_reason="error",
                    error=message,
                    latency_s=time.perf_counter() - started,
                    extra={"attempts": attempt},
                )
                return _Outcome(completion, attempts=attempt, unreachable=failure.unreachable)
            delay = self._backoff(attempt, failure.retry_after)
            reason = self._redact(failure.message)
            logger.debug("%s: attempt %d failed (%s); retrying in %.2fs", self.name, attempt, reason, delay)
            await asyncio.sleep(delay)  # outside the semaphore: a waiting request holds no slot
        completion = self._parse(path, data, request)
        completion.latency_s = time.perf_counter() - started
        completion.extra["attempts"] = attempt
        cost = None
        if self.price is not None:
            cost = self.price.cost(completion.prompt_tokens, completion.completion_tokens)
            completion.extra["cost_usd"] = cost
        return _Outcome(completion, attempts=attempt, cost_usd=cost)

    async def _post(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/{path}"
        try:
            response = await client.post(path, json=body)
        except httpx.TimeoutException:
            raise _AttemptFailed(f"no answer from {url} within timeout_s={self.timeout_s:g}", retryable=True) from None
        except httpx.ConnectError as error:
            raise _AttemptFailed(
                f"could not connect to the OpenAI-compatible server at {self.base_url} ({type(error).__name__}: "
                f"{error}); check that the server is running and that base_url / OPENAI_BASE_URL points at it",
                retryable=True,
                unreachable=True,
            ) from None
        except httpx.TransportError as error:  # dropped connection, protocol error: worth another try
            raise _AttemptFailed(f"{type(error).__name__} talking to {url}: {error}", retryable=True) from None
        if response.status_code == 200:
            try:
                data = response.json()
            except ValueError:
                raise _AttemptFailed(f"{url} answered 200 with a body that is not JSON", retryable=True) from None
            if not isinstance(data, dict) or not data.get("choices"):
                raise _AttemptFailed(f"{url} answered 200 without choices: {str(data)[:200]}", retryable=False)
            return data
        detail = _server_message(response)
        status = response.status_code
        if status == 429 or status >= 500:
            raise _AttemptFailed(
                f"HTTP {status} from {url}: {detail}", retryable=True, retry_after=_retry_after(response)
            )
        hint = ""
        if status in (401, 403):
            hint = " (check the API key: OPENAI_API_KEY or api_key=)"
        elif status == 404:
            hint = f" (check the model name {self.model!r} and that base_url ends in /v1)"
        raise _AttemptFailed(f"HTTP {status} from {url}: {detail}{hint}", retryable=False)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: the server's ``Retry-After`` if it gave one, else full jitter."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff_s)
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        # Full jitter (uniform in [0, ceiling]) spreads out the retries of a batch that failed together.
        return self._jitter.uniform(0.0, ceiling)

    # ------------------------------------------------------------------ request and response

    def _body(self, request: GenerationRequest, sampling: SamplingParams) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        if request.messages is not None:
            path = "chat/completions"
            body["messages"] = request.messages
            if self.logprobs:
                body["logprobs"] = True
        elif request.prompt is not None:
            path = "completions"
            body["prompt"] = request.prompt
            if self.logprobs:
                body["logprobs"] = 0  # the sampled token only
        else:
            raise ValueError("a GenerationRequest needs messages or a prompt")
        stop = request.stop if request.stop is not None else sampling.stop
        if stop:
            body["stop"] = list(stop)
        seed = combine_seeds(sampling.seed, request.seed)
        if seed is not None:
            body["seed"] = seed
        if self.token_ids:
            body["return_token_ids"] = True
        if request.choices is not None:
            if not request.choices:
                raise ValueError("choices is empty: nothing could be answered")
            if self.choice_param == "structured_outputs":
                body["structured_outputs"] = {"choice": list(request.choices)}
            elif self.choice_param == "guided_choice":
                body["guided_choice"] = list(request.choices)
        body.update(self.extra_body)
        return path, body

    def _parse(self, path: str, data: dict[str, Any], request: GenerationRequest) -> Completion:
        choice = data["choices"][0]
        if path == "chat/completions":
            text = (choice.get("message") or {}).get("content") or ""
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
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        completion = Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or (len(logprobs) if logprobs else 0)),
            token_ids=[int(token) for token in token_ids] if token_ids is not None else None,
            logprobs=logprobs,
        )
        prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
        if prompt_ids:  # vLLM with return_token_ids: what the server actually tokenised
            completion.prompt_token_ids = [int(token) for token in prompt_ids]
        if request.choices is not None and match_choice(text, request.choices) is None:
            constraint = (
                "the server was not asked to constrain it (choice_param='none')"
                if self.choice_param == "none"
                else f"the server ignored {self.choice_param!r}? (older vLLM takes choice_param='guided_choice')"
            )
            completion = replace(
                completion,
                finish_reason="error",
                error=f"the answer {text!r} is not one of the choices {list(request.choices)}; {constraint}",
            )
        return completion

    # ------------------------------------------------------------------ bookkeeping

    def _account(self, outcomes: Sequence[_Outcome]) -> None:
        prompt = sum(outcome.completion.prompt_tokens for outcome in outcomes)
        written = sum(outcome.completion.completion_tokens for outcome in outcomes)
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
            )

    def _redact(self, text: str) -> str:
        """``text`` with the API key replaced, in case a server or library echoed it."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text


def _server_message(response: httpx.Response) -> str:
    """The error message in a server's answer (OpenAI's ``{"error": {"message": ...}}`` or the raw text)."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
        if data.get("message"):
            return str(data["message"])[:300]
        if data.get("detail"):
            return str(data["detail"])[:300]
    return str(data)[:300]


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds asked for by ``Retry-After`` (a number or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
