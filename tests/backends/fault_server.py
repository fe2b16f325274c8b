"""A loopback OpenAI-compatible HTTP server that injects faults, for testing API clients for real.

It serves ``POST /v1/chat/completions``, ``POST /v1/completions`` and ``GET /v1/models`` on
127.0.0.1 (port 0: the OS picks a free one) from a ``ThreadingHTTPServer`` in a background
thread. Every request is keyed by its last message (or prompt) text, and a fault plan maps
``(key, attempt number)`` to what the server does with that attempt:

- ``ok``: a valid completion (with logprobs / token ids when asked, one of the choices when
  ``structured_outputs.choice`` or ``guided_choice`` is given);
- ``429`` (with ``Retry-After``), ``500``, ``503``, ``400``: that status with an OpenAI-style error body;
- ``stall``: say nothing for ``stall_s`` seconds (past the client's timeout), then hang up;
- ``trickle``: send the headers, then the body one byte every ``trickle_s`` seconds (each read
  arrives in time, the whole answer does not);
- ``drop``: hang up at once without answering;
- ``slow``: wait ``slow_s`` seconds, then answer (to observe concurrency);
- ``echo_auth``: 401 whose body repeats the ``Authorization`` header (a leaky server);
- ``off_choice``: a valid completion that ignores the choice constraint.

Injected 429s and 5xx carry ``retry-after-ms`` (``retry_after_ms``, 1 ms by default) so that
the ``openai`` SDK's retries do not sit out its half-second backoff in every test; give
``retry_after`` (seconds) to test ``Retry-After`` itself.

With ``reasoning=ReasoningModel(...)`` the server answers as today's hosted reasoning models do:
its thinking in a separate ``reasoning_content`` field (or inline as ``<think>...</think>``),
``usage.completion_tokens_details.reasoning_tokens``, and a 400 for the parameters such a model
rejects (``max_tokens``, ``temperature``). A ``reply`` may return a message dict instead of text
(``content``, ``reasoning_content``, ``tool_calls`` made with :func:`tool_call`), to answer with
tool calls or with chosen thinking.

The server counts attempts per key and records every request body, so tests can check retries
server-side. Nothing here is random unless a plan says so, and then from its own seeded generator.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Reply = Callable[[dict[str, Any]], "str | dict[str, Any]"]
"""Maps a request body to the answer text, or to a message dict (``content``, ``reasoning_content``, ``tool_calls``)."""

REJECTIONS = {
    "max_tokens": (
        "unsupported_parameter",
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    ),
    "temperature": (
        "unsupported_value",
        "Unsupported value: 'temperature' does not support {value} with this model. "
        "Only the default (1) value is supported.",
    ),
    "top_p": ("unsupported_parameter", "Unsupported parameter: 'top_p' is not supported with this model."),
}
"""OpenAI's answers (code, message) to parameters its reasoning models reject."""


@dataclass
class ReasoningModel:
    """How the server plays a reasoning model.

    Attributes:
        thinking: ``field``: the thinking in its own message field; ``inline``: as
            ``<think>...</think>`` before the answer in ``content``.
        field: The message field for ``thinking="field"`` (``reasoning_content`` or ``reasoning``).
        rejects: Parameters answered with a 400, as OpenAI's reasoning models do.
        think: The thinking written for a request body.
        report_tokens: Report ``usage.completion_tokens_details.reasoning_tokens``.
    """

    thinking: Literal["field", "inline"] = "field"
    field: str = "reasoning_content"
    rejects: tuple[str, ...] = ("max_tokens", "temperature")
    think: Callable[[dict[str, Any]], str] = lambda body: "The goal is down and to the right; moving on."
    report_tokens: bool = True


def tool_call(name: str, arguments: str | Mapping[str, Any], call_id: str = "call_0") -> dict[str, Any]:
    """One entry of a message's ``tool_calls`` (arguments as given if text, else as JSON)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def address_clerk(body: dict[str, Any]) -> dict[str, Any]:
    """A hosted model serving ``ServiceAddress-v0`` by reading the conversation: ask, ask, look up, update."""
    text = body["messages"][-1]["content"]
    email = re.search(r"My email is (\S+@example\.com)\.", text)
    new = re.search(r"My new address is (.+?)\.\n", text)
    customer = re.search(r"Customer (C\d+)", text)
    if email is None:
        call = tool_call("ask_user", {"topic": "email"})
    elif new is None:
        call = tool_call("ask_user", {"topic": "address"})
    elif customer is None:
        call = tool_call("lookup_customer", {"email": email.group(1)})
    else:
        call = tool_call("update_address", {"customer_id": customer.group(1), "address": new.group(1)})
    return {"content": None, "tool_calls": [call]}


FaultPlan = Callable[[str, int], str]
"""Maps (request key, attempt number starting at 1) to an action name."""


def scripted(scripts: Mapping[str, Sequence[str]], default: str = "ok") -> FaultPlan:
    """A plan from per-key action lists: attempt k of a key gets ``scripts[key][k-1]``.

    A key not listed, or an attempt past its script, gets ``default``; a key that starts with a
    listed key followed by ``:`` uses that script too (``"fail:3"`` follows ``"fail"``).
    """

    def plan(key: str, attempt: int) -> str:
        script = scripts.get(key)
        if script is None:
            script = scripts.get(key.split(":", 1)[0])
        if script is None or attempt > len(script):
            return default
        return script[attempt - 1]

    return plan


def random_faults(
    *, p429: float = 0.0, p500: float = 0.0, pstall: float = 0.0, faulty_attempts: int = 2, seed: int = 0
) -> FaultPlan:
    """A plan that fails each of the first ``faulty_attempts`` attempts of a request at random.

    The draw for (key, attempt) comes from a generator seeded by ``(seed, key, attempt)``, so the
    same batch meets the same faults whatever order the requests arrive in. Attempts after
    ``faulty_attempts`` always succeed: a client with that many retries must complete them all.
    """

    def plan(key: str, attempt: int) -> str:
        if attempt > faulty_attempts:
            return "ok"
        draw = random.Random(f"{seed}/{key}/{attempt}").random()
        for action, probability in (("429", p429), ("500", p500), ("stall", pstall)):
            if draw < probability:
                return action
            draw -= probability
        return "ok"

    return plan


class FaultServer:
    """The server; use as a context manager, or :meth:`start` / :meth:`stop`.

    Attributes:
        plan: The fault plan (default: always ``ok``).
        attempts: Attempts seen per key.
        actions: Counts of the actions taken.
        bodies: Every JSON body received, in arrival order.
        arrivals: Arrival times (``time.monotonic``) per key.
        authorizations: ``Authorization`` headers seen.
        max_in_flight: Most requests handled at the same time.
    """

    def __init__(
        self,
        plan: FaultPlan | None = None,
        *,
        reply: Reply | None = None,
        stall_s: float = 5.0,
        slow_s: float = 0.1,
        trickle_s: float = 0.2,
        retry_after: str | None = None,
        retry_after_ms: str | None = "1",
        reasoning: ReasoningModel | None = None,
    ) -> None:
        self.plan: FaultPlan = plan or (lambda key, attempt: "ok")
        self.reply: Reply = reply or (lambda body: f"echo {request_key(body)}")
        self.stall_s = stall_s
        self.slow_s = slow_s
        self.trickle_s = trickle_s
        self.retry_after = retry_after
        self.retry_after_ms = retry_after_ms
        self.reasoning = reasoning
        self.attempts: Counter[str] = Counter()
        self.actions: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: dict[str, list[float]] = {}
        self.authorizations: list[str] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        if self._server is None:
            raise RuntimeError("the server is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FaultServer:
        """Bind a free loopback port and serve in a daemon thread."""
        handler = _make_handler(self)
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True  # a stalled handler must not keep the test process alive
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake stalled handlers, stop serving and free the port."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _admit(self, key: str, authorization: str | None, body: dict[str, Any]) -> str:
        with self._lock:
            self.attempts[key] += 1
            action = self.plan(key, self.attempts[key])
            self.actions[action] += 1
            self.bodies.append(body)
            self.arrivals.setdefault(key, []).append(time.monotonic())
            if authorization:
                self.authorizations.append(authorization)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        return action

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connections when a client opens 16 at once (the client then
    # waits a whole SYN retransmission, ~1 s, which looks like a timeout fault that was never injected).
    request_queue_size = 128


def request_key(body: Mapping[str, Any]) -> str:
    """The text that identifies a request: its last message's content, or its prompt."""
    messages = body.get("messages")
    if messages:
        return str(messages[-1].get("content", ""))
    return str(body.get("prompt", ""))


def completion_body(
    body: Mapping[str, Any], answer: str | Mapping[str, Any], chat: bool, reasoning: ReasoningModel | None = None
) -> dict[str, Any]:
    """A valid OpenAI-style answer (one token per character), with logprobs, ids and thinking as asked.

    ``answer`` is the text, or a message dict (``content``, ``reasoning_content`` / ``reasoning``,
    ``tool_calls``). Thinking counts as completion tokens and as ``reasoning_tokens``.
    """
    message: dict[str, Any] = {"role": "assistant", "content": answer} if isinstance(answer, str) else dict(answer)
    message.setdefault("role", "assistant")
    thinking = next((str(message[k]) for k in ("reasoning_content", "reasoning") if message.get(k)), "")
    if reasoning is not None and not thinking:
        thinking = reasoning.think(dict(body))
        if reasoning.thinking == "inline":
            message["content"] = f"<think>{thinking}</think>{message.get('content') or ''}"
        else:
            message[reasoning.field] = thinking
    text = str(message.get("content") or "")
    tokens = list(text)
    logprobs = [-0.25 - 0.01 * index for index in range(len(tokens))]
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages") or []) + len(body.get("prompt", ""))
    calls = message.get("tool_calls") or []
    written = len(text) + sum(len(call["function"]["arguments"]) for call in calls)
    if "<think>" not in text:
        written += len(thinking)  # a separate field: its tokens are billed, not shown in content
    choice: dict[str, Any] = {"index": 0, "finish_reason": "tool_calls" if calls else "stop"}
    if chat:
        choice["message"] = message
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": token, "logprob": value, "bytes": list(token.encode()), "top_logprobs": []}
                    for token, value in zip(tokens, logprobs, strict=True)
                ]
            }
    else:
        choice["text"] = text
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": tokens, "token_logprobs": logprobs, "text_offset": [], "top_logprobs": []}
    if body.get("return_token_ids"):
        choice["token_ids"] = [ord(token) for token in tokens]
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_chars // 4 + 1,
        "completion_tokens": written,
        "total_tokens": prompt_chars // 4 + 1 + written,
    }
    if thinking and (reasoning is None or reasoning.report_tokens):
        usage["completion_tokens_details"] = {"reasoning_tokens": len(thinking)}
    return {
        "id": "cmpl-fault-server",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": body.get("model", "fault-server"),
        "choices": [choice],
        "usage": usage,
    }


def _choices(body: Mapping[str, Any]) -> list[str] | None:
    structured = body.get("structured_outputs")
    if isinstance(structured, dict) and structured.get("choice"):
        return list(structured["choice"])
    if body.get("guided_choice"):
        return list(body["guided_choice"])
    return None


def _make_handler(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (keep test output quiet)
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": "fault-server", "object": "model"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            chat = self.path == "/v1/chat/completions"
            if not chat and self.path != "/v1/completions":
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            key = request_key(body)
            action = server._admit(key, self.headers.get("Authorization"), body)
            try:
                self._act(action, body, chat)
            finally:
                server._leave()

        def _act(self, action: str, body: dict[str, Any], chat: bool) -> None:
            if action in ("ok", "slow", "off_choice", "trickle"):
                if action == "slow":
                    server._stopping.wait(server.slow_s)
                rejected = self._rejection(body)
                if rejected is not None:
                    self._json(400, {"error": rejected})
                    return
                choices = _choices(body)
                answer: str | dict[str, Any]
                if choices and action != "off_choice":
                    # A deterministic pick, so that tests can predict it.
                    answer = choices[len(request_key(body)) % len(choices)]
                elif choices:
                    answer = "none of the above"
                else:
                    answer = server.reply(body)
                payload = completion_body(body, answer, chat, server.reasoning)
                if action == "trickle":
                    self._trickle(payload)
                else:
                    self._json(200, payload)
            elif action == "429":
                self._json(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, retry=True)
            elif action in ("500", "503"):
                self._json(int(action), {"error": {"message": f"injected {action}"}}, retry=True)
            elif action == "400":
                self._json(400, {"error": {"message": "injected 400", "type": "invalid_request_error"}})
            elif action == "echo_auth":
                leaked = self.headers.get("Authorization", "")
                self._json(401, {"error": {"message": f"invalid key in header {leaked!r}"}})
            elif action == "stall":
                server._stopping.wait(server.stall_s)
                self.close_connection = True
            elif action == "drop":
                self.close_connection = True
            else:
                self._json(500, {"error": {"message": f"unknown fault action {action!r}"}})

        def _rejection(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
            """OpenAI's error for the first parameter of ``body`` a reasoning model would reject."""
            if server.reasoning is None:
                return None
            for param in server.reasoning.rejects:
                if param in body:
                    code, message = REJECTIONS[param]
                    return {
                        "message": message.format(value=body[param]),
                        "type": "invalid_request_error",
                        "param": param,
                        "code": code,
                    }
            return None

        def _json(self, status: int, payload: Mapping[str, Any], retry: bool = False) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry and server.retry_after is not None:
                    self.send_header("Retry-After", server.retry_after)
                elif retry and server.retry_after_ms is not None:
                    self.send_header("retry-after-ms", server.retry_after_ms)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up first: nothing to do
                self.close_connection = True

        def _trickle(self, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.flush()
                for byte in data:
                    if server._stopping.wait(server.trickle_s):
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler
