"""MS-GRPO (Dilkes, Yazdanpanah and Stein 2025): the training loop, read top to bottom.

What :func:`train` implements, exactly (each stage names the module that does it):

* **Rollout** (:mod:`training.rollout.sources`): independent groups by default (below); trees branched
  from shared prefixes (``rollout.shape: tree``, :mod:`training.rollout.tree`), RTPO's reverse-turn stages
  (``rollout.shape: rtpo``, :mod:`training.rollout.rtpo`), or either of the first two played ahead by a
  worker process with older weights (``loop.mode: async``, :mod:`training.rollout.async_loop`).
* **Rollout: independent groups** (:func:`training.rollout.engines.independent_groups`). Update ``u``
  plays ``rollout.groups_per_update`` groups of ``rollout.group_size`` episodes; a group's
  episodes share one game seed (one start). Every seed of update ``u`` derives from
  ``(run.seed, u)`` (:mod:`tsmg.seeding`): the game seeds (below ``run.eval_seed_start``, where
  held-out seeds start), the LAP's run seed, the sampler's draws. A group's episodes differ
  because each model call's seed is keyed on the episode's index in its group. The engine plays
  the model through its LAP with the HF model being trained, or on a vLLM engine that gets the
  new weights (or LoRA adapter) after each update (:mod:`training.rollout.engines`). Multi-agent games:
  self-play, a fixed opponent policy (``rollout.opponent``) in the seats the model does not
  play, or a past checkpoint drawn per group from an opponent pool; with ``rollout.seating:
  rotate`` the model's seat moves from group to group (:mod:`training.rollout.selfplay`; groups seated one
  by one play as synchronous groups, not trees or asynchronous rollouts). Only the seats
  the model played (of ``rollout.train_agents``) are trained.
* **Credit** (:mod:`training.credit`): any registered assigner; ``ms-grpo`` by default, the
  group-normalised episode return ``(R - mean) / (std + eps)`` copied to every step. A stateful
  assigner (``rae``: a baseline per game and seat) keeps its state in the checkpoints.
* **Sampling** (:func:`training.sampling.draw_steps`): ``aaw`` by default, episodes drawn with
  p proportional to |A|^alpha (every step of a drawn episode trains), or single steps. With
  ``sampler.refill_zero_variance`` the groups without signal are first replaced by new groups
  (DAPO's dynamic sampling, :mod:`training.rollout.dynamic_sampling`).
* **Update** (:class:`training.update.PolicyUpdate`): each sampled step is one sequence, the
  prompt ids and tokens recorded in the episode; the PPO-clipped loss per token (``ppo-clip``,
  eps 0.2, or any registered loss), pi_old the behaviour log-probabilities the rollout recorded
  (or recomputed), optional k3 KL to a reference (the model with its LoRA adapter off, or a
  frozen copy), optional entropy bonus over the sampled steps or over the whole rollout;
  constrained-choice answers scored over the tokens the choice allowed. AdamW, micro-batches
  accumulated over ``optim.grad_accumulation`` per optimizer step with the step's aggregation
  denominator, global grad-norm clipping, ``optim.epochs`` passes, optional early stop at
  ``optim.target_kl``; the learning-rate schedule advances once per update.
* **Run folder** (:mod:`training.run_folder`): config, metrics, checkpoints (exact resume after
  ``kill -9``), optional training episodes, the final model and a learning curve.
* **Bad updates**: a non-finite loss or gradient norm skips that update (``loss/skipped_updates``);
  out of memory raises :class:`TrainingOOMError` naming the sizes to lower.
* **Several processes** (``torchrun`` / ``accelerate launch``): rollouts sharded by group,
  each optimizer step's samples split across ranks, the model shared by torch's DDP or FSDP2
  (parameters, gradients and optimizer state sharded; rollouts run with the weights gathered),
  gradients summed; rank 0 writes, every rank writes its shards of an FSDP checkpoint
  (:mod:`training.distributed`). The update does not depend on the world size.

Simplifications: asynchronous rollouts with one trainer process only; groups seated one by one
(a rotating seat, an opponent pool) only as synchronous groups.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from backends.base import TrainableModel
from training.checkpoint import restore_rng_state, weights_saver
from training.config import TrainConfig, validate_against_game
from training.credit import CreditAssignment, assign_credit, credit_state_metrics
from training.distill import check_teacher
from training.distributed import check_world_divides_groups, current_world
from training.rollout.async_loop import AsyncRollouts
from training.rollout.build import build_rollouts
from training.rollout.dynamic_sampling import refill_zero_signal
from training.rollout.engines import RolloutEngine, build_engine, check_rollout, play_sharded
from training.rollout.selfplay import Opponents, check_opponents
from training.rollout.sources import SAMPLER, RolloutSource, mark_trained_steps
from training.run_folder import RunFolder
from training.sampling import draw_steps
from training.setup import base_model_source, set_up, unsharded_backend
from training.signal_watch import SignalWatch
from training.update import PolicyUpdate, TrainingOOMError, training_samples
from tsmg.core import GameCodeError
from tsmg.episode import Episode
from tsmg.policies import policy_from_spec
from tsmg.rollout import plan_episodes, record_game_error
from tsmg.seeding import seed_generator

__all__ = ["RunState", "TrainHooks", "TrainResult", "TrainingOOMError", "base_model_source", "train"]

logger = logging.getLogger(__name__)


@dataclass
class TrainHooks:
    """Optional callbacks into the loop (the CLI's progress display, benchmarks, tests).

    Attributes:
        on_update: Called with (step, metrics) after each update's metrics are written.
        should_stop: Called with (step, metrics) before they are written; True ends training
            after that update (with a final evaluation when evaluations are on).
        transform_loss: Called with (step, loss) on every micro-batch loss before backward
            (tests use it to inject a NaN).
        build_engine: Builds the rollout engines in place of :func:`training.rollout.engines.build_engine`,
            called with the same arguments (tests wrap it to keep the engine and to pass
            test-sized vLLM options). An asynchronous run's worker process builds its own engine
            with :func:`~training.rollout.engines.build_engine`; this one then builds the evaluations' engine.
    """

    on_update: Callable[[int, dict[str, float]], None] | None = None
    should_stop: Callable[[int, dict[str, float]], bool] | None = None
    transform_loss: Callable[[int, torch.Tensor], torch.Tensor] | None = None
    build_engine: Callable[..., RolloutEngine] | None = None


@dataclass
class RunState:
    """The trainer's counters, saved with every checkpoint (the ``state`` of its ``state.json``).

    Attributes:
        skipped_updates: Updates skipped for a non-finite loss or gradient.
        episodes_total: Training episodes played (refills included), what ``run.episodes`` bounds.
        elapsed_s: Wall seconds of the run, resumes included (up to the last checkpoint).
        cpu_s: CPU seconds of the run, resumes included (up to the last checkpoint).
        credit_state: A stateful credit assigner's state (``rae``'s baselines), updated in place.
    """

    skipped_updates: int = 0
    episodes_total: int = 0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    credit_state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_checkpoint(cls, state: Mapping[str, Any]) -> RunState:
        """The counters a checkpoint stored; one written before a counter existed lacks it and gets its zero.

        Example:
            >>> RunState.from_checkpoint({"skipped_updates": 1, "episodes_total": 64, "elapsed_s": 9.5})
            RunState(skipped_updates=1, episodes_total=64, elapsed_s=9.5, cpu_s=0.0, credit_state={})
        """
        return cls(
            skipped_updates=int(state.get("skipped_updates", 0)),
            episodes_total=int(state.get("episodes_total", 0)),
            elapsed_s=float(state.get("elapsed_s", 0.0)),
            cpu_s=float(state.get("cpu_s", 0.0)),  # none before the CPU budget existed
            credit_state=dict(state.get("credit_state") or {}),
        )

    def to_checkpoint(self) -> dict[str, Any]:
        """The counters as the JSON-ready mapping a checkpoint stores (the keys the trainer always wrote)."""
        return {
            "skipped_updates": self.skipped_updates,
            "episodes_total": self.episodes_total,
            "elapsed_s": self.elapsed_s,
            "cpu_s": self.cpu_s,
            "credit_state": self.credit_state,
        }


@dataclass
class TrainResult:
    """What a run left behind.

    Attributes:
        run_dir: The run folder.
        steps: Updates done (including those before a resume).
        stop_reason: Why training ended ("updates", "episodes", "max_seconds", "max_cpu_seconds", "hook").
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
        training.distill.TeacherMismatchError: The distillation teacher's tokenizer is not the student's.
        TrainingOOMError: Out of memory (the message says what to lower).
        FileExistsError: A fresh run in a folder that already holds one.
        GameCodeError: The game's own code raised (a bug of the game): the run stopped after writing
            the failure to ``game_errors.jsonl`` and a checkpoint of the last finished update, so that
            it resumes once the game is fixed (an asynchronous rollout worker's failure included). A
            failure in the check before the model loads leaves that file alone in the run folder.
    """
    hooks = hooks or TrainHooks()
    started, cpu_started = time.perf_counter(), time.process_time()
    run, rollout_config, sampler = config.run, config.rollout, config.sampler

    # --- 1. refuse what cannot work, before any model loads -----------------------------------
    try:
        agents = list(validate_against_game(config).agents)
    except GameCodeError as error:  # the game's own bug, met by this check: its traceback goes where a run's goes
        if os.environ.get("RANK", "0") == "0":  # one process writes (the world is not set up yet)
            record_game_error(run.out_dir, error)
        raise
    # A distillation teacher must share the student's tokenizer.
    check_teacher(config.distill, config.model, run_dir=Path(run.out_dir), seed=run.seed)
    check_opponents(config.rollout)  # who plays the seats the model does not (training/rollout/selfplay.py)

    # --- 2. set up: run folder, model, optimizer, rollout engine, metrics log ------------------
    world = current_world(config.distributed.timeout_s, group_of_one=config.distributed.strategy == "fsdp")
    check_world_divides_groups(world, rollout_config.groups_per_update)
    folder = RunFolder(Path(run.out_dir), world, run.keep_last)
    prepare = partial(base_model_source, config.model, folder.path, seed=run.seed)  # a tiny model, built once
    checkpoint = folder.open(config, resume, prepare=prepare)
    state = RunState.from_checkpoint(checkpoint.state) if checkpoint is not None else RunState()
    setup = set_up(config, folder.path, checkpoint, world, episodes_played=lambda: state.episodes_total)
    update = PolicyUpdate.from_config(setup, config, world, transform_loss=hooks.transform_loss)
    if checkpoint is not None:
        restore_rng_state(checkpoint.rng)
    elapsed_before, cpu_before, start_step = state.elapsed_s, state.cpu_s, checkpoint.step if checkpoint else 0
    opponent = policy_from_spec(rollout_config.opponent, seed=run.seed) if rollout_config.opponent else None
    opponents = Opponents(
        config.rollout,
        config.model,
        run,
        agents,
        folder.path,
        world,
        fixed=opponent,
        resume_step=checkpoint.step if checkpoint else None,
    )
    train_seats = list(opponents.train_seats)
    # Where each update's episodes come from (groups, trees, RTPO's stages; a worker process when
    # asynchronous) and the engine evaluations play on (training/rollout/build.py).
    make_engine = hooks.build_engine or build_engine

    def engine_of(backend: TrainableModel, *, on_vllm: bool = True) -> RolloutEngine:
        return make_engine(
            backend,
            folder.path,
            opponents.model_seats,
            opponents.base_opponent,
            rollout=config.rollout,
            model=config.model,
            seed=run.seed,
            vllm_engine=config.distributed.vllm_engine,
            world=world,
            parallel=setup.parallel,
            on_vllm=on_vllm,
        )

    rollouts: RolloutSource
    if config.loop.mode == "async":  # the worker process rebuilds the model and engine from the whole config
        rollouts = AsyncRollouts(
            config,
            engine_of(setup.backend, on_vllm=False),  # evaluations: the trainer's own weights, on its model
            world,
            setup=setup,
            update=update,
            run_dir=folder.path,
            model_seats=opponents.model_seats,
            start_step=start_step,
        )
    else:
        rollouts = build_rollouts(config.rollout, run, engine_of(setup.backend), world, opponents)
    engine = rollouts.eval_engine
    if checkpoint is not None:
        engine.sync()  # an engine with its own copy of the weights starts from the base ones
        rollouts.load(checkpoint.path)
    opponents.start(start_step, setup.backend)
    eval_plans = plan_episodes(rollout_config.game_id, run.resolved_eval_seeds(), group_size=1, id_prefix="eval")
    save_weights = weights_saver(setup.backend, config.model.finetune)
    log = folder.metrics_log(resume, checkpoint, config.run, config.model_dump(mode="json"))
    watch = SignalWatch(config.rollout.lap.action_format.kind)  # warns once after updates with nothing to learn

    def rollout_weights() -> AbstractContextManager[None]:
        """FSDP: the whole weights for an engine that plays the trained model (each rank runs its own forwards)."""
        return setup.parallel.gathered() if getattr(engine, "plays_trained_model", True) else nullcontext()

    def elapsed() -> float:
        return elapsed_before + time.perf_counter() - started

    def cpu_used() -> float:
        """This process's CPU seconds (every thread, user + system) since the run began, resumes included."""
        return cpu_before + time.process_time() - cpu_started

    def evaluate() -> dict[str, float]:
        began = time.perf_counter()
        seating = opponents.eval_seating(eval_plans)
        with rollout_weights():
            batch = play_sharded(
                opponents.engine(engine, seating), eval_plans, 1, world, seed=run.seed, temperature=run.eval_temperature
            )
        metrics = opponents.summary(batch.episodes).as_metrics("eval/")
        return {**metrics, "time/eval_s": time.perf_counter() - began}

    def credit_of(played: Sequence[Episode]) -> CreditAssignment:
        """Per-step advantages of the trained seats the model played in ``played``."""
        return assign_credit(
            config.credit.name,
            played,
            agent=train_seats,
            params=config.credit.params,
            credit_if=opponents.credit_if(),
            state=state.credit_state,  # saved with every checkpoint
        )

    def save_checkpoint(step: int) -> Path:
        state.elapsed_s, state.cpu_s = elapsed(), cpu_used()
        return folder.save_checkpoint(
            step,
            save_weights=save_weights,
            save_extra=rollouts.save,  # what a resumed run's rollouts need (RTPO's cycle, async rollouts played ahead)
            optimizer=setup.optimizer,
            scheduler=setup.scheduler,
            state=state.to_checkpoint(),
            parallel=setup.parallel,
        )

    # --- 3. the loop: rollout -> credit -> sample -> update -> evaluate, log, checkpoint --------
    step, stop_reason, last_checkpoint = start_step, "updates", None
    trained = start_step  # the last update whose weights the model holds (what a game failure checkpoints)
    try:
        if run.eval_every and run.eval_at_start and start_step == 0:
            initial = evaluate()
            if log is not None:
                log.write(0, initial)
        while step < run.updates:
            step += 1
            metrics: dict[str, float] = {}

            # Rollout: groups of G episodes from one game seed each (independent, or a tree).
            began = time.perf_counter()
            with rollout_weights():
                batch = rollouts.play(step)
            check_rollout(batch, config.rollout)
            episodes = [episode for episode in batch.episodes if episode.error is None]
            state.episodes_total += len(batch.episodes)
            metrics.update(opponents.summary(batch.episodes).as_metrics("rollout/"))
            metrics["rollout/episodes_total"] = float(state.episodes_total)
            metrics["time/rollout_s"] = time.perf_counter() - began
            played = list(batch.episodes)

            # Credit: per-step advantages of the trained seats.
            credit = credit_of(episodes)
            if sampler.refill_zero_variance:  # DAPO's dynamic sampling: groups without signal replaced by new ones
                refilled = refill_zero_signal(
                    episodes,
                    credit,
                    target_groups=rollout_config.groups_per_update,
                    max_rounds=sampler.max_refill_rounds,
                    play_round=partial(rollouts.play_refill, step),
                    credit_of=credit_of,
                )
                episodes, credit = refilled.episodes, refilled.credit
                state.episodes_total += len(refilled.played)
                metrics.update(refilled.metrics)
                metrics["rollout/episodes_total"] = float(state.episodes_total)
                played += refilled.played
            credit = rollouts.trained_credit(credit, episodes)  # a tree's shared steps once; RTPO's turn
            mark_trained_steps(played, credit)  # the one place that says which steps train
            if run.episodes_every and step % run.episodes_every == 0:
                folder.write_episodes(played)
            metrics.update(credit.stats.as_metrics())
            metrics.update(credit_state_metrics(state.credit_state))

            # Sampling: trajectories (all their steps) or single steps, by |A| or uniformly.
            rng = seed_generator(run.seed, step, SAMPLER)
            steps, drawn = draw_steps(
                credit,
                sampler.name,
                rng,
                unit=sampler.unit,
                count=sampler.samples_per_update,
                alpha=sampler.alpha,
                replace=sampler.replacement,
                importance_correction=sampler.importance_correction,
            )
            metrics.update(drawn.stats.as_metrics())

            # Samples: the prompt ids and tokens each episode recorded, with the step's advantage.
            by_id = {episode.episode_id: episode for episode in episodes}
            samples, corrected = rollouts.training_samples(steps, by_id, batch, step)  # async: stale ones corrected
            metrics.update(corrected)
            metrics["sampler/samples"] = float(len(samples))
            rollout_samples = []
            if config.loss.entropy_coef and config.loss.entropy_scope == "rollout":
                rollout_samples = training_samples(credit.steps(), by_id)

            # Update: clipped policy gradient over micro-batches; then the engine gets the weights.
            began = time.perf_counter()
            metrics.update(update(step, samples, rollout_samples, temperature=batch.temperature, rng=rng))
            with warnings.catch_warnings():  # a skipped update steps the schedule without an optimizer step
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
                setup.scheduler.step()
            trained = step
            rollouts.publish(step)
            opponents.after_update(step, setup.backend)
            state.skipped_updates += int(metrics["loss/skipped"])
            metrics["loss/skipped_updates"] = float(state.skipped_updates)
            metrics["optim/lr"] = float(setup.optimizer.param_groups[0]["lr"])
            metrics["time/update_s"] = time.perf_counter() - began

            # Evaluation on held-out seeds: every eval_every updates, and after the last one.
            if run.episodes is not None and state.episodes_total >= run.episodes:  # the same on every rank
                stop_reason = "episodes"
            elif world.broadcast(run.max_seconds is not None and elapsed() >= run.max_seconds):  # rank 0's clock
                stop_reason = "max_seconds"
            elif world.broadcast(run.max_cpu_seconds is not None and cpu_used() >= run.max_cpu_seconds):
                stop_reason = "max_cpu_seconds"
            last = stop_reason != "updates" or step == run.updates
            evaluated = bool(run.eval_every) and (step % run.eval_every == 0 or last)
            if evaluated:
                metrics.update(evaluate())
            metrics["time/elapsed_s"] = elapsed()
            metrics["time/cpu_s"] = cpu_used()
            if not last and world.broadcast(hooks.should_stop is not None and hooks.should_stop(step, metrics)):
                stop_reason, last = "hook", True
                if run.eval_every and not evaluated:
                    metrics.update(evaluate())
            if log is not None:
                log.write(step, metrics)
                watch.observe(step, metrics)
            if hooks.on_update is not None:
                hooks.on_update(step, metrics)
            if last or (run.checkpoint_every and step % run.checkpoint_every == 0):
                last_checkpoint = save_checkpoint(step)
            if last:
                break
    except GameCodeError as error:  # a bug of the game: stop, keeping what a run resumed after the fix needs
        if world.is_main:
            record_game_error(folder.path, error)
        saved = folder.checkpoints / f"step-{trained}"
        if not saved.is_dir():  # e.g. not saved since the last checkpoint_every
            saved = save_checkpoint(trained)
        error.note = f"the run stopped with its checkpoint {saved}; fix the game and rerun with --resume"
        raise
    finally:
        rollouts.close()
        if log is not None:
            log.close()
        close_engine = getattr(engine, "close", None)
        if close_engine is not None:  # a vLLM engine holds processes and GPU memory
            close_engine()

    # --- 4. the end: final model and learning curve ---------------------------------------------
    if last_checkpoint is None:  # resumed a finished run: nothing was trained, save again
        last_checkpoint = save_checkpoint(step)
    title = f"{config.credit.name} on {rollout_config.game_id}"
    # Under FSDP, gathered on rank 0.
    final_backend = unsharded_backend(setup, config.model, folder.path, world, seed=run.seed)
    final_model, adapter, curve, rows = folder.finish(final_backend, setup.lora, log, title)
    return TrainResult(
        run_dir=folder.path,
        steps=step,
        stop_reason=stop_reason,
        final_model=final_model,
        adapter=adapter,
        checkpoint=last_checkpoint,
        skipped_updates=state.skipped_updates,
        learning_curve=curve,
        resumed_from=checkpoint.step if checkpoint is not None else None,
        metrics=rows,
    )
