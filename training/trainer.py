"""The MS-GRPO trainer: rollouts, credit, sampling and a clipped policy-gradient update, in one loop.

:func:`train` reads top to bottom. What it implements, exactly:

* **Rollout strategy: independent groups.** Update ``u`` (1, 2, ...) plays
  ``rollout.groups_per_update`` groups of ``rollout.group_size`` episodes; the episodes of a
  group share one game seed (same start). The seeds come from
  ``numpy.random.default_rng([run.seed, u])`` and lie below ``run.eval_seed_start`` (held-out
  seeds start there). Sampling seeds differ per update and per episode (group members must
  not share their sampling noise, or they would play the same moves).
* **Rollout engine.** :class:`~training.engines.HFRolloutEngine` plays with the very model
  being trained (HF backend, LAP, one batched ``generate`` per round). ``model.spec: vllm:PATH``
  plays on :class:`~training.engines.VLLMRolloutEngine`, which pushes the weights (or the LoRA
  adapter) into the vLLM engine in :meth:`~training.engines.RolloutEngine.sync` after each update.
* **Multi-agent games.** Self-play (the model plays every seat) or a fixed opponent policy
  (``rollout.opponent``: random, oracle, fixed:TEXT) in the seats the model does not play; only
  ``rollout.train_agents`` are trained (default: every seat the model plays; with an opponent,
  the model plays ``train_agents`` or else the first seat).
* **Credit:** any registered assigner (``ms-grpo`` by default: the group-normalised episode
  return copied to every step); **sampling:** any registered sampler over trajectories (every
  step of a drawn trajectory trains) or single steps (``aaw`` by default: p proportional to |A|^alpha).
* **Samples.** Each sampled step is one sequence: the prompt exactly as the LAP sent it,
  re-encoded with the backend's own :meth:`encode_prompts`, and the completion tokens the model
  wrote. With constrained choice (``action_format.kind: choice``) every log-probability, the
  KL and the entropy are taken over the tokens the choice allowed (the distribution the
  backend sampled from), not over the whole vocabulary.
* **Loss:** :func:`training.losses.policy_loss` (token/turn ratio, clip or clip-higher,
  optional k3 KL to a reference, entropy bonus, one of three aggregations). pi_old is the
  behaviour log-probability the rollout recorded, or a recomputation (``loss.old_logprobs``).
  The reference is the model with its LoRA adapter disabled, or a frozen copy of the initial
  weights for full fine-tuning. The entropy bonus covers the sampled steps, or
  (``loss.entropy_scope: rollout``) every trained step of the rollout once, as a term of its
  own, so that it still acts when every group has equal returns and nothing is sampled.
* **Optimisation:** AdamW; micro-batches of ``optim.micro_batch_size`` samples whose gradients
  accumulate over ``optim.grad_accumulation`` micro-batches (None: the whole update) per
  optimizer step, with the aggregation denominator of that whole step; global grad-norm
  clipping; ``optim.epochs`` passes; optionally PPO's early stop once the approximate KL to
  the sampling policy passes ``optim.target_kl``; the learning-rate schedule advances once per
  update.
* **Bad updates:** a non-finite loss or gradient norm ends the update without an optimizer
  step; it is counted (``loss/skipped_updates``) and training goes on. Out of memory raises
  :class:`TrainingOOMError` naming the batch size and sequence length to lower.
* **Run folder:** ``config.yaml``, ``metrics.jsonl`` and TensorBoard (:mod:`training.run_log`),
  ``checkpoints/step-N`` (:mod:`training.checkpoint`), optional ``episodes.jsonl``, at the end
  ``final/`` (a full model folder with its tokenizer: ``tsmg eval --model hf:RUN/final``;
  LoRA is merged into it and also kept as ``adapter/``) and ``learning_curve.png``.

* **Several processes** (``accelerate launch`` / ``torchrun``): rollouts sharded by group,
  samples of each optimizer step split across ranks, gradients summed; rank 0 writes the run
  folder (:mod:`training.distributed`). The update does not depend on the world size.

Simplifications: data parallel only (no FSDP sharding of the weights); rollouts and updates
alternate (no overlap).
"""

from __future__ import annotations

import copy
import logging
import math
import re
import shutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training import sampling
from training.advantages import assign_credit
from training.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
    save_final_model,
    weights_saver,
)
from training.config import TrainConfig, validate_against_game
from training.distributed import World, current_world
from training.engines import RolloutBatch, RolloutEngine, build_engine
from training.losses import LossSettings, aggregation_denominator, policy_loss
from training.run_log import CURVE_FILE, RunLog, episode_metrics, plot_learning_curve, read_metrics
from training.schedule import lr_multiplier
from tsmg.episode import Episode, read_episodes, write_episodes
from tsmg.policies import policy_from_spec
from tsmg.rollout import EpisodePlan, plan_episodes
from tsmg.seeding import derive_seed, seed_generator

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
EPISODES_FILE = "episodes.jsonl"
BASE_MODEL_DIR = "base_model"
#: Fields that may change between a run and its resumption (how long and how fast, not what).
RESUMABLE_CHANGES = frozenset({("run", "updates"), ("run", "max_seconds"), ("run", "threads")})
SAMPLING_KEY = 1  # tells an update's sampling seed apart from its game seeds (seed_generator(run seed, step))


# ============================================================================ errors, hooks, results
class TrainingOOMError(RuntimeError):
    """Out of memory during training; the message names the sizes to lower."""


@dataclass
class TrainHooks:
    """Optional callbacks into the loop (the CLI's progress display, benchmarks, tests).

    Attributes:
        on_update: Called with (step, metrics) after each update's metrics are written.
        should_stop: Called with (step, metrics) before they are written; True ends training
            after that update (with a final evaluation when evaluations are on).
        transform_loss: Called with (step, loss) on every micro-batch loss before backward
            (tests use it to inject a NaN).
    """

    on_update: Callable[[int, dict[str, float]], None] | None = None
    should_stop: Callable[[int, dict[str, float]], bool] | None = None
    transform_loss: Callable[[int, torch.Tensor], torch.Tensor] | None = None


@dataclass
class TrainResult:
    """What a run left behind.

    Attributes:
        run_dir: The run folder.
        steps: Updates done (including those before a resume).
        stop_reason: Why training ended ("updates", "max_seconds", "hook").
        final_model: Full model folder that ``HFBackend`` (``tsmg eval --model hf:DIR``) loads.
        adapter: The LoRA adapter folder (LoRA runs only).
        checkpoint: The last checkpoint.
        skipped_updates: Updates skipped for a non-finite loss or gradient.
        learning_curve: The PNG (None without matplotlib).
        resumed_from: The checkpoint step this session started from (None: a fresh run).
        metrics: Every row of ``metrics.jsonl``.
    """

    run_dir: Path
    steps: int
    stop_reason: str
    final_model: Path | None
    adapter: Path | None
    checkpoint: Path | None
    skipped_updates: int
    learning_curve: Path | None
    resumed_from: int | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def evals(self, key: str = "eval/success_rate") -> list[tuple[int, float]]:
        """(step, value) of every evaluation."""
        return [(int(row["step"]), float(row[key])) for row in self.metrics if row.get(key) is not None]


# ============================================================================ model set-up
def load_backend(config: TrainConfig, run_dir: Path, *, weights: Path | None = None) -> Any:
    """The HF backend of the model to train (built, loaded, or restored from a checkpoint's ``model/``).

    ``tiny`` builds a model from scratch into ``run_dir/base_model`` (once; a resumed run reuses
    it). ``vllm:PATH`` trains the HF copy of PATH (rollouts run on vLLM).
    """
    from backends.hf import HFBackend

    options: dict[str, Any] = {"dtype": config.model.dtype, "threads": config.run.threads}
    options["max_batch_size"] = max(64, config.rollout.max_concurrent)
    if weights is not None:
        return HFBackend(weights, **options)
    return HFBackend(base_model_source(config, run_dir), **options)


def base_model_source(config: TrainConfig, run_dir: Path) -> str:
    """Where the initial weights come from (a folder or hub id); builds the tiny model if needed."""
    spec = config.model.spec
    kind, _, target = spec.partition(":")
    if spec == "tiny":
        folder = run_dir / BASE_MODEL_DIR
        if not (folder / "config.json").is_file():
            _build_tiny(config, folder)
        return str(folder)
    if spec == "smollm2" or kind == "smollm2":
        from backends.embedded import embedded_model_dir

        return str(embedded_model_dir())
    if kind == "hf" and target:
        return target
    if kind == "vllm" and target:  # trained in HF from the same folder; rollouts run on the vLLM engine
        return target
    raise ValueError(f"cannot train model spec {spec!r}: use 'tiny', 'smollm2' or 'hf:PATH_OR_ID'")


def _build_tiny(config: TrainConfig, folder: Path) -> None:
    from backends.tiny import build_tiny_model, game_corpus

    tiny = config.model.tiny
    corpus = None
    if tiny.tokenizer_corpus == "prose":
        board_line = re.compile(r"[_A-Z]+")  # board rows: runs of capital letters and underscores
        corpus = [
            "\n".join(line for line in text.splitlines() if not board_line.fullmatch(line)) for text in game_corpus()
        ]
    temporary = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    build_tiny_model(
        temporary,
        preset=tiny.preset,
        corpus=corpus,
        vocab_size=tiny.vocab_size,
        hidden_size=tiny.hidden_size,
        layers=tiny.layers,
        heads=tiny.heads,
        intermediate_size=tiny.intermediate_size,
        seed=config.run.seed,
    )
    temporary.replace(folder)


def _add_lora(backend: Any, config: TrainConfig) -> None:
    """A fresh adapter, initialised from the run seed without touching the global generator."""
    model = config.model
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(config.run.seed)
        backend.add_lora(
            r=model.lora_r, alpha=model.lora_alpha, target_modules=model.lora_target_modules, dropout=model.lora_dropout
        )


# ============================================================================ the training forward pass
@dataclass
class TrainSample:
    """One credited step as a training sequence.

    Attributes:
        prompt_ids: The prompt's token ids (as the backend encoded it for generation).
        completion_ids: The tokens the model wrote.
        behaviour_logprobs: Their log-probabilities recorded at rollout time.
        advantage: The step's advantage (every token carries it).
        choices: The allowed answers of a constrained decision (None: free text).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float] | None
    advantage: float
    choices: list[str] | None = None


@dataclass
class ForwardOutput:
    """Per-token log-probabilities of a micro-batch's completions, right-aligned in ``(batch, tail)``."""

    logprobs: torch.Tensor
    entropy: torch.Tensor
    mask: torch.Tensor


class ChoiceMasks:
    """Which tokens each position of a constrained completion may take (the backend's choice trie)."""

    def __init__(self, tokenizer: Any, eos_ids: Sequence[int]) -> None:
        self.tokenizer = tokenizer
        self.end_token = eos_ids[0] if eos_ids else None
        self._tries: dict[tuple[str, ...], Any] = {}
        self.mismatches = 0

    def allowed(self, choices: Sequence[str], completion: Sequence[int]) -> list[list[int]] | None:
        """Allowed tokens at each completion position; None if the completion leaves the trie."""
        from backends.hf_constraints import ChoiceTrie

        key = tuple(choices)
        trie = self._tries.get(key)
        if trie is None:
            encoded = self.tokenizer(list(choices), add_special_tokens=False)["input_ids"]
            trie = self._tries[key] = ChoiceTrie(encoded, list(choices), end_token=self.end_token)
        node, allowed = trie.ROOT, []
        for token in completion:
            allowed.append(trie.allowed(node))
            try:
                node = trie.advance(node, token)
            except KeyError:
                self.mismatches += 1
                return None
        return allowed


def policy_forward(
    model: Any,
    samples: Sequence[TrainSample],
    *,
    pad_id: int,
    temperature: float,
    choice_masks: ChoiceMasks | None = None,
    entropy_grad: bool = False,
    share_prefix: bool = True,
) -> ForwardOutput:
    """Log-probabilities (and entropies) of the samples' completion tokens under ``model``.

    The distribution is ``log_softmax(logits / T)`` (T = 0 counts as 1), restricted to the
    allowed tokens where a sample is a constrained choice: what the backend sampled from.
    Gradients flow when enabled by the caller; the entropy carries them only with ``entropy_grad``.
    With ``share_prefix`` a prompt prefix common to every sample is computed once (same result,
    less work: with a chat model's system prompt and game rules, most of each prompt).
    """
    from backends.hf_generation import ModelCalls, tail_logits

    device = next(model.parameters()).device
    calls = ModelCalls.inspect(model)
    tail = max(len(sample.completion_ids) for sample in samples)
    shared = _shared_prompt_prefix(samples) if share_prefix else 0
    cache = None
    if shared:
        # The prompt prefix every sample shares (system text, rules) runs once, with gradients;
        # its keys and values are repeated for every row, and the rows run on from there.
        prefix = torch.tensor([samples[0].prompt_ids[:shared]], device=device)
        output = model(
            input_ids=prefix,
            attention_mask=torch.ones_like(prefix),
            position_ids=torch.arange(shared, device=device)[None],
            use_cache=True,
            **({"logits_to_keep": 1} if calls.logits_kwarg == "logits_to_keep" else {}),
        )
        cache = output.cache if calls.cache_kwarg == "cache" else output.past_key_values
        cache.batch_repeat_interleave(len(samples))
    rows = [(sample.prompt_ids + sample.completion_ids)[shared:] for sample in samples]
    logits, input_ids = tail_logits(model, calls, rows, tail, pad_id, shared=shared, cache=cache)
    logits = logits.float() / (temperature if temperature > 0 else 1.0)
    lengths = torch.tensor([len(sample.completion_ids) for sample in samples], device=device)
    mask = torch.arange(tail, device=device)[None, :] >= (tail - lengths)[:, None]
    allowed = _allowed_tokens(samples, choice_masks, tail, logits.shape[-1], device)
    if allowed is not None:
        logits = logits.masked_fill(~allowed, -math.inf)
    logprobs_all = torch.log_softmax(logits, dim=-1)
    targets = input_ids[:, -tail:]
    picked = logprobs_all.gather(-1, targets[:, :, None]).squeeze(-1)
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        finite = logprobs_all.masked_fill(~torch.isfinite(logprobs_all), 0.0)  # -inf * 0 would be NaN
        entropy = -(logprobs_all.exp() * finite).sum(-1)
    return ForwardOutput(picked, entropy, mask)


#: A common prompt prefix shorter than this is not worth a forward pass of its own.
MIN_SHARED_PREFIX = 16


def _shared_prompt_prefix(samples: Sequence[TrainSample]) -> int:
    """Prompt tokens every sample shares (0 for one sample, or when fewer than :data:`MIN_SHARED_PREFIX`)."""
    from backends.hf_generation import shared_prefix_length

    if len(samples) < 2:
        return 0
    length = shared_prefix_length([sample.prompt_ids for sample in samples])
    return length if length >= MIN_SHARED_PREFIX else 0


def _allowed_tokens(
    samples: Sequence[TrainSample], masks: ChoiceMasks | None, tail: int, vocab: int, device: torch.device
) -> torch.Tensor | None:
    """A ``(batch, tail, vocab)`` bool mask for constrained rows; None when no row is constrained."""
    if masks is None or all(sample.choices is None for sample in samples):
        return None
    allowed = torch.ones(len(samples), tail, vocab, dtype=torch.bool, device=device)
    for row, sample in enumerate(samples):
        if sample.choices is None:
            continue
        per_position = masks.allowed(sample.choices, sample.completion_ids)
        if per_position is None:
            continue  # could not follow the trie: leave the row unconstrained (counted in masks.mismatches)
        offset = tail - len(sample.completion_ids)
        for position, tokens in enumerate(per_position):
            allowed[row, offset + position] = False
            allowed[row, offset + position, tokens] = True
    return allowed


def _padded(values: Sequence[Sequence[float]], tail: int, device: torch.device) -> torch.Tensor:
    """Right-aligned ``(batch, tail)`` float tensor (zeros on the left)."""
    rows = [[0.0] * (tail - len(row)) + list(row) for row in values]
    return torch.tensor(rows, dtype=torch.float32, device=device)


# ============================================================================ metrics helpers
def _weighted_mean(pairs: Sequence[tuple[float, float]]) -> float:
    total = sum(weight for _, weight in pairs)
    return sum(value * weight for value, weight in pairs) / total if total else 0.0


def _is_oom(error: BaseException) -> bool:
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


# ============================================================================ run folder
def _check_run_folder(config: TrainConfig, run_dir: Path, resume: bool) -> None:
    """Refuse to mix runs: a fresh run in a used folder, or a resumed run whose config changed."""
    stored = run_dir / CONFIG_FILE
    if not stored.exists():
        return
    if not resume:
        raise FileExistsError(f"{run_dir} already holds a training run: pass --resume, or choose another --out")
    before = TrainConfig.from_yaml(stored).model_dump(mode="json")
    now = config.model_dump(mode="json")
    changed = [
        f"{section}.{name}"
        for section in now
        for name in now[section]
        if before.get(section, {}).get(name) != now[section][name] and (section, name) not in RESUMABLE_CHANGES
    ]
    if changed:
        raise ValueError(f"{run_dir} holds a run with another configuration (changed: {', '.join(changed)})")


def _truncate_episodes(path: Path, last_step: int) -> None:
    """Drop episodes of updates past the checkpoint (their ids start with ``u{step}/``)."""
    if not path.exists():
        return
    kept = [episode for episode in read_episodes(path) if int(episode.episode_id.split("/")[0][1:]) <= last_step]
    temporary = path.with_suffix(".jsonl.tmp")
    temporary.write_text("".join(episode.to_json() + "\n" for episode in kept), encoding="utf-8")
    temporary.replace(path)


def _update_seeds(config: TrainConfig, step: int) -> tuple[list[int], int]:
    """The game seeds of update ``step`` and its sampling seed (a function of run seed and step only)."""
    rng = seed_generator(config.run.seed, step)
    seeds = rng.choice(config.run.eval_seed_start, size=config.rollout.groups_per_update, replace=False)
    return [int(seed) for seed in seeds], derive_seed(config.run.seed, step, SAMPLING_KEY)


def _play_sharded(
    engine: RolloutEngine,
    plans: Sequence[EpisodePlan],
    group_size: int,
    world: World,
    *,
    seed: int,
    temperature: float | None = None,
) -> RolloutBatch:
    """Play ``plans`` with each rank taking a contiguous share of whole groups; every rank gets the whole batch."""
    if world.size == 1:
        return engine.play(plans, seed=seed, temperature=temperature)
    first, last = world.shard_bounds(len(plans) // group_size)
    mine = engine.play(plans[first * group_size : last * group_size], seed=seed, temperature=temperature)
    parts = world.gather(mine)
    return RolloutBatch(
        episodes=[episode for part in parts for episode in part.episodes],
        temperature=mine.temperature,
        exact_logprobs=all(part.exact_logprobs for part in parts),
    )


# ============================================================================ pieces of an update
def _training_samples(steps: Sequence[Any], by_id: Mapping[str, Episode], exact_logprobs: bool) -> list[TrainSample]:
    """One :class:`TrainSample` per sampled step (repeats kept), straight from the episode records."""
    samples = []
    for item in steps:
        record = by_id[item.episode_id].steps[item.step_index]
        if not record.token_ids or record.prompt_token_ids is None:  # scripted seats and failed calls
            continue
        samples.append(
            TrainSample(
                prompt_ids=record.prompt_token_ids,
                completion_ids=record.token_ids,
                behaviour_logprobs=record.logprobs if exact_logprobs else None,
                advantage=item.advantage,
                choices=record.choices,
            )
        )
    return samples


def _no_grad_logprobs(
    model: Any, samples: Sequence[TrainSample], micro_batch: int, forward: Callable[..., ForwardOutput]
) -> list[list[float]]:
    """Per-sample completion log-probabilities under ``model`` without gradient, in micro-batches."""
    values: list[list[float]] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for first in range(0, len(samples), micro_batch):
            output = forward(model, samples[first : first + micro_batch])
            for row in range(output.mask.shape[0]):
                values.append(output.logprobs[row][output.mask[row]].tolist())
    model.train(was_training)
    return values


def _sharded_no_grad_logprobs(
    model: Any, samples: Sequence[TrainSample], micro_batch: int, forward: Callable[..., ForwardOutput], world: World
) -> list[list[float]]:
    """:func:`_no_grad_logprobs` of every sample, each rank computing a contiguous share."""
    if world.size == 1:
        return _no_grad_logprobs(model, samples, micro_batch, forward)
    mine = _no_grad_logprobs(model, world.shard(samples), micro_batch, forward)
    return [values for part in world.gather(mine) for values in part]


def _update(
    step: int,
    samples: Sequence[TrainSample],
    *,
    rollout_samples: Sequence[TrainSample] = (),
    backend: Any,
    reference: Any,
    lora: bool,
    optimizer: torch.optim.Optimizer,
    parameters: Sequence[torch.nn.Parameter],
    config: TrainConfig,
    settings: LossSettings,
    temperature: float,
    choice_masks: ChoiceMasks,
    rng: np.random.Generator,
    hooks: TrainHooks,
    world: World,
) -> dict[str, float]:
    """Optimizer steps over ``samples``; returns loss/optim metrics and ``loss/skipped`` (0 or 1).

    ``rollout_samples`` (every trained step of the rollout, once) carry the entropy bonus when its
    scope is the rollout: each optimizer step then also subtracts ``entropy_coef`` x the token-mean
    entropy of its share of them, which keeps acting when no group has a signal (no ``samples``).

    Every rank holds the same ``samples`` and plans the same optimizer steps; each backpropagates
    its share of a step's samples (with the step's global denominator) and the gradients are
    summed over ranks before the step, so the update does not depend on the world size.
    """
    optim = config.optim
    if not samples and not rollout_samples:  # every advantage was 0 and nothing else to do
        return {"loss/skipped": 0.0, "optim/steps": 0.0}
    model = backend.model
    device = next(model.parameters()).device
    entropy_coef = settings.entropy_coef
    if rollout_samples:  # the policy term leaves the entropy to the rollout-wide term
        settings = replace(settings, entropy_coef=0.0)

    def forward(net: Any, chunk: Sequence[TrainSample], entropy_grad: bool = False) -> ForwardOutput:
        return policy_forward(
            net,
            chunk,
            pad_id=backend.pad_id,
            temperature=temperature,
            choice_masks=choice_masks,
            entropy_grad=entropy_grad,
        )

    # pi_old: the behaviour log-probabilities, or recomputed under the weights that sampled them.
    recorded = [sample.behaviour_logprobs for sample in samples]
    if config.loss.old_logprobs == "recompute" or any(
        values is None or len(values) != len(sample.completion_ids)
        for values, sample in zip(recorded, samples, strict=True)
    ):
        old = _sharded_no_grad_logprobs(model, samples, optim.micro_batch_size, forward, world)
    else:
        old = [list(values or ()) for values in recorded]
    ref: list[list[float]] | None = None
    if settings.kl_beta > 0 and samples:
        if lora:
            with backend.adapter_enabled(False):
                ref = _sharded_no_grad_logprobs(model, samples, optim.micro_batch_size, forward, world)
        else:
            ref = _sharded_no_grad_logprobs(reference, samples, optim.micro_batch_size, forward, world)

    sums: dict[str, float] = {}
    weighted: dict[str, list[tuple[float, float]]] = {}
    grad_norms: list[float] = []
    optimizer_steps = 0
    stopped_early = 0.0
    model.train()
    for step_batches, step_entropy_batches in _optimizer_steps(len(samples), len(rollout_samples), optim, rng):
        optimizer.zero_grad(set_to_none=True)
        losses: list[tuple[torch.Tensor, dict[str, float], float]] = []
        if step_batches:  # the step's global denominator, whichever rank computes which sample
            masks = [_completion_mask([len(samples[i].completion_ids) for i in indices]) for indices in step_batches]
            denominator = aggregation_denominator(masks, settings.aggregation, settings.constant_normalizer)
        entropy_tokens = sum(len(rollout_samples[int(i)].completion_ids) for b in step_entropy_batches for i in b)
        finite = True
        for indices in _my_share(step_batches, optim.micro_batch_size, world):
            chunk = [samples[int(i)] for i in indices]
            output = forward(model, chunk, entropy_grad=settings.entropy_coef != 0)
            tail = output.mask.shape[1]
            result = policy_loss(
                output.logprobs,
                _padded([old[int(i)] for i in indices], tail, device),
                torch.tensor([sample.advantage for sample in chunk], dtype=torch.float32, device=device),
                output.mask,
                settings,
                logprobs_ref=None if ref is None else _padded([ref[int(i)] for i in indices], tail, device),
                entropy=output.entropy,
                denominator=denominator,
            )
            losses.append((result.loss, result.metrics, float(output.mask.sum())))
            finite = _backward(step, losses[-1][0], hooks)
            if not finite:
                break
        if optim.target_kl is not None and optimizer_steps and step_batches:
            local = [(values["loss/approx_kl"], tokens) for _, values, tokens in losses]
            drift = _weighted_mean([pair for pairs in world.gather(local) for pair in pairs])
            if drift > optim.target_kl:  # moved far enough from the sampling policy: stop here
                stopped_early = 1.0
                break
        for indices in _my_share(step_entropy_batches, optim.micro_batch_size, world) if finite else ():
            output = forward(model, [rollout_samples[int(i)] for i in indices], entropy_grad=True)
            entropy_sum = torch.where(output.mask, output.entropy, torch.zeros_like(output.entropy)).sum()
            tokens = float(output.mask.sum())
            metrics = {"loss/rollout_entropy": float(entropy_sum.detach()) / max(tokens, 1.0)}
            losses.append((-entropy_coef * entropy_sum / max(entropy_tokens, 1), metrics, tokens))
            finite = _backward(step, losses[-1][0], hooks)
            if not finite:
                break
        if not world.all_true(finite):  # a non-finite loss on any rank skips the update on every rank
            optimizer.zero_grad(set_to_none=True)
            return {"loss/skipped": 1.0, "optim/steps": float(optimizer_steps)}
        for _, values, tokens in losses:
            for key, value in values.items():
                if key in ("loss/policy", "loss/total", "loss/tokens"):
                    sums[key] = sums.get(key, 0.0) + value
                else:
                    weighted.setdefault(key, []).append((value, tokens))
        world.sum_gradients(parameters)
        norm = torch.nn.utils.clip_grad_norm_(parameters, optim.grad_clip or math.inf)
        if not bool(torch.isfinite(norm)):
            logger.warning("update %d: non-finite gradient norm; the update is skipped", step)
            optimizer.zero_grad(set_to_none=True)
            return {"loss/skipped": 1.0, "optim/steps": float(optimizer_steps)}
        optimizer.step()
        optimizer_steps += 1
        grad_norms.append(float(norm))
    optimizer.zero_grad(set_to_none=True)
    sums, weighted, mismatches = _merge_loss_metrics(world.gather((sums, weighted, choice_masks.mismatches)))
    metrics = {key: value / optimizer_steps for key, value in sums.items() if key != "loss/tokens"}
    metrics["loss/tokens"] = sums.get("loss/tokens", 0.0)
    metrics.update({key: _weighted_mean(pairs) for key, pairs in weighted.items()})
    metrics.update({"loss/skipped": 0.0, "optim/steps": float(optimizer_steps), "optim/stopped_early": stopped_early})
    metrics["optim/grad_norm"] = float(np.mean(grad_norms)) if grad_norms else 0.0
    metrics["loss/choice_mismatches"] = float(mismatches)
    return metrics


def _my_share(batches: Batches, micro_batch_size: int, world: World) -> Batches:
    """This rank's share of one optimizer step's micro-batches, re-cut into micro-batches.

    Example:
        >>> _my_share([np.arange(4), np.arange(4, 6)], 4, World(rank=1, size=2))
        [array([3, 4, 5])]
    """
    if world.size == 1 or not batches:
        return batches
    mine = np.concatenate(batches)[slice(*world.shard_bounds(sum(len(batch) for batch in batches)))]
    return [mine[first : first + micro_batch_size] for first in range(0, len(mine), micro_batch_size)]


LossSums = dict[str, float]
WeightedValues = dict[str, list[tuple[float, float]]]


def _merge_loss_metrics(parts: Sequence[tuple[LossSums, WeightedValues, int]]) -> tuple[LossSums, WeightedValues, int]:
    """The loss sums, token-weighted values and choice mismatches of every rank, merged."""
    sums: LossSums = {}
    weighted: WeightedValues = {}
    for part_sums, part_weighted, _ in parts:
        for key, value in part_sums.items():
            sums[key] = sums.get(key, 0.0) + value
        for key, pairs in part_weighted.items():
            weighted.setdefault(key, []).extend(pairs)
    return sums, weighted, sum(part[2] for part in parts)


Batches = list[np.ndarray]


def _optimizer_steps(
    samples: int, rollout_samples: int, optim: Any, rng: np.random.Generator
) -> list[tuple[Batches, Batches]]:
    """Per optimizer step: its policy micro-batches and its share of the rollout-entropy micro-batches.

    ``optim.grad_accumulation`` micro-batches per step (None: all of an epoch's), ``optim.epochs``
    passes (the first in sampled order, later ones shuffled). The rollout's steps are split evenly
    over each epoch's optimizer steps (one step of their own when there are no samples).
    """
    size = optim.micro_batch_size
    plan: list[tuple[Batches, Batches]] = []
    for epoch in range(optim.epochs):
        order = rng.permutation(samples) if epoch else np.arange(samples)
        batches = [order[first : first + size] for first in range(0, samples, size)]
        per_step = optim.grad_accumulation or max(len(batches), 1)
        groups = [batches[first : first + per_step] for first in range(0, len(batches), per_step)]
        if rollout_samples and not groups:
            groups = [[]]
        shares = np.array_split(np.arange(rollout_samples), len(groups)) if rollout_samples else []
        for index, group in enumerate(groups):
            share = shares[index] if rollout_samples else np.zeros(0, dtype=np.int64)
            plan.append((group, [share[first : first + size] for first in range(0, len(share), size)]))
    return plan


def _backward(step: int, loss: torch.Tensor, hooks: TrainHooks) -> bool:
    """Backpropagate ``loss`` (after the test hook); False, without backward, when it is not finite."""
    if hooks.transform_loss is not None:
        loss = hooks.transform_loss(step, loss)
    if not bool(torch.isfinite(loss.detach())):
        logger.warning("update %d: non-finite loss (%s); the update is skipped", step, float(loss.detach()))
        return False
    loss.backward()
    return True


def _completion_mask(lengths: Sequence[int]) -> torch.Tensor:
    tail = max(lengths)
    return torch.arange(tail)[None, :] >= (tail - torch.tensor(lengths))[:, None]


def _raise_on_rollout_oom(batch: RolloutBatch, config: TrainConfig) -> None:
    """The backend turns a failed batch into failed answers; out of memory there must stop the run."""
    messages = [episode.error for episode in batch.episodes if episode.error]
    messages += [step.reason for episode in batch.episodes for step in episode.steps if step.reason]
    if any("out of memory" in message.lower() for message in messages):
        longest = max((step.prompt_tokens or 0 for episode in batch.episodes for step in episode.steps), default=0)
        rollout_config = config.rollout
        raise TrainingOOMError(
            f"out of memory while generating: up to {rollout_config.max_concurrent} prompts decode together "
            f"(rollout.max_concurrent; an update plays {rollout_config.groups_per_update * rollout_config.group_size} "
            f"episodes), prompts up to {longest} tokens, up to {rollout_config.lap.max_tokens} new tokens: lower "
            "rollout.max_concurrent, or shorten prompts (rollout.lap.template.history, rollout.observation_lines) "
            "and rollout.lap.max_tokens"
        )
    if batch.episodes and all(episode.error for episode in batch.episodes):
        raise RuntimeError(f"every episode of the rollout failed; the first error: {batch.episodes[0].error}")


def _oom_error(samples: Sequence[TrainSample], config: TrainConfig) -> TrainingOOMError:
    longest = max((len(sample.prompt_ids) + len(sample.completion_ids) for sample in samples), default=0)
    return TrainingOOMError(
        f"out of memory in a training micro-batch of {config.optim.micro_batch_size} sequences of up to {longest} "
        f"tokens (prompt + completion): lower optim.micro_batch_size (gradients accumulate, so the update stays "
        f"the same), shorten prompts (rollout.lap.template.history, rollout.observation_lines) or "
        f"rollout.lap.max_tokens (now {config.rollout.lap.max_tokens}), or train a LoRA adapter in bfloat16"
    )


# ============================================================================ the loop
def train(config: TrainConfig, *, resume: bool = False, hooks: TrainHooks | None = None) -> TrainResult:
    """Train as ``config`` says, writing the run folder ``config.run.out_dir``.

    Args:
        config: The run's configuration.
        resume: Continue from the newest complete checkpoint of the run folder (a fresh start
            when there is none). The configuration must match the stored one, except
            ``run.updates``, ``run.max_seconds`` and ``run.threads``.
        hooks: Optional callbacks (progress, early stop, test injections).

    Returns:
        Where the model, checkpoints and metrics went, and how the run ended.

    Raises:
        training.config.IncompatibleGameError: The credit assigner needs what the game lacks.
        TrainingOOMError: Out of memory (the message says what to lower).
        FileExistsError: A fresh run in a folder that already holds one.
    """
    hooks = hooks or TrainHooks()
    started = time.perf_counter()
    run, optim = config.run, config.optim
    run_dir = Path(run.out_dir)

    # --- 1. refuse what cannot work, before any model loads -----------------------------------
    agents = list(validate_against_game(config).agents)
    if config.rollout.opponent is None:
        model_seats, train_seats = agents, list(config.rollout.train_agents or agents)
    else:
        model_seats = list(config.rollout.train_agents or agents[:1])
        train_seats = model_seats
    settings = LossSettings(**config.loss_options())
    world = current_world()
    _check_run_folder(config, run_dir, resume)  # every rank checks the folder before rank 0 writes to it
    world.barrier()
    if world.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        config.to_yaml(run_dir / CONFIG_FILE)
        base_model_source(config, run_dir)  # a model built from scratch: once, before the other ranks load it
    world.barrier()
    found = latest_checkpoint(run_dir / "checkpoints") if resume else None
    checkpoint = load_checkpoint(found) if found is not None else None
    start_step = checkpoint.step if checkpoint is not None else 0

    # --- 2. model, reference, optimizer, schedule, engine ---------------------------------------
    lora = config.model.finetune == "lora"
    backend = load_backend(config, run_dir, weights=checkpoint.model_dir if checkpoint and not lora else None)
    if lora and checkpoint is not None and checkpoint.adapter_dir is not None:
        backend.load_adapter(checkpoint.adapter_dir, trainable=True)
    elif lora:
        _add_lora(backend, config)
    reference = None
    if settings.kl_beta > 0 and not lora:  # full fine-tuning: a frozen copy of the initial weights
        initial = Path(base_model_source(config, run_dir))
        reference = (
            copy.deepcopy(backend.model) if checkpoint is None else load_backend(config, run_dir, weights=initial).model
        )
        reference.eval().requires_grad_(False)
    parameters = [parameter for parameter in backend.model.parameters() if parameter.requires_grad]
    world.sync_parameters(parameters)  # every rank starts from rank 0's weights (as DDP does)
    optimizer = torch.optim.AdamW(parameters, lr=optim.lr, weight_decay=optim.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda update: lr_multiplier(update, run.updates, optim.schedule, optim.warmup_steps, optim.min_lr_ratio),
    )
    state: dict[str, Any] = {"skipped_updates": 0, "episodes_total": 0, "elapsed_s": 0.0}
    if checkpoint is not None:
        if checkpoint.optimizer is not None:
            optimizer.load_state_dict(checkpoint.optimizer)
        if checkpoint.scheduler is not None:
            scheduler.load_state_dict(checkpoint.scheduler)
        state.update(checkpoint.state)
        restore_rng_state(checkpoint.rng)
    if resume and world.is_main:
        _truncate_episodes(run_dir / EPISODES_FILE, start_step if checkpoint else -1)
    elapsed_before = float(state["elapsed_s"])
    opponent = policy_from_spec(config.rollout.opponent, seed=run.seed) if config.rollout.opponent else None
    engine: RolloutEngine = build_engine(config, backend, run_dir, model_seats, opponent)
    if checkpoint is not None:
        engine.sync()  # an engine with its own copy of the weights starts from the base ones
    choice_masks = ChoiceMasks(backend.tokenizer, backend.eos_ids)
    eval_plans = plan_episodes(config.rollout.game_id, run.resolved_eval_seeds(), group_size=1, id_prefix="eval")
    save_weights = weights_saver(backend, config.model.finetune)

    def elapsed() -> float:
        return elapsed_before + time.perf_counter() - started

    def evaluate() -> dict[str, float]:
        began = time.perf_counter()
        batch = _play_sharded(engine, eval_plans, 1, world, seed=run.seed, temperature=run.eval_temperature)
        metrics = episode_metrics(batch.episodes, train_seats, prefix="eval/")
        metrics["time/eval_s"] = time.perf_counter() - began
        return metrics

    def checkpoint_now(step: int) -> Path:
        state["elapsed_s"] = elapsed()
        folder = run_dir / "checkpoints" / f"step-{step}"
        if world.is_main:
            folder = save_checkpoint(
                run_dir / "checkpoints",
                step,
                save_weights=save_weights,
                optimizer=optimizer,
                scheduler=scheduler,
                state=state,
                keep_last=run.keep_last,
            )
        world.barrier()  # no rank runs ahead of a checkpoint it could be resumed from
        return folder

    # Rank 0 writes the metrics. Resuming cuts them (and episodes) back to the checkpoint, or to nothing.
    resume_step = (start_step if checkpoint else -1) if resume else None
    log = RunLog(run_dir, resume_step=resume_step, tensorboard=run.tensorboard) if world.is_main else None
    if run.eval_every and run.eval_at_start and start_step == 0:
        initial_metrics = evaluate()
        if log is not None:
            log.write(0, initial_metrics)

    # --- 3. the loop: rollout -> credit -> sample -> update ------------------------------------
    step, stop_reason, last_checkpoint = start_step, "updates", None
    try:
        while step < run.updates:
            step += 1
            metrics: dict[str, float] = {}

            # Rollout: independent groups of G episodes, each group from one seed.
            began = time.perf_counter()
            seeds, sampling_seed = _update_seeds(config, step)
            plans = plan_episodes(config.rollout.game_id, seeds, config.rollout.group_size, id_prefix=f"u{step}")
            batch = _play_sharded(engine, plans, config.rollout.group_size, world, seed=sampling_seed)
            _raise_on_rollout_oom(batch, config)
            episodes = [episode for episode in batch.episodes if episode.error is None]
            state["episodes_total"] = int(state["episodes_total"]) + len(batch.episodes)
            metrics.update(episode_metrics(batch.episodes, train_seats))
            metrics["rollout/episodes_total"] = float(state["episodes_total"])
            metrics["time/rollout_s"] = time.perf_counter() - began
            if run.episodes_every and step % run.episodes_every == 0 and world.is_main:
                write_episodes(run_dir / EPISODES_FILE, batch.episodes)

            # Credit: per-step advantages of the trained seats.
            credit = assign_credit(config.credit.name, episodes, agent=train_seats, params=config.credit.params)
            metrics.update(credit.stats.as_metrics())

            # Sampling: trajectories (all their steps) or single steps, by |A| or uniformly.
            rng = np.random.default_rng([run.seed, step, 1])
            sampler = config.sampler
            if sampler.unit == "episode":
                count = sampler.samples_per_update or len(credit.trajectories)
                values = credit.sampling_advantages()
                drawn = sampling.sample(
                    sampler.name, values, count, rng, alpha=sampler.alpha, replace=sampler.replacement
                )
                steps = credit.steps(drawn.indices)
            else:
                every_step = credit.steps()
                count = sampler.samples_per_update or len(every_step)
                advantages = [item.advantage for item in every_step]
                drawn = sampling.sample(
                    sampler.name, advantages, count, rng, alpha=sampler.alpha, replace=sampler.replacement
                )
                steps = [every_step[int(index)] for index in drawn.indices]
            metrics.update(drawn.stats.as_metrics())

            # Samples: the prompt as the LAP showed it, the tokens the model wrote.
            by_id = {episode.episode_id: episode for episode in episodes}
            samples = _training_samples(steps, by_id, batch.exact_logprobs)
            metrics["sampler/samples"] = float(len(samples))
            rollout_samples: list[TrainSample] = []
            if settings.entropy_coef and config.loss.entropy_scope == "rollout":
                rollout_samples = _training_samples(credit.steps(), by_id, batch.exact_logprobs)

            # Update: clipped policy gradient over micro-batches, then the engine gets the weights.
            began = time.perf_counter()
            try:
                update_metrics = _update(
                    step,
                    samples,
                    rollout_samples=rollout_samples,
                    backend=backend,
                    reference=reference,
                    lora=lora,
                    optimizer=optimizer,
                    parameters=parameters,
                    config=config,
                    settings=settings,
                    temperature=batch.temperature,
                    choice_masks=choice_masks,
                    rng=rng,
                    hooks=hooks,
                    world=world,
                )
            except RuntimeError as error:
                if _is_oom(error):
                    raise _oom_error(samples, config) from error
                raise
            with warnings.catch_warnings():  # a skipped update steps the schedule without an optimizer step
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                scheduler.step()
            engine.sync()
            state["skipped_updates"] = int(state["skipped_updates"]) + int(update_metrics["loss/skipped"])
            metrics.update(update_metrics)
            metrics["loss/skipped_updates"] = float(state["skipped_updates"])
            metrics["optim/lr"] = float(optimizer.param_groups[0]["lr"])
            metrics["time/update_s"] = time.perf_counter() - began

            # Evaluation on held-out seeds: every eval_every updates, and after the last one.
            if world.broadcast(run.max_seconds is not None and elapsed() >= run.max_seconds):  # rank 0's clock
                stop_reason = "max_seconds"
            last = stop_reason != "updates" or step == run.updates
            evaluated = bool(run.eval_every) and (step % run.eval_every == 0 or last)
            if evaluated:
                metrics.update(evaluate())
            metrics["time/elapsed_s"] = elapsed()
            if not last and world.broadcast(hooks.should_stop is not None and hooks.should_stop(step, metrics)):
                stop_reason, last = "hook", True
                if run.eval_every and not evaluated:
                    metrics.update(evaluate())
            if log is not None:
                log.write(step, metrics)
            if hooks.on_update is not None:
                hooks.on_update(step, metrics)
            if last or (run.checkpoint_every and step % run.checkpoint_every == 0):
                last_checkpoint = checkpoint_now(step)
            if last:
                break
    finally:
        if log is not None:
            log.close()
        close_engine = getattr(engine, "close", None)
        if close_engine is not None:  # a vLLM engine holds processes and GPU memory
            close_engine()

    # --- 4. the end: final model and learning curve ---------------------------------------------
    if last_checkpoint is None:  # resumed a finished run: nothing was trained, save again
        last_checkpoint = checkpoint_now(step)
    final_model = adapter = curve = None
    rows: list[dict[str, Any]] = []
    if log is not None:  # rank 0
        final_model, adapter = save_final_model(backend, lora, run_dir)
        rows = read_metrics(log.path)
        title = f"{config.credit.name} on {config.rollout.game_id}"
        curve = plot_learning_curve(rows, run_dir / CURVE_FILE, title=title)
    world.barrier()
    return TrainResult(
        run_dir=run_dir,
        steps=step,
        stop_reason=stop_reason,
        final_model=final_model,
        adapter=adapter,
        checkpoint=last_checkpoint,
        skipped_updates=int(state["skipped_updates"]),
        learning_curve=curve,
        resumed_from=checkpoint.step if checkpoint is not None else None,
        metrics=rows,
    )
