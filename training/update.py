"""One policy update: training samples from the episode records, the clipped loss, optimizer steps.

(Past 600 lines: one optimizer step read in one place, from pi_old through the loss passes every
process pairs up to the applied gradient; the loss formulas are in :mod:`training.losses`.)

:func:`training_samples` turns credited steps into :class:`TrainSample` sequences straight from
the episode records (the prompt ids the model read, the tokens it wrote, their behaviour
log-probabilities, the choices a constrained answer allowed). :class:`PolicyUpdate` then does,
per update:

1. pi_old: the recorded behaviour log-probabilities, or a recomputation under the current
   weights (``loss.old_logprobs: recompute``, or an engine whose numerics are not the trainer's);
   the reference log-probabilities when the loss has a KL term;
2. optimizer steps planned by :func:`plan_optimizer_steps`: ``optim.epochs`` passes over the
   samples, ``optim.grad_accumulation`` micro-batches of ``optim.micro_batch_size`` per step;
3. per optimizer step, :meth:`PolicyUpdate.backward_step` backpropagates each micro-batch's
   :func:`training.losses.policy_loss` with the *step's* aggregation denominator, so k
   micro-batches give the gradient of one batch; then :meth:`PolicyUpdate.apply_gradients`
   clips and applies it.

Every log-probability comes from :func:`backends.scoring.score_completions`, the distribution
the backend sampled from. A non-finite loss or gradient norm skips the update; out of memory
raises :class:`TrainingOOMError` naming what to lower. With several processes every rank plans
the same steps and backpropagates its share of each through torch's DDP or FSDP2, which sum the
gradients over ranks (:mod:`training.distributed`: the shares are uneven, so every rank runs the
same number of passes, some with a loss multiplied by 0).

Two additions for the other losses and for distillation: a sequence-level ratio (``gspo``) or
SORL's clip normalisation (``sorl``) needs figures of the whole optimizer step, computed once per
step without gradient (:mod:`training.ratio_context`; one more forward pass per optimizer step
after an update's first); a teacher (``distill.teacher``) scores every sample once per update and
its per-token advantage lambda (log pi_teacher - log pi_old) is added (:mod:`training.distill`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from backends.scoring import MIN_SHARED_PREFIX, ChoiceMasks, TokenScores, score_completions, shared_prefix_length
from training.config import DistillConfig, LossConfig, OptimConfig, TrainConfig
from training.credit import StepCredit
from training.distill import Teacher, opd_advantages
from training.distributed import World
from training.losses import LossSettings, StepFigures, aggregation_denominator, policy_loss
from training.ratio_context import StepContext, sequence_members, step_context
from training.setup import TrainingSetup
from tsmg.episode import Episode

logger = logging.getLogger(__name__)

#: Indices of samples, one array per micro-batch.
Batches = list[np.ndarray]
#: Called with (update, loss) on every micro-batch loss before backward (tests inject a NaN with it).
LossTransform = Callable[[int, torch.Tensor], torch.Tensor]


class TrainingOOMError(RuntimeError):
    """Out of memory during training; the message names the sizes to lower."""


@dataclass
class TrainSample:
    """One credited step as a training sequence.

    Attributes:
        prompt_ids: The prompt's token ids, as the model read them.
        completion_ids: The tokens the model wrote.
        behaviour_logprobs: Their log-probabilities recorded at rollout time (None: recompute).
        advantage: The step's advantage (every token carries it).
        choices: The allowed answers of a constrained decision (None: free text).
        sequence: The draw it came with: the samples of one drawn trajectory share it (one
            sequence for a sequence-level ratio).
        policy_version: The policy version that sampled it (asynchronous training tells stale samples by it).
        token_mask: Which tokens the loss counts (None: all); asynchronous training masks the
            off-policy ones (:mod:`training.rollout.async_loop`).
        token_weights: Each token's importance weight in the policy term (None: 1); asynchronous
            training weights a stale sample's kept tokens by pi_prox / pi_behaviour (decoupled PPO).
        sampler_logprobs: The log-probabilities the rollout engine reported for the tokens where
            they are not the trainer's numerics (vLLM, an HF sampler outside float32; None
            otherwise): truncated importance sampling weighs each token by pi_old / these
            (``loss.tis_cap``, :func:`training.losses.truncated_importance_weights`).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    behaviour_logprobs: list[float] | None
    advantage: float
    choices: list[str] | None = None
    sequence: int = 0
    policy_version: int | None = None
    token_mask: list[bool] | None = None
    token_weights: list[float] | None = None
    sampler_logprobs: list[float] | None = None


def training_samples(
    steps: Sequence[StepCredit], episodes: Mapping[str, Episode], *, exact_logprobs: bool | None = None
) -> list[TrainSample]:
    """One :class:`TrainSample` per credited step (repeats kept), straight from the episode records.

    Steps the record says the update does not train (``StepRecord.trains`` False:
    :func:`training.rollout.sources.mark_trained_steps`), and steps without tokens (a scripted seat, a
    failed model call) or without prompt ids (a backend that does not report them) are left out.

    Args:
        steps: The credited steps to train on.
        episodes: The episodes by id.
        exact_logprobs: None (the default): each step's record says whether its log-probabilities
            are the trainer's own (``StepRecord.exact_logprobs``; those that are not leave pi_old
            to be recomputed, and are kept as the sample's ``sampler_logprobs`` for truncated
            importance sampling). True keeps every recorded one as pi_old (asynchronous training
            corrects them itself; no ``sampler_logprobs``).
    """
    samples = []
    for item in steps:
        record = episodes[item.episode_id].steps[item.step_index]
        if record.trains is False or not record.token_ids or not record.prompt_token_ids:
            continue
        exact = record.exact_logprobs is not False if exact_logprobs is None else exact_logprobs
        sampler = None
        if not exact and record.logprobs is not None and len(record.logprobs) == len(record.token_ids):
            sampler = record.logprobs
        samples.append(
            TrainSample(
                prompt_ids=record.prompt_token_ids,
                completion_ids=record.token_ids,
                behaviour_logprobs=record.logprobs if exact else None,
                advantage=item.advantage,
                choices=record.choices,
                sequence=item.draw,
                policy_version=record.policy_version,
                sampler_logprobs=sampler,
            )
        )
    return samples


@dataclass(frozen=True)
class OptimizerStep:
    """The micro-batches of one optimizer step.

    Attributes:
        policy: Indices into the update's samples, per micro-batch.
        entropy: Indices into the rollout's steps that carry the rollout-wide entropy bonus, per micro-batch.
    """

    policy: Batches
    entropy: Batches


def plan_optimizer_steps(
    samples: int,
    rollout_samples: int,
    optim: OptimConfig,
    rng: np.random.Generator,
    lengths: Sequence[int] | None = None,
) -> list[OptimizerStep]:
    """The optimizer steps of an update, each with its micro-batches.

    ``optim.grad_accumulation`` micro-batches per step (None: all of an epoch's), ``optim.epochs``
    passes (the first in sampled order, later ones shuffled). The rollout's steps are split evenly
    over each epoch's optimizer steps (one step of their own when there are no samples).

    With ``lengths`` (each sample's tokens, prompt and completion) and ``optim.sort_by_length``,
    each optimizer step's samples are re-cut into micro-batches of similar length, so that little
    of a forward pass goes into padding. A step keeps the very samples it had and its loss is
    divided by the whole step's denominator, so only the float summation order changes.

    Example:
        >>> plan = plan_optimizer_steps(5, 0, OptimConfig(micro_batch_size=2), np.random.default_rng(0))
        >>> [[batch.tolist() for batch in step.policy] for step in plan]
        [[[0, 1], [2, 3], [4]]]
        >>> lengths = [9, 1, 8, 2, 7]
        >>> plan = plan_optimizer_steps(5, 0, OptimConfig(micro_batch_size=2), np.random.default_rng(0), lengths)
        >>> [[batch.tolist() for batch in step.policy] for step in plan]
        [[[1, 3], [4, 2], [0]]]
    """
    size = optim.micro_batch_size
    sort_lengths = np.asarray(lengths) if lengths is not None and optim.sort_by_length else None
    plan: list[OptimizerStep] = []
    for epoch in range(optim.epochs):
        order = rng.permutation(samples) if epoch else np.arange(samples)
        batches = [order[first : first + size] for first in range(0, samples, size)]
        per_step = optim.grad_accumulation or max(len(batches), 1)
        groups = [batches[first : first + per_step] for first in range(0, len(batches), per_step)]
        if sort_lengths is not None:
            groups = [by_length(group, sort_lengths, size) for group in groups]
        if rollout_samples and not groups:
            groups = [[]]
        shares = np.array_split(np.arange(rollout_samples), len(groups)) if rollout_samples else []
        for index, group in enumerate(groups):
            share = shares[index] if rollout_samples else np.zeros(0, dtype=np.int64)
            plan.append(OptimizerStep(group, [share[first : first + size] for first in range(0, len(share), size)]))
    return plan


def by_length(batches: Batches, lengths: np.ndarray, size: int) -> Batches:
    """The samples of ``batches`` re-cut into micro-batches of ``size`` in order of length (a stable sort).

    Example:
        >>> [batch.tolist() for batch in by_length([np.array([0, 1]), np.array([2])], np.array([5, 3, 4]), 2)]
        [[1, 2], [0]]
    """
    if not batches:
        return batches
    members = np.concatenate(batches)
    members = members[np.argsort(lengths[members], kind="stable")]
    return [members[first : first + size] for first in range(0, len(members), size)]


def padding_share(samples: Sequence[TrainSample], batches: Batches) -> float:
    """The share of padding among the tokens the micro-batches' forward passes compute.

    Each micro-batch runs its rows' shared prompt prefix once (:func:`backends.scoring.score_completions`)
    and the rest left-padded to its longest row.

    Example:
        >>> short, long = TrainSample([1], [2], None, 1.0), TrainSample([1, 2, 3], [4], None, 1.0)
        >>> padding_share([short, long], [np.array([0, 1])])
        0.25
    """
    padding = computed = 0
    for batch in batches:
        rows = [samples[int(index)].prompt_ids + samples[int(index)].completion_ids for index in batch]
        if not rows:
            continue
        shared = shared_prefix_length(rows, MIN_SHARED_PREFIX) if len(rows) > 1 else 0
        width = max(len(row) for row in rows) - shared
        padding += sum(width - (len(row) - shared) for row in rows)
        computed += shared + width * len(rows)
    return padding / computed if computed else 0.0


def rank_share(batches: Batches, micro_batch_size: int, world: World, rank: int | None = None) -> Batches:
    """A rank's (this one's) share of one optimizer step's micro-batches, re-cut into micro-batches.

    Example:
        >>> rank_share([np.arange(4), np.arange(4, 6)], 4, World(rank=1, size=2))
        [array([3, 4, 5])]
    """
    if world.size == 1 or not batches:
        return batches
    mine = np.concatenate(batches)[slice(*world.shard_bounds(sum(len(batch) for batch in batches), rank))]
    return [mine[first : first + micro_batch_size] for first in range(0, len(mine), micro_batch_size)]


@dataclass
class UpdateData:
    """What an update trains on, prepared once before its optimizer steps.

    Attributes:
        samples: The sampled steps (the policy term).
        rollout_samples: Every trained step of the rollout, once (the rollout-wide entropy term).
        old: pi_old log-probabilities of each sample's tokens.
        reference: The reference policy's log-probabilities (None without a KL term).
        temperature: The sampling temperature (the distribution is ``log_softmax(logits / T)``).
        token_advantages: Per sample, the advantage of each token (None: the sample's own, on
            every token); set when a teacher adds its per-token term.
        moved: Whether an optimizer step of this update has changed the weights (pi_old is then
            no longer the current policy).
    """

    samples: Sequence[TrainSample]
    rollout_samples: Sequence[TrainSample]
    old: list[list[float]]
    reference: list[list[float]] | None
    temperature: float
    token_advantages: list[list[float]] | None = None
    moved: bool = False

    def advantages_of(self, index: int) -> list[float]:
        """The per-token advantages of sample ``index``."""
        if self.token_advantages is not None:
            return self.token_advantages[index]
        return [self.samples[index].advantage] * len(self.samples[index].completion_ids)


@dataclass
class LossTally:
    """The metrics of an update's micro-batch losses, merged over optimizer steps and ranks.

    Sums (``loss/policy``, ``loss/total``, ``loss/tokens``) are summed over a step's micro-batches
    and averaged over steps; every other metric is a token-weighted mean.
    """

    sums: dict[str, float] = field(default_factory=dict)
    weighted: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    SUMMED = ("loss/policy", "loss/total", "loss/tokens")

    def add(self, metrics: Mapping[str, float], tokens: float) -> None:
        """Count one micro-batch's metrics (over ``tokens`` tokens)."""
        for key, value in metrics.items():
            if key in self.SUMMED:
                self.sums[key] = self.sums.get(key, 0.0) + value
            else:
                self.weighted.setdefault(key, []).append((value, tokens))

    def merge(self, other: LossTally) -> None:
        """Add another rank's tally."""
        for key, value in other.sums.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
        for key, pairs in other.weighted.items():
            self.weighted.setdefault(key, []).extend(pairs)

    def metrics(self, optimizer_steps: int) -> dict[str, float]:
        """Per-step means of the sums, token-weighted means of the rest, and the total token count."""
        metrics = {key: value / optimizer_steps for key, value in self.sums.items() if key != "loss/tokens"}
        metrics["loss/tokens"] = self.sums.get("loss/tokens", 0.0)
        metrics.update({key: weighted_mean(pairs) for key, pairs in self.weighted.items()})
        return metrics


def weighted_mean(pairs: Sequence[tuple[float, float]]) -> float:
    """The mean of ``(value, weight)`` pairs (0 when every weight is 0).

    Example:
        >>> weighted_mean([(1.0, 1.0), (4.0, 2.0)])
        3.0
    """
    total = sum(weight for _, weight in pairs)
    return sum(value * weight for value, weight in pairs) / total if total else 0.0


class PolicyUpdate:
    """The update stage: pi_old and reference log-probabilities, micro-batched losses, optimizer steps.

    It takes only the sections it reads; :meth:`from_config` picks them out of a run's
    :class:`~training.config.TrainConfig` (and loads the teacher).

    Args:
        setup: The model, reference, trained parameters and optimizer
            (:meth:`training.setup.TrainingSetup.from_config`).
        world: This process's place among the training processes.
        optim: Optimizer steps, micro-batches, clipping, the target KL.
        loss: The loss, its options, where pi_old comes from and the entropy bonus's scope.
        max_tokens: The longest answer (``rollout.lap.max_tokens``): the loss's constant normaliser
            when it sets none, and named by the out-of-memory message.
        distill: On-policy distillation's weight and balance (used with a ``teacher``).
        teacher: The loaded teacher (:meth:`training.distill.Teacher.load`); None: no distillation.
        transform_loss: Applied to every micro-batch loss before backward (tests inject a NaN).

    Raises:
        ValueError: ``distill.teacher`` names a teacher but none is given.
    """

    def __init__(
        self,
        setup: TrainingSetup,
        world: World,
        *,
        optim: OptimConfig,
        loss: LossConfig,
        max_tokens: int,
        distill: DistillConfig | None = None,
        teacher: Teacher | None = None,
        transform_loss: LossTransform | None = None,
    ) -> None:
        distill = DistillConfig() if distill is None else distill
        if distill.teacher is not None and teacher is None:
            raise ValueError(
                f"distill.teacher is {distill.teacher!r} but no teacher was given: build the update with "
                "PolicyUpdate.from_config, or pass teacher=Teacher.load(...)"
            )
        self.backend = setup.backend
        self.reference = setup.reference
        self.lora = setup.lora
        self.optimizer = setup.optimizer
        self.parameters = setup.parameters
        self.parallel = setup.parallel
        self.reference_parallel = setup.reference_parallel
        self.world = world
        self.transform_loss = transform_loss
        self.optim = optim
        self.recompute_old = loss.old_logprobs != "behaviour"
        self.old_from_first_pass = loss.old_logprobs == "first-pass"
        self.rollout_entropy = loss.entropy_scope == "rollout"
        self.settings = LossSettings(**loss.options(max_tokens))
        self.choice_masks = ChoiceMasks(setup.backend.choice_tries)
        self.max_tokens = max_tokens
        self.distill = distill
        self.teacher = teacher

    @classmethod
    def from_config(
        cls, setup: TrainingSetup, config: TrainConfig, world: World, transform_loss: LossTransform | None = None
    ) -> PolicyUpdate:
        """The update of a run: its ``optim``, ``loss``, ``distill`` sections, ``rollout.lap.max_tokens``, the teacher.

        Args:
            setup: The model, reference, trained parameters and optimizer.
            config: The run's configuration (the sections above are read; nothing is kept).
            world: This process's place among the training processes.
            transform_loss: Applied to every micro-batch loss before backward (tests inject a NaN).
        """
        distill = config.distill
        teacher = (
            Teacher.load(distill, dtype=config.model.dtype, threads=config.run.threads)
            if distill.teacher is not None
            else None
        )
        return cls(
            setup,
            world,
            optim=config.optim,
            loss=config.loss,
            max_tokens=config.rollout.lap.max_tokens,
            distill=distill,
            teacher=teacher,
            transform_loss=transform_loss,
        )

    # ------------------------------------------------------------------ one update
    def __call__(
        self,
        step: int,
        samples: Sequence[TrainSample],
        rollout_samples: Sequence[TrainSample] = (),
        *,
        temperature: float,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Optimizer steps over ``samples``; returns loss/optim metrics and ``loss/skipped`` (0 or 1).

        ``rollout_samples`` (every trained step of the rollout, once) carry the entropy bonus when
        its scope is the rollout: each optimizer step then also subtracts ``entropy_coef`` x the
        token-mean entropy of its share of them, which keeps acting when no group has a signal
        (no ``samples``).

        Raises:
            TrainingOOMError: Out of memory (the message says what to lower).
        """
        if not samples and not rollout_samples:  # every advantage was 0 and nothing else to do
            return {"loss/skipped": 0.0, "optim/steps": 0.0}
        try:
            return self._update(step, samples, rollout_samples, temperature, rng)
        except RuntimeError as error:
            if is_out_of_memory(error):
                raise self._oom_error(samples) from error
            raise

    def _update(
        self,
        step: int,
        samples: Sequence[TrainSample],
        rollout_samples: Sequence[TrainSample],
        temperature: float,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        self.choice_masks.mismatches = 0  # counted per update
        began = time.perf_counter()
        lengths = [len(sample.prompt_ids) + len(sample.completion_ids) for sample in samples]
        plan = plan_optimizer_steps(len(samples), len(rollout_samples), self.optim, rng, lengths)
        data = UpdateData(samples, rollout_samples, self.old_logprobs(samples, temperature, plan), None, temperature)
        if self.settings.kl_beta > 0 and samples:
            data.reference = self.reference_logprobs(samples, temperature)
        distill_metrics = self._distill(data) if self.teacher is not None and samples else {}
        scored = time.perf_counter()
        tally, grad_norms, stopped_early = LossTally(), list[float](), 0.0
        self.backend.model.train()
        for index, planned in enumerate(plan):
            self.optimizer.zero_grad(set_to_none=True)
            losses, finite = self.backward_step(step, planned, data)
            if not finite:  # a non-finite loss on some rank: the update is skipped on every rank
                self.optimizer.zero_grad(set_to_none=True)
                return {"loss/skipped": 1.0, "optim/steps": float(len(grad_norms))}
            if index and self._past_target_kl(planned, losses):  # PPO's early stop: far enough from pi_old
                stopped_early = 1.0
                break
            for metrics, tokens in losses:
                tally.add(metrics, tokens)
            norm = self.apply_gradients()
            if norm is None:
                logger.warning("update %d: non-finite gradient norm; the update is skipped", step)
                return {"loss/skipped": 1.0, "optim/steps": float(len(grad_norms))}
            grad_norms.append(norm)
            data.moved = True
        self.optimizer.zero_grad(set_to_none=True)
        merged, mismatches = LossTally(), 0
        for part, part_mismatches in self.world.gather((tally, self.choice_masks.mismatches)):
            merged.merge(part)
            mismatches += part_mismatches
        metrics = merged.metrics(len(grad_norms))
        metrics.update(
            {"loss/skipped": 0.0, "optim/steps": float(len(grad_norms)), "optim/stopped_early": stopped_early}
        )
        metrics["optim/grad_norm"] = float(np.mean(grad_norms)) if grad_norms else 0.0
        metrics["loss/choice_mismatches"] = float(mismatches)
        metrics["optim/padding_share"] = padding_share(samples, [batch for planned in plan for batch in planned.policy])
        metrics.update(distill_metrics)
        # Where the update's time went: pi_old and reference scoring, then the optimizer steps.
        metrics["time/scoring_s"] = scored - began
        metrics["time/optimizer_s"] = time.perf_counter() - scored
        return metrics

    def _distill(self, data: UpdateData) -> dict[str, float]:
        """The teacher's log-probabilities of every sample, turned into per-token advantages (OPD)."""
        assert self.teacher is not None
        teacher = self._logprobs_without_grad(self.teacher.model, data.samples, data.temperature)
        settings = self.settings
        extra = opd_advantages(
            teacher,
            data.old,
            self.distill.weight,
            turn_balanced=self.distill.turn_balanced,
            aggregation=settings.aggregation,
            sequences=[sample.sequence for sample in data.samples] if settings.ratio_level == "sequence" else None,
        )
        data.token_advantages = [
            [sample.advantage + value for value in values] for sample, values in zip(data.samples, extra, strict=True)
        ]
        gaps = [
            s - t for student, given in zip(data.old, teacher, strict=True) for s, t in zip(student, given, strict=True)
        ]
        return {
            "distill/reverse_kl": float(np.mean(gaps)) if gaps else 0.0,
            "distill/teacher_logprob": float(np.mean([value for row in teacher for value in row])) if gaps else 0.0,
        }

    def step_context(self, planned: OptimizerStep, data: UpdateData) -> StepContext | None:
        """Figures of the whole optimizer step that a sequence-level ratio or SORL's normalisation needs."""
        settings = self.settings
        if not planned.policy or (settings.ratio_level != "sequence" and not settings.clip_normalization):
            return None
        rows = [int(i) for batch in planned.policy for i in batch]
        sequences = [
            sample.sequence if settings.ratio_level == "sequence" else index
            for index, sample in enumerate(data.samples)
        ]
        members = sequence_members(sequences, rows)
        if data.moved:  # the weights moved since pi_old: score the step's sequences as they stand now
            with self.parallel.gathered():
                scored = self._logprobs_without_grad(
                    self.backend.model, [data.samples[i] for i in members], data.temperature
                )
            current = dict(zip(members, scored, strict=True))
        else:
            current = {index: data.old[index] for index in members}
        return step_context(
            rows,
            sequences,
            current,
            data.old,
            [data.advantages_of(index) for index in range(len(data.samples))],
            clip_eps_low=settings.clip_eps_low,
            clip_eps_high=settings.clip_eps_high,
        )

    def _past_target_kl(self, planned: OptimizerStep, losses: Sequence[tuple[dict[str, float], float]]) -> bool:
        """Whether the approximate KL to pi_old (over every rank's micro-batches) passed ``optim.target_kl``."""
        if self.optim.target_kl is None or not planned.policy:
            return False
        local = [(metrics["loss/approx_kl"], tokens) for metrics, tokens in losses if "loss/approx_kl" in metrics]
        return weighted_mean([pair for part in self.world.gather(local) for pair in part]) > self.optim.target_kl

    # ------------------------------------------------------------------ log-probabilities
    def score(
        self,
        model: torch.nn.Module,
        samples: Sequence[TrainSample],
        temperature: float,
        *,
        entropy: bool = True,
        entropy_grad: bool = False,
        share_prefix: bool = True,
    ) -> TokenScores:
        """Log-probabilities (and entropies) of the samples' tokens under ``model`` (gradients as enabled)."""
        return score_completions(
            model,
            [sample.prompt_ids for sample in samples],
            [sample.completion_ids for sample in samples],
            pad_id=self.backend.pad_id,
            temperature=temperature,
            choices=[sample.choices for sample in samples],
            choice_masks=self.choice_masks,
            entropy=entropy,
            entropy_grad=entropy_grad,
            share_prefix=share_prefix,
        )

    def old_logprobs(
        self, samples: Sequence[TrainSample], temperature: float, plan: Sequence[OptimizerStep] = ()
    ) -> list[list[float]]:
        """pi_old: the behaviour log-probabilities, or recomputed under the weights that sampled them.

        With ``loss.old_logprobs: first-pass`` (one process) the samples of the first optimizer step
        of ``plan`` are left empty here: that step's own forward fills them (:meth:`_policy_pass`),
        before any weight moved, so the ratio is exactly 1 and no extra forward is spent on them.
        """
        recorded = [sample.behaviour_logprobs for sample in samples]
        if self.recompute_old or any(
            values is None or len(values) != len(sample.completion_ids)
            for values, sample in zip(recorded, samples, strict=True)
        ):
            first = set()
            if self.old_from_first_pass and self.world.size == 1 and plan:
                first = {int(i) for batch in plan[0].policy for i in batch}
            rest = [index for index in range(len(samples)) if index not in first]
            with self.parallel.gathered():
                scored = self._logprobs_without_grad(self.backend.model, [samples[i] for i in rest], temperature)
            old: list[list[float]] = [[] for _ in samples]
            for index, values in zip(rest, scored, strict=True):
                old[index] = values
            return old
        return [list(values or ()) for values in recorded]

    def reference_logprobs(self, samples: Sequence[TrainSample], temperature: float) -> list[list[float]]:
        """The reference policy's log-probabilities: the adapter switched off (LoRA), or the frozen copy."""
        if self.lora:
            with self.parallel.gathered(), self.backend.adapter_enabled(False):
                return self._logprobs_without_grad(self.backend.model, samples, temperature)
        assert self.reference_parallel is not None
        with self.reference_parallel.gathered():
            return self._logprobs_without_grad(self.reference, samples, temperature)

    def _logprobs_without_grad(
        self, model: torch.nn.Module, samples: Sequence[TrainSample], temperature: float
    ) -> list[list[float]]:
        """Per-sample log-probabilities without gradient, in micro-batches, each rank computing a share.

        Under FSDP the caller holds the weights gathered, so the ranks' uneven shares need no pairing.
        """
        world, size = self.world, self.optim.micro_batch_size
        mine = world.shard(samples) if world.size > 1 else list(samples)
        values: list[list[float]] = []
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for first in range(0, len(mine), size):
                scores = self.score(model, mine[first : first + size], temperature, entropy=False)
                values.extend(row.tolist() for row in scores.rows())
        model.train(was_training)
        if world.size == 1:
            return values
        return [row for part in world.gather(values) for row in part]

    # ------------------------------------------------------------------ one optimizer step
    def backward_step(
        self, step: int, planned: OptimizerStep, data: UpdateData
    ) -> tuple[list[tuple[dict[str, float], float]], bool]:
        """Backpropagate this rank's share of one optimizer step's micro-batches (gradients accumulate).

        Each micro-batch's loss is divided by the aggregation denominator of the whole step (every
        rank's micro-batches together), so k micro-batches give the gradient of one batch.

        Args:
            step: The update (for the loss transform and log messages).
            planned: The step's micro-batches.
            data: The update's samples and log-probabilities.

        Returns:
            ``(metrics, tokens)`` per micro-batch, and whether every loss was finite on every rank
            (when not, nothing may be applied).
        """
        settings = self.settings
        entropy_coef = settings.entropy_coef
        if self.rollout_entropy:  # the policy term leaves the entropy to the rollout-wide term
            settings = replace(settings, entropy_coef=0.0)
        denominator = None
        context = self.step_context(planned, data)
        if planned.policy:  # the step's global denominator, whichever rank computes which sample
            masks = [sample_mask([data.samples[int(i)] for i in batch]) for batch in planned.policy]
            denominator = aggregation_denominator(masks, settings.aggregation, settings.constant_normalizer)
            if settings.ratio_level == "sequence" and settings.aggregation == "sequence-mean":
                assert context is not None
                denominator = context.share  # sequences, not rows
        entropy_tokens = sum(len(data.rollout_samples[int(i)].completion_ids) for b in planned.entropy for i in b)
        size, world = self.optim.micro_batch_size, self.world

        def share(rank: int | None = None) -> list[tuple[str, np.ndarray | None]]:
            policy: list[tuple[str, np.ndarray | None]] = [
                ("policy", indices) for indices in rank_share(planned.policy, size, world, rank)
            ]
            return policy + [("entropy", indices) for indices in rank_share(planned.entropy, size, world, rank)]

        # DDP and FSDP pair up one backward (FSDP: one forward too) per rank: every rank runs as many
        # passes as the busiest one, the others' extra ones with a loss multiplied by 0.
        passes = share()
        slots = self.parallel.micro_batch_slots([len(share(rank)) for rank in range(world.size)])
        passes += [("idle", None)] * (slots - len(passes))
        losses: list[tuple[dict[str, float], float]] = []
        finite = True
        for index, (kind, indices) in enumerate(passes):
            with self.parallel.accumulating(last=index == slots - 1):
                if kind == "policy" and indices is not None:
                    loss, metrics, tokens = self._policy_pass(indices, data, settings, denominator, context)
                    losses.append((metrics, tokens))
                elif kind == "entropy" and indices is not None:
                    entropy_sum, tokens = self._entropy_pass(indices, data)
                    losses.append(({"loss/rollout_entropy": float(entropy_sum.detach()) / max(tokens, 1.0)}, tokens))
                    # A bonus: the loss falls as the token-mean entropy of the rollout's steps rises.
                    loss = -entropy_coef * entropy_sum / max(entropy_tokens, 1)
                else:  # an idle pass: this rank's share ran out (see above)
                    loss = self._idle_pass(data)
                # Every pass backpropagates, even a non-finite one: the other ranks' collectives wait for it.
                finite = self._backward(step, loss, transform=kind != "idle") and finite
        return losses, self.world.all_true(finite)

    def _policy_pass(
        self,
        indices: np.ndarray,
        data: UpdateData,
        settings: LossSettings,
        denominator: float | None,
        context: StepContext | None,
    ) -> tuple[torch.Tensor, dict[str, float], float]:
        """The policy loss of one micro-batch of samples, its metrics and its token count.

        ``context``: the optimizer step's figures a sequence-level ratio or SORL's normalisation
        needs (:meth:`step_context`; None for the other losses).
        """
        chunk = [data.samples[int(i)] for i in indices]
        scores = self.score(
            self.parallel.forward_model,
            chunk,
            data.temperature,
            entropy_grad=settings.entropy_coef != 0,
            share_prefix=self.parallel.shares_prefix_in_backward,
        )
        tail, device = scores.mask.shape[1], scores.mask.device
        reference = None if data.reference is None else [data.reference[int(i)] for i in indices]
        if data.token_advantages is None:
            advantages = torch.tensor([sample.advantage for sample in chunk], dtype=torch.float32, device=device)
        else:  # distillation: a teacher's term per token
            advantages = padded([data.token_advantages[int(i)] for i in indices], tail, device)
        step = StepFigures(denominator, clipped_fraction=None if context is None else context.clipped_fraction)
        if context is not None and settings.ratio_level == "sequence":
            step = replace(
                step,
                sequence_log_ratio=torch.tensor([context.sequence_log_ratio[int(i)] for i in indices], device=device),
                sequence_tokens=torch.tensor([context.sequence_tokens[int(i)] for i in indices], device=device),
            )
        if not data.moved and any(len(data.old[int(i)]) != len(sample.completion_ids) for i, sample in
                                  zip(indices, chunk, strict=True)):  # fmt: skip
            # loss.old_logprobs 'first-pass': the weights have not moved, so this forward is pi_old.
            for i, row in zip(indices, scores.rows(), strict=True):
                data.old[int(i)] = row.detach().float().tolist()
        result = policy_loss(
            scores.logprobs,
            padded([data.old[int(i)] for i in indices], tail, device),
            advantages,
            scores.mask & sample_mask(chunk, tail).to(device),  # asynchronous training masks off-policy tokens
            settings,
            step,
            logprobs_ref=None if reference is None else padded(reference, tail, device),
            entropy=scores.entropy,
            token_weights=token_weights(chunk, tail, device),
            logprobs_sampler=sampler_logprobs(chunk, [data.old[int(i)] for i in indices], tail, device),
        )
        return result.loss, result.metrics, float(scores.mask.sum())

    def _entropy_pass(self, indices: np.ndarray, data: UpdateData) -> tuple[torch.Tensor, float]:
        """The summed entropy (with gradient) over one micro-batch of the rollout's steps, and its token count."""
        chunk = [data.rollout_samples[int(i)] for i in indices]
        scores = self.score(
            self.parallel.forward_model,
            chunk,
            data.temperature,
            entropy_grad=True,
            share_prefix=self.parallel.shares_prefix_in_backward,
        )
        assert scores.entropy is not None
        entropy_sum = torch.where(scores.mask, scores.entropy, torch.zeros_like(scores.entropy)).sum()
        return entropy_sum, float(scores.mask.sum())

    def _idle_pass(self, data: UpdateData) -> torch.Tensor:
        """A loss of 0 through the model's whole forward (one sample's), for a rank whose share ran out."""
        sample = (data.samples or data.rollout_samples)[0]
        scores = self.score(
            self.parallel.forward_model,
            [sample],
            data.temperature,
            entropy=False,
            share_prefix=self.parallel.shares_prefix_in_backward,
        )
        return torch.where(scores.mask, scores.logprobs, torch.zeros_like(scores.logprobs)).sum() * 0.0

    def apply_gradients(self) -> float | None:
        """The gradient step (already summed over ranks by DDP or FSDP): clip the global norm, step the optimizer.

        Returns:
            The gradient norm before clipping, or None (nothing applied) when it is not finite.
        """
        norm = self.parallel.clip_grad_norm(self.optim.grad_clip)
        if not math.isfinite(norm):
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.optimizer.step()
        return norm

    def _backward(self, step: int, loss: torch.Tensor, *, transform: bool = True) -> bool:
        """Backpropagate ``loss`` (after the test hook); returns whether it was finite (if not, the step is skipped)."""
        if transform and self.transform_loss is not None:
            loss = self.transform_loss(step, loss)
        finite = bool(torch.isfinite(loss.detach()))
        if not finite:
            logger.warning("update %d: non-finite loss (%s); the update is skipped", step, float(loss.detach()))
        loss.backward()
        return finite

    def _oom_error(self, samples: Sequence[TrainSample]) -> TrainingOOMError:
        longest = max((len(sample.prompt_ids) + len(sample.completion_ids) for sample in samples), default=0)
        return TrainingOOMError(
            f"out of memory in a training micro-batch of {self.optim.micro_batch_size} sequences of up to "
            f"{longest} tokens (prompt + completion): lower optim.micro_batch_size (gradients accumulate, so the "
            "update stays the same), shorten prompts (rollout.lap.template.history, rollout.observation_lines) or "
            f"rollout.lap.max_tokens (now {self.max_tokens}), or train a LoRA adapter in bfloat16"
        )


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is torch running out of (GPU or CPU) memory."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def sample_mask(samples: Sequence[TrainSample], tail: int | None = None) -> torch.Tensor:
    """The right-aligned ``(rows, tail)`` mask of the tokens the loss counts: completions, less masked tokens.

    Example:
        >>> sample = TrainSample([1], [5, 6, 7], None, 1.0, token_mask=[True, False, True])
        >>> sample_mask([sample], 4).tolist()
        [[False, True, False, True]]
    """
    lengths = [len(sample.completion_ids) for sample in samples]
    width = max(lengths) if tail is None else tail
    mask = torch.arange(width)[None, :] >= (width - torch.tensor(lengths))[:, None]
    for row, sample in enumerate(samples):
        if sample.token_mask is not None:
            mask[row, width - len(sample.token_mask) :] &= torch.tensor(sample.token_mask, dtype=torch.bool)
    return mask


def token_weights(samples: Sequence[TrainSample], tail: int, device: torch.device) -> torch.Tensor | None:
    """The right-aligned ``(rows, tail)`` importance weights of the samples' tokens (None: no sample has any)."""
    if all(sample.token_weights is None for sample in samples):
        return None
    rows = [
        sample.token_weights if sample.token_weights is not None else [1.0] * len(sample.completion_ids)
        for sample in samples
    ]
    return padded(rows, tail, device)


def sampler_logprobs(
    samples: Sequence[TrainSample], old: Sequence[Sequence[float]], tail: int, device: torch.device
) -> torch.Tensor | None:
    """The right-aligned ``(rows, tail)`` log-probabilities the rollout engine reported (None: no sample has any).

    A row without them (the trainer's own numerics) takes its pi_old ``old``: weight 1, no
    sampler-trainer gap. (One rollout comes from one engine, so a batch has them on every row or on none.)
    """
    if all(sample.sampler_logprobs is None for sample in samples):
        return None
    rows = [
        sample.sampler_logprobs if sample.sampler_logprobs is not None else row
        for sample, row in zip(samples, old, strict=True)
    ]
    return padded(rows, tail, device)


def padded(values: Sequence[Sequence[float]], tail: int, device: torch.device) -> torch.Tensor:
    """Right-aligned ``(rows, tail)`` float tensor (zeros on the left)."""
    rows = [[0.0] * (tail - len(row)) + list(row) for row in values]
    return torch.tensor(rows, dtype=torch.float32, device=device)
