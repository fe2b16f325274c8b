"""Training configuration: one frozen pydantic model split by concern, validated when built.

``TrainConfig`` has one section per stage of the pipeline (``rollout``, ``credit``, ``sampler``,
``loss``, ``optim``) plus ``model`` and ``run``; the sections live in :mod:`training.config_sections`,
and what a game provides in :mod:`training.capabilities`. This module is the public home of all of
them (``from training.config import RolloutConfig, validate_against_game``): it holds what spans
sections. Unknown fields are refused everywhere, so a typo fails with its name; algorithm names are
checked against the registries (the error lists the valid names); combinations that cannot work are
refused with the reason, first at build time (e.g. a group-based credit assigner with
``group_size`` 1) and then against the game itself with :func:`validate_against_game` (e.g. GiGPO on
a game without usable state keys).

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
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, model_validator

from training.annotators import ANNOTATORS
from training.capabilities import GameCapabilities, IncompatibleGameError, game_capabilities, incompatibilities
from training.config_sections import (
    CreditConfig,
    DistillConfig,
    DistributedConfig,
    LoopConfig,
    LossConfig,
    ModelConfig,
    OpponentPoolConfig,
    OptimConfig,
    RolloutConfig,
    RunConfig,
    SamplerConfig,
    Section,
    TinyModelOptions,
    TreeConfig,
    WandbConfig,
)
from training.credit import CREDIT_ASSIGNERS
from training.loss_specs import LOSSES, Aggregation, loss_spec
from tsmg.core import Game
from tsmg.influence import EXACT
from tsmg.model_spec import parse_model_spec

__all__ = [
    "ENGINES_TAKING_WEIGHTS",
    "CreditConfig",
    "DistillConfig",
    "DistributedConfig",
    "GameCapabilities",
    "IncompatibleGameError",
    "LoopConfig",
    "LossConfig",
    "ModelConfig",
    "OpponentPoolConfig",
    "OptimConfig",
    "RolloutConfig",
    "RunConfig",
    "SamplerConfig",
    "TinyModelOptions",
    "TrainConfig",
    "TreeConfig",
    "WandbConfig",
    "game_capabilities",
    "incompatibilities",
    "validate_against_game",
]

#: Rollout engines that take each new policy version while training (:mod:`training.rollout.engines`): the HF
#: backend (a copy of the trained model) and vLLM's in-process engine (weights or adapter pushed).
ENGINES_TAKING_WEIGHTS = frozenset({"hf", "tiny", "smollm2", "vllm"})


def _rtpo_as_rollout_shape(data: Any) -> Any:  # Any: a before-validator gets the raw input
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


class TrainConfig(Section):
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
    def _method_aggregation(cls, data: Any) -> Any:  # Any: a before-validator gets the raw input
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
    def _exact_influence_by_default(cls, data: Any) -> Any:  # Any: a before-validator gets the raw input
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
    def _async_engine_takes_weights(cls, data: Any) -> Any:  # Any: a before-validator gets the raw input
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
    reasons = incompatibilities(capabilities, rollout=config.rollout, credit=config.credit, sampler=config.sampler)
    if reasons:
        raise IncompatibleGameError("; ".join(reasons))
    return capabilities
