"""The trainer's efficiency: CPU-seconds per update by phase, beside this machine's matmul peak and plain HF.

One MS-GRPO update as ``tsmg train`` runs it (the rollout through the trainer's engine, credit,
AAW sampling, the clipped-loss optimizer step and the engine's sync), from
``configs/frozen_lake_smollm2_tags.yaml`` on the embedded SmolLM2-135M-Instruct (a fresh LoRA
adapter; steps drawn uniformly, as many as the config's AAW draws, since an untrained model seldom
gives a group signal; ``--quick``: the 0.15M tiny model and a small update), timed in CPU-seconds
by phase:

- **prefill** and **decode**: the model calls of generation (prompt passes; one-token steps);
- **forward** and **backward**: the training passes (model calls; ``loss.backward()``);
- **other**: the rest of the update (sampling tokens, the LAP and the game, credit, log-softmax
  and loss, the optimizer step, refreshing the merged generation copy).

Beside it, in the same run:

- **peak**: the best of five float32 ``torch.mm`` of 2048 x 2048 at the update's thread count,
  and where the update runs in another dtype (``auto`` is bfloat16 on a CPU with AMX) the same in
  that dtype: the whole update's efficiency is given against both, the phases' and the phase that
  holds the update back against the update's own dtype;
- **plain generate**: ``model.generate`` of the trained PEFT model on the same prompts, round by
  round, as many new tokens as the round's longest answer;
- **plain forward-backward**: the PEFT model's forward over the same micro-batches (left-padded,
  every position's logits), log-softmax, the advantage-weighted log-likelihood, ``backward()``;
- **generation unmerged**: the same rollout through the adapter instead of the merged copy.

Arms alternate within each repeat (update, plain generate, unmerged rollout, plain
forward-backward), so that load drift hits them all. Efficiency is the model's matmul FLOPs
(2 x weights x tokens computed, padding not counted; the backward of a LoRA model costs one more
forward's worth, for the activations' gradients; attention's own FLOPs are left out) over
CPU-seconds x peak.

Usage: python bench/trainer_efficiency.py [--quick] [--repeats 2] [--threads 1] [--groups 8]
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

import games  # noqa: F401  (registers the catalog)
from training.config import TrainConfig
from training.credit import assign_credit
from training.distributed import World
from training.rollout.engines import HFRolloutEngine, build_engine, independent_groups
from training.rollout.sources import SAMPLER, mark_trained_steps
from training.sampling import draw_steps
from training.setup import set_up
from training.update import PolicyUpdate, TrainSample, plan_optimizer_steps, training_samples
from tsmg.episode import Episode
from tsmg.seeding import seed_generator

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "frozen_lake_smollm2_tags.yaml"
PHASES = ("prefill", "decode", "forward", "backward", "other")


def matmul_peak(threads: int, size: int = 2048, tries: int = 5, dtype: torch.dtype = torch.float32) -> float:
    """FLOP/s of the best of ``tries`` ``torch.mm`` of ``size`` x ``size`` in ``dtype`` at ``threads`` threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)  # warm-up
    best = min(_cpu_seconds(lambda: torch.mm(a, b)) for _ in range(tries))
    return 2 * size**3 / best


def _cpu_seconds(run: Callable[[], Any]) -> float:
    began = time.process_time()
    run()
    return time.process_time() - began


class ModelMeter:
    """CPU-seconds and matmul FLOPs of a model's calls, by the phase the caller names (forward hooks).

    Args:
        model: A transformers causal LM (hooked on its outermost transformers module).
    """

    def __init__(self, model: Any) -> None:
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        head = base.get_output_embeddings()
        self.head_weights = head.weight.numel()
        self.body_weights = sum(
            module.weight.numel()
            for module in base.modules()
            if isinstance(module, torch.nn.Linear) and module is not head and not _is_lora(module)
        )
        self.phase = "other"
        self.seconds: dict[str, float] = defaultdict(float)
        self.flops: dict[str, float] = defaultdict(float)
        self._began = 0.0
        self._tokens = 0
        self._handles = [
            base.register_forward_pre_hook(self._before, with_kwargs=True),
            base.register_forward_hook(self._after),
        ]

    def _before(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        width = ids.shape[1]
        self._tokens = int(mask[:, -width:].sum()) if mask is not None else ids.numel()
        self._began = time.process_time()

    def _after(self, module: Any, args: Any, output: Any) -> None:
        phase = self.phase
        if phase == "generation":
            phase = "prefill" if self._tokens > output.logits.shape[0] else "decode"
        self.seconds[phase] += time.process_time() - self._began
        logits = output.logits.shape[0] * output.logits.shape[1]
        self.flops[phase] += 2.0 * (self.body_weights * self._tokens + self.head_weights * logits)

    def reset(self) -> None:
        """Forget what was measured."""
        self.seconds.clear()
        self.flops.clear()


def _is_lora(module: Any) -> bool:
    return any(name in type(module).__module__ for name in ("peft",))


def build(args: argparse.Namespace, folder: Path) -> tuple[TrainConfig, Any]:
    """The update's configuration (the SmolLM2 tags config, or a small tiny one with ``--quick``) and its setup."""
    config = TrainConfig.from_yaml(CONFIG)
    # Uniform draws: the untrained models seldom give a group any signal, and AAW would then draw no step
    # to train on; uniform draws the config's number of steps whatever their advantage.
    changes: dict[str, Any] = {
        "run": {"out_dir": str(folder), "threads": args.threads},
        "sampler": {"name": "uniform"},
    }
    if args.quick:
        changes["model"] = {"spec": "tiny"}
        changes["rollout"] = {"group_size": 4, "groups_per_update": 2}
        changes["lap"] = {"action_format": {"kind": "choice"}}  # the untrained tiny model writes no tags
        changes["sampler"]["samples_per_update"] = 8
        changes["optim"] = {"micro_batch_size": 4}
    else:
        changes["model"] = {"spec": "smollm2"}
        if args.groups is not None:  # a smaller update than the config's 8 groups of 8 (a busy machine)
            changes["rollout"] = {"groups_per_update": args.groups}
            changes["sampler"]["samples_per_update"] = 4 * args.groups
    data = config.model_dump(mode="json")
    data["rollout"]["lap"].update(changes.pop("lap", {}))
    for section, values in changes.items():
        data[section].update(values)
    config = TrainConfig.model_validate(data)
    return config, set_up(config, folder, None, World())


class Update:
    """One update of the trainer's loop, phase by phase (training/trainer.py's rollout -> update -> sync)."""

    def __init__(self, config: TrainConfig, setup: Any, folder: Path) -> None:
        self.config, self.setup = config, setup
        self.engine = build_engine(
            setup.backend, folder, ["player"], None, rollout=config.rollout, model=config.model, seed=config.run.seed
        )
        self.unmerged = HFRolloutEngine(setup.backend, config.rollout, ["player"], None)
        self.update = PolicyUpdate.from_config(setup, config, World())
        self.rng = np.random.default_rng(config.run.seed)
        self.step = 0
        self.samples: list[TrainSample] = []
        self.episodes: list[Episode] = []
        self.plans: list[Any] = []
        self.refresh_s = 0.0

    def run(self, meters: Sequence[ModelMeter]) -> dict[str, float]:
        """Play and train one update; CPU-seconds by phase (and the update's total)."""
        config, step = self.config, self.step + 1
        self.step = step
        began = time.process_time()
        self.plans = independent_groups(config.rollout, step, self.rng, 1_000_000)
        _set_phase(meters, "generation")
        batch = self.engine.play(self.plans, seed=config.run.seed + step)
        _set_phase(meters, "other")
        self.episodes = [episode for episode in batch.episodes if episode.error is None]
        credit = assign_credit(config.credit.name, self.episodes, agent=["player"], params=config.credit.params)
        mark_trained_steps(batch.episodes, credit)
        sampler = config.sampler
        rng = seed_generator(config.run.seed, step, SAMPLER)
        steps, _ = draw_steps(
            credit,
            sampler.name,
            rng,
            unit=sampler.unit,
            count=sampler.samples_per_update,
            alpha=sampler.alpha,
            replace=sampler.replacement,
        )
        by_id = {episode.episode_id: episode for episode in self.episodes}
        self.samples = training_samples(steps, by_id)
        backward_s = [0.0]
        plain_backward = self.update._backward

        def timed_backward(*args: Any, **kwargs: Any) -> bool:
            started = time.process_time()
            try:
                return plain_backward(*args, **kwargs)
            finally:
                backward_s[0] += time.process_time() - started

        self.update._backward = timed_backward  # type: ignore[method-assign]
        _set_phase(meters, "forward")
        try:
            metrics = self.update(step, self.samples, temperature=batch.temperature, rng=rng)
        finally:
            self.update._backward = plain_backward  # type: ignore[method-assign]
            _set_phase(meters, "other")
        refresh_began = time.process_time()
        self.engine.sync()
        self.refresh_s = time.process_time() - refresh_began
        total = time.process_time() - began
        seconds = {phase: sum(meter.seconds.get(phase, 0.0) for meter in meters) for phase in PHASES[:3]}
        seconds["backward"] = backward_s[0]
        seconds["other"] = total - sum(seconds.values())
        seconds["total"] = total
        seconds["padding_share"] = metrics.get("optim/padding_share", 0.0)
        return seconds

    def unmerged_generation(self, meter: ModelMeter) -> float:
        """CPU-seconds of the model calls of the same rollout played through the adapter (not the merged copy)."""
        meter.reset()
        meter.phase = "generation"
        self.unmerged.play(self.plans, seed=self.config.run.seed + self.step)
        meter.phase = "other"
        return meter.seconds["prefill"] + meter.seconds["decode"]


def _set_phase(meters: Sequence[ModelMeter], phase: str) -> None:
    for meter in meters:
        meter.phase = phase


def plain_generate(model: Any, episodes: Sequence[Episode], pad_id: int) -> float:
    """CPU-seconds of ``model.generate`` over the episodes' prompts, round by round, the round's longest answer each."""
    rounds: dict[int, list[tuple[list[int], int]]] = defaultdict(list)
    for episode in episodes:
        for step in episode.steps:
            if step.prompt_token_ids and step.token_ids:
                rounds[step.round].append((list(step.prompt_token_ids), len(step.token_ids)))
    began = time.process_time()
    with torch.inference_mode():
        for _, rows in sorted(rounds.items()):
            width = max(len(prompt) for prompt, _ in rows)
            ids = torch.tensor([[pad_id] * (width - len(prompt)) + prompt for prompt, _ in rows])
            mask = torch.tensor([[0] * (width - len(prompt)) + [1] * len(prompt) for prompt, _ in rows])
            new = max(tokens for _, tokens in rows)
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=new,
                min_new_tokens=new,
                pad_token_id=pad_id,
            )
    return time.process_time() - began


def plain_forward_backward(
    model: Any, samples: Sequence[TrainSample], batches: Sequence[np.ndarray], pad: int
) -> float:
    """CPU-seconds of plain PEFT forward-backward passes over the same micro-batches (gradients then dropped)."""
    model.train()
    tokens = max(sum(len(sample.completion_ids) for sample in samples), 1)
    began = time.process_time()
    for batch in batches:
        rows = [samples[int(index)] for index in batch]
        sequences = [row.prompt_ids + row.completion_ids for row in rows]
        width = max(map(len, sequences))
        ids = torch.tensor([[pad] * (width - len(sequence)) + sequence for sequence in sequences])
        mask = torch.tensor([[0] * (width - len(sequence)) + [1] * len(sequence) for sequence in sequences])
        logprobs = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), dim=-1)
        chosen = logprobs.gather(-1, ids[:, 1:, None]).squeeze(-1)
        weights = torch.zeros_like(chosen)
        for row, sample in enumerate(rows):
            weights[row, width - 1 - len(sample.completion_ids) :] = sample.advantage
        (-(chosen * weights).sum() / tokens).backward()
    spent = time.process_time() - began
    model.zero_grad(set_to_none=True)
    return spent


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        config, setup = build(args, Path(folder))
        peak = matmul_peak(args.threads)
        dtype = setup.backend.dtype
        dtype_peak = peak if dtype == torch.float32 else matmul_peak(args.threads, dtype=dtype)
        trainer = Update(config, setup, Path(folder))
        meters = [ModelMeter(setup.backend.model)]
        if trainer.engine.merged is not None:
            meters.append(ModelMeter(trainer.engine.merged.model))
        records: list[dict[str, float]] = []
        for repeat in range(args.repeats):
            for meter in meters:
                meter.reset()
            seconds = trainer.run(meters)
            flops = {phase: sum(meter.flops.get(phase, 0.0) for meter in meters) for phase in PHASES[:3]}
            flops["backward"] = flops["forward"]  # LoRA: the activations' gradients, one forward's worth
            model = setup.backend.model
            lengths = [len(sample.prompt_ids) + len(sample.completion_ids) for sample in trainer.samples]
            plan = plan_optimizer_steps(len(trainer.samples), 0, config.optim, np.random.default_rng(0), lengths)
            batches = [batch for planned in plan for batch in planned.policy]
            record = {
                **{f"{phase}_s": seconds[phase] for phase in PHASES},
                "update_s": seconds["total"],
                "flops": sum(flops.values()),
                **{f"{phase}_flops": flops.get(phase, 0.0) for phase in PHASES[:4]},
                "padding_share": seconds["padding_share"],
                "refresh_s": trainer.refresh_s,
                "plain_generate_s": plain_generate(model, trainer.episodes, setup.backend.pad_id),
                "unmerged_generation_s": trainer.unmerged_generation(meters[0]),
                "plain_forward_backward_s": plain_forward_backward(
                    model, trainer.samples, batches, setup.backend.pad_id
                ),
                "episodes": len(trainer.episodes),
                "samples": len(trainer.samples),
            }
            records.append(record)
            print(
                f"repeat {repeat + 1}: update {record['update_s']:.1f} CPU-s "
                + "  ".join(f"{phase} {record[f'{phase}_s']:.1f}" for phase in PHASES)
                + f"  | plain generate {record['plain_generate_s']:.1f}, unmerged generation "
                f"{record['unmerged_generation_s']:.1f}, "
                f"plain forward-backward {record['plain_forward_backward_s']:.1f}",
                flush=True,
            )
        return summarise(records, peak, args, str(dtype).removeprefix("torch."), dtype_peak)


def summarise(
    records: Sequence[dict[str, float]],
    peak: float,
    args: argparse.Namespace,
    dtype: str,
    dtype_peak: float | None = None,
) -> dict[str, Any]:
    """Means over the repeats, the efficiency against the peaks, and the phase furthest below the dtype's.

    ``peak`` is the float32 matmul peak, ``dtype_peak`` the one in the update's dtype (None: the same).
    """
    own_peak = dtype_peak or peak
    mean = {key: statistics.fmean(record[key] for record in records) for key in records[0]}
    efficiency = mean["flops"] / (mean["update_s"] * peak)
    by_phase = {
        phase: mean[f"{phase}_flops"] / (mean[f"{phase}_s"] * own_peak) if mean[f"{phase}_s"] > 0 else 0.0
        for phase in PHASES[:4]
    }
    # The phase that holds the update back: the most CPU-seconds beyond what the dtype's peak would need.
    lost = {phase: mean[f"{phase}_s"] - mean.get(f"{phase}_flops", 0.0) / own_peak for phase in PHASES}
    generation_s = mean["prefill_s"] + mean["decode_s"]
    training_s = mean["forward_s"] + mean["backward_s"]
    return {
        "bench": "trainer_efficiency",
        "model": "tiny 0.15m" if args.quick else "SmolLM2-135M-Instruct",
        "dtype": dtype,
        "threads": args.threads,
        "repeats": len(records),
        "episodes": int(mean["episodes"]),
        "samples": int(mean["samples"]),
        "peak_gflops": round(peak / 1e9, 1),
        "dtype_peak_gflops": round(own_peak / 1e9, 1),
        "update_cpu_s": round(mean["update_s"], 2),
        "phases_cpu_s": {phase: round(mean[f"{phase}_s"], 2) for phase in PHASES},
        "phase_efficiency": {phase: round(value, 3) for phase, value in by_phase.items()},
        "efficiency": round(efficiency, 3),
        "efficiency_at_dtype_peak": round(mean["flops"] / (mean["update_s"] * own_peak), 3),
        "target": 0.5,
        "reached": efficiency >= 0.5,
        "held_back_by": max(lost, key=lambda phase: lost[phase]),
        "spread_update_cpu_s": [round(record["update_s"], 2) for record in records],
        "generation_cpu_s": {
            "merged": round(generation_s, 2),
            "unmerged": round(mean["unmerged_generation_s"], 2),
            "plain_generate": round(mean["plain_generate_s"], 2),
        },
        "training_cpu_s": {"ours": round(training_s, 2), "plain_peft": round(mean["plain_forward_backward_s"], 2)},
        "merged_refresh_cpu_s": round(mean["refresh_s"], 3),
        "padding_share": round(mean["padding_share"], 4),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 0.15M tiny model and a small update (seconds)")
    parser.add_argument("--repeats", type=int, default=2, help="updates measured, each with the plain arms after it")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the update and of the peak")
    parser.add_argument(
        "--groups", type=int, help="groups of 8 episodes per update, 4 samples each (default: the config's 8 and 32)"
    )
    args = parser.parse_args(argv)
    result = measure(args)
    print(
        f"{result['model']} ({result['dtype']}, {result['threads']} thread(s)): {result['update_cpu_s']} CPU-s per "
        f"update, efficiency {result['efficiency']} of the {result['peak_gflops']} GFLOP/s float32 peak "
        f"(target 0.5), {result['efficiency_at_dtype_peak']} of the {result['dtype_peak_gflops']} GFLOP/s "
        f"{result['dtype']} peak; held back most by {result['held_back_by']}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
