"""Rollout engines: how the trainer plays an update's episodes with the policy being trained.

:class:`RolloutEngine` is the contract: :meth:`~RolloutEngine.play` a list of planned episodes,
and :meth:`~RolloutEngine.sync` after each update so that the next rollout samples from the new
weights. :class:`HFRolloutEngine` plays with the trained HF model itself, or a LoRA model's merged
copy that :meth:`~RolloutEngine.sync` refreshes (``rollout.merged_adapter``);
:class:`VLLMRolloutEngine` plays on a vLLM engine started from the same folder (``model.spec:
vllm:PATH``) and pushes the new weights, or the LoRA adapter, into it after every update
(:mod:`training.rollout.vllm_sync`). Every engine drives the model through its LAP; the episode records
hold all the trainer needs (prompt ids, offered choices, tokens, behaviour log-probabilities).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import torch

from training.config import ModelConfig, RolloutConfig
from training.distributed import ParallelModel, World
from training.rollout.vllm_sync import (
    AdapterFolders,
    EngineSyncError,
    adapter_root,
    checkpoint_state_dict,
    engine_options,
    require_vllm,
)
from training.update import TrainingOOMError
from tsmg.episode import Episode, StepRecord
from tsmg.lap import LAP
from tsmg.model_spec import parse_model_spec

# CompactView and compact_observation live in tsmg.policies (evaluation uses them without torch);
# older code imports them from here.
from tsmg.policies import CompactView, Decision, DecisionRequest, Policy, compact_observation  # noqa: F401
from tsmg.rollout import Brancher, EpisodePlan, plan_episodes, rollout

if TYPE_CHECKING:
    from backends.base import TrainableModel
    from backends.hf_lora import MergedAdapter
    from backends.vllm_engine import VLLMBackend

logger = logging.getLogger(__name__)


@dataclass
class RolloutBatch:
    """Episodes of one rollout: the whole record, nothing beside it.

    Attributes:
        episodes: Episode records in plan order (failed ones carry ``error``). Each episode names
            the seats the trained model played (``model_seats``); each of their steps records its
            prompt ids, offered choices, tokens, behaviour log-probabilities, the temperature it was
            sampled at and whether those log-probabilities are the trainer's own
            (:func:`record_sampling`).
    """

    episodes: list[Episode]

    @property
    def temperature(self) -> float:
        """The temperature the model sampled the rollout at (one rollout, one temperature; 1.0: none sampled)."""
        return next((step.temperature for step in self._model_steps() if step.temperature is not None), 1.0)

    @property
    def exact_logprobs(self) -> bool:
        """Whether every recorded log-probability is the trainer's own (else pi_old is recomputed under its weights)."""
        return all(step.exact_logprobs is not False for step in self._model_steps())

    def _model_steps(self) -> Iterator[StepRecord]:
        for episode in self.episodes:
            yield from (step for step in episode.steps if step.temperature is not None)


def record_sampling(
    episodes: Sequence[Episode], model_seats: Sequence[str] | None, temperature: float, exact_logprobs: bool
) -> None:
    """Record on each episode the seats the trained model played, and on their steps how they were sampled.

    Steps already recorded (a tree branch's copies of its parent's steps) keep what they have.

    Args:
        episodes: The episodes an engine just played.
        model_seats: The seats the model played (None: every seat, self-play).
        temperature: The temperature it sampled at.
        exact_logprobs: Whether its log-probabilities are the trainer's own numerics.
    """
    for episode in episodes:
        seats = [agent for agent in episode.agents if model_seats is None or agent in model_seats]
        episode.model_seats = seats
        for step in episode.steps:
            if step.agent in seats and step.temperature is None:
                step.temperature, step.exact_logprobs = temperature, exact_logprobs


class RolloutEngine(Protocol):
    """Plays episodes with the current policy; the trainer calls :meth:`sync` after every update.

    An engine that samples from its own copy of the weights (vLLM) pushes the new weights or
    adapter there in :meth:`sync`; the HF engine shares the trained model and has nothing to do.
    """

    def play(
        self,
        plans: Sequence[EpisodePlan],
        *,
        seed: int,
        temperature: float | None = None,
        branch: Brancher | None = None,
    ) -> RolloutBatch:
        """Play the planned episodes; ``seed`` is the LAP's run seed, ``temperature`` overrides the LAP's.

        Every sampling seed follows from ``seed`` and the decision's plan position
        (:func:`tsmg.seeding.decision_seed`), so a process that plays a share of a rollout
        samples each of its episodes as the whole rollout would. ``branch`` grows tree rollouts
        (:func:`tsmg.rollout.rollout`).
        """
        ...

    def sync(self) -> None:
        """Make the engine sample from the trainer's current weights."""
        ...


class _LAPRolloutEngine:
    """What every engine shares: the model's seats through its LAP, an opponent policy in the others.

    Args:
        backend: The language model that plays (any :class:`~tsmg.lm.LanguageModel`).
        config: The rollout section (game, LAP, compact view, opponent).
        model_seats: The seats the model plays.
        opponent: The policy of the other seats (None: self-play).
    """

    #: Whether the log-probabilities ``backend`` records are the trainer's (see :class:`RolloutBatch`).
    exact_logprobs: bool = True
    #: Whether the engine samples from the trained model itself (under FSDP it needs the weights gathered).
    plays_trained_model: bool = True

    def __init__(
        self,
        backend: Any,  # Any: an HF backend or a VLLMBackend (None on a shared engine's other ranks)
        config: RolloutConfig,
        model_seats: Sequence[str],
        opponent: Policy | None = None,
    ) -> None:
        self.backend = backend
        self.config = config
        self.model_seats = tuple(model_seats)
        self.opponent = opponent

    def play(
        self,
        plans: Sequence[EpisodePlan],
        *,
        seed: int,
        temperature: float | None = None,
        branch: Brancher | None = None,
    ) -> RolloutBatch:
        """Play ``plans``; see :meth:`RolloutEngine.play`."""
        update: dict[str, Any] = {"seed": seed}
        if temperature is not None:
            update["temperature"] = temperature
        lap_config = self.config.lap.model_copy(update=update)
        model = CompactView(LAP(self.backend, lap_config), self.config.observation_lines)
        policies: Policy | dict[str, Policy] = model
        if self.opponent is not None:
            opponent = self.opponent
            policies = {agent: model if agent in self.model_seats else opponent for agent in self._agents()}
        episodes = rollout(
            self.config.game_id,
            policies,
            plans=plans,
            game_options=self.config.game_options,
            max_concurrent=self.config.max_concurrent,
            branch=branch,
        )
        seats = None if self.opponent is None else self.model_seats
        record_sampling(episodes, seats, lap_config.temperature, self.exact_logprobs)
        return RolloutBatch(episodes)

    def with_seats(self, model_seats: Sequence[str], opponent: Policy | None) -> _LAPRolloutEngine:
        """This engine with another seating: the model in ``model_seats``, ``opponent`` in the rest (None: self-play).

        The copy shares the backend (and its weights); :mod:`training.rollout.selfplay` plays each group of
        an update with its own seating through it.
        """
        seated = copy.copy(self)
        seated.model_seats, seated.opponent = tuple(model_seats), opponent
        return seated

    def _agents(self) -> tuple[str, ...]:
        from tsmg import make

        game = make(self.config.game_id, **self.config.game_options)
        try:
            return tuple(game.agents)
        finally:
            game.close()


def independent_groups(
    config: RolloutConfig, update: int, rng: np.random.Generator, seed_limit: int, *, refill: int = 0
) -> list[EpisodePlan]:
    """The rollout plan of one update: ``groups_per_update`` groups of ``group_size`` episodes, each from one game seed.

    Args:
        config: The rollout section.
        update: The update (episode ids are ``u{update}/s{seed}/g{k}``).
        rng: Draws the game seeds (distinct, below ``seed_limit``).
        seed_limit: Held-out seeds start here.
        refill: Dynamic sampling's refill round (ids ``u{update}r{refill}/s{seed}/g{k}``); 0: the rollout itself.
    """
    seeds = rng.choice(seed_limit, size=config.groups_per_update, replace=False)
    prefix = f"u{update}r{refill}" if refill else f"u{update}"
    return plan_episodes(config.game_id, [int(seed) for seed in seeds], config.group_size, id_prefix=prefix)


def play_sharded(
    engine: RolloutEngine,
    plans: Sequence[EpisodePlan],
    group_size: int,
    world: World,
    *,
    seed: int,
    temperature: float | None = None,
    branch: Brancher | None = None,
) -> RolloutBatch:
    """Play ``plans`` with each rank taking a contiguous share of whole groups; every rank gets the whole batch.

    ``group_size`` is the number of plans per group (a tree's roots); ``branch`` grows trees. A
    shared engine (one vLLM engine in rank 0 for every rank) plays them all on rank 0.
    """
    if world.size == 1:
        return engine.play(plans, seed=seed, temperature=temperature, branch=branch)
    if getattr(engine, "shared", False):
        played = engine.play(plans, seed=seed, temperature=temperature, branch=branch) if world.is_main else None
        batch = world.broadcast(played)
        assert batch is not None
        return batch
    first, last = world.shard_bounds(len(plans) // group_size)
    share = plans[first * group_size : last * group_size]
    mine = engine.play(share, seed=seed, temperature=temperature, branch=branch)
    parts = world.gather(mine)
    return RolloutBatch([episode for part in parts for episode in part.episodes])


def check_rollout(batch: RolloutBatch, rollout: RolloutConfig) -> None:
    """Stop the run where the backend turned a failure into failed answers: out of memory, or every episode failed.

    Raises:
        TrainingOOMError: A model call ran out of memory (the message names what to lower).
        RuntimeError: Every episode of the rollout failed (the message gives the first error).
    """
    messages = [episode.error for episode in batch.episodes if episode.error]
    messages += [step.reason for episode in batch.episodes for step in episode.steps if step.reason]
    if any("out of memory" in message.lower() for message in messages):
        longest = max((step.prompt_tokens or 0 for episode in batch.episodes for step in episode.steps), default=0)
        raise TrainingOOMError(
            f"out of memory while generating: up to {rollout.max_concurrent} prompts decode together "
            f"(rollout.max_concurrent; an update plays {rollout.groups_per_update * rollout.group_size} "
            f"episodes), prompts up to {longest} tokens, up to {rollout.lap.max_tokens} new tokens: lower "
            "rollout.max_concurrent, or shorten prompts (rollout.lap.template.history, rollout.observation_lines) "
            "and rollout.lap.max_tokens"
        )
    if batch.episodes and all(episode.error for episode in batch.episodes):
        raise RuntimeError(f"every episode of the rollout failed; the first error: {batch.episodes[0].error}")


class HFRolloutEngine(_LAPRolloutEngine):
    """Rollouts with the HF backend being trained: LAP decisions, one batched call per round.

    With ``merged``, a LoRA model's rollouts are sampled from a separate copy of its weights with
    the adapter folded in (:class:`backends.hf_lora.MergedAdapter`), refreshed by :meth:`sync`
    after every update; the trained weights are never merged. In float32 the log-probabilities
    sampled (from the copy or the trained model) are the trainer's to float rounding and stand as
    pi_old; in another dtype (bfloat16, ``auto`` on CUDA and on a CPU with AMX) a cached decode and
    the training forward round differently, so the batches say ``exact_logprobs=False`` and the
    trainer recomputes pi_old under its weights.

    Args:
        backend: The :class:`backends.hf.HFBackend` whose model is trained.
        config: The rollout section (game, LAP, compact view, opponent).
        model_seats: The seats the model plays.
        opponent: The policy of the other seats (None: self-play).
        merged: Sample from a merged copy (the model must carry a LoRA adapter).

    Attributes:
        merged: The merged copy (None: the engine samples through the trained model itself).
    """

    def __init__(
        self,
        backend: Any,  # Any: an HFBackend, whose chat and batch size TrainableModel does not declare
        config: RolloutConfig,
        model_seats: Sequence[str],
        opponent: Policy | None = None,
        *,
        merged: bool = False,
    ) -> None:
        self.merged: MergedAdapter | None = None
        if merged:
            from backends.hf import HFBackend
            from backends.hf_lora import MergedAdapter

            self.merged = MergedAdapter(backend.model)
            backend = HFBackend.from_model(
                self.merged.model,
                backend.tokenizer,
                chat=backend.chat,
                max_context=backend.context_window,
                name=backend.name,
                max_batch_size=backend.max_batch_size,
            )
            self.plays_trained_model = False
        self.exact_logprobs = backend.dtype == torch.float32
        super().__init__(backend, config, model_seats, opponent)

    def sync(self) -> None:
        """Refresh the merged copy from the trained weights (nothing to do without one: it samples from them)."""
        if self.merged is not None:
            self.merged.refresh()


def merges_adapter(rollout: RolloutConfig, backend: TrainableModel, parallel: ParallelModel | None) -> bool:
    """Whether the HF rollout engine samples from a merged copy of the LoRA model (``rollout.merged_adapter``).

    Raises:
        ValueError: ``on`` where the weights are sharded (FSDP) or the model carries no adapter.
    """
    choice = rollout.merged_adapter
    possible = getattr(backend, "has_adapter", False) and not (parallel is not None and parallel.sharded)
    if choice == "on" and not possible:
        raise ValueError("rollout.merged_adapter 'on' needs a LoRA model with whole weights in this process")
    if choice == "auto":
        return possible and str(backend.device) == "cpu" and backend.dtype == torch.float32
    return choice == "on"


class VLLMRolloutEngine(_LAPRolloutEngine):
    """Rollouts on a vLLM engine that follows the HF model being trained.

    The engine holds its own copy of the weights; :meth:`sync` pushes the trained ones (full
    fine-tuning) or the trained LoRA adapter into it. Its log-probabilities are not the trainer's
    (vLLM has its own kernels, and for a constrained answer its own token mask), so batches say
    ``exact_logprobs=False``: the trainer recomputes pi_old under its weights, and weighs each token
    by min(pi_old / pi_vLLM, ``loss.tis_cap``) (truncated importance sampling; the engine reports
    the log-probabilities it sampled from, :func:`training.rollout.vllm_sync.engine_options`).

    Args:
        trained: The :class:`backends.hf.HFBackend` being trained (a PEFT adapter when ``lora``).
        engine: A :class:`backends.vllm_engine.VLLMBackend` started from the trained model's
            initial weights (with ``enable_lora`` when ``lora``).
        config: The rollout section (game, LAP, compact view, opponent).
        model_seats: The seats the model plays.
        opponent: The policy of the other seats (None: self-play).
        lora: Push the adapter (True) or every weight (False).
        adapter_dir: Where the adapters go (``step-N`` folders; the latest is kept). Required with ``lora``.

        parallel: How the processes share the trained model: under FSDP its weights (or adapter)
            are gathered for every push (None: one process, or whole weights on every process).
        shared: One engine in process 0 for every process (``engine`` is None on the others, which
            only take part in gathering the weights).

    Attributes:
        syncs: Pushes done so far (a LoRA engine pushes its starting adapter when built).
    """

    exact_logprobs = False
    plays_trained_model = False

    def __init__(
        self,
        trained: TrainableModel,
        engine: VLLMBackend | None,
        config: RolloutConfig,
        model_seats: Sequence[str],
        opponent: Policy | None = None,
        *,
        lora: bool,
        adapter_dir: Path | None = None,
        parallel: ParallelModel | None = None,
        shared: bool = False,
    ) -> None:
        super().__init__(engine, config, model_seats, opponent)
        self.trained = trained
        self.lora = lora
        self.parallel = parallel
        self.shared = shared
        self.syncs = 0
        self.adapters: AdapterFolders | None = None
        if lora:
            if adapter_dir is None:
                raise ValueError("a LoRA run's vLLM engine needs adapter_dir, the folder its adapters are saved to")
            self.adapters = AdapterFolders(adapter_dir)
            # The starting adapter at once: vLLM checks it (rank, target modules) before any rollout.
            self.sync()

    def sync(self) -> None:
        """Push the trained weights (or adapter) into the engine.

        Raises:
            EngineSyncError: The push failed; the engine would go on sampling from older weights.
        """
        gathered = None
        if self.parallel is not None and self.parallel.sharded:  # every process takes part
            gathered = self.parallel.full_state_dict(everywhere=not self.shared, trainable_only=self.lora)
        if self.backend is None:  # a shared engine lives in process 0
            return
        try:
            if self.adapters is not None:
                folder = self.adapters.save(self.trained, gathered)
                self.backend.set_adapter(folder)
                self.adapters.prune()
            else:
                self.backend.load_weights(checkpoint_state_dict(self.trained.model, gathered))
        except Exception as error:
            what = "LoRA adapter" if self.lora else "weights"
            raise EngineSyncError(
                f"could not push the trained {what} into the vLLM rollout engine ({type(error).__name__}: {error}); "
                "stopping rather than sampling rollouts from stale weights"
            ) from error
        self.syncs += 1
        logger.debug("vLLM rollout engine synced (%d)", self.syncs)

    def close(self) -> None:
        """Shut the vLLM engine down (the rollout engine is unusable afterwards)."""
        if self.backend is not None:
            self.backend.close()


def build_engine(
    backend: TrainableModel,
    run_dir: Path,
    model_seats: Sequence[str],
    opponent: Policy | None,
    *,
    rollout: RolloutConfig,
    model: ModelConfig,
    seed: int,
    vllm_engine: Literal["per-process", "shared"] = "per-process",
    vllm_options: Mapping[str, Any] | None = None,
    on_vllm: bool = True,
    world: World | None = None,
    parallel: ParallelModel | None = None,
) -> RolloutEngine:
    """The rollout engine ``model.spec`` asks for: ``vllm:PATH`` plays on a vLLM engine, the rest on ``backend``.

    Args:
        backend: The HF backend being trained.
        run_dir: The run folder (a LoRA run's vLLM engine keeps its adapters in ``vllm_adapter/``).
        model_seats: The seats the model plays.
        opponent: The policy of the other seats (None: self-play).
        rollout: How episodes are played (the run's ``rollout`` section).
        model: The model trained (the run's ``model`` section: its spec, fine-tuning and vLLM options).
        seed: The run's seed (``run.seed``), which seeds a vLLM engine.
        vllm_engine: ``distributed.vllm_engine``: one engine per process, or one shared by them all.
        vllm_options: Options of :class:`backends.vllm_engine.VLLMBackend` over the defaults of
            :func:`training.rollout.vllm_sync.engine_options` (e.g. ``gpu_memory_utilization``,
            ``max_model_len``, ``enforce_eager``), over the config's ``model.vllm_options``.
        on_vllm: False plays on ``backend`` whatever the spec (asynchronous training evaluates so).
        world: This process's place among the training processes (None: one process).
        parallel: How the processes share the trained model (FSDP: weights gathered for each push).

    Raises:
        ImportError: ``vllm:PATH`` where vLLM is not installed (the message says how to get it).
    """
    spec = parse_model_spec(model.spec)
    path = spec.target
    if spec.kind != "vllm" or not on_vllm:
        # An engine built with on_vllm=False plays evaluations on the trainer's current weights without
        # syncs (asynchronous training), so only the rollout engine proper samples from a merged copy.
        merged = on_vllm and merges_adapter(rollout, backend, parallel)
        return HFRolloutEngine(backend, rollout, model_seats, opponent, merged=merged)
    require_vllm()
    from backends.vllm_engine import VLLMBackend

    world = world or World()
    shared = world.size > 1 and vllm_engine == "shared"
    overrides = {**model.vllm_options, **(vllm_options or {})}
    options = engine_options(model, backend, overrides, seed=seed, processes=1 if shared else world.size)
    lora = model.finetune == "lora"
    engine = VLLMBackend(path, **options) if world.is_main or not shared else None
    try:
        return VLLMRolloutEngine(
            backend,
            engine,
            rollout,
            model_seats,
            opponent,
            lora=lora,
            adapter_dir=adapter_root(run_dir) if lora else None,
            parallel=parallel,
            shared=shared,
        )
    except Exception:
        if engine is not None:
            engine.close()  # its processes would outlive the failed start
        raise
