#!/usr/bin/env bash
# The GPU check of the training stack at real model sizes: one prepared command, under 10 minutes.
#
#   bash bench/gpu_check.sh              # on a GPU machine (every GPU it finds)
#   bash bench/gpu_check.sh --dry-run    # the same steps on the CPU at a tiny size (a test runs this)
#
# For each size (Qwen2.5-0.5B by default, Qwen2 architecture, random weights built from a config:
# nothing is downloaded), in this order, each step within what is left of the time budget:
#   1. build the model (bfloat16, on the GPU) with a tokenizer trained on the spot;
#   2. MS-GRPO updates on Frozen Lake (random 4x4 maps, 8 groups of 8, constrained choice) with the
#      real trainer: rollouts on the HF backend (LoRA r=16, full), on vLLM (`--model vllm:PATH`:
#      LoRA, full), and FSDP2 over the GPUs it finds (torchrun; one GPU: FSDP over one device), with
#      rollouts on the HF backend and on vLLM (one engine per process; plus one shared engine with
#      two GPUs or more). Each prints seconds per update = rollout + scoring (pi_old, reference) +
#      optimizer + push (new weights into vLLM), torch's peak memory per process, and nvidia-smi's
#      peak per GPU (vLLM's engine included);
#   3. TRL's GRPOTrainer with use_vllm=True (engine colocated), 2 steps through each route of
#      tsmg.apps.integrations.trl: rollout_func (tsmg samples on TRL's engine) and environment_factory
#      (TRL samples and calls the make_move tool); seconds per step and episode records written;
#   4. generation throughput: vLLM's offline engine (256 x 128 tokens) and the HF backend (64 x 128).
# Every figure is printed as it comes, then one JSON line per measurement ("RESULT {...}"); the last
# line is one JSON object with all of them.
#
# Environment: GPU_CHECK_SIZES ("0.5b"; "0.5b 3b" for both), GPU_CHECK_UPDATES (3), GPU_CHECK_BUDGET_S
# (540: every step gets at most the time left), GPU_CHECK_DIR (a fresh temporary folder), PYTHON
# (.venv/bin/python; vLLM steps run where `import vllm` works, TRL's where `import trl` works too,
# else they are skipped, saying so).
# --dry-run: size "tiny" on the CPU, 1 update, FSDP over 2 CPU processes (gloo), 8 x 16 tokens generated,
# budget 400 s.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
for argument in "$@"; do
  case "$argument" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $argument (use --dry-run or --help)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
GENERATE=()
if [ "$DRY_RUN" = 1 ]; then
  SIZES=${GPU_CHECK_SIZES:-tiny}
  UPDATES=${GPU_CHECK_UPDATES:-1}
  BUDGET=${GPU_CHECK_BUDGET_S:-400}
  GENERATE=(--rows 8 --tokens 16)
else
  SIZES=${GPU_CHECK_SIZES:-0.5b}
  UPDATES=${GPU_CHECK_UPDATES:-3}
  BUDGET=${GPU_CHECK_BUDGET_S:-540}
fi
WORK=${GPU_CHECK_DIR:-$(mktemp -d -t tsmg-gpu-check-XXXXXX)}
RESULTS="$WORK/results.jsonl"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false VLLM_NO_USAGE_STATS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$WORK/logs"
: > "$RESULTS"
STEP=0
STARTED=$SECONDS
FAILED=0

GPUS=0
if [ "$DRY_RUN" = 0 ] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$DRY_RUN" = 1 ]; then
  export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  PROCESSES=2  # FSDP over two CPU processes (gloo)
else
  PROCESSES=$(( GPUS > 0 ? GPUS : 1 ))
fi
HAS_VLLM=0
"$PY" -c "import vllm" >/dev/null 2>&1 && HAS_VLLM=1
HAS_TRL=0
"$PY" -c "import trl" >/dev/null 2>&1 && HAS_TRL=1
echo "gpu_check: sizes [$SIZES], $UPDATES updates, $GPUS GPUs, FSDP over $PROCESSES processes, vLLM $([ "$HAS_VLLM" = 1 ] && echo yes || echo no), budget ${BUDGET}s, work folder $WORK"

# Seconds a step may take: at most CAP, never past the budget (0: no time left).
allowance() {
  local left=$(( BUDGET - (SECONDS - STARTED) ))
  (( left > $1 )) && left=$1
  (( left < 20 )) && left=0
  echo "$left"
}

# run NAME CAP COMMAND...: one step under its time allowance; its RESULT lines are kept.
run() {
  local name=$1 cap=$2 limit log
  shift 2
  limit=$(allowance "$cap")
  if [ "$limit" = 0 ]; then
    echo "=== $name: skipped, the time budget of ${BUDGET}s is spent"
    return 0
  fi
  echo "=== $name ($(( SECONDS - STARTED ))s elapsed, at most ${limit}s)"
  log="$WORK/logs/$(( ++STEP ))-${name//[^A-Za-z0-9.]/_}.log"  # every step's whole log is kept
  if timeout "$limit" "$@" > "$log" 2>&1; then
    grep -E '^(RESULT |MS-GRPO |built |hf |vllm |trl )' "$log" || true
    grep '^RESULT ' "$log" | cut -c8- >> "$RESULTS" || true
  else
    echo "$name failed or timed out; the end of its log ($log):"
    tail -n 25 "$log"
    FAILED=$(( FAILED + 1 ))
  fi
}

torchrun_command() {
  echo "$PY" -m torch.distributed.run --nproc_per_node "$1" --master_addr 127.0.0.1 --master_port "$(( 20000 + RANDOM % 20000 ))"
}

run "tokenizer" 120 "$PY" bench/gpu_check.py tokenizer "$WORK/tokenizer"

for SIZE in $SIZES; do
  MODEL="$WORK/qwen2-$SIZE"
  run "$SIZE: build" 240 "$PY" bench/gpu_check.py build "$SIZE" "$MODEL" "$WORK/tokenizer"
  [ -f "$MODEL/config.json" ] || { echo "=== $SIZE: no model, its other steps are skipped"; continue; }
  TRAIN=(bench/gpu_check.py train "$MODEL" "$SIZE" --updates "$UPDATES")

  for FINETUNE in lora full; do
    [ "$SIZE" = 3b ] && [ "$FINETUNE" = full ] && continue  # 3B full fine-tuning: FSDP's case below
    run "$SIZE: HF rollouts, $FINETUNE" 150 "$PY" "${TRAIN[@]}" --engine hf --finetune "$FINETUNE" --out "$WORK/hf-$SIZE-$FINETUNE"
  done
  if [ "$HAS_VLLM" = 1 ]; then
    for FINETUNE in lora full; do
      run "$SIZE: vLLM rollouts (--model vllm:PATH), $FINETUNE" 180 "$PY" "${TRAIN[@]}" --engine vllm --finetune "$FINETUNE" --out "$WORK/vllm-$SIZE-$FINETUNE"
    done
  else
    echo "=== $SIZE: vLLM rollouts skipped (vllm is not importable by $PY)"
  fi

  read -r -a LAUNCH <<< "$(torchrun_command "$PROCESSES")"
  run "$SIZE: FSDP2 x$PROCESSES, HF rollouts, full" 180 "${LAUNCH[@]}" "${TRAIN[@]}" --engine hf --finetune full --strategy fsdp --out "$WORK/fsdp-$SIZE-hf"
  if [ "$HAS_VLLM" = 1 ]; then
    read -r -a LAUNCH <<< "$(torchrun_command "$PROCESSES")"
    run "$SIZE: FSDP2 x$PROCESSES, vLLM per process, LoRA" 200 "${LAUNCH[@]}" "${TRAIN[@]}" --engine vllm --finetune lora --strategy fsdp --vllm-engine per-process --out "$WORK/fsdp-$SIZE-vllm"
    if [ "$PROCESSES" -ge 2 ]; then
      read -r -a LAUNCH <<< "$(torchrun_command "$PROCESSES")"
      run "$SIZE: FSDP2 x$PROCESSES, one shared vLLM engine, full" 200 "${LAUNCH[@]}" "${TRAIN[@]}" --engine vllm --finetune full --strategy fsdp --vllm-engine shared --out "$WORK/fsdp-$SIZE-shared"
    fi
  fi

  if [ "$HAS_VLLM" = 1 ] && [ "$HAS_TRL" = 1 ]; then
    for ROUTE in rollout tools; do
      run "$SIZE: TRL GRPOTrainer on vLLM (colocate), route $ROUTE" 150 "$PY" bench/gpu_check.py trl "$MODEL" "$SIZE" --route "$ROUTE" --out "$WORK/trl-$SIZE-$ROUTE"
    done
  else
    echo "=== $SIZE: TRL on vLLM skipped (vllm and trl are not both importable by $PY)"
  fi

  if [ "$HAS_VLLM" = 1 ]; then
    run "$SIZE: vLLM generation" 150 "$PY" bench/gpu_check.py generate "$MODEL" "$SIZE" --engine vllm "${GENERATE[@]}"
  fi
  run "$SIZE: HF generation" 90 "$PY" bench/gpu_check.py generate "$MODEL" "$SIZE" --engine hf "${GENERATE[@]}"
  rm -rf "$MODEL" "$WORK"/*-"$SIZE"-*  # the next size needs the disk
done

echo
echo "gpu_check: done in $(( SECONDS - STARTED ))s, $FAILED step(s) failed"
"$PY" -c 'import json, sys; print(json.dumps({"results": [json.loads(line) for line in open(sys.argv[1])], "failed_steps": int(sys.argv[2])}))' "$RESULTS" "$FAILED"
[ "$FAILED" = 0 ]
