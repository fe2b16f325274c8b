"""``dtype: auto``: the device's fast dtype, detected from the device (never assumed), and printed by the CLIs."""

from pathlib import Path

import pytest
import torch

from backends.base import BackendError
from backends.hf import AUTO_DTYPE_ENV, HFBackend, auto_dtype, cpu_flags_of_machine, describe_dtype
from tsmg.run_folder import CONFIG_FILE


@pytest.fixture
def detected(monkeypatch):
    """``auto`` detected from the machine: the suite's pin to float32 (the root conftest.py) lifted."""
    monkeypatch.delenv(AUTO_DTYPE_ENV, raising=False)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"avx2", "fma"}, torch.float32),
        ({"avx512f", "avx512_bf16"}, torch.float32),  # bf16 instructions without AMX: slower than fp32 matmuls
        ({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}, torch.bfloat16),
        (set(), torch.float32),
    ],
)
def test_auto_on_a_cpu_is_bfloat16_only_with_amx_bf16(flags, expected):
    dtype, reason = auto_dtype("cpu", cpu_flags=flags)
    assert dtype == expected
    assert ("with AMX-BF16" in reason) == (expected == torch.bfloat16)


@pytest.mark.parametrize(("bf16", "expected"), [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_on_cuda_follows_its_bfloat16_support(bf16, expected):
    assert auto_dtype("cuda", cuda_bf16=bf16)[0] == expected
    assert auto_dtype("cuda:1", cuda_bf16=bf16)[0] == expected


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads /proc/cpuinfo")
def test_the_machine_flags_are_read_from_cpuinfo_and_decide_auto(tiny_model_dir, detected):
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    flags = frozenset(next(line for line in lines if line.startswith("flags")).split(":", 1)[1].split())
    assert cpu_flags_of_machine() == flags
    expected = torch.bfloat16 if "amx_bf16" in flags else torch.float32
    assert auto_dtype("cpu")[0] == expected
    assert HFBackend(tiny_model_dir, dtype="auto", device="cpu").dtype == expected


def test_describe_dtype_names_the_choice_and_why_auto_made_it(detected):
    assert describe_dtype("float32") == "float32"
    assert describe_dtype("bfloat16", "cpu") == "bfloat16"
    dtype, reason = auto_dtype("cpu")
    assert describe_dtype("auto", "cpu") == f"{str(dtype).removeprefix('torch.')} (auto: {reason})"


def test_tsmg_train_prints_the_dtype_auto_resolved_to(tmp_path, capsys):
    # In process; the run stops at once (the folder already holds a run), after the line that names the model.
    from tsmg.cli import main

    out = tmp_path / "run"
    out.mkdir()
    (out / CONFIG_FILE).write_text("{}\n")
    returncode = main(["train", "--game", "FrozenLake-v0", "--model", "tiny", "--out", str(out)])
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
