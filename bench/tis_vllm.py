"""The sampler–trainer gap that truncated importance sampling corrects, measured on vLLM's CPU build.

Runs the training script of ``tests/training/test_vllm_rollouts.py`` (the tiny vLLM test model,
Frozen Lake with choice answers, 3 updates, full fine-tuning, rollouts on a ``VLLMBackend``) with
``dtype: auto`` pinned to each dtype asked for (``TSMG_AUTO_DTYPE``; the engine computes in the
trainer's dtype), and prints per update ``loss/sampler_trainer_kl`` (k3 estimate of
KL(vLLM || trainer) on the sampled tokens), ``loss/tis_weight_mean`` and ``loss/tis_capped_share``.
Needs ``.venv-vllm`` (``bash scripts/setup_vllm_cpu_env.sh``); about a minute per dtype on 2 cores.

    .venv/bin/python bench/tis_vllm.py --dtypes float32,bfloat16

The last line is one JSON object: per dtype, the three figures of each update.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "training"))
sys.path.insert(0, str(ROOT / "tests" / "backends"))
from test_vllm_rollouts import TRAIN_SCRIPT, UPDATES  # noqa: E402  (the test's own training run)
from vllm_env import require_vllm_python, run_in_vllm_env, vllm_model_dir  # noqa: E402

KEYS = ("loss/sampler_trainer_kl", "loss/tis_weight_mean", "loss/tis_capped_share", "optim/steps")


def measure(dtype: str) -> list[dict[str, float | None]]:
    """The figures of each update of one run with ``dtype: auto`` meaning ``dtype``."""
    os.environ["TSMG_AUTO_DTYPE"] = dtype  # inherited by the vLLM process (vllm_environ copies os.environ)
    out = Path(tempfile.mkdtemp(prefix="tsmg-tis-bench-"))
    run = run_in_vllm_env(require_vllm_python(), TRAIN_SCRIPT, str(vllm_model_dir()), str(out), str(UPDATES), "full",
                          timeout_s=900)  # fmt: skip
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        raise SystemExit(f"the vLLM training run failed ({run.returncode}):\n{run.stdout[-4000:]}")
    rows = json.loads(lines[-1][len("RESULT ") :])["full"]["metrics"]
    return [{key: row.get(key) for key in KEYS} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated dtypes for dtype: auto")
    args = parser.parse_args()
    figures = {dtype: measure(dtype) for dtype in args.dtypes.split(",")}
    print(f"{'dtype':<10} {'update':>6} {'sampler_trainer_kl':>20} {'tis_weight_mean':>16} {'capped':>7}")
    for dtype, rows in figures.items():
        for update, row in enumerate(rows, start=1):
            kl, weight, capped = (row[key] for key in KEYS[:3])
            if kl is None:  # no optimizer step: every group had equal returns
                print(f"{dtype:<10} {update:>6} {'-':>20} {'-':>16} {'-':>7}")
                continue
            print(f"{dtype:<10} {update:>6} {kl:>20.3e} {weight:>16.6f} {capped:>7.3f}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
