"""The sections of a training configuration, one frozen pydantic model per stage of the pipeline.

(Past 600 lines: one model per section, each field with the description that ``docs/config.md`` is
generated from, and each section with the validators that refuse what cannot work within it.)

The sections are put together by :class:`training.config.TrainConfig`, which checks what spans
sections (a group credit assigner with ``group_size`` 1, say); import them from there
(``from training.config import RolloutConfig``), their public home. Unknown keys are refused
everywhere, so a typo fails with its name (and the CLI suggests the key it was probably meant to be).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from training.advantages import SharedSteps
from training.annotators import check_annotators
from training.credit import CREDIT_ASSIGNERS, AssignerParams, Need, credit_assigner, resolve_params
from training.loss_specs import LOSSES, Aggregation, loss_spec
from training.sampling import SAMPLERS, SampleUnit, sampler
from training.schedule import Schedule
from tsmg.lap import LAPConfig, checked_regex
from tsmg.model_spec import parse_model_spec


class Section(BaseModel):
    """A section of the configuration: frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TreeConfig(Section):
    """The shape of a tree rollout (``rollout.shape: tree``; see :mod:`training.rollout.tree`).

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


class OpponentPoolConfig(Section):
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


class RolloutConfig(Section):
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
            "per seed and group_size branches per turn, the last turn first (training/rollout/rtpo.py; the game "
            "must fork)."
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


class CreditConfig(Section):
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


class SamplerConfig(Section):
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
            "rounds were played (training/rollout/dynamic_sampling.py)."
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


class LossConfig(Section):
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
    def _tis_off(cls, value: Any) -> Any:  # Any: a before-validator gets the raw input
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


class OptimConfig(Section):
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


class TinyModelOptions(Section):
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
            "Text the tokenizer is trained on: 'game' (training.tiny_corpus.game_corpus) or 'prose' (the same without "
            "board lines, so that every board cell stays its own token)."
        ),
    )


class ModelConfig(Section):
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


class WandbConfig(Section):
    """Weights & Biases logging of the metrics rows and the configuration (the ``wandb`` extra)."""

    enabled: bool = Field(
        default=False,
        description=(
            "Also log every metrics.jsonl row (same keys, same steps) and the configuration to Weights & Biases; "
            "needs wandb (pip install 'tsmg[wandb]')."
        ),
    )
    mode: Literal["offline", "online"] = Field(
        default="offline",
        description=(
            "'offline': nothing leaves the machine, the W&B run is kept under RUN/wandb (upload it later with "
            "`wandb sync RUN/wandb/offline-run-*`); 'online': streamed while training (needs `wandb login` or "
            "WANDB_API_KEY)."
        ),
    )
    project: str = Field(default="tsmg", description="W&B project the run is logged to.")
    entity: str | None = Field(default=None, description="W&B team or user (None: the logged-in user's default).")
    name: str | None = Field(default=None, description="W&B run name (None: the run folder's name).")
    group: str | None = Field(default=None, description="W&B group, to show several runs together (None: none).")
    tags: list[str] = Field(default_factory=list, description="W&B tags of the run.")


class RunConfig(Section):
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
    wandb: WandbConfig = Field(
        default_factory=WandbConfig,
        description="Weights & Biases logging (off by default; TensorBoard above needs no account).",
    )
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads (None: torch's default).")

    def resolved_eval_seeds(self) -> list[int]:
        """The held-out seeds evaluations use."""
        if self.eval_seeds is not None:
            return list(self.eval_seeds)
        return list(range(self.eval_seed_start, self.eval_seed_start + self.eval_episodes))


class DistillConfig(Section):
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


class LoopConfig(Section):
    """Whether rollouts and updates alternate or overlap (:mod:`training.rollout.async_loop`)."""

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


class DistributedConfig(Section):
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
