#!/usr/bin/env bash
# One-GPU check of the training stack at real model sizes, in under 8 minutes on an H200-class GPU.
#
# For each size (Qwen2.5-0.5B and Qwen2.5-3B shapes, Qwen2 architecture, random weights built from
# a config: nothing is downloaded):
#   1. build the model in bfloat16 on the GPU and save it (tokenizer: the tiny one of backends.tiny,
#      trained on the spot; the model keeps Qwen2.5's 151,936-row vocabulary, so compute is real);
#   2. vLLM (if importable): offline engine, 256 prompts x 128 new tokens -> generated tokens/s;
#   3. HF backend: 64 prompts x 128 new tokens -> generated tokens/s;
#   4. a few MS-GRPO updates on Frozen Lake (random 4x4 maps, groups of 8, constrained choice)
#      with the real trainer: LoRA r=16 for both sizes, plus full fine-tuning for 0.5B ->
#      seconds per update (rollout + update) and peak GPU memory.
# Every figure is printed as it comes, then one JSON line per measurement (prefixed "RESULT ").
#
# Environment: GPU_CHECK_SIZES ("0.5b 3b"; "tiny" runs a CPU smoke test of the same code paths),
# GPU_CHECK_UPDATES (3), GPU_CHECK_BUDGET_S (450: every step gets at most the time left, so the whole
# script ends in time), GPU_CHECK_DIR (a fresh temporary folder), PYTHON (.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
SIZES=${GPU_CHECK_SIZES:-"0.5b 3b"}
UPDATES=${GPU_CHECK_UPDATES:-3}
WORK=${GPU_CHECK_DIR:-$(mktemp -d -t tsmg-gpu-check-XXXXXX)}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BUDGET=${GPU_CHECK_BUDGET_S:-450}
mkdir -p "$WORK"
STARTED=$SECONDS

# Seconds a step may take: at most CAP, never past the script's budget (0: no time left).
allowance() {
  local left=$(( BUDGET - (SECONDS - STARTED) ))
  (( left > $1 )) && left=$1
  (( left < 20 )) && left=0
  echo "$left"
}
echo "gpu_check: sizes [$SIZES], $UPDATES updates each, work folder $WORK"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

# --- the tokenizer, once (a few seconds) ------------------------------------------------------------
"$PY" - "$WORK" <<'PYTHON'
import sys
from pathlib import Path

from backends.tiny import build_tiny_model

folder = Path(sys.argv[1]) / "tokenizer-source"
if not (folder / "tokenizer.json").is_file():
    build_tiny_model(folder)  # only its tokenizer is used
PYTHON

for SIZE in $SIZES; do
  MODEL="$WORK/qwen2-$SIZE"
  echo
  echo "=== $SIZE: build ($(( SECONDS - STARTED ))s elapsed)"
  # --- 1. build ---------------------------------------------------------------------------------------
  if [ "$(allowance 240)" = 0 ]; then
    echo "=== $SIZE: skipped, the time budget of ${BUDGET}s is spent"
    continue
  fi
  if ! timeout "$(allowance 240)" "$PY" - "$WORK" "$SIZE" "$MODEL" <<'PYTHON'
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

work, size, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
SHAPES = {  # Qwen2.5-0.5B and Qwen2.5-3B (config.json of the released models)
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14),
    "3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4),
}
if (out / "config.json").is_file():
    sys.exit(0)
tokenizer = AutoTokenizer.from_pretrained(work / "tokenizer-source")
config = Qwen2Config(
    vocab_size=151936,
    num_key_value_heads=2,
    tie_word_embeddings=True,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    bos_token_id=None,
    eos_token_id=tokenizer.eos_token_id,
    pad_token_id=tokenizer.pad_token_id,
    **SHAPES[size],
)
cuda = torch.cuda.is_available()
began = time.perf_counter()
torch.manual_seed(0)
with torch.device("cuda" if cuda else "cpu"):  # initialise on the GPU: minutes faster than on the CPU
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16 if cuda else torch.float32)
model.generation_config.eos_token_id = tokenizer.eos_token_id
model.generation_config.pad_token_id = tokenizer.pad_token_id
model.save_pretrained(out)
tokenizer.save_pretrained(out)
parameters = sum(parameter.numel() for parameter in model.parameters())
print(f"built {size}: {parameters / 1e9:.3f}B parameters in {time.perf_counter() - began:.0f}s -> {out}")
PYTHON
  then
    echo "building $SIZE failed or timed out: skipped"
    continue
  fi

  # --- 2. vLLM generation throughput (separate process: vLLM keeps GPU memory until it exits) ---------
  if [ "$(allowance 180)" != 0 ] && "$PY" -c "import vllm" 2>/dev/null; then
    echo "=== $SIZE: vLLM generation ($(( SECONDS - STARTED ))s elapsed)"
    timeout "$(allowance 180)" "$PY" - "$MODEL" "$SIZE" <<'PYTHON' || echo "vLLM check failed or timed out (see above)"
import json
import subprocess
import sys
import time

from transformers import AutoTokenizer

model, size = sys.argv[1], sys.argv[2]
import games  # noqa: F401
from tsmg import make
from vllm import LLM, SamplingParams

tokenizer = AutoTokenizer.from_pretrained(model)
game = make("FrozenLake-NoSlip-v0")
prompts = []
for seed in range(256):
    observation = game.reset(seed=seed)[0]["player"]
    text = tokenizer.apply_chat_template([{"role": "user", "content": observation}], tokenize=False, add_generation_prompt=True)
    prompts.append({"prompt_token_ids": tokenizer(text, add_special_tokens=False)["input_ids"]})
began = time.perf_counter()
# skip_tokenizer_init: prompts go in as token ids and outputs stay ids (the home-made tokenizer covers
# 512 of the model's 151,936 ids; a random model writes any of them).
llm = LLM(model=model, dtype="bfloat16", gpu_memory_utilization=0.45, max_model_len=2048, seed=0, skip_tokenizer_init=True)
startup = time.perf_counter() - began
params = SamplingParams(temperature=1.0, max_tokens=128, ignore_eos=True, detokenize=False, seed=0)
llm.generate(prompts[:8], params)  # warm-up
began = time.perf_counter()
outputs = llm.generate(prompts, params)
seconds = time.perf_counter() - began
generated = sum(len(output.outputs[0].token_ids) for output in outputs)
used = subprocess.run(
    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True
).stdout.split()
figures = {
    "size": size,
    "engine": "vllm",
    "what": "generate 256 x 128 tokens",
    "tokens_per_s": round(generated / seconds),
    "seconds": round(seconds, 2),
    "startup_s": round(startup, 1),
    "gpu_memory_used_mib": int(used[0]) if used else None,
}
print(f"vLLM {size}: {figures['tokens_per_s']} generated tokens/s (startup {startup:.0f}s)")
print("RESULT " + json.dumps(figures))
PYTHON
  else
    echo "=== $SIZE: vLLM skipped (not importable, or no time left)"
  fi

  # --- 3 and 4. HF generation throughput, then MS-GRPO updates with the real trainer -------------------
  echo "=== $SIZE: HF backend and MS-GRPO updates ($(( SECONDS - STARTED ))s elapsed)"
  LIMIT=$(allowance 300)
  [ "$LIMIT" = 0 ] && { echo "skipped: the time budget of ${BUDGET}s is spent"; rm -rf "$MODEL"; continue; }
  timeout "$LIMIT" "$PY" - "$MODEL" "$SIZE" "$UPDATES" "$WORK" <<'PYTHON' || echo "HF check of $SIZE failed or timed out"
import json
import sys
import time
from pathlib import Path

import torch

import games  # noqa: F401
from backends.base import GenerationRequest, SamplingParams
from backends.hf import HFBackend
from tsmg import make
from training.config import TrainConfig
from training.trainer import TrainHooks, train

model, size, updates, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
cuda = torch.cuda.is_available()


def peak_gib() -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None


game = make("FrozenLake-NoSlip-v0")
observations = [game.reset(seed=seed)[0]["player"] for seed in range(64)]
backend = HFBackend(model)
requests = [
    GenerationRequest(messages=[{"role": "user", "content": text}], max_tokens=128, seed=index)
    for index, text in enumerate(observations)
]
sampling = SamplingParams(temperature=1.0, max_tokens=128)
backend.generate(requests[:4], sampling)  # warm-up
if cuda:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
began = time.perf_counter()
completions = backend.generate(requests, sampling)
if cuda:
    torch.cuda.synchronize()
seconds = time.perf_counter() - began
generated = sum(completion.completion_tokens for completion in completions)
figures = {
    "size": size,
    "engine": "hf",
    "what": "generate 64 x 128 tokens",
    "tokens_per_s": round(generated / seconds),
    "seconds": round(seconds, 2),
    "peak_gib": peak_gib(),
}
print(f"HF {size}: {figures['tokens_per_s']} generated tokens/s")
print("RESULT " + json.dumps(figures))
del backend
if cuda:
    torch.cuda.empty_cache()

modes = ["lora", "full"] if size in ("0.5b", "tiny") else ["lora"]
for finetune in modes:
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model_section = {"spec": f"hf:{model}", "finetune": finetune}
    if finetune == "lora":
        model_section["lora_r"] = 16
    config = TrainConfig.model_validate(
        {
            "rollout": {
                "game_id": "FrozenLake-NoSlip-v0",
                "group_size": 8,
                "groups_per_update": 8,
                "lap": {"action_format": {"kind": "choice"}},
            },
            "model": model_section,
            "optim": {"lr": 1e-5, "micro_batch_size": 32},
            "run": {"out_dir": str(work / f"train-{size}-{finetune}"), "updates": updates, "tensorboard": False},
        }
    )
    timings: list[dict[str, float]] = []
    result = train(config, hooks=TrainHooks(on_update=lambda step, metrics: timings.append(metrics)))
    steady = timings[1:] or timings  # the first update pays for warm-up
    per_update = sum(row["time/rollout_s"] + row["time/update_s"] for row in steady) / len(steady)
    rollout_tokens = sum(row.get("rollout/completion_tokens", 0.0) for row in steady)
    figures = {
        "size": size,
        "engine": "hf",
        "what": f"ms-grpo update ({finetune}), 64 episodes",
        "seconds_per_update": round(per_update, 2),
        "rollout_s": round(sum(row["time/rollout_s"] for row in steady) / len(steady), 2),
        "update_s": round(sum(row["time/update_s"] for row in steady) / len(steady), 2),
        "samples_per_update": round(sum(row.get("sampler/samples", 0.0) for row in steady) / len(steady)),
        "rollout_completion_tokens": int(rollout_tokens),
        "peak_gib": peak_gib(),
    }
    print(
        f"MS-GRPO {size} {finetune}: {per_update:.2f}s per update "
        f"(rollout {figures['rollout_s']}s, update {figures['update_s']}s), peak {figures['peak_gib']} GiB"
    )
    print("RESULT " + json.dumps(figures))
PYTHON
  rm -rf "$MODEL" "$WORK"/train-"$SIZE"-*  # the next size needs the disk and the time
done
echo
echo "gpu_check: done in $(( SECONDS - STARTED ))s"
