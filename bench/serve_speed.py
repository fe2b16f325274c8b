"""Serving speed: ``tsmg serve`` over the WebSocket against in-process stepping and stock OpenEnv.

Three arms play the same game with the same cyclic moves (resetting when an episode ends):

* **in-process**: ``game.step`` on a ``tsmg.make`` game, no server.
* **tsmg**: ``tsmg serve --game GAME`` (OpenEnv's server plus tsmg's layer: typed observation with legal
  actions and info, HTTP sessions, error handling, log redaction), in its own process.
* **stock**: OpenEnv's stock ``create_fastapi_app`` wrapping the same game with nothing of tsmg's
  layer (a text action in, the observation text, reward and done out; OpenEnv's default sync
  ``step``), in its own process, under uvicorn's defaults (as OpenEnv's template runs it).
* **stock, no deflate** (64 sessions only): the same with WebSocket compression off, as
  ``tsmg serve`` runs, to show how much of the difference that setting makes.

Both servers are driven by OpenEnv's own async ``GenericEnvClient`` from this process: 1 session,
then 64 concurrent sessions. The arms alternate for ``--rounds`` rounds and each figure is the
median over rounds (the range is printed), since the machine is shared.

Usage: python bench/serve_speed.py [--game FrozenLake-v0] [--rounds 3] [--steps-1 2000] [--steps-64 100]
The last line printed is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvloop

ROOT = Path(__file__).resolve().parents[1]
MOVES = ("right", "right", "down", "down", "down", "right")  # the shortest path on the standard 4x4 map


# ------------------------------------------------------------------ the stock arm's server
def stock_app(game_id: str) -> Any:
    """OpenEnv's stock app around a tsmg game, with nothing of tsmg's serving layer."""
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    import tsmg

    class TextAction(Action):
        text: str

    class TextObservation(Observation):
        text: str

    class StockGame(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.game = tsmg.make(game_id)
            self.agent = self.game.agents[0]

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TextObservation:
            observations, _ = self.game.reset(seed=seed)
            return TextObservation(text=observations[self.agent])

        def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
            result = self.game.step({self.agent: action.text})
            agent = self.agent
            return TextObservation(text=result.observations[agent], reward=result.rewards[agent], done=result.done)

        @property
        def state(self) -> State:
            return State()

    # Made once before serving, as `tsmg serve` does: the registry loads its plugins on first use,
    # and 64 sessions opened at once must not race on that.
    tsmg.make(game_id)
    return create_fastapi_app(StockGame, TextAction, TextObservation, max_concurrent_envs=256)


def run_stock_server(game_id: str, deflate: bool) -> None:
    """Serve the stock app on a free loopback port; print its URL first (like ``tsmg serve``)."""
    import uvicorn

    from tsmg.apps.serve.server import WS_MAX_BYTES, bind

    sock = bind("127.0.0.1", 0)
    print(f"stock: on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        stock_app(game_id),
        log_level="warning",
        access_log=False,
        ws_max_size=WS_MAX_BYTES,
        ws_per_message_deflate=deflate,
    )
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def server(command: list[str]) -> Iterator[tuple[str, int]]:
    """Start a server subprocess, wait for /health, yield its base URL and pid, stop it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    try:
        assert process.stdout is not None
        base = process.stdout.readline().split(" on ", 1)[1].split()[0]
        for _ in range(600):
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base, process.pid
    finally:
        process.terminate()
        process.wait(timeout=20)


# ------------------------------------------------------------------ load
async def play(url: str, session: int, steps: int, latencies: list[float]) -> None:
    """One session: reset, then ``steps`` steps with the cyclic moves (reset when an episode ends)."""
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url, message_timeout_s=120) as env:
        await env.reset(seed=session)
        for step in range(steps):
            began = time.perf_counter()
            result = await env.step({"text": MOVES[step % len(MOVES)]})
            latencies.append(time.perf_counter() - began)
            if result.done:
                await env.reset(seed=session)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(url: str, pid: int, sessions: int, steps: int) -> dict[str, float]:
    """Steps/s, step latency percentiles and server CPU per step of ``sessions`` concurrent sessions."""
    await asyncio.gather(*(play(url, s, 20, []) for s in range(sessions)))  # warm-up
    latencies: list[float] = []
    cpu_before = cpu_seconds(pid)
    began = time.perf_counter()
    await asyncio.gather(*(play(url, s, steps, latencies) for s in range(sessions)))
    elapsed = time.perf_counter() - began
    server_cpu = cpu_seconds(pid) - cpu_before
    latencies.sort()
    return {
        "steps_per_s": len(latencies) / elapsed,
        "p50_ms": 1e3 * latencies[len(latencies) // 2],
        "p99_ms": 1e3 * latencies[int(len(latencies) * 0.99)],
        "server_cpu_us": 1e6 * server_cpu / len(latencies),
    }


def in_process(game_id: str, steps: int) -> dict[str, float]:
    """Steps/s of the game itself with the same moves."""
    import tsmg

    game = tsmg.make(game_id)
    agent = game.agents[0]
    game.reset(seed=0)
    began = time.perf_counter()
    for step in range(steps):
        if game.step({agent: MOVES[step % len(MOVES)]}).done:
            game.reset(seed=0)
    elapsed = time.perf_counter() - began
    return {"steps_per_s": steps / elapsed, "step_us": 1e6 * elapsed / steps}


def remote_game_latency(url: str, steps: int) -> float:
    """Median step latency (ms) of ``tsmg.make(URL)``, the Game that plays over the wire."""
    import tsmg

    game = tsmg.make(url)
    agent = game.agents[0]
    game.reset(seed=0)
    latencies = []
    for step in range(steps):
        began = time.perf_counter()
        done = game.step({agent: MOVES[step % len(MOVES)]}).done
        latencies.append(time.perf_counter() - began)
        if done:
            game.reset(seed=0)
    game.close()
    return 1e3 * statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="FrozenLake-v0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps-1", type=int, default=2000, help="steps of the one-session run")
    parser.add_argument("--steps-64", type=int, default=100, help="steps per session of the 64-session run")
    parser.add_argument("--stock-server", choices=["deflate", "plain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stock_server:
        run_stock_server(args.game, deflate=args.stock_server == "deflate")
        return

    tsmg_command = [sys.executable, "-m", "tsmg.apps.cli", "serve", args.game, "--port", "0"]
    tsmg_command += ["--log-level", "warning", "--no-access-log"]
    stock_command = [sys.executable, __file__, "--game", args.game, "--stock-server"]
    runs: dict[str, list[dict[str, float]]] = {}
    with (
        server(tsmg_command) as (tsmg_base, tsmg_pid),
        server([*stock_command, "deflate"]) as (stock_base, stock_pid),
        server([*stock_command, "plain"]) as (plain_base, plain_pid),
    ):
        arms = {
            "tsmg": (f"{tsmg_base}/{args.game}", tsmg_pid),
            "stock": (stock_base, stock_pid),
            "plain": (plain_base, plain_pid),
        }
        for round_index in range(args.rounds):
            runs.setdefault("inproc", []).append(in_process(args.game, 20_000))
            # The order alternates between rounds, so that a drift in the machine's load hits every arm.
            order = list(arms) if round_index % 2 == 0 else list(reversed(arms))
            for name in order:
                url, pid = arms[name]
                if name != "plain":
                    runs.setdefault(f"{name}_1", []).append(uvloop.run(load(url, pid, 1, args.steps_1)))
                runs.setdefault(f"{name}_64", []).append(uvloop.run(load(url, pid, 64, args.steps_64)))
            remote = remote_game_latency(arms["tsmg"][0], args.steps_1 // 2)
            runs.setdefault("remote_game", []).append({"p50_ms": remote})
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    def median(arm: str, figure: str) -> float:
        return statistics.median(run[figure] for run in runs[arm])

    def spread(arm: str, figure: str) -> str:
        values = [run[figure] for run in runs[arm]]
        return f"{min(values):,.3g}-{max(values):,.3g}"

    def line(label: str, key: str) -> str:
        return (
            f"  {label:<26} {median(key, 'steps_per_s'):>9,.0f} steps/s ({spread(key, 'steps_per_s')})"
            f"  p50 {median(key, 'p50_ms'):.3f} ms  p99 {median(key, 'p99_ms'):.3f} ms"
            f"  server CPU {median(key, 'server_cpu_us'):.0f} us/step"
        )

    print(f"{args.game}, {args.rounds} rounds (median, range over rounds)")
    inproc = median("inproc", "steps_per_s")
    print(f"  {'in-process':<26} {inproc:>9,.0f} steps/s  ({median('inproc', 'step_us'):.1f} us/step)")
    print(line("tsmg serve, 1 session", "tsmg_1"))
    print(line("stock OpenEnv, 1 session", "stock_1"))
    print(line("tsmg serve, 64 sessions", "tsmg_64"))
    print(line("stock OpenEnv, 64 sessions", "stock_64"))
    print(line("stock, no deflate, 64", "plain_64"))
    print(f"  tsmg.make(URL) step     p50 {median('remote_game', 'p50_ms'):.3f} ms")
    ratios = [t["steps_per_s"] / s["steps_per_s"] for t, s in zip(runs["tsmg_64"], runs["stock_64"], strict=True)]
    print(f"  tsmg / stock throughput with 64 sessions, per round: {', '.join(f'{r:.3f}' for r in ratios)}")
    headline = {
        "game": args.game,
        "rounds": args.rounds,
        "inproc_steps_per_s": round(median("inproc", "steps_per_s")),
        "ws_1_p50_ms": round(median("tsmg_1", "p50_ms"), 4),
        "ws_1_p99_ms": round(median("tsmg_1", "p99_ms"), 4),
        "ws_1_steps_per_s": round(median("tsmg_1", "steps_per_s")),
        "ws_64_steps_per_s": round(median("tsmg_64", "steps_per_s")),
        "ws_64_p50_ms": round(median("tsmg_64", "p50_ms"), 3),
        "ws_64_p99_ms": round(median("tsmg_64", "p99_ms"), 3),
        "stock_1_p50_ms": round(median("stock_1", "p50_ms"), 4),
        "stock_1_steps_per_s": round(median("stock_1", "steps_per_s")),
        "stock_64_steps_per_s": round(median("stock_64", "steps_per_s")),
        "stock_64_p50_ms": round(median("stock_64", "p50_ms"), 3),
        "tsmg_over_stock_64": round(statistics.median(ratios), 3),
        "stock_no_deflate_64_steps_per_s": round(median("plain_64", "steps_per_s")),
        "ws_64_server_cpu_us_per_step": round(median("tsmg_64", "server_cpu_us"), 1),
        "stock_64_server_cpu_us_per_step": round(median("stock_64", "server_cpu_us"), 1),
        "remote_game_p50_ms": round(median("remote_game", "p50_ms"), 4),
    }
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
