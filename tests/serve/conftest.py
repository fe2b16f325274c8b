"""``tsmg serve`` as a real subprocess on loopback, for the serve tests."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("openenv", reason="the serve tests need tsmg[serve] (make setup installs it)")

ROOT = Path(__file__).resolve().parents[2]
#: How long a test waits for `tsmg serve` to answer before it fails.
START_TIMEOUT_S = 180


class Served:
    """A running ``tsmg serve``: its base URL and what it has logged so far."""

    def __init__(self, process: subprocess.Popen, base: str, log: Path) -> None:
        self.process = process
        self.base = base
        self.log = log

    def url(self, game_id: str) -> str:
        return f"{self.base}/{game_id}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def sessions(self, game_id: str) -> int:
        return httpx.get(f"{self.url(game_id)}/sessions", timeout=10).json()["active"]


@contextlib.contextmanager
def serve_process(tmp_path: Path, *arguments: str, prelude: str = "", headers: dict[str, str] | None = None):
    """Start ``tsmg serve ARGUMENTS --port 0``, wait until it answers, stop it afterwards.

    ``prelude``: Python run in the server's process before the CLI (e.g. an exit hook that
    reports what it imported). ``headers``: sent with the start-up health checks (a token).
    """
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "tsmg.apps.cli", "serve", *arguments, "--port", "0"]
    if prelude:
        argv = ["serve", *arguments, "--port", "0"]
        script = f"{prelude}\nimport sys\nfrom tsmg.apps.cli import main\nsys.exit(main({argv!r}))"
        command = [sys.executable, "-c", script]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
    try:
        base = None
        # A wait bound, not a timing claim: a server loading torch and a model beside a busy test run
        # took over 60 s here (load average 10 on 2 cores, nothing logged yet).
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert process.poll() is None, f"tsmg serve exited early:\n{log.read_text()}"
            # The first line of tsmg serve's own (a model it loads may print progress before it).
            lines = [line for line in log.read_text().splitlines() if line.startswith("tsmg serve: ")]
            if lines and " on http://" in lines[0]:
                base = lines[0].split(" on ", 1)[1].split()[0]
                try:
                    if httpx.get(f"{base}/health", timeout=2, headers=headers).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.1)
        else:
            raise AssertionError(f"tsmg serve did not start within {START_TIMEOUT_S} s:\n{log.read_text()}")
        yield Served(process, base, log)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server with a single-agent, a turn-based and a simultaneous game."""
    with serve_process(
        tmp_path_factory.mktemp("serve"),
        "FrozenLake-NoSlip-v0",
        "TicTacToe-v0",
        "SnakeArena-2p-v0",
        "FrozenLake-v0",
        "--max-sessions",
        "64",
    ) as server:
        yield server
