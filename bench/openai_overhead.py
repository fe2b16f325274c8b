"""What tsmg's layer over the ``openai`` SDK costs: OpenAIBackend against bare AsyncOpenAI calls.

Both send the same chat requests, with the same concurrency, to the same loopback server (the
test suite's fault server, answering at once), alternating arms over several repeats; the figure
is the ratio of their throughputs. tsmg's layer is the concurrency bound, the whole-attempt
deadline transport, attempt counting, response parsing into Completions and usage accounting.

    .venv/bin/python bench/openai_overhead.py --requests 400 --concurrency 16 --repeats 5

The last line is one JSON object (``backend_requests_per_s``, ``sdk_requests_per_s``, ``ratio``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "backends"))
from fault_server import FaultServer  # noqa: E402  (a test tool: the loopback server)

from backends.base import GenerationRequest, SamplingParams  # noqa: E402
from backends.openai_compat import OpenAIBackend  # noqa: E402


def requests_for(count: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=[{"role": "user", "content": f"move {index}"}]) for index in range(count)]


def backend_rate(server: FaultServer, count: int, concurrency: int) -> float:
    with OpenAIBackend("bench", base_url=server.base_url, api_key="none", concurrency=concurrency) as backend:
        backend.generate(requests_for(concurrency), SamplingParams(max_tokens=8))  # warm connections
        started = time.perf_counter()
        completions = backend.generate(requests_for(count), SamplingParams(max_tokens=8))
        elapsed = time.perf_counter() - started
    assert all(completion.error is None for completion in completions)
    return count / elapsed


def sdk_rate(server: FaultServer, count: int, concurrency: int) -> float:
    async def run() -> float:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=5, timeout=60)
        slots = asyncio.Semaphore(concurrency)

        async def one(request: GenerationRequest) -> str:
            async with slots:
                answer = await client.chat.completions.create(
                    model="bench", messages=request.messages or [], max_tokens=8, temperature=1.0, top_p=1.0
                )
            return answer.choices[0].message.content or ""

        await asyncio.gather(*(one(request) for request in requests_for(concurrency)))
        started = time.perf_counter()
        texts = await asyncio.gather(*(one(request) for request in requests_for(count)))
        elapsed = time.perf_counter() - started
        await client.close()
        assert all(texts)
        return count / elapsed

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ours, bare = [], []
    with FaultServer() as server:
        for _ in range(args.repeats):
            ours.append(backend_rate(server, args.requests, args.concurrency))
            bare.append(sdk_rate(server, args.requests, args.concurrency))
    ratios = [a / b for a, b in zip(ours, bare, strict=True)]
    print(f"OpenAIBackend: {statistics.median(ours):,.0f} requests/s (median of {args.repeats})")
    print(f"bare AsyncOpenAI: {statistics.median(bare):,.0f} requests/s")
    print(f"ratio (ours / bare), per repeat: {', '.join(f'{ratio:.2f}' for ratio in ratios)}")
    figures = {
        "backend_requests_per_s": round(statistics.median(ours), 1),
        "sdk_requests_per_s": round(statistics.median(bare), 1),
        "ratio": round(statistics.median(ratios), 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
