"""Two FSDP2 processes with one shared vLLM engine (``distributed.vllm_engine: shared``), on vLLM's CPU build.

One ``torchrun --nproc_per_node 2`` launch with the vLLM environment's interpreter trains the tiny
vLLM test model for two updates with FSDP2, full fine-tuning and then LoRA, each time with one
vLLM engine in process 0 that plays every group and receives the gathered weights (or adapter)
after each update. After the last update process 0 asks the engine for a greedy answer and the
test compares the engine's log-probabilities with the trained HF model (``final/``): the engine
must serve the weights FSDP trained, not the base ones. Per-process engines (the default) need
one device per process; the GPU check (``bench/gpu_check.sh``) runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from vllm_env import REPO, free_port, require_vllm_python, vllm_environ, vllm_model_dir  # noqa: E402

UPDATES = 2
SAME = 2e-3  # as tests/training/test_vllm_rollouts.py: vLLM's and transformers' logprobs of the same tokens

SCRIPT = r"""
import json
import os
import sys
from pathlib import Path

from training.rollout.engines import build_engine
from backends.base import GenerationRequest, SamplingParams
from backends.hf import HFBackend
from tests.small_lake import make_config
from training.distributed import release_world
from training.trainer import TrainHooks, train

def main():
    model_dir, out_root, updates = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    rank = int(os.environ["RANK"])
    probe = GenerationRequest(messages=[{"role": "user", "content": "P_\n_G"}], max_tokens=8)
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    found = {}

    for mode, lr in (("full", 1e-2), ("lora", 5e-2)):
        record = found[mode] = {}
        engines = []

        def build_and_keep(*args, engines=engines, **kwargs):
            kwargs["vllm_options"] = {"enforce_eager": True, "max_model_len": 512}
            engines.append(build_engine(*args, **kwargs))
            return engines[-1]

        def on_update(step, metrics, engines=engines, record=record):
            engine = engines[0]
            record.setdefault("syncs", []).append(engine.syncs)
            record["hosts_engine"] = engine.backend is not None
            if step == updates and engine.backend is not None:
                completion = engine.backend.generate([probe], greedy)[0]
                record["after"] = {"token_ids": completion.token_ids, "logprobs": completion.logprobs}

        config = make_config(
            out_root / mode,
            model_dir,
            model={"spec": f"vllm:{model_dir}", "finetune": mode},
            optim={"lr": lr, "micro_batch_size": 4, "grad_accumulation": None},
            run={"updates": updates},
            distributed={"strategy": "fsdp", "vllm_engine": "shared"},
        )
        result = train(config, hooks=TrainHooks(on_update=on_update, build_engine=build_and_keep))
        engines[0].close()
        if rank == 0:
            keys = ("step", "loss/skipped", "optim/steps")
            record["metrics"] = [{k: row.get(k) for k in keys} for row in result.metrics]
            final, base = HFBackend(result.final_model, threads=1), HFBackend(model_dir, threads=1)
            prompt = final.encode_prompts([probe])[0]
            tokens = record["after"]["token_ids"]
            record["final_on_after"] = final.sequence_logprobs([prompt], [tokens])[0].tolist()
            record["base_on_after"] = base.sequence_logprobs([prompt], [tokens])[0].tolist()
    release_world()
    # A file per process: two processes printing to one pipe can interleave their lines.
    (out_root / f"result-{rank}.json").write_text(json.dumps(found))


if __name__ == "__main__":  # vLLM's engine process is spawned and imports this file again
    main()
"""


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = require_vllm_python()
    out = tmp_path_factory.mktemp("vllm-fsdp")
    script = out / "train.py"
    script.write_text(SCRIPT)
    command = [
        str(python),
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(script),
        str(vllm_model_dir()),
        str(out),
        str(UPDATES),
    ]
    began = time.perf_counter()
    env = {**vllm_environ(), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"the launch failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    found: dict[str, Any] = {"wall_s": time.perf_counter() - began}
    for rank in (0, 1):
        found[rank] = json.loads((out / f"result-{rank}.json").read_text())
    return found


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_one_shared_engine_serves_what_fsdp_trained(launched: dict[str, Any], mode: str) -> None:
    main, other = launched[0][mode], launched[1][mode]
    assert main["hosts_engine"] and not other["hosts_engine"]  # one engine, in process 0
    # One push after every update (a LoRA engine also got the starting adapter), all of them by process 0.
    assert main["syncs"] == [step + (mode == "lora") for step in range(1, UPDATES + 1)]
    assert other["syncs"] == [0] * UPDATES
    rows = main["metrics"]
    assert [row["step"] for row in rows] == list(range(1, UPDATES + 1))
    assert all(row["loss/skipped"] == 0 for row in rows) and rows[0]["optim/steps"] >= 1, rows
    # After the last push, the engine's log-probabilities are the trained model's, not the base model's.
    engine, final, base = main["after"]["logprobs"], main["final_on_after"], main["base_on_after"]
    assert max(abs(a - b) for a, b in zip(engine, final, strict=True)) <= SAME
    assert max(abs(a - b) for a, b in zip(engine, base, strict=True)) > 10 * SAME
