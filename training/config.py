"""Training configuration: one frozen pydantic model split by concern, validated when built.

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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from training.credit import CREDIT_ASSIGNERS, AssignerParams, Need, credit_assigner, resolve_params
from training.loss_specs import LOSSES, Aggregation, loss_spec
from training.sampling import SAMPLERS, SampleUnit, sampler
from training.schedule import Schedule
from tsmg.core import Game
from tsmg.lap import LAPConfig, checked_regex
from tsmg.model_spec import parse_model_spec


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RolloutConfig(_Section):
    """How episodes are played: independent groups of G episodes, each group from one seed."""

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

    @field_validator("observation_lines")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        return checked_regex(pattern, "observation_lines")


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
    samples_per_update: int | None = Field(
        default=None, ge=1, description="Draws per update; None: as many as there are items to draw from."
    )
    unit: SampleUnit = Field(
        default="episode",
        description="Draw whole (episode, agent) trajectories (all their steps train) or single steps.",
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
        description="'token-mean' over the batch (DAPO), 'sequence-mean' (GRPO), 'constant' (Dr.GRPO).",
    )
    constant_normalizer: int | None = Field(
        default=None, ge=1, description="Length of the 'constant' aggregation; None: rollout.lap.max_tokens."
    )
    old_logprobs: Literal["behaviour", "recompute"] = Field(
        default="behaviour",
        description=(
            "pi_old of the ratio: the log-probabilities recorded by the rollout engine, or recomputed by the "
            "trainer's forward pass before the update (removes engine/trainer numeric mismatch; one more forward)."
        ),
    )

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        loss_spec(name)
        return name


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
    lora_dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the LoRA input.")
    lora_target_modules: list[str] | Literal["all-linear"] = Field(
        default="all-linear", description="Modules that get an adapter, or 'all-linear'."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="Weights' dtype ('auto': bfloat16 where supported, else float32)."
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
    updates: int = Field(default=100, ge=1, description="Policy updates to perform.")
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


class TrainConfig(_Section):
    """A whole training run. Build it from keyword sections, a dict, or YAML (:meth:`from_yaml`)."""

    rollout: RolloutConfig = Field(description="How episodes are played.")
    model: ModelConfig = Field(description="The model being trained.")
    credit: CreditConfig = Field(default_factory=CreditConfig, description="Credit assigner.")
    sampler: SamplerConfig = Field(default_factory=SamplerConfig, description="Episode sampler.")
    loss: LossConfig = Field(default_factory=LossConfig, description="Policy loss.")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="Optimizer and batching.")
    run: RunConfig = Field(default_factory=RunConfig, description="Output, length, evaluation, checkpoints.")
    distributed: DistributedConfig = Field(
        default_factory=DistributedConfig, description="Several training processes: DDP or FSDP, timeouts."
    )

    @model_validator(mode="after")
    def _groups_available(self) -> TrainConfig:
        if "groups" in self.credit.needs and self.rollout.group_size < 2:
            raise ValueError(
                f"credit assigner {self.credit.name!r} compares the episodes of a group and needs "
                f"rollout.group_size >= 2 (got {self.rollout.group_size}); a group of one gets no signal"
            )
        return self

    def loss_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`training.losses.LossSettings` (defaults of the loss resolved).

        Example:
            >>> config = TrainConfig(rollout={"game_id": "g"}, model={"spec": "tiny"}, loss={"name": "clip-higher"})
            >>> config.loss_options()["clip_eps_high"]
            0.28
        """
        spec = loss_spec(self.loss.name)
        return {
            "ratio_level": spec.ratio_level,
            "clip_eps_low": spec.clip_eps_low if self.loss.clip_eps_low is None else self.loss.clip_eps_low,
            "clip_eps_high": spec.clip_eps_high if self.loss.clip_eps_high is None else self.loss.clip_eps_high,
            "aggregation": self.loss.aggregation,
            "constant_normalizer": float(self.loss.constant_normalizer or self.rollout.lap.max_tokens),
            "kl_beta": self.loss.kl_beta,
            "entropy_coef": self.loss.entropy_coef,
        }

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
    """

    agents: tuple[str, ...]
    state_keys: bool
    state_keys_reason: str
    per_step_rewards: bool | None
    per_step_rewards_reason: str


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
            actions: dict[str, str] = {}
            for agent in game.active_agents:
                legal = game.legal_actions(agent)
                if not legal:
                    return None, "the game does not enumerate its legal actions, so random play cannot probe it"
                actions[agent] = legal[int(rng.integers(len(legal)))]
            result = game.step(actions)
            if not result.done and any(reward != 0 for reward in result.rewards.values()):
                return True, "random play received a reward before the episode ended"
    return False, f"in {episodes} random-play episodes every reward came at the end (or none came)"


def game_capabilities(
    game: Game, *, seed: int = 0, probe_episodes: int = 16, max_rounds: int = 200
) -> GameCapabilities:
    """Find out what ``game`` provides: its declarations first, else short probes (which reset the game).

    A game may declare ``provides_state_key`` and ``per_step_rewards`` (bools) to skip the probes.
    """
    state_keys, state_reason = _probe_state_keys(game, seed)
    step_rewards, reward_reason = _probe_step_rewards(game, seed, probe_episodes, max_rounds)
    return GameCapabilities(tuple(game.agents), state_keys, state_reason, step_rewards, reward_reason)


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
    return reasons


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
    if game is not None:
        capabilities = game_capabilities(game, seed=config.run.seed)
    else:
        from tsmg import make

        game = make(config.rollout.game_id, **config.rollout.game_options)
        try:
            capabilities = game_capabilities(game, seed=config.run.seed)
        finally:
            game.close()
    reasons = incompatibilities(config, capabilities)
    if reasons:
        raise IncompatibleGameError("; ".join(reasons))
    return capabilities
