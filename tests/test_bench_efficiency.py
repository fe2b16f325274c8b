"""bench/trainer_efficiency.py: phases told apart by the model calls, FLOPs counted without padding, the verdict."""

import argparse

import pytest
import torch
from bench_modules import load_bench

from backends.base import GenerationRequest, SamplingParams
from backends.hf import HFBackend

efficiency = load_bench("trainer_efficiency")


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    from backends.tiny import build_tiny_model

    return HFBackend(build_tiny_model(tmp_path_factory.mktemp("tiny")), threads=1)


def test_the_meter_splits_generation_into_prefill_and_decode_and_counts_real_tokens(backend):
    meter = efficiency.ModelMeter(backend.model)
    body = sum(p.numel() for n, p in backend.model.named_parameters() if n.endswith("proj.weight"))
    assert meter.body_weights == body and meter.head_weights == backend.model.lm_head.weight.numel()
    requests = [GenerationRequest(prompt="a b c d e f" if row else "a b", seed=row) for row in range(2)]
    prompts = backend.encode_prompts(requests)
    meter.phase = "generation"
    [first, second] = backend.generate(requests, SamplingParams(max_tokens=3, stop=()))
    assert meter.seconds["prefill"] > 0 and meter.flops["prefill"] > 0
    # The prefill runs each prompt's tokens once (the padding of the shorter one is not counted).
    real = sum(len(prompt) for prompt in prompts)
    assert meter.flops["prefill"] == 2.0 * (meter.body_weights * real + meter.head_weights * 2)
    steps = max(first.completion_tokens, second.completion_tokens) - 1
    assert meter.flops["decode"] <= 2.0 * (meter.body_weights + meter.head_weights) * 2 * steps
    assert (meter.flops["decode"] > 0) == (steps > 0)


def test_efficiency_is_flops_over_cpu_seconds_times_peak_and_names_the_phase_that_loses_most():
    record = {
        "prefill_s": 2.0,
        "decode_s": 6.0,
        "forward_s": 1.0,
        "backward_s": 1.0,
        "other_s": 1.0,
        "update_s": 11.0,
        "flops": 4.0e9,
        "prefill_flops": 1.6e9,
        "decode_flops": 0.4e9,
        "forward_flops": 1.0e9,
        "backward_flops": 1.0e9,
        "padding_share": 0.05,
        "refresh_s": 0.01,
        "plain_generate_s": 9.0,
        "unmerged_generation_s": 9.5,
        "plain_forward_backward_s": 3.0,
        "episodes": 8,
        "samples": 4,
    }
    args = argparse.Namespace(quick=True, threads=1)
    result = efficiency.summarise([record, {**record, "update_s": 13.0}], 1.0e9, args, "float32")
    assert result["efficiency"] == pytest.approx(4.0 / 12.0, abs=1e-3)
    assert result["held_back_by"] == "decode"  # 6 s spent where the peak would need 0.4 s
    assert result["phase_efficiency"]["prefill"] == pytest.approx(0.8)
    assert not result["reached"] and result["spread_update_cpu_s"] == [11.0, 13.0]
    assert result["generation_cpu_s"] == {"merged": 8.0, "unmerged": 9.5, "plain_generate": 9.0}
    assert result["efficiency_at_dtype_peak"] == result["efficiency"] and result["dtype_peak_gflops"] == 1.0
    # In bfloat16 (auto on a CPU with AMX): the update against both peaks, its phases against its own dtype's.
    fast = efficiency.summarise([record], 1.0e9, args, "bfloat16", dtype_peak=4.0e9)
    assert fast["efficiency"] == pytest.approx(4.0 / 11.0, abs=1e-3)
    assert fast["efficiency_at_dtype_peak"] == pytest.approx(1.0 / 11.0, abs=1e-3)
    assert fast["phase_efficiency"]["prefill"] == pytest.approx(0.2)
    assert fast["held_back_by"] == "decode"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_peak_is_a_plausible_rate(dtype):
    peak = efficiency.matmul_peak(torch.get_num_threads(), size=256, tries=2, dtype=dtype)
    assert 1e8 < peak < 1e13
