"""What ``dtype: auto`` means on this machine: the device's fast dtype, detected, or pinned by the environment.

:func:`auto_dtype` decides from the device (CUDA's bfloat16 support; a CPU's feature flags, and
where they leave it open a measured bfloat16-over-float32 matmul speedup); ``TSMG_AUTO_DTYPE``
pins it (:func:`pinned_auto_dtype`). :func:`backends.hf.describe_dtype` prints the choice and why.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Collection
from typing import Literal, get_args

import torch

from backends.base import BackendError

#: The weights' dtypes a backend takes; ``auto``: :func:`auto_dtype`.
DType = Literal["auto", "float32", "bfloat16", "float16"]

#: The environment variable that pins what ``dtype: auto`` means on this machine (:func:`pinned_auto_dtype`).
AUTO_DTYPE_ENV = "TSMG_AUTO_DTYPE"


def pinned_auto_dtype() -> tuple[torch.dtype, str] | None:
    """What ``TSMG_AUTO_DTYPE`` pins ``auto`` to (None: unset, ``auto`` is detected by :func:`auto_dtype`).

    Figures measured where ``auto`` was float32 (a CPU without AMX) come out again on a CPU with
    AMX-BF16, where ``auto`` is bfloat16, with ``TSMG_AUTO_DTYPE=float32``; the test suite pins it
    so that its exact comparisons and recorded references do not depend on the machine's CPU.

    Raises:
        BackendError: The variable names no dtype of ``dtype:``.
    """
    pinned = os.environ.get(AUTO_DTYPE_ENV, "").strip()
    if not pinned:
        return None
    allowed = [name for name in get_args(DType) if name != "auto"]
    if pinned not in allowed:
        raise BackendError(
            f"{AUTO_DTYPE_ENV}={pinned!r} is not a dtype; set it to one of {', '.join(allowed)} or unset it"
        )
    return getattr(torch, pinned), f"pinned by {AUTO_DTYPE_ENV}"


#: On a CPU with bfloat16 instructions but no AMX, ``auto`` is bfloat16 when its matmuls run at
#: least this many times as fast as float32's (:func:`cpu_bf16_speedup`). The CPUs measured so far
#: sit far from it on either side: 0.58 (this project's first machine) and 4.6 (an AMD EPYC).
BF16_FAST_SPEEDUP = 1.5


def auto_dtype(
    device: str,
    *,
    cpu_flags: Collection[str] | None = None,
    cuda_bf16: bool | None = None,
    bf16_speedup: float | None = None,
) -> tuple[torch.dtype, str]:
    """The dtype ``auto`` means on ``device``, detected, and why: the fastest one that trains well there.

    bfloat16 where the device has fast bfloat16 matmuls: CUDA with bfloat16 (float16 on older
    GPUs), a CPU with AMX-BF16, and a CPU with ``avx512_bf16`` but no AMX where a bfloat16 matmul
    is measured to run at least :data:`BF16_FAST_SPEEDUP` times as fast as a float32 one. That flag
    alone does not tell: on one AVX-512 CPU with it, bfloat16 ran at 74 GFLOP/s against 128 for
    float32; on an AMD EPYC with it, 410 against 89 (one thread, 2026-12-02). On any other CPU
    float32, whose matmuls there are the fast ones.

    Args:
        device: ``cpu`` or ``cuda`` (``cuda:N``).
        cpu_flags: The CPU's feature flags (None: read from the machine, :func:`cpu_flags_of_machine`).
        cuda_bf16: Whether the GPU supports bfloat16 (None: ask torch).
        bf16_speedup: bfloat16's matmul speed over float32's on this CPU (None: measured once per
            process where the flags leave it open, :func:`cpu_bf16_speedup`).

    Returns:
        ``(dtype, reason)``, the reason a short phrase for the model's printed description.

    Example:
        >>> auto_dtype("cpu", cpu_flags={"avx512f", "amx_bf16", "amx_tile"})
        (torch.bfloat16, 'CPU with AMX-BF16')
        >>> auto_dtype("cpu", cpu_flags={"avx2", "avx512_bf16"}, bf16_speedup=0.58)[0]
        torch.float32
        >>> auto_dtype("cpu", cpu_flags={"avx2"})[0]
        torch.float32
    """
    if device.startswith("cuda"):
        bf16 = torch.cuda.is_bf16_supported() if cuda_bf16 is None else cuda_bf16
        return (torch.bfloat16, "CUDA with bfloat16") if bf16 else (torch.float16, "CUDA without bfloat16")
    flags = frozenset(cpu_flags) if cpu_flags is not None else cpu_flags_of_machine()
    if "amx_bf16" in flags:
        return torch.bfloat16, "CPU with AMX-BF16"
    if "avx512_bf16" not in flags:
        return torch.float32, "CPU without bfloat16 matmul instructions"
    speedup = cpu_bf16_speedup() if bf16_speedup is None else bf16_speedup
    measured = f"bfloat16 matmuls measured at {speedup:.1f}x float32's"
    if speedup >= BF16_FAST_SPEEDUP:
        return torch.bfloat16, f"CPU with AVX512-BF16, {measured}"
    return torch.float32, f"CPU with AVX512-BF16 but no AMX, {measured}"


@functools.cache
def cpu_bf16_speedup(size: int = 512, repeats: int = 5) -> float:
    """How many times as fast a bfloat16 ``torch.mm`` runs as a float32 one on this CPU: measured once per process.

    The best of ``repeats`` runs of each, ``size`` x ``size``, on one thread in that thread's CPU
    time (a busy machine that takes the core away mid-run does not count), after one run of each
    to warm up: about 30 ms in all. The CPUs it decides for sit far from the threshold (0.58 and
    4.6 measured), so load does not flip the choice; where it could, ``TSMG_AUTO_DTYPE`` pins it
    (:func:`pinned_auto_dtype`).
    """
    generator = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a per-core property; one thread's CPU time is the whole cost
    try:
        timings = {}
        for dtype in (torch.float32, torch.bfloat16):
            left = torch.randn(size, size, generator=generator).to(dtype)
            right = torch.randn(size, size, generator=generator).to(dtype)
            torch.mm(left, right)  # the first call picks and loads the kernel
            best = float("inf")
            for _ in range(repeats):
                started = time.thread_time()
                torch.mm(left, right)
                best = min(best, time.thread_time() - started)
            timings[dtype] = best
    finally:
        torch.set_num_threads(threads)
    return timings[torch.float32] / max(timings[torch.bfloat16], 1e-12)


def cpu_flags_of_machine() -> frozenset[str]:
    """This CPU's feature flags: the ``flags`` line of ``/proc/cpuinfo``, else what torch detects (AMX, AVX512-BF16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    # No /proc (macOS, Windows): torch's own checks of the AMX tile unit (which comes with AMX-BF16) and AVX512-BF16.
    checks = {"amx_tile": "_is_amx_tile_supported", "avx512_bf16": "_is_avx512_bf16_supported"}
    found = {flag for flag, check in checks.items() if getattr(torch.cpu, check, lambda: False)()}
    return frozenset(found | ({"amx_bf16"} if "amx_tile" in found else set()))
