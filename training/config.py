"""Training configuration: one frozen pydantic model split by concern, validated when built.

(Past 600 lines: one section model per stage of the pipeline, each with the validators that refuse
what cannot work, and the checks against the game.)

``TrainConfig`` has one section per stage of the pipeline (``rollout``, ``credit``, ``sampler``,
``loss``, ``optim``) plus ``model`` and ``run``. Unknown fields are refused everywhere, so a typo
fails with its name; algorithm names are checked against the registries (the error lists the
valid names); combinations that cannot work are refused with the reason, first at build time
(e.g. a group-based credit assigner with ``group_size`` 1) and then against the game itself with
:func:`validate_against_game` (e.g. GiGPO on a game without usable state keys).

Example:
    >>> config = TrainConfig(rollout={"game_id": "FrozenLake-v0"}, model={"spec": "tiny"})
    >>> config.credit.name, config.sampler.name, config.loss.name
    ('ms-grpo', 'aaw', 'ppo-clip')
    >>> TrainConfig.from_yaml_text(config.to_yaml()) == config
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from training.advantages import SharedSteps
from training.annotators import ANNOTATORS, check_annotators
from training.credit import CREDIT_ASSIGNERS, AssignerParams, Need, credit_assigner, resolve_params
from training.loss_specs import LOSSES, Aggregation, loss_spec
from training.sampling import SAMPLERS, SampleUnit, sampler
from training.schedule import Schedule
from tsmg.core import Game
from tsmg.influence import EXACT
from tsmg.lap import LAPConfig, checked_regex
from tsmg.model_spec import parse_model_spec


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TreeConfig(_Section):
    """The shape of a tree rollout (``rollout.shape: tree``; see :mod:`training.tree`).

    A group of ``rollout.group_size`` leaves from one seed grows from ``roots`` root episodes: an
    episode still playing after ``fork_every``, 2 x ``fork_every``, ... rounds forks into
    ``branch_factor`` (itself and ``branch_factor - 1`` new branches) while the group has leaves
    left; when every episode of a group has ended with leaves left, new roots start.
    """

    roots: int = Field(default=2, ge=1, description="Root episodes each group starts with (at most group_size).")
    branch_factor: int = Field(default=2, ge=2, description="An episode that forks continues itself plus this - 1.")
    fork_every: int = Field(default=1, ge=1, description="An episode may fork after every this many rounds.")
    shared_steps: SharedSteps = Field(
        default="mean",
        description=(
            "How a prefix step shared by n leaves trains: once with the mean of their advantages ('mean', each leaf "
            "weighs 1/n), once with sqrt(n) x that mean ('sqrt', 1/sqrt(n)), or once per leaf ('each')."
        ),
    )


class OpponentPoolConfig(_Section):
    """Past checkpoints that play the seats the model does not (``rollout.opponent_pool``; docs/selfplay.md).

    Each group draws one entry, uniformly among the newest ``latest``, for every seat but the
    model's. Entries: the checkpoints named in ``checkpoints`` (resolved when the run starts, in
    the order given, each folder's checkpoints oldest first), then this run's own snapshots (the
    initial weights, then every ``snapshot_every`` updates), written to ``RUN/opponent_pool/``.
    """

    checkpoints: list[str] = Field(
        default_factory=list,
        description=(
            "Checkpoints of earlier runs: a run folder or its checkpoints/ folder (every checkpoint in it), "
            "a checkpoint folder (checkpoints/step-N), or a model folder."
        ),
    )
    snapshot_every: int = Field(
        default=0,
        ge=0,
        description="Add this run's own weights to the pool, first the initial ones, then every k updates (0: never).",
    )
    latest: int | None = Field(default=None, ge=1, description="Draw among the newest this many entries (None: all).")

    @model_validator(mode="after")
    def _has_a_source(self) -> OpponentPoolConfig:
        if not self.checkpoints and not self.snapshot_every:
            raise ValueError(
                "the opponent pool has no checkpoints yet: list earlier checkpoints in opponent_pool.checkpoints "
                "or let the run add its own with opponent_pool.snapshot_every > 0"
            )
        return self


class RolloutConfig(_Section):
    """How episodes are played: independent groups of G episodes, each group from one seed (or trees)."""

    game_id: str = Field(description="Registered game id, e.g. 'FrozenLake-v0'.")
    game_options: dict[str, Any] = Field(default_factory=dict, description="Options passed to tsmg.make.")
    group_size: int = Field(default=8, ge=1, description="G: episodes per group, all started from the same seed.")
    groups_per_update: int = Field(default=8, ge=1, description="Groups (distinct seeds) played per update.")
    max_concurrent: int = Field(default=64, ge=1, description="Episodes in flight at once.")
    lap: LAPConfig = Field(
        default_factory=LAPConfig,
        description="The language-agent policy: prompt template, action format, temperature, top_p, max_tokens.",
    )
    opponent: str | None = Field(
        default=None,
        description="Policy for the seats not trained (multi-agent games); None: self-play (one model, every seat).",
    )
    train_agents: list[str] | None = Field(
        default=None, description="The seats whose steps are trained; None: every seat the model plays."
    )
    observation_lines: str | None = Field(
        default=None,
        description=(
            "Compact view: show the model only the observation lines that fully match this regular expression "
            "(e.g. '[_OPG]+' keeps a Frozen Lake grid); None: the whole observation."
        ),
    )
    merged_adapter: Literal["auto", "on", "off"] = Field(
        default="auto",
        description=(
            "LoRA runs whose rollouts play on the trained HF model: sample them from a separate copy of the weights "
            "with the adapter folded in (faster generation; refreshed after every update; the trained weights are "
            "never merged). 'auto': on when the model is float32 on a CPU, where the copy's log-probabilities are "
            "the trainer's to float rounding; 'on': whatever the device and dtype (outside float32 pi_old is then "
            "recomputed under the trained weights); 'off': sample through the adapter."
        ),
    )

    shape: Literal["groups", "tree", "rtpo"] = Field(
        default="groups",
        description=(
            "'groups': group_size independent episodes per seed; 'tree': group_size leaves per seed branched from "
            "shared prefixes (rollout.tree; the game must fork); 'rtpo': RTPO's reverse-turn stages, one spine "
            "per seed and group_size branches per turn, the last turn first (training/rtpo.py; the game must fork)."
        ),
    )
    tree: TreeConfig = Field(default_factory=TreeConfig, description="The tree's shape, for shape 'tree'.")
    annotators: list[str] = Field(
        default_factory=list,
        description="Registered annotators run on every rollout before credit, in order (training.annotators).",
    )

    @field_validator("annotators")
    @classmethod
    def _registered_annotators(cls, names: list[str]) -> list[str]:
        check_annotators(names)
        return names

    self_play: bool = Field(
        default=False,
        description=(
            "Ask for self-play explicitly: the one model plays every seat and trains them all (refused for a "
            "single-agent game; without it, a multi-agent game with no opponent is self-play too)."
        ),
    )
    seating: Literal["fixed", "rotate"] = Field(
        default="fixed",
        description=(
            "With an opponent or an opponent pool, the model's seat: train_agents (else the first seat) in every "
            "group ('fixed'), or seat (k + update) mod n in group k ('rotate', so that it learns every seat)."
        ),
    )
    opponent_pool: OpponentPoolConfig | None = Field(
        default=None,
        description="Past checkpoints in the seats the model does not play, one drawn per group (docs/selfplay.md).",
    )

    @field_validator("observation_lines")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        return checked_regex(pattern, "observation_lines")

    @model_validator(mode="after")
    def _samples_what_training_scores(self) -> RolloutConfig:
        # The update scores every token under log_softmax(logits / T) over the whole vocabulary
        # (backends.scoring): pi_old is the sampling distribution only if the rollout sampled it.
        if self.lap.top_p < 1.0:
            raise ValueError(
                f"rollout.lap.top_p is {self.lap.top_p}, but training scores each token under the whole "
                "distribution, not the nucleus it was drawn from, so the ratio pi_new / pi_old would be wrong: set "
                "rollout.lap.top_p to 1 (and sharpen sampling with rollout.lap.temperature instead)"
            )
        if self.lap.temperature == 0.0:
            raise ValueError(
                "rollout.lap.temperature is 0 (greedy decoding): every episode of a group would play the same and "
                "the sampling distribution log_softmax(logits / T) is undefined at T = 0; set a temperature above 0 "
                "(1.0 samples the model as it is; evaluations stay greedy by run.eval_temperature)"
            )
        return self

    @model_validator(mode="after")
    def _tree_fits(self) -> RolloutConfig:
        if self.shape != "tree" and self.tree != TreeConfig():
            raise ValueError(f"rollout.tree only applies to rollout.shape 'tree' (shape is {self.shape!r})")
        if self.shape == "tree" and self.tree.roots > self.group_size:
            raise ValueError(
                f"rollout.tree.roots ({self.tree.roots}) cannot exceed rollout.group_size ({self.group_size}), the "
                "leaves of a group"
            )
        return self

    @model_validator(mode="after")
    def _one_kind_of_opponent(self) -> RolloutConfig:
        opponents = [
            name
            for name, given in (
                ("self_play", self.self_play),
                ("opponent", self.opponent is not None),
                ("opponent_pool", self.opponent_pool is not None),
            )
            if given
        ]
        if len(opponents) > 1:
            raise ValueError(f"choose one of {' / '.join(opponents)}: each says who plays the other seats")
        if self.seating == "rotate" and not (self.opponent or self.opponent_pool):
            raise ValueError(
                "seating 'rotate' moves the model between seats against an opponent or opponent pool; "
                "self-play already plays every seat"
            )
        if self.seating == "rotate" and self.train_agents is not None:
            raise ValueError("seating 'rotate' trains the seat the model plays in each group; leave train_agents unset")
        if self.seats_each_group and self.shape == "tree":
            raise ValueError(
                "a rotating seat or an opponent pool seats every group on its own, which tree rollouts do not do "
                "yet: use rollout.shape 'groups'"
            )
        return self

    @property
    def seats_each_group(self) -> bool:
        """Whether groups differ in who plays which seat (a rotating seat, or an opponent pool)."""
        return self.seating == "rotate" or self.opponent_pool is not None


class CreditConfig(_Section):
    """Which credit assigner turns groups of episodes into per-step advantages."""

    name: str = Field(default="ms-grpo", description=f"A registered credit assigner: {sorted(CREDIT_ASSIGNERS)}.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        validate_default=True,
        description="The assigner's parameters (validated; defaults filled in).",
    )

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        credit_assigner(name)
        return name

    @field_validator("params")
    @classmethod
    def _valid_params(cls, params: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "name" not in info.data:  # the name was refused already; that error says enough
            return params
        return resolve_params(info.data["name"], params).model_dump()

    def resolved(self) -> AssignerParams:
        """The parameters as the assigner's typed model."""
        return resolve_params(self.name, self.params)

    @property
    def needs(self) -> frozenset[Need]:
        """What the assigner needs (groups, state keys, per-step rewards)."""
        return credit_assigner(self.name).needs


class SamplerConfig(_Section):
    """Which credited episodes (or steps) an update trains on."""

    name: str = Field(default="aaw", description=f"A registered sampler: {sorted(SAMPLERS)}.")
    alpha: float = Field(default=1.0, ge=0.0, description="AAW sharpness: p_i proportional to |A_i|^alpha.")
    replacement: bool = Field(default=True, description="Draw with replacement (items may repeat) or distinct items.")
    samples_per_update: Annotated[int, Field(ge=1)] | Literal["all"] | None = Field(
        default=None,
        description=(
            "Draws per update; None: as many as there are items to draw from; 'all': no draw, every item of the "
            "rollout (every decision with unit 'step') trains once with its own advantage."
        ),
    )
    unit: SampleUnit = Field(
        default="episode",
        description="Draw whole (episode, agent) trajectories (all their steps train) or single steps.",
    )
    importance_correction: bool = Field(
        default=False,
        description=(
            "AAW only: multiply each drawn item's advantage by 1 / (N p_i), N the items offered, which makes the "
            "update an unbiased estimate of the uniform one (plain AAW reweights it: expected weight "
            "sign(A)|A|^(1+alpha)); needs replacement."
        ),
    )

    refill_zero_variance: bool = Field(
        default=False,
        description=(
            "DAPO's dynamic sampling: drop the groups whose credit is 0 on every step (equal returns) and play new "
            "groups until the update has rollout.groups_per_update groups with signal, or max_refill_rounds extra "
            "rounds were played (training/dynamic_sampling.py)."
        ),
    )
    max_refill_rounds: int = Field(
        default=4, ge=1, description="The most extra rounds of groups_per_update groups one update may play."
    )

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        sampler(name)
        return name

    @model_validator(mode="after")
    def _alpha_used(self) -> SamplerConfig:
        if self.alpha != 1.0 and not sampler(self.name).uses_alpha:
            raise ValueError(f"alpha={self.alpha} has no effect on sampler {self.name!r}; only 'aaw' uses it")
        if self.importance_correction and not sampler(self.name).uses_alpha:
            raise ValueError(f"importance_correction reweights AAW's draws; sampler {self.name!r} draws uniformly")
        if self.importance_correction and self.samples_per_update == "all":
            raise ValueError(
                "importance_correction reweights a draw by 1 / (N p_i); samples_per_update 'all' draws nothing "
                "(every item trains once, uniformly): leave importance_correction off"
            )
        if self.importance_correction and not self.replacement:
            raise ValueError(
                "importance_correction needs replacement: true (1 / (N p_i) is the exact correction only for "
                "independent draws)"
            )
        if sampler(self.name).uses_alpha:
            if self.alpha == 0.0:
                raise ValueError(
                    "sampler 'aaw' with alpha 0 draws every item with A != 0 equally likely: that is sampler "
                    "'uniform-nonzero'; use it by that name (or an alpha above 0)"
                )
            if not self.replacement and self.samples_per_update is None:
                raise ValueError(
                    "sampler 'aaw' without replacement and without samples_per_update draws every item with A != 0 "
                    "exactly once, whatever |A|: that is sampler 'uniform-nonzero' drawing them all; set "
                    "samples_per_update below the number of items, or replacement: true"
                )
        return self


class LossConfig(_Section):
    """The policy loss: ratio level and clipping, KL to a reference, entropy bonus, aggregation."""

    name: str = Field(default="ppo-clip", description=f"A registered policy loss: {sorted(LOSSES)}.")
    clip_eps_low: float | None = Field(
        default=None, gt=0.0, lt=1.0, description="Ratio clipped below at 1 - eps; None: the loss's default."
    )
    clip_eps_high: float | None = Field(
        default=None, gt=0.0, description="Ratio clipped above at 1 + eps; None: the loss's default."
    )
    kl_beta: float = Field(
        default=0.0,
        ge=0.0,
        description="Weight of the k3 KL to a reference (LoRA: adapter disabled; full fine-tune: frozen copy).",
    )
    entropy_coef: float = Field(default=0.0, ge=0.0, description="Weight of the entropy bonus (keeps exploration).")
    entropy_scope: Literal["sampled", "rollout"] = Field(
        default="sampled",
        description=(
            "Steps the entropy bonus covers: the sampled ones (inside the policy loss), or every trained step of "
            "the rollout once, as a term of its own, so that it still acts when every group has equal returns "
            "and the sampler draws nothing."
        ),
    )
    aggregation: Aggregation = Field(
        default="token-mean",
        description=(
            "'token-mean' over the batch (DAPO), 'sequence-mean' (GRPO), 'constant' (Dr.GRPO). Left unset, a loss or "
            "credit assigner whose paper prescribes one gets it (gspo: sequence-mean, dr-grpo: constant)."
        ),
    )
    constant_normalizer: int | None = Field(
        default=None, ge=1, description="Length of the 'constant' aggregation; None: rollout.lap.max_tokens."
    )
    old_logprobs: Literal["behaviour", "recompute", "first-pass"] = Field(
        default="behaviour",
        description=(
            "pi_old of the ratio: the log-probabilities recorded by the rollout engine, or recomputed by the "
            "trainer's forward pass before the update (removes engine/trainer numeric mismatch; one more forward), "
            "or 'first-pass': the recomputed values without the extra forward, taken (detached) from the first "
            "optimizer step's own forward, where the weights have not moved (ratio exactly 1; samples of later "
            "steps of the first epoch are recomputed up front; one process, no dropout)."
        ),
    )

    tis_cap: float | None = Field(
        default=2.0,
        ge=1.0,
        description=(
            "Truncated importance sampling against the sampler-trainer mismatch: each token's policy term is "
            "multiplied by min(pi_trainer_old / pi_sampler, tis_cap), pi_sampler the log-probability the rollout "
            "engine reported for the token and pi_trainer_old the trainer's own at the rollout temperature (no "
            "gradient). It applies where the rollout's log-probabilities are not the trainer's numerics (a vLLM "
            "engine, an HF sampler outside float32); where the sampler is the trained model in float32 the "
            "weights are 1 by construction and nothing is applied; asynchronous rollouts keep their own "
            "correction. 'off' (or null): no weight (the sampler-trainer KL is still logged)."
        ),
    )

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        loss_spec(name)
        return name

    @field_validator("tis_cap", mode="before")
    @classmethod
    def _tis_off(cls, value: Any) -> Any:
        # YAML reads a bare `off` as False: both spellings mean no truncated importance sampling.
        if value is False or (isinstance(value, str) and value.strip().lower() in ("off", "none", "null")):
            return None
        return value

    def options(self, max_tokens: int) -> dict[str, Any]:
        """Keyword arguments of :class:`training.losses.LossSettings` (defaults of the loss resolved).

        Args:
            max_tokens: The longest answer (``rollout.lap.max_tokens``): the ``constant`` aggregation's
                length when ``constant_normalizer`` is unset.

        Example:
            >>> LossConfig(name="clip-higher").options(max_tokens=64)["clip_eps_high"]
            0.28
        """
        spec = loss_spec(self.name)
        return {
            "ratio_level": spec.ratio_level,
            "clip_eps_low": spec.clip_eps_low if self.clip_eps_low is None else self.clip_eps_low,
            "clip_eps_high": spec.clip_eps_high if self.clip_eps_high is None else self.clip_eps_high,
            "aggregation": self.aggregation,
            "constant_normalizer": float(self.constant_normalizer or max_tokens),
            "kl_beta": self.kl_beta,
            "entropy_coef": self.entropy_coef,
            "clip_normalization": spec.clip_normalization,
            "tis_cap": self.tis_cap,
        }


class OptimConfig(_Section):
    """Optimizer, learning-rate schedule, gradient clipping and batching."""

    lr: float = Field(default=1e-5, gt=0.0, description="Peak learning rate (AdamW).")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")
    schedule: Schedule = Field(default="constant", description="Learning-rate schedule after warm-up.")
    warmup_steps: int = Field(default=0, ge=0, description="Optimizer steps of linear warm-up.")
    min_lr_ratio: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Final lr / peak lr of the linear and cosine schedules."
    )
    grad_clip: float | None = Field(default=1.0, gt=0.0, description="Max global gradient norm; None: no clipping.")
    micro_batch_size: int = Field(default=8, ge=1, description="Samples (steps) per forward/backward pass.")
    grad_accumulation: int | None = Field(
        default=None,
        ge=1,
        description="Micro-batches per optimizer step; None: one optimizer step over all of an update's samples.",
    )
    epochs: int = Field(
        default=1, ge=1, description="Passes over an update's samples (ratios leave 1 after the first)."
    )
    sort_by_length: bool = Field(
        default=True,
        description=(
            "Cut each optimizer step's samples into micro-batches of similar length (less padding in the forward "
            "passes; the same samples and loss normalisation per step); False: micro-batches in sampled order."
        ),
    )
    target_kl: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "End an update's optimizer steps once the approximate KL between the sampling policy and the current "
            "one exceeds this (PPO's early stop; the first step always happens); None: never."
        ),
    )


class TinyModelOptions(_Section):
    """Shape of a model built on the spot for ``model.spec: tiny`` (:func:`backends.tiny.build_tiny_model`)."""

    preset: Literal["0.15m", "4m"] = Field(default="0.15m", description="Size preset; the fields below override it.")
    vocab_size: int | None = Field(default=None, ge=64, description="Target vocabulary of the trained tokenizer.")
    hidden_size: int | None = Field(default=None, ge=8, description="Width of the residual stream.")
    layers: int | None = Field(default=None, ge=1, description="Transformer blocks.")
    heads: int | None = Field(default=None, ge=1, description="Attention heads (must divide hidden_size).")
    intermediate_size: int | None = Field(default=None, ge=8, description="Width of the MLP.")
    tokenizer_corpus: Literal["game", "prose"] = Field(
        default="game",
        description=(
            "Text the tokenizer is trained on: 'game' (backends.tiny.game_corpus) or 'prose' (the same without "
            "board lines, so that every board cell stays its own token)."
        ),
    )


class ModelConfig(_Section):
    """The model being trained and how (LoRA adapter or full fine-tuning)."""

    spec: str = Field(description="Local model spec: 'hf:PATH_OR_ID', 'vllm:PATH', 'smollm2' or 'tiny'.")
    finetune: Literal["lora", "full"] = Field(default="lora", description="Train a LoRA adapter or every weight.")
    lora_r: int = Field(default=8, ge=1, description="LoRA rank.")
    lora_alpha: float = Field(default=16.0, gt=0.0, description="LoRA scaling numerator (scale = alpha / r).")
    lora_dropout: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Dropout on the LoRA input; SFT only: RL training refuses > 0 (the first ratio would not be 1).",
    )
    lora_target_modules: list[str] | Literal["all-linear"] = Field(
        default="all-linear", description="Modules that get an adapter, or 'all-linear'."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description=(
            "Weights' dtype; 'auto': the device's fast one, detected (backends.hf_dtype.auto_dtype): bfloat16 on "
            "CUDA (float16 without bfloat16 support), on a CPU with AMX-BF16 and on one with AVX512-BF16 whose "
            "bfloat16 matmuls are measured at least 1.5x as fast as float32's, float32 on other CPUs; the environment "
            "variable TSMG_AUTO_DTYPE pins it (e.g. float32, to reproduce figures measured in float32)."
        ),
    )
    tiny: TinyModelOptions = Field(
        default_factory=TinyModelOptions,
        description="Shape of the model built from scratch for spec 'tiny' (see backends.tiny).",
    )
    vllm_options: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Keyword arguments of backends.vllm_engine.VLLMBackend for the rollout engine of spec 'vllm:PATH' "
            "(e.g. gpu_memory_utilization, max_model_len, enforce_eager); they override the trainer's defaults."
        ),
    )

    @field_validator("spec")
    @classmethod
    def _trainable(cls, spec: str) -> str:
        if not spec.strip():
            raise ValueError("model spec is empty; use 'hf:PATH_OR_ID', 'vllm:PATH', 'smollm2' or 'tiny'")
        if not parse_model_spec(spec).local_weights:
            raise ValueError(
                f"cannot train {spec!r}: training needs the weights and token log-probabilities of a local model "
                "(use 'hf:PATH_OR_ID', 'vllm:PATH', 'smollm2' or 'tiny')"
            )
        return spec

    @model_validator(mode="after")
    def _lora_fields_need_lora(self) -> ModelConfig:
        changed = sorted(
            name
            for name, field in type(self).model_fields.items()
            if name.startswith("lora_") and getattr(self, name) != field.get_default(call_default_factory=True)
        )
        if self.finetune == "full" and changed:
            raise ValueError(f"{changed} only apply to finetune='lora' (finetune is 'full')")
        if self.vllm_options and parse_model_spec(self.spec).kind != "vllm":
            raise ValueError(f"vllm_options only apply to spec 'vllm:PATH' (spec is {self.spec!r})")
        return self


class RunConfig(_Section):
    """Where the run writes, how long it lasts, when it evaluates and checkpoints."""

    out_dir: str = Field(default="runs/train", description="Run folder: metrics.jsonl, checkpoints, plots.")
    seed: int = Field(default=0, description="Seeds every generator of the run (rollout seeds, sampler, init).")
    updates: int = Field(default=100, ge=1, description="Policy updates to perform (at most, with run.episodes).")
    episodes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Training-episode budget: stop after the update that brings the episodes played to this many (None: "
            "run.updates alone). A linear or cosine schedule then decays over these episodes, not over run.updates, "
            "so set-ups that play different numbers of episodes per update (RTPO, trees) share one budget."
        ),
    )
    eval_every: int = Field(default=0, ge=0, description="Evaluate every this many updates (0: never).")
    eval_episodes: int = Field(default=50, ge=1, description="Held-out episodes per evaluation.")
    eval_seed_start: int = Field(
        default=1_000_000, ge=0, description="Held-out seeds are eval_seed_start, +1, ...; keep training seeds below."
    )
    eval_seeds: list[int] | None = Field(
        default=None, description="Explicit held-out seeds (override eval_episodes / eval_seed_start)."
    )
    checkpoint_every: int = Field(
        default=0, ge=0, description="Checkpoint every this many updates (0: only at the end)."
    )
    keep_last: int = Field(default=3, ge=1, description="Checkpoints kept (older ones are deleted).")
    eval_temperature: float | None = Field(
        default=0.0, ge=0.0, description="Sampling temperature of evaluations (0: greedy; None: rollout.lap's)."
    )
    eval_at_start: bool = Field(
        default=True, description="Also evaluate before the first update (logged at step 0), when eval_every > 0."
    )
    max_seconds: float | None = Field(
        default=None, gt=0.0, description="Stop after the update during which this much wall time has passed."
    )
    max_cpu_seconds: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "Stop after the update during which the training process has used this much CPU time (every thread, "
            "user + system, evaluations included, a resumed run's earlier sessions counted; not an asynchronous "
            "rollout worker's): budgets that stay equal on a busy machine, where wall time does not."
        ),
    )
    episodes_every: int = Field(
        default=0, ge=0, description="Append every k-th update's training episodes to episodes.jsonl (0: never)."
    )
    tensorboard: bool = Field(
        default=True, description="Also write TensorBoard events (when tensorboard is installed)."
    )
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads (None: torch's default).")

    def resolved_eval_seeds(self) -> list[int]:
        """The held-out seeds evaluations use."""
        if self.eval_seeds is not None:
            return list(self.eval_seeds)
        return list(range(self.eval_seed_start, self.eval_seed_start + self.eval_episodes))


class DistillConfig(_Section):
    """On-policy distillation (OPD): a teacher scores the student's own tokens.

    Every token the student wrote gets lambda x (log pi_teacher - log pi_student) added to its
    advantage (reverse KL, per token); with credit ``opd`` that term is the whole advantage.
    """

    teacher: str | None = Field(
        default=None,
        description=(
            "The teacher: a local model spec ('hf:PATH', 'smollm2', 'vllm:PATH') or a trained run's folder "
            "('hf:runs/NAME' uses runs/NAME/final); it must share the student's tokenizer. None: no distillation."
        ),
    )
    weight: float = Field(default=1.0, gt=0.0, description="lambda: A = A_RL + lambda A_OPD.")
    turn_balanced: bool = Field(
        default=False,
        description=(
            "Scale each turn's OPD term so that every turn carries the same total weight in the loss under "
            "loss.aggregation, whatever its length (token-mean: by mean tokens per turn / its tokens)."
        ),
    )

    @field_validator("teacher")
    @classmethod
    def _local(cls, spec: str | None) -> str | None:
        if spec is not None and parse_model_spec(spec).kind == "tiny":
            raise ValueError("distill.teacher 'tiny' would be a model built from scratch: name a trained one")
        if spec is not None and not parse_model_spec(spec).local_weights:
            raise ValueError(
                f"distill.teacher {spec!r} must be a local model whose log-probabilities can be computed "
                "('hf:PATH', 'smollm2', 'vllm:PATH', or a trained run's folder as 'hf:runs/NAME')"
            )
        return spec


class LoopConfig(_Section):
    """Whether rollouts and updates alternate or overlap (:mod:`training.async_loop`)."""

    mode: Literal["sync", "async"] = Field(
        default="sync",
        description=(
            "'sync': each update's episodes are played with the weights of the update before; 'async': a rollout "
            "worker plays ahead with older weights while the trainer updates (at most max_staleness versions old)."
        ),
    )
    max_staleness: int = Field(
        default=1,
        description=(
            "eta: the episodes of update u are played by policy version u - 1 - eta (0: synchronous results; "
            "1: the worker plays the next update's episodes during this update)."
        ),
    )
    # Why so wide: one update moves many tokens past +-20 % (several optimizer steps per update); with
    # [0.8, 1.2] a third to a half of the stale tokens of the random-maps set-up were masked and
    # learning slowed to a crawl, while [0.5, 2] masks what moved more than twofold.
    trust_eps_low: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="Off-policy tokens with pi_trainer / pi_engine < 1 - this are masked."
    )
    trust_eps_high: float = Field(
        default=1.0, gt=0.0, description="Off-policy tokens with pi_trainer / pi_engine > 1 + this are masked."
    )

    @field_validator("max_staleness")
    @classmethod
    def _non_negative(cls, eta: int) -> int:
        if eta < 0:
            raise ValueError(
                f"loop.max_staleness (eta) is {eta}; it counts how many policy versions a sample may lag behind "
                "the trainer, so it must be 0 or more (0: synchronous)"
            )
        return eta

    @model_validator(mode="after")
    def _async_fields_need_async(self) -> LoopConfig:
        fields = type(self).model_fields
        changed = sorted(name for name in fields if name != "mode" and getattr(self, name) != fields[name].default)
        if self.mode == "sync" and changed:
            raise ValueError(f"loop fields {changed} only apply to loop.mode 'async' (mode is 'sync')")
        return self


#: Rollout engines that take each new policy version while training (:mod:`training.engines`): the HF
#: backend (a copy of the trained model) and vLLM's in-process engine (weights or adapter pushed).
ENGINES_TAKING_WEIGHTS = frozenset({"hf", "tiny", "smollm2", "vllm"})


class DistributedConfig(_Section):
    """How several training processes share the model (``torchrun`` / ``accelerate launch``; one process ignores it)."""

    strategy: Literal["auto", "ddp", "fsdp"] = Field(
        default="auto",
        description=(
            "'ddp': every process holds the whole model and optimizer (torch DistributedDataParallel); 'fsdp': "
            "parameters, gradients and optimizer state sharded over the processes (FSDP2 fully_shard); 'auto': "
            "fsdp when accelerate was launched with FSDP, else ddp."
        ),
    )
    fsdp_reshard_after_forward: bool = Field(
        default=True,
        description=(
            "FSDP: free each layer's gathered weights after its forward (least memory) instead of keeping them "
            "until its backward. accelerate's --fsdp_reshard_after_forward wins when it launched with FSDP."
        ),
    )
    fsdp_cpu_offload: bool = Field(
        default=False, description="FSDP: keep the shards in CPU memory between uses (GPUs only)."
    )
    timeout_s: float = Field(
        default=600.0,
        gt=0.0,
        description="How long a collective waits for the other processes before the run stops with an error.",
    )
    vllm_engine: Literal["per-process", "shared"] = Field(
        default="per-process",
        description=(
            "Rollouts on vLLM (model.spec 'vllm:PATH') with several processes: 'per-process': every process plays "
            "its share of the groups on an engine of its own, on its own GPU; 'shared': one engine in process 0 "
            "plays every group, and the new weights or adapter are pushed to it once per update."
        ),
    )


def _rtpo_as_rollout_shape(data: Any) -> Any:
    """The old spelling ``credit.name: rtpo`` as ``rollout.shape: rtpo`` with ``ms-grpo``, with a warning.

    RTPO is where episodes come from (spines, then branch groups turn by turn), not a credit
    formula: its groups are scored by the ``ms-grpo`` formula, as they always were.
    """
    credit = data.get("credit") if isinstance(data, Mapping) else None
    if not isinstance(credit, Mapping) or credit.get("name") != "rtpo":
        return data
    rollout = data.get("rollout") or {}
    if not isinstance(rollout, Mapping):
        return data
    if rollout.get("shape", "groups") not in ("groups", "rtpo"):
        raise ValueError(
            f"credit.name 'rtpo' is now rollout.shape 'rtpo', which cannot be combined with rollout.shape "
            f"{rollout['shape']!r}: choose one shape"
        )
    warnings.warn(
        "credit.name 'rtpo' (--algo rtpo) is deprecated: RTPO is a rollout shape, write rollout.shape: rtpo "
        "(its groups are scored by credit.name ms-grpo, the default)",
        FutureWarning,
        stacklevel=2,
    )
    return {**data, "credit": {**credit, "name": "ms-grpo"}, "rollout": {**rollout, "shape": "rtpo"}}


class TrainConfig(_Section):
    """A whole training run. Build it from keyword sections, a dict, or YAML (:meth:`from_yaml`)."""

    rollout: RolloutConfig = Field(description="How episodes are played.")
    model: ModelConfig = Field(description="The model being trained.")
    credit: CreditConfig = Field(default_factory=CreditConfig, description="Credit assigner.")
    sampler: SamplerConfig = Field(default_factory=SamplerConfig, description="Episode sampler.")
    loss: LossConfig = Field(default_factory=LossConfig, description="Policy loss.")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="Optimizer and batching.")
    run: RunConfig = Field(default_factory=RunConfig, description="Output, length, evaluation, checkpoints.")
    distill: DistillConfig = Field(
        default_factory=DistillConfig, description="On-policy distillation from a teacher (credit 'opd', or added)."
    )
    loop: LoopConfig = Field(default_factory=LoopConfig, description="Synchronous or asynchronous rollouts.")
    distributed: DistributedConfig = Field(
        default_factory=DistributedConfig, description="Several training processes: DDP or FSDP, timeouts."
    )

    @model_validator(mode="before")
    @classmethod
    def _method_aggregation(cls, data: Any) -> Any:
        """An unset ``loss.aggregation`` takes the one the loss's or the assigner's paper prescribes."""
        data = _rtpo_as_rollout_shape(data)  # first: the old spelling names no registered assigner
        if not isinstance(data, Mapping):
            return data
        loss, credit = data.get("loss") or {}, data.get("credit") or {}
        if not isinstance(loss, Mapping) or not isinstance(credit, Mapping) or "aggregation" in loss:
            return data
        prescribed = _prescribed_aggregations(loss.get("name", "ppo-clip"), credit.get("name", "ms-grpo"))
        if not prescribed:
            return data
        return {**data, "loss": {**loss, "aggregation": prescribed[0][1]}}

    @model_validator(mode="before")
    @classmethod
    def _exact_influence_by_default(cls, data: Any) -> Any:
        """An assigner that reads the game's own influence graphs gets the ``exact`` annotator listed by default."""
        if not isinstance(data, Mapping):
            return data
        credit, rollout = data.get("credit") or {}, data.get("rollout")
        if not isinstance(credit, Mapping) or not isinstance(rollout, Mapping):
            return data
        spec = CREDIT_ASSIGNERS.get(credit.get("name", "ms-grpo"))
        params = credit.get("params") or {}
        if spec is None or "influence" not in spec.needs or not isinstance(params, Mapping):
            return data
        annotators = list(rollout.get("annotators") or [])
        if params.get("graph", EXACT) != EXACT or EXACT in annotators:
            return data
        return {**data, "rollout": {**rollout, "annotators": [*annotators, EXACT]}}

    @model_validator(mode="after")
    def _first_pass_is_on_policy(self) -> TrainConfig:
        """``loss.old_logprobs: first-pass`` only where the first optimizer step's forward is pi_old exactly."""
        if self.loss.old_logprobs != "first-pass":
            return self
        spec = loss_spec(self.loss.name)
        reasons = []
        if spec.ratio_level == "sequence" or spec.clip_normalization:
            reasons.append(f"loss {self.loss.name!r} needs the whole step's pi_old before its first forward")
        if self.distill.teacher is not None:
            reasons.append("distill.teacher needs pi_old before the first optimizer step")
        if self.loop.mode == "async":
            reasons.append("asynchronous rollouts were sampled by older weights")
        if reasons:
            raise ValueError(
                "loss.old_logprobs 'first-pass' takes pi_old from the first optimizer step's own forward, which is "
                "pi_old only when nothing else differs: " + "; ".join(reasons) + " (use 'recompute')"
            )
        return self

    @model_validator(mode="after")
    def _influence_annotated(self) -> TrainConfig:
        if "influence" not in self.credit.needs:
            return self
        graph = self.credit.params.get("graph", EXACT)
        if graph not in self.rollout.annotators:
            raise ValueError(
                f"credit assigner {self.credit.name!r} routes advantage along each episode's influence graph "
                f"{graph!r}, and no annotator in rollout.annotators {self.rollout.annotators} makes it: list "
                f"{graph!r} there (registered annotators: {sorted(ANNOTATORS)})"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _async_engine_takes_weights(cls, data: Any) -> Any:
        # Before the sections are validated, so that the reason names asynchronous training rather
        # than the model section's generic refusal of a model without local weights.
        loop, model = (data.get(key) if isinstance(data, Mapping) else None for key in ("loop", "model"))
        mode = loop.get("mode") if isinstance(loop, Mapping) else getattr(loop, "mode", None)
        spec = model.get("spec") if isinstance(model, Mapping) else getattr(model, "spec", None)
        if mode == "async" and isinstance(spec, str):
            try:
                kind = parse_model_spec(spec).kind
            except ValueError:
                return data  # the model section says what is wrong with the spec
            if kind not in ENGINES_TAKING_WEIGHTS:
                raise ValueError(
                    f"loop.mode 'async' pushes every new policy version into the rollout engine, and {spec!r} plays "
                    f"on an engine that cannot take new weights; use a model spec whose engine can "
                    f"({', '.join(sorted(ENGINES_TAKING_WEIGHTS))})"
                )
        return data

    @model_validator(mode="after")
    def _no_lora_dropout(self) -> TrainConfig:
        # pi_old is scored in eval mode (or on the merged copy) and the loss's forward runs in train mode, so
        # dropout would make the first ratio differ from 1 and bias every clip; SFT has no ratio and keeps it.
        if self.model.lora_dropout > 0:
            raise ValueError(
                f"model.lora_dropout {self.model.lora_dropout} makes the policy ratio differ from 1 before any "
                "update (pi_old is scored without dropout): set model.lora_dropout 0 for RL training"
            )
        return self

    @model_validator(mode="after")
    def _merged_adapter_applies(self) -> TrainConfig:
        if self.rollout.merged_adapter != "on":
            return self
        if self.model.finetune != "lora":
            raise ValueError("rollout.merged_adapter 'on' folds a LoRA adapter into a copy: it needs finetune 'lora'")
        if parse_model_spec(self.model.spec).kind == "vllm":
            raise ValueError(
                "rollout.merged_adapter 'on' applies to rollouts on the HF model; 'vllm:PATH' plays on vLLM"
            )
        if self.distributed.strategy == "fsdp":
            raise ValueError("rollout.merged_adapter 'on' needs whole weights in each process; FSDP shards them")
        return self

    @model_validator(mode="after")
    def _groups_available(self) -> TrainConfig:
        if "groups" in self.credit.needs and self.rollout.group_size < 2:
            raise ValueError(
                f"credit assigner {self.credit.name!r} compares the episodes of a group and needs "
                f"rollout.group_size >= 2 (got {self.rollout.group_size}); a group of one gets no signal"
            )
        for method, aggregation in _prescribed_aggregations(self.loss.name, self.credit.name):
            if self.loss.aggregation != aggregation:
                warnings.warn(
                    f"{method} prescribes loss.aggregation {aggregation!r}, but this configuration sets "
                    f"{self.loss.aggregation!r}: the run is not {method} as its paper defines it",
                    UserWarning,
                    stacklevel=2,
                )
        return self

    @model_validator(mode="after")
    def _teacher_given(self) -> TrainConfig:
        if "teacher" in self.credit.needs and self.distill.teacher is None:
            raise ValueError(
                f"credit assigner {self.credit.name!r} distils from a teacher: set distill.teacher to a local model "
                "spec ('hf:PATH', 'smollm2') or a trained run's folder ('hf:runs/NAME')"
            )
        if self.distill.teacher is None and self.distill != DistillConfig():
            raise ValueError("distill.weight and distill.turn_balanced only apply with a distill.teacher")
        if self.credit.name == "opd" and self.sampler.name != "uniform":
            raise ValueError(
                f"credit assigner 'opd' gives every step an RL advantage of 0 (the teacher's term is added per token "
                f"later), so sampler {self.sampler.name!r}, which draws by A, would draw nothing: use sampler 'uniform'"
            )
        return self

    @model_validator(mode="after")
    def _rollout_shape_fits(self) -> TrainConfig:
        name, shape = self.credit.name, self.rollout.shape
        if "tree" in self.credit.needs and shape != "tree":
            raise ValueError(f"credit assigner {name!r} normalises within trees and needs rollout.shape 'tree'")
        if shape == "rtpo" and "groups" not in self.credit.needs:
            raise ValueError(
                f"rollout.shape 'rtpo' normalises each turn's branches as a group, and credit assigner {name!r} "
                "compares no groups: use a group assigner (ms-grpo, rloo, dr-grpo, ...)"
            )
        if self.rollout.seats_each_group and (shape == "rtpo" or self.loop.mode == "async"):
            raise ValueError(
                "a rotating seat or an opponent pool seats every group on its own, which "
                f"{'rtpo' if shape == 'rtpo' else 'asynchronous training'} does not do yet: use the synchronous loop "
                "with rollout.shape 'groups' and a group credit assigner"
            )
        if shape == "rtpo" and self.loop.mode == "async":
            raise ValueError(
                "rtpo updates each turn against a continuation played by the already-updated policy, which an "
                "asynchronous worker playing with older weights cannot give; use loop.mode 'sync'"
            )
        return self

    @model_validator(mode="after")
    def _refill_fits(self) -> TrainConfig:
        sampling = self.sampler
        if sampling.max_refill_rounds != type(sampling).model_fields["max_refill_rounds"].default and not (
            sampling.refill_zero_variance
        ):
            raise ValueError("sampler.max_refill_rounds only applies with sampler.refill_zero_variance: true")
        if not sampling.refill_zero_variance:
            return self
        credit, rollout = self.credit.name, self.rollout
        if rollout.shape == "rtpo":
            raise ValueError(
                "sampler.refill_zero_variance replaces groups whose episodes carry no signal, and rollout.shape "
                "'rtpo' plays its own reverse-turn groups: use rollout.shape 'groups' or leave refill_zero_variance off"
            )
        if "groups" not in self.credit.needs:
            raise ValueError(
                f"sampler.refill_zero_variance replaces groups whose episodes carry no signal, and credit assigner "
                f"{credit!r} compares no groups: use "
                "a group assigner (ms-grpo, rloo, dr-grpo, gigpo, ...) or leave refill_zero_variance off"
            )
        if rollout.shape != "groups" or rollout.seats_each_group or self.loop.mode != "sync":
            raise ValueError(
                "sampler.refill_zero_variance plays new independent groups with the current weights, which needs "
                "rollout.shape 'groups', the synchronous loop and no seat chosen group by group (a rotating seat, "
                "an opponent pool)"
            )
        return self

    def loss_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`training.losses.LossSettings` (:meth:`LossConfig.options` of this run).

        Example:
            >>> config = TrainConfig(rollout={"game_id": "g"}, model={"spec": "tiny"}, loss={"name": "clip-higher"})
            >>> config.loss_options()["clip_eps_high"]
            0.28
        """
        return self.loss.options(self.rollout.lap.max_tokens)

    # ------------------------------------------------------------------ YAML
    @classmethod
    def from_yaml_text(cls, text: str) -> TrainConfig:
        """Build from YAML text (a mapping of sections)."""
        data = yaml.safe_load(text)
        if not isinstance(data, Mapping):
            raise ValueError("a training config must be a YAML mapping of sections (rollout, model, credit, ...)")
        return cls.model_validate(dict(data))

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainConfig:
        """Build from a YAML file."""
        return cls.from_yaml_text(Path(path).read_text(encoding="utf-8"))

    def to_yaml(self, path: str | Path | None = None) -> str:
        """The config as YAML (every field, defaults included); also written to ``path`` if given."""
        text = yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


def _prescribed_aggregations(loss_name: str, credit_name: str) -> list[tuple[str, Aggregation]]:
    """(method, aggregation) the loss's and the assigner's papers prescribe, the loss's first (it wins)."""
    prescribed: list[tuple[str, Aggregation]] = []
    loss = LOSSES[loss_name].aggregation if loss_name in LOSSES else None
    credit = CREDIT_ASSIGNERS[credit_name].aggregation if credit_name in CREDIT_ASSIGNERS else None
    if loss is not None:
        prescribed.append((f"loss {loss_name!r}", loss))
    if credit is not None:
        prescribed.append((f"credit assigner {credit_name!r}", credit))
    return prescribed


# --------------------------------------------------------------------------- against a game
class IncompatibleGameError(ValueError):
    """The configuration needs something the game does not provide; the message says what and why."""


@dataclass(frozen=True)
class GameCapabilities:
    """What a game provides to credit assigners, as far as can be told from the game object.

    Attributes:
        agents: The game's agents.
        state_keys: Whether ``state_key`` gives a usable (non-None, hashable) key.
        state_keys_reason: Why not, when it does not.
        per_step_rewards: Whether rewards arrive before the last step (None: could not tell).
        per_step_rewards_reason: How that was decided.
        next_state_keys: Whether ``state_key`` also names the state a finished episode ended in
            (what the last step led to), besides the states where agents decide.
        next_state_keys_reason: Why not, when it does not.
        fork_mode: How the game forks an episode in progress (:attr:`tsmg.core.Game.fork_mode`).
        influence: Whether the game keeps each episode's exact influence graph
            (:attr:`tsmg.core.Game.provides_influence`).
    """

    agents: tuple[str, ...]
    state_keys: bool
    state_keys_reason: str
    per_step_rewards: bool | None
    per_step_rewards_reason: str
    next_state_keys: bool = False
    next_state_keys_reason: str = "not probed"
    fork_mode: str = "none"
    influence: bool = False


def _probe_state_keys(game: Game, seed: int) -> tuple[bool, str]:
    declared = getattr(game, "provides_state_key", None)
    if declared is not None:
        return bool(declared), f"the game declares provides_state_key = {declared}"
    game.reset(seed=seed)
    for agent in game.active_agents:
        try:
            key = game.state_key(agent)
        except Exception as error:  # any failure means "not usable", and the reason says which
            return False, f"state_key({agent!r}) raised {error!r}"
        if key is None:
            return False, f"state_key({agent!r}) returned None"
        try:
            hash(key)
        except TypeError:
            return False, f"state_key({agent!r}) returned an unhashable {type(key).__name__}"
    return True, "state_key gives a hashable key"


def _random_actions(game: Game, rng: np.random.Generator) -> dict[str, str] | None:
    """A uniformly drawn legal action for every agent to move (None: the game does not list them)."""
    actions: dict[str, str] = {}
    for agent in game.active_agents:
        legal = game.legal_actions(agent)
        if not legal:
            return None
        actions[agent] = legal[int(rng.integers(len(legal)))]
    return actions


def _probe_step_rewards(game: Game, seed: int, episodes: int, max_rounds: int) -> tuple[bool | None, str]:
    declared = getattr(game, "per_step_rewards", None)
    if declared is not None:
        return bool(declared), f"the game declares per_step_rewards = {declared}"
    rng = np.random.default_rng(seed)
    for episode in range(episodes):
        game.reset(seed=seed + episode)
        for _ in range(max_rounds):
            if game.done:
                break
            actions = _random_actions(game, rng)
            if actions is None:
                return None, "the game does not enumerate its legal actions, so random play cannot probe it"
            result = game.step(actions)
            if not result.done and any(reward != 0 for reward in result.rewards.values()):
                return True, "random play received a reward before the episode ended"
    return False, f"in {episodes} random-play episodes every reward came at the end (or none came)"


def _probe_final_state_keys(game: Game, seed: int, max_rounds: int) -> tuple[bool, str]:
    """Whether a finished episode's state has a usable key (PGPO and GRAFT follow the last step there)."""
    declared = getattr(game, "provides_state_key", None)
    if declared is not None:
        return bool(declared), f"the game declares provides_state_key = {declared}"
    rng = np.random.default_rng(seed)
    game.reset(seed=seed)
    for _ in range(max_rounds):
        if game.done:
            break
        actions = _random_actions(game, rng)
        if actions is None:
            return False, "the game does not enumerate its legal actions, so random play cannot reach an end"
        game.step(actions)
    for agent in game.agents:
        try:
            key = game.state_key(agent)
            hash(key)
        except Exception as error:  # any failure means "not usable", and the reason says which
            return False, f"state_key({agent!r}) of a finished episode raised {error!r}"
        if key is None:
            return False, f"state_key({agent!r}) of a finished episode returned None"
    return True, "state_key names the state a finished episode ended in"


def game_capabilities(
    game: Game, *, seed: int = 0, probe_episodes: int = 16, max_rounds: int = 200, next_state_keys: bool = True
) -> GameCapabilities:
    """Find out what ``game`` provides: its declarations first, else short probes (which reset the game).

    A game may declare ``provides_state_key`` and ``per_step_rewards`` (bools) to skip the probes.
    ``next_state_keys=False`` skips playing an episode to its end to probe the key of a finished
    one (reported as not probed).
    """
    state_keys, state_reason = _probe_state_keys(game, seed)
    step_rewards, reward_reason = _probe_step_rewards(game, seed, probe_episodes, max_rounds)
    next_keys, next_reason = False, "not probed"
    if next_state_keys:
        next_keys, next_reason = (
            _probe_final_state_keys(game, seed, max_rounds) if state_keys else (False, state_reason)
        )
    return GameCapabilities(
        tuple(game.agents),
        state_keys,
        state_reason,
        step_rewards,
        reward_reason,
        next_keys,
        next_reason,
        fork_mode=game.fork_mode,
        influence=bool(game.provides_influence),
    )


def incompatibilities(config: TrainConfig, capabilities: GameCapabilities) -> list[str]:
    """Every reason why ``config`` cannot train on a game with these capabilities (empty: it can)."""
    reasons: list[str] = []
    name, needs = config.credit.name, config.credit.needs
    game_id = config.rollout.game_id
    if "state_keys" in needs and not capabilities.state_keys:
        reasons.append(
            f"credit assigner {name!r} groups steps by state key, but {game_id} has none usable "
            f"({capabilities.state_keys_reason})"
        )
    if "next_state_keys" in needs and capabilities.state_keys and not capabilities.next_state_keys:
        reasons.append(
            f"credit assigner {name!r} follows each step to the state it led to, but {game_id} names no "
            f"state once an episode is over ({capabilities.next_state_keys_reason})"
        )
    if "per_step_rewards" in needs and not capabilities.per_step_rewards:
        reasons.append(
            f"credit assigner {name!r} needs rewards before the last step, but for {game_id}: "
            f"{capabilities.per_step_rewards_reason} (a game may declare per_step_rewards = True)"
        )
    unknown_seats = sorted(set(config.rollout.train_agents or ()) - set(capabilities.agents))
    if unknown_seats:
        reasons.append(f"rollout.train_agents {unknown_seats} are not agents of {game_id} {list(capabilities.agents)}")
    if config.rollout.opponent is not None and len(capabilities.agents) < 2:
        reasons.append(f"rollout.opponent is set but {game_id} has a single agent")
    reasons.extend(_aaw_identical(config, capabilities))
    if "influence" in needs and config.credit.params.get("graph", EXACT) == EXACT and not capabilities.influence:
        reasons.append(
            f"credit assigner {name!r} routes advantage along each episode's influence graph, and {game_id} keeps "
            "no influence record of its own (tsmg.core.Game.provides_influence): list an influence annotator in "
            f"rollout.annotators and name it in credit.params.graph (registered annotators: {sorted(ANNOTATORS)})"
        )
    forking = {"tree": "tree rollouts (rollout.shape: tree)", "rtpo": "RTPO's branches (rollout.shape: rtpo)"}.get(
        config.rollout.shape
    )
    if "fork" in needs:
        forking = f"credit assigner {name!r}"
    if forking and capabilities.fork_mode == "none":
        reasons.append(
            f"{forking} fork episodes in progress, but {game_id} cannot fork (its fork_mode is 'none': it neither "
            "copies a snapshot of its state nor replays one from a seed; see tsmg.core.Game.fork)"
        )
    if len(capabilities.agents) < 2:
        single = f"{game_id} has a single agent ({capabilities.agents[0] if capabilities.agents else 'none'})"
        if config.rollout.self_play:
            reasons.append(f"self-play needs a game of two or more seats, but {single}")
        if config.rollout.opponent_pool is not None:
            reasons.append(f"an opponent pool plays the seats the model does not, but {single}")
        if "multi_agent" in needs:
            reasons.append(f"credit assigner {name!r} assigns self-play credit per seat, but {single}")
    return reasons


def _aaw_identical(config: TrainConfig, capabilities: GameCapabilities) -> list[str]:
    """AAW without replacement asked for at least as many draws as there are trajectories draws them all."""
    sampling = config.sampler
    if not sampler(sampling.name).uses_alpha or sampling.replacement or sampling.unit != "episode":
        return []
    seats = len(config.rollout.train_agents or capabilities.agents) if config.rollout.opponent is None else 1
    trajectories = config.rollout.groups_per_update * config.rollout.group_size * seats
    count = sampling.samples_per_update
    if count is None or count == "all" or count < trajectories:
        return []
    return [
        f"sampler 'aaw' without replacement draws {sampling.samples_per_update} of at most {trajectories} "
        "trajectories per update, so it draws every one with A != 0 exactly once, whatever |A|: that is sampler "
        "'uniform-nonzero'; lower sampler.samples_per_update or set sampler.replacement: true"
    ]


def validate_against_game(config: TrainConfig, game: Game | None = None) -> GameCapabilities:
    """Refuse a configuration the game cannot serve, with every reason at once.

    Args:
        config: The training configuration.
        game: The game to check (it gets reset); None builds it from ``config.rollout`` with
            :func:`tsmg.make`, which also checks the game id and options.

    Returns:
        The game's capabilities, when the configuration fits.

    Raises:
        IncompatibleGameError: The reasons the configuration cannot train on the game.
    """
    probe_next = "next_state_keys" in config.credit.needs
    if game is not None:
        capabilities = game_capabilities(game, seed=config.run.seed, next_state_keys=probe_next)
    else:
        from tsmg import make

        game = make(config.rollout.game_id, **config.rollout.game_options)
        try:
            capabilities = game_capabilities(game, seed=config.run.seed, next_state_keys=probe_next)
        finally:
            game.close()
    reasons = incompatibilities(config, capabilities)
    if reasons:
        raise IncompatibleGameError("; ".join(reasons))
    return capabilities
