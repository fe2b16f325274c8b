"""The measurements of ``bench/gpu_check.sh``, one sub-command each (importable, and run on the CPU by a test).

* ``build SIZE OUT TOKENIZER_DIR``: a Qwen2-architecture model of a released shape (0.5b, 3b) or
  ``tiny`` (the CPU smoke test), random weights in bfloat16 on the GPU, saved with its tokenizer;
* ``tokenizer DIR``: the tiny tokenizer every size shares (trained on the spot);
* ``generate MODEL SIZE --engine hf|vllm``: generated tokens per second;
* ``train MODEL SIZE --engine hf|vllm --finetune lora|full [--strategy fsdp]``: MS-GRPO updates
  with the real trainer (under ``torchrun`` for FSDP), seconds per update split into rollout /
  scoring (pi_old, reference) / optimizer / weight push, and peak memory per device (torch's
  peak on each process, and ``nvidia-smi``'s on each GPU, which counts vLLM's engine too);
* ``trl MODEL SIZE --route rollout|tools``: TRL's ``GRPOTrainer`` with ``use_vllm=True`` (the
  engine colocated) through :mod:`tsmg.apps.integrations.trl`: ``rollout_func`` (tsmg samples on TRL's
  engine) or ``environment_factory`` (TRL samples and calls the ``make_move`` tool); seconds per
  step and the tsmg episode records written.

Every figure is printed as it comes, then one line ``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SHAPES = {  # Qwen2.5-0.5B and Qwen2.5-3B (config.json of the released models); tiny: head size 64 (vLLM CPU)
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14},
    "3b": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16},
    "tiny": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2},
}
GAME = "FrozenLake-NoSlip-v0"
ROUTES = {"rollout": "rollout_func", "tools": "environment_factory"}  # the two routes of tsmg.apps.integrations.trl


def result(figures: dict[str, Any]) -> None:
    """Print the machine-readable line of one measurement."""
    print("RESULT " + json.dumps(figures), flush=True)


def build_tokenizer(folder: Path) -> None:
    """The tiny tokenizer every size uses (the model keeps Qwen2.5's 151,936-row vocabulary)."""
    from backends.tiny import build_tiny_model

    if not (folder / "tokenizer.json").is_file():
        build_tiny_model(folder)  # only its tokenizer is used


def build(size: str, out: Path, tokenizer_dir: Path) -> None:
    """Build a random-weight Qwen2 model of ``size`` into ``out`` (nothing is downloaded)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    if (out / "config.json").is_file():
        return
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
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


def observations(count: int) -> list[str]:
    """The first observation of ``count`` random Frozen Lake maps."""
    import games  # noqa: F401  (registers the catalog)
    from tsmg import make

    game = make(GAME)
    return [game.reset(seed=seed)[0]["player"] for seed in range(count)]


def generate(model: str, size: str, engine: str, rows: int | None = None, tokens: int = 128) -> None:
    """Generated tokens per second: 256 prompts on vLLM's offline engine, 64 on the HF backend (``tokens`` each)."""
    import torch

    cuda = torch.cuda.is_available()
    rows = rows or (256 if engine == "vllm" else 64)
    if engine == "vllm":
        from transformers import AutoTokenizer
        from vllm import LLM, SamplingParams

        tokenizer = AutoTokenizer.from_pretrained(model)
        prompts = []
        for text in observations(rows):
            chat = tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
            prompts.append({"prompt_token_ids": tokenizer(chat, add_special_tokens=False)["input_ids"]})
        began = time.perf_counter()
        # skip_tokenizer_init: ids in, ids out (the home-made tokenizer covers 512 of the 151,936 ids).
        llm = LLM(
            model=model,
            dtype="bfloat16" if cuda else "float32",
            gpu_memory_utilization=0.45,
            max_model_len=2048,
            seed=0,
            skip_tokenizer_init=True,
            enforce_eager=not cuda,
        )
        startup = time.perf_counter() - began
        params = SamplingParams(temperature=1.0, max_tokens=tokens, ignore_eos=True, detokenize=False, seed=0)
        llm.generate(prompts[:8], params)  # warm-up
        began = time.perf_counter()
        outputs = llm.generate(prompts, params)
        seconds = time.perf_counter() - began
        generated = sum(len(output.outputs[0].token_ids) for output in outputs)
        figures = {"startup_s": round(startup, 1), "gpu_memory_used_mib": gpu_memory_used()}
    else:
        from backends.base import GenerationRequest
        from backends.base import SamplingParams as Sampling
        from backends.hf import HFBackend

        backend = HFBackend(model)
        requests = [
            GenerationRequest(messages=[{"role": "user", "content": text}], max_tokens=tokens, seed=index)
            for index, text in enumerate(observations(rows))
        ]
        sampling = Sampling(temperature=1.0, max_tokens=tokens)
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
        figures = {"peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None}
    figures = {"size": size, "engine": engine, "what": f"generate {rows} x {tokens} tokens", **figures}
    figures.update({"tokens_per_s": round(generated / seconds), "seconds": round(seconds, 2)})
    print(f"{engine} {size}: {figures['tokens_per_s']} generated tokens/s")
    result(figures)


def gpu_memory_used() -> dict[str, int] | None:
    """MiB in use on each GPU now (all processes, vLLM's engine included), or None without ``nvidia-smi``."""
    try:
        lines = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    used = {}
    for line in lines:
        index, _, mib = line.partition(",")
        if mib.strip().isdigit():
            used[f"gpu{index.strip()}"] = int(mib.strip())
    return used or None


class MemorySampler:
    """Peak of :func:`gpu_memory_used` per GPU, sampled every ``every_s`` in a thread."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            for device, mib in (gpu_memory_used() or {}).items():
                self.peak[device] = max(self.peak.get(device, 0), mib)
            self._stop.wait(self.every_s)


def train_config(
    model: str, engine: str, finetune: str, updates: int, out: Path, strategy: str, vllm_engine: str
) -> Any:
    """The MS-GRPO run of the check: random 4x4 maps, groups of 8, constrained choice.

    A random-weight model almost never reaches the goal, so no group would carry a signal and the
    optimizer would never run: a small entropy bonus over the whole rollout makes every update
    backpropagate every step the rollout played (the optimizer's real load).
    """
    import torch

    from training.config import TrainConfig

    model_section: dict[str, Any] = {"spec": f"{engine}:{model}", "finetune": finetune}
    if finetune == "lora":
        model_section["lora_r"] = 16
    if engine == "vllm":
        options: dict[str, Any] = {"max_model_len": 2048}
        if not torch.cuda.is_available():  # the --dry-run on vLLM's CPU build
            # No torch.compile; and whole prefills: the CPU build fails on a seeded request whose
            # prefill is split across steps ("CPU Generator does not use offset").
            options.update(enforce_eager=True, max_num_batched_tokens=65536)
        model_section["vllm_options"] = options
    return TrainConfig.model_validate(
        {
            "rollout": {
                "game_id": GAME,
                "group_size": 8,
                "groups_per_update": 8,
                "lap": {"action_format": {"kind": "choice"}},
            },
            "model": model_section,
            "loss": {"entropy_coef": 1e-3, "entropy_scope": "rollout"},
            "optim": {"lr": 1e-5, "micro_batch_size": 32},
            "run": {"out_dir": str(out), "updates": updates, "tensorboard": False, "checkpoint_every": updates},
            "distributed": {"strategy": strategy, "vllm_engine": vllm_engine},
        }
    )


def train_check(
    model: str, size: str, engine: str, finetune: str, updates: int, out: Path, strategy: str, vllm_engine: str
) -> None:
    """A few MS-GRPO updates; seconds per update split by stage, peak memory per device."""
    import torch

    import games  # noqa: F401  (registers the catalog)
    from training.distributed import release_world
    from training.trainer import TrainHooks, train

    cuda = torch.cuda.is_available()
    rank = int(os.environ.get("RANK", "0"))
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    config = train_config(model, engine, finetune, updates, out, strategy, vllm_engine)
    rows: list[dict[str, float]] = []
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    with MemorySampler() as sampler:
        train(config, hooks=TrainHooks(on_update=lambda step, metrics: rows.append(metrics)))
    steady = rows[1:] or rows  # the first update pays for warm-up
    stages = {"rollout": "time/rollout_s", "scoring": "time/scoring_s", "optimizer": "time/optimizer_s"}

    def mean(key: str) -> float:
        return sum(row.get(key, 0.0) for row in steady) / max(len(steady), 1)

    split = {stage: round(mean(key), 3) for stage, key in stages.items()}
    split["push"] = round(max(mean("time/update_s") - split["scoring"] - split["optimizer"], 0.0), 3)  # into vLLM
    per_update = round(mean("time/rollout_s") + mean("time/update_s"), 3)
    figures = {
        "size": size,
        "engine": engine,
        "finetune": finetune,
        "strategy": strategy,
        "processes": processes,
        "rank": rank,
        "what": f"ms-grpo update, {8 * 8} episodes",
        "seconds_per_update": per_update,
        "seconds": split,
        "samples_per_update": round(mean("sampler/samples")),
        "optimizer_steps_per_update": round(mean("optim/steps"), 2),
        "torch_peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "device_peak_mib": sampler.peak or None,
    }
    if engine == "vllm" and processes > 1:
        figures["vllm_engine"] = vllm_engine
    label = f"{engine} {size} {finetune}" + (f" {strategy} x{processes}" if processes > 1 or strategy == "fsdp" else "")
    print(
        f"MS-GRPO {label} (rank {rank}): {per_update:.2f}s per update = rollout {split['rollout']}s + scoring "
        f"{split['scoring']}s + optimizer {split['optimizer']}s + push {split['push']}s; torch peak "
        f"{figures['torch_peak_gib']} GiB; per device {sampler.peak or 'n/a'} MiB",
        flush=True,
    )
    result(figures)
    release_world()


def trl_check(model: str, size: str, route: str, steps: int, out: Path, engine: str = "vllm") -> None:
    """A few steps of TRL's GRPOTrainer generating on its colocated vLLM engine, through either tsmg route.

    ``engine="hf"`` leaves vLLM out (TRL generates with transformers, tsmg with its HF backend):
    the same step where vLLM is not installed.
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    import games  # noqa: F401  (registers the catalog)
    from tsmg.apps.integrations.trl import GameRollout, GameTools
    from tsmg.episode import read_episodes

    cuda = torch.cuda.is_available()
    out.mkdir(parents=True, exist_ok=True)
    episodes = out / "episodes.jsonl"
    tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16 if cuda else torch.float32)
    game: GameRollout | GameTools
    extra: dict[str, Any] = {}
    if route == "tools":
        from trl.chat_template_utils import qwen2_5_chat_template

        tokenizer.chat_template = qwen2_5_chat_template  # renders tools; TRL parses its <tool_call> blocks
        game = GameTools(GAME, seeds=range(64), episodes_path=episodes)
        extra["max_tool_calling_iterations"] = 8
    else:
        game = GameRollout(GAME, seeds=range(64), episodes_path=episodes)
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=16,
        num_generations=8,
        max_steps=steps,
        max_completion_length=256,
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        bf16=cuda,
        use_cpu=not cuda,
        use_vllm=engine == "vllm",
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
        vllm_max_model_length=2048,
        **extra,
    )
    trainer = GRPOTrainer(policy, args=args, processing_class=tokenizer, **game.trainer_kwargs())
    began = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - began
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    figures = {
        "size": size,
        "engine": engine,
        "route": route,
        "what": f"TRL GRPOTrainer, {'use_vllm colocate' if engine == 'vllm' else 'no vLLM'}, {ROUTES[route]}",
        "steps": len(logs),
        "seconds_per_step": round(seconds / max(len(logs), 1), 3),
        "episodes_recorded": sum(1 for _ in read_episodes(episodes)),
        "reward": logs[-1]["reward"] if logs else None,
        "gpu_memory_used_mib": gpu_memory_used(),
    }
    print(
        f"trl {route} {size}: {figures['seconds_per_step']}s per step, {figures['episodes_recorded']} episodes recorded"
    )
    result(figures)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    tokenizer = commands.add_parser("tokenizer")
    tokenizer.add_argument("folder", type=Path)
    builder = commands.add_parser("build")
    builder.add_argument("size", choices=sorted(SHAPES))
    builder.add_argument("out", type=Path)
    builder.add_argument("tokenizer_dir", type=Path)
    generator = commands.add_parser("generate")
    generator.add_argument("model")
    generator.add_argument("size")
    generator.add_argument("--engine", choices=["hf", "vllm"], required=True)
    generator.add_argument("--rows", type=int, help="prompts (default: 256 on vLLM, 64 on HF)")
    generator.add_argument("--tokens", type=int, default=128, help="new tokens per prompt")
    trainer = commands.add_parser("train")
    trainer.add_argument("model")
    trainer.add_argument("size")
    trainer.add_argument("--engine", choices=["hf", "vllm"], required=True)
    trainer.add_argument("--finetune", choices=["lora", "full"], required=True)
    trainer.add_argument("--updates", type=int, default=3)
    trainer.add_argument("--out", type=Path, required=True)
    trainer.add_argument("--strategy", choices=["auto", "ddp", "fsdp"], default="auto")
    trainer.add_argument("--vllm-engine", choices=["per-process", "shared"], default="per-process")
    trl = commands.add_parser("trl")
    trl.add_argument("model")
    trl.add_argument("size")
    trl.add_argument("--route", choices=["rollout", "tools"], required=True)
    trl.add_argument("--engine", choices=["vllm", "hf"], default="vllm", help="hf: without vLLM")
    trl.add_argument("--steps", type=int, default=2)
    trl.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "tokenizer":
        build_tokenizer(args.folder)
    elif args.command == "build":
        build(args.size, args.out, args.tokenizer_dir)
    elif args.command == "generate":
        generate(args.model, args.size, args.engine, args.rows, args.tokens)
    elif args.command == "trl":
        trl_check(args.model, args.size, args.route, args.steps, args.out, args.engine)
    else:
        train_check(
            args.model, args.size, args.engine, args.finetune, args.updates, args.out, args.strategy, args.vllm_engine
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
