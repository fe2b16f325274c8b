"""``dtype: auto``: the device's fast dtype, detected from the device (never assumed), and printed by the CLIs."""

from pathlib import Path

import pytest
import torch

from backends.base import BackendError
from backends.hf import HFBackend, describe_dtype
from backends.hf_dtype import AUTO_DTYPE_ENV, BF16_FAST_SPEEDUP, auto_dtype, cpu_bf16_speedup, cpu_flags_of_machine
from tsmg.run_folder import CONFIG_FILE


@pytest.fixture
def detected(monkeypatch):
    """``auto`` detected from the machine: the suite's pin to float32 (the root conftest.py) lifted."""
    monkeypatch.delenv(AUTO_DTYPE_ENV, raising=False)


@pytest.mark.parametrize(
    ("flags", "speedup", "expected"),
    [
        ({"avx2", "fma"}, None, torch.float32),
        (set(), None, torch.float32),
        # bf16 instructions without AMX: slower than fp32 matmuls on one CPU (0.58), 4.6x faster on another
        ({"avx512f", "avx512_bf16"}, 0.58, torch.float32),
        ({"avx512f", "avx512_bf16"}, BF16_FAST_SPEEDUP - 0.01, torch.float32),
        ({"avx512f", "avx512_bf16"}, BF16_FAST_SPEEDUP, torch.bfloat16),
        ({"avx512f", "avx512_bf16"}, 4.6, torch.bfloat16),
        ({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}, 0.1, torch.bfloat16),  # AMX: not measured
    ],
)
def test_auto_on_a_cpu_is_bfloat16_with_amx_or_measured_fast_avx512_bf16(flags, speedup, expected):
    dtype, reason = auto_dtype("cpu", cpu_flags=flags, bf16_speedup=speedup)
    assert dtype == expected
    assert ("measured" in reason) == ("avx512_bf16" in flags and "amx_bf16" not in flags)


def test_the_bfloat16_speedup_is_float32s_time_over_bfloat16s(monkeypatch):
    import time

    def busy(seconds):  # CPU time, which the measurement counts (a sleep would not)
        started = time.thread_time()
        while time.thread_time() - started < seconds:
            pass

    real_mm = torch.mm
    cost = {torch.float32: 0.004, torch.bfloat16: 0.001}  # bfloat16 four times as fast
    monkeypatch.setattr(torch, "mm", lambda left, right: (busy(cost[left.dtype]), real_mm(left, right))[1])
    cpu_bf16_speedup.cache_clear()
    try:
        assert 2.5 < cpu_bf16_speedup(size=8, repeats=3) < 6.0
    finally:
        cpu_bf16_speedup.cache_clear()


def test_the_bfloat16_speedup_is_measured_once_per_process():
    cpu_bf16_speedup.cache_clear()
    first = cpu_bf16_speedup(size=64, repeats=1)
    assert first > 0 and cpu_bf16_speedup(size=64, repeats=1) == first  # cached: the choice cannot flip mid-run


@pytest.mark.parametrize(("bf16", "expected"), [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_follows_its_bfloat16_support(bf16, expected):
    assert auto_dtype("cuda", cuda_bf16=bf16)[0] == expected
    assert auto_dtype("cuda:1", cuda_bf16=bf16)[0] == expected


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads /proc/cpuinfo")
def test_the_machine_flags_are_read_from_cpuinfo_and_decide_auto(tiny_model_dir, detected):
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    flags = frozenset(next(line for line in lines if line.startswith("flags")).split(":", 1)[1].split())
    assert cpu_flags_of_machine() == flags
    fast_bf16 = "amx_bf16" in flags or ("avx512_bf16" in flags and cpu_bf16_speedup() >= BF16_FAST_SPEEDUP)
    expected = torch.bfloat16 if fast_bf16 else torch.float32
    assert auto_dtype("cpu")[0] == expected
    assert HFBackend(tiny_model_dir, dtype="auto", device="cpu").dtype == expected


def test_describe_dtype_names_the_choice_and_why_auto_made_it(detected):
    assert describe_dtype("float32") == "float32"
    assert describe_dtype("bfloat16", "cpu") == "bfloat16"
    dtype, reason = auto_dtype("cpu")
    assert describe_dtype("auto", "cpu") == f"{str(dtype).removeprefix('torch.')} (auto: {reason})"


def test_tsmg_train_prints_the_dtype_auto_resolved_to(tmp_path, capsys):
    # In process; the run stops at once (the folder already holds a run), after the line that names the model.
    from tsmg.apps.cli import main

    out = tmp_path / "run"
    out.mkdir()
    (out / CONFIG_FILE).write_text("{}\n")
    command = ["train", "--game", "FrozenLake-v0", "--model", "tiny", "--finetune", "lora", "--dtype", "auto"]
    returncode = main([*command, "--out", str(out)])  # the flags over the tiny model's defaults (full, float32)
    printed = capsys.readouterr()
    assert returncode != 0 and "already holds a training run" in printed.err
    assert f"training tiny (lora, {describe_dtype('auto')}) on FrozenLake-v0" in printed.out


@pytest.mark.parametrize("pinned", ["float32", "bfloat16"])
def test_the_environment_pins_what_auto_means_whatever_the_cpu(tiny_model_dir, monkeypatch, pinned):
    monkeypatch.setenv(AUTO_DTYPE_ENV, pinned)
    assert HFBackend(tiny_model_dir, dtype="auto", device="cpu").dtype == getattr(torch, pinned)
    assert describe_dtype("auto", "cpu") == f"{pinned} (auto: pinned by {AUTO_DTYPE_ENV})"
    assert HFBackend(tiny_model_dir, dtype="float16", device="cpu").dtype == torch.float16  # a named dtype wins


def test_a_pin_that_names_no_dtype_is_refused_with_the_allowed_list(monkeypatch):
    monkeypatch.setenv(AUTO_DTYPE_ENV, "fp32")
    refused = "TSMG_AUTO_DTYPE='fp32' is not a dtype; set it to one of float32, bfloat16, float16"
    with pytest.raises(BackendError, match=refused):
        describe_dtype("auto", "cpu")
