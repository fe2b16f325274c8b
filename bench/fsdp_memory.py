"""Memory of parameters + optimizer state per process: one process against FSDP2 over N processes.

The same MS-GRPO run (a tiny Llama-shape model built on the spot, full fine-tuning, AdamW, the
small Frozen Lake of the trainer tests) is trained twice: by one process, and by
``torchrun --nproc_per_node N`` with ``distributed.strategy: fsdp`` (gloo on the CPU, NCCL on
GPUs). After the last update each process counts the bytes it holds of

* **parameters**: every weight of the model, or its local shard under FSDP;
* **optimizer state**: AdamW's two moments and step counters, or their local shards;

and the bench prints both arms and their ratio (per process / one process; FSDP's ideal is
1/N, plus what it cannot split evenly). The two run folders (``OUT/one``, ``OUT/fsdp``) hold
the same config but the strategy, and ``tests/training/test_distributed.py`` compares their
episodes, losses and final weights.

Usage: python bench/fsdp_memory.py [--processes 2] [--updates 3] [--preset 0.15m|4m] [--out DIR]
The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MEMORY_FILE = "memory-rank{rank}.json"


def state_bytes(model: Any, optimizer: Any) -> dict[str, int]:
    """Bytes this process holds of the model's parameters and of the optimizer's state (local shards under FSDP)."""

    def local(tensor: Any) -> Any:
        return tensor.to_local() if hasattr(tensor, "to_local") else tensor

    parameters = sum(local(p).numel() * p.element_size() for p in model.parameters())
    moments = 0
    for state in optimizer.state.values():
        for value in state.values():
            if hasattr(value, "numel"):
                moments += local(value).numel() * value.element_size()
    return {"parameters": int(parameters), "optimizer": int(moments), "total": int(parameters + moments)}


def run_config(out: Path, updates: int, preset: str, strategy: str) -> Any:
    """The bench's run: the trainer tests' small lake (tests/small_lake.py), a tiny model made once in ``out/..``."""
    if str(REPO) not in sys.path:  # the small lake lives with the tests, which are no installed package
        sys.path.insert(0, str(REPO))
    from tests.small_lake import build_lake_model, make_config

    model = build_lake_model(out.parent / f"model-{preset}", preset=preset)
    return make_config(
        out,
        model,
        # micro-batches of 4, so that each process's share of a step spans several of them; one optimizer step
        optim={"micro_batch_size": 4, "grad_accumulation": None},
        run={
            "updates": updates,
            "eval_every": updates,
            "eval_episodes": 8,
            "checkpoint_every": 1,
            "keep_last": 2,
            "episodes_every": 1,
        },
        distributed={"strategy": strategy},
    )


def worker(config_file: Path) -> None:
    """Train the run of ``config_file`` (one process, or one rank of a launch) and write this rank's figures."""
    import games  # noqa: F401  (registers the catalog)
    import training.trainer as trainer_module
    from training.config import TrainConfig
    from training.distributed import release_world

    config = TrainConfig.from_yaml(config_file)
    kept: list[Any] = []
    set_up = trainer_module.set_up

    def set_up_and_keep(*args: Any, **kwargs: Any) -> Any:
        kept.append(set_up(*args, **kwargs))
        return kept[-1]

    trainer_module.set_up = set_up_and_keep  # the optimizer lives inside train(): keep a handle on it
    trainer_module.train(config)
    setup = kept[0]
    figures = state_bytes(setup.backend.model, setup.optimizer)
    rank = int(os.environ.get("RANK", "0"))
    (Path(config.run.out_dir) / MEMORY_FILE.format(rank=rank)).write_text(json.dumps(figures), encoding="utf-8")
    release_world()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch(config_file: Path, processes: int) -> None:
    """Run :func:`worker` on ``config_file`` in ``processes`` processes (torchrun), or in one plain process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    here = [str(Path(__file__).resolve()), "--worker", str(config_file)]
    if processes == 1:
        command = [sys.executable, *here]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={processes}",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            *here,
        ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the {processes}-process run failed ({done.returncode}):\n{done.stderr[-6000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--preset", choices=["0.15m", "4m"], default="0.15m")
    parser.add_argument("--out", type=Path, help="where the two runs go (default: a temporary folder)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="tsmg-fsdp-memory-"))
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"processes": args.processes, "updates": args.updates, "preset": args.preset}
    for arm, processes, strategy in (("one", 1, "auto"), ("fsdp", args.processes, "fsdp")):
        config = run_config(out / arm, args.updates, args.preset, strategy)
        config_file = out / f"{arm}.yaml"
        config.to_yaml(config_file)
        launch(config_file, processes)
        ranks = [json.loads((out / arm / MEMORY_FILE.format(rank=r)).read_text()) for r in range(processes)]
        figures[arm] = ranks
        for rank, held in enumerate(ranks):
            print(
                f"{arm:>4} rank {rank}: parameters {held['parameters'] / 2**20:8.3f} MiB  optimizer "
                f"{held['optimizer'] / 2**20:8.3f} MiB  total {held['total'] / 2**20:8.3f} MiB",
                flush=True,
            )
    one = figures["one"][0]["total"]
    largest = max(held["total"] for held in figures["fsdp"])
    figures["ratio_largest_process"] = round(largest / one, 4)
    figures["ideal_ratio"] = round(1 / args.processes, 4)
    figures["out"] = str(out)
    print(f"per process / one process: {largest / one:.3f} (ideal {1 / args.processes:.3f})")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
