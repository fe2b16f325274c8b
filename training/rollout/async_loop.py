"""Asynchronous training: a rollout worker plays ahead with older weights while the trainer updates.

What ``loop.mode: async`` does, with eta = ``loop.max_staleness`` (:class:`AsyncRollouts`):

* **Versions.** Version v is the weights after v updates. The rollout of update u is played by
  version ``u - 1 - eta`` exactly (never older, never newer; after a resume from update s, by
  version s at the oldest). So while the trainer computes update u, the worker plays update
  u + 1 (eta = 1), up to u + eta; eta = 0 is the synchronous loop, with the same episodes and the
  same weights. A fixed lag rather than "the newest weights available" keeps a run reproducible
  whatever the timing: same seed, same episodes.
* **The worker** is a process of its own (:func:`worker_main`; a thread would share the
  interpreter lock with the trainer, and a rollout of a small model is mostly Python). It builds
  the same rollout engine as the synchronous loop (HF on its own copy of the model, or vLLM
  pushed from that copy) and plays each update's rollout exactly as the synchronous loop would
  (independent groups or trees, :class:`training.rollout.sources.GroupRollouts`), stamping the version
  on every episode and model step. The trainer sends it update u's request as soon as version
  ``u - 1 - eta`` is published, with that version's trained parameters (shared memory, once per
  version). A whole episode is played by one version, so a long episode is admitted by the
  version it started under; nothing is dropped or played again.
* **The trainer** takes update u's rollout (waiting only if the worker is behind), credits it,
  and corrects what is stale: a sample played by a version older than the trainer's gets pi_old
  recomputed under the trainer's current weights (the proximal policy of decoupled PPO), and its
  tokens whose ratio pi_trainer / pi_engine, against the log-probabilities the engine recorded,
  leaves ``[1 - loop.trust_eps_low, 1 + loop.trust_eps_high]`` are masked out of the loss
  (:func:`training.losses.off_policy_mask`; masked, not clipped: they add no gradient and do not
  count in the token mean), and the kept ones are weighted by that ratio, w = pi_prox / pi_engine
  (:func:`training.losses.importance_weights`, no gradient): decoupled PPO's
  ``-w min(r A, clip(r) A)`` with ``r = pi_theta / pi_prox``. vLLM's recorded numbers are not the
  trainer's (for a constrained answer it normalises over more tokens), so there the trainer
  recomputes pi_engine under the weights of the version that played the sample, which it keeps
  until they are trained. Fresh samples keep their recorded log-probabilities, as in the
  synchronous loop.
* **Annotators** (``rollout.annotators``, :mod:`training.annotators`) run once per rollout, in the
  worker, as the rollout is handed over (:class:`training.rollout.sources.GroupRollouts`), so that a slow
  one (a model annotator) overlaps the trainer's update; the trainer receives annotated episodes
  and runs none. The trainer sends the worker the annotator objects the run lists (pickled: a
  function or object registered at run time in the trainer reaches the worker too).
* **Checkpoints** after update s hold the rollouts s + 1 .. s + eta the worker played already
  (the trainer waits for them: they need versions up to s - 1), so a resumed run plays exactly
  what the uninterrupted one would: no credited sample is lost and none is trained on twice.
* **Evaluations** play on the trainer's own weights (its HF model), in the trainer's process.

One trainer process only (data-parallel async is not done); RTPO cannot run asynchronously
(its stages need the updated weights), which the configuration refuses. The worker rebuilds the
game from its registration: a game registered at run time must have an importable entry point.
"""

from __future__ import annotations

import json
import logging
import pickle
import queue
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.multiprocessing as multiprocessing

from training.annotators import ANNOTATORS, Annotator, register_annotator
from training.config import TrainConfig
from training.credit import StepCredit
from training.distributed import World
from training.losses import importance_weights, off_policy_mask
from training.rollout.engines import RolloutBatch, RolloutEngine
from training.rollout.sources import GroupRollouts
from training.update import PolicyUpdate, TrainSample, training_samples
from tsmg.core import GameCodeError
from tsmg.episode import Episode

if TYPE_CHECKING:
    from training.setup import TrainingSetup
    from tsmg.registry import GameSpec

logger = logging.getLogger(__name__)

PENDING_FILE = "async_rollouts.jsonl"
#: How long a waiting side sleeps between checks that the other one is still alive.
_POLL_S = 0.5
#: How long closing waits for the worker to finish the rollout it is playing before terminating it.
_STOP_TIMEOUT_S = 120.0


def trained_parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s trained parameters (the frozen ones never change), by name."""
    return {name: value.detach().clone() for name, value in model.named_parameters() if value.requires_grad}


def load_parameters(weights: Mapping[str, torch.Tensor], model: torch.nn.Module) -> None:
    """Copy ``weights`` into ``model``'s parameters of the same names."""
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in weights.items():
            parameters[name].copy_(value)


def worker_main(
    config_data: dict[str, Any],
    run_dir: str,
    model_seats: list[str],
    game_spec: GameSpec | None,
    requests: Any,  # Any: torch.multiprocessing queues (untyped)
    results: Any,  # Any: as requests
    annotators: Mapping[str, Annotator] | None = None,
) -> None:
    """The rollout worker process: build the engine, then play each requested update's rollout.

    ``annotators`` (the run's ``rollout.annotators``, by name) are registered here first: the
    worker annotates every rollout it plays (:class:`training.rollout.sources.GroupRollouts`).

    Requests are ``(step, version, weights or None)`` (None weights: the version already loaded),
    or None to stop; results are ``("batch", step, batch, seconds, finished_at)`` (``time.time()``),
    ``("game_error", step, GameCodeError)`` (the game's own code raised: the trainer records it and
    checkpoints, as in a synchronous run) or ``("error", step, text)``.
    The worker also stops when the trainer's process is gone (killed).
    """
    from training.rollout.engines import build_engine
    from training.setup import add_lora, load_backend, own_storage
    from tsmg import registry
    from tsmg.policies import policy_from_spec

    step = 0
    try:
        for name, annotator in (annotators or {}).items():
            register_annotator(name, annotator)
        config = TrainConfig.model_validate(config_data)
        if game_spec is not None and game_spec.id not in {spec.id for spec in registry.specs()}:
            spec = game_spec
            registry.register(spec.id, spec.entry_point, description=spec.description, **spec.kwargs)
        model, run = config.model, config.run
        backend = load_backend(model, run, Path(run_dir), max_concurrent=config.rollout.max_concurrent)
        if model.finetune == "lora":
            add_lora(backend, model, seed=run.seed)
        own_storage(backend.model)  # as the trainer's model: the same numerics
        rollout = config.rollout
        opponent = policy_from_spec(rollout.opponent, seed=config.run.seed) if rollout.opponent else None
        engine = build_engine(
            backend, Path(run_dir), model_seats, opponent, rollout=rollout, model=config.model, seed=config.run.seed
        )
        source = GroupRollouts(config.rollout, config.run, engine, World())
        parent = multiprocessing.parent_process()
        while True:
            try:
                request = requests.get(timeout=_POLL_S)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return
                continue
            if request is None:
                break
            step, version, weights = request
            if weights is not None:
                load_parameters(weights, backend.model)
                engine.sync()  # vLLM: the version pushed in; HF: the copy is the rollout model
            began = time.perf_counter()
            batch = source.play(step, version=version)
            results.put(("batch", step, batch, time.perf_counter() - began, time.time()))
        close = getattr(engine, "close", None)
        if close is not None:
            close()
    except GameCodeError as error:  # a bug of the game: the trainer records it and checkpoints, as in a sync run
        results.put(("game_error", step, _portable_game_error(error)))
    except BaseException:
        results.put(("error", step, traceback.format_exc()))


def _portable_game_error(error: GameCodeError) -> GameCodeError:
    """``error`` as it can cross to the trainer's process: its traceback as text, its cause picklable.

    A traceback object does not pickle, and a game's own exception class may not either (one whose
    ``__init__`` takes other arguments than its message); such a cause crosses as a RuntimeError
    with the same text.
    """
    cause = error.error
    try:
        pickle.loads(pickle.dumps(cause))
    except Exception:  # any failure to round-trip means: send its text instead
        cause = RuntimeError(f"{type(cause).__name__}: {cause}")
    portable = GameCodeError(error.game_id, error.call, cause, error.seed)
    portable.episode_id = error.episode_id
    portable.traceback_text = "".join(traceback.format_exception(error.error))
    return portable


class AsyncRollouts(GroupRollouts):
    """The groups or trees of :class:`~training.rollout.sources.GroupRollouts`, played ahead by a worker process.

    Bounded staleness, off-policy correction and checkpoints: see the module docstring.

    Args:
        config: The run's whole configuration (``loop.mode: async``): sent to the worker, which rebuilds
            the model and its engine from it.
        engine: The engine on the trainer's own weights (evaluations).
        world: One process.
        setup: The training setup (its backend's trained parameters are the versions).
        update: The update stage (recomputes stale samples' pi_old).
        run_dir: The run folder (the worker finds a model built from scratch there).
        model_seats: The seats the model plays.
        start_step: Updates done before this session.

    Raises:
        ValueError: Several processes.
    """

    def __init__(
        self,
        config: TrainConfig,
        engine: RolloutEngine,
        world: World,
        *,
        setup: TrainingSetup,
        update: PolicyUpdate,
        run_dir: Path,
        model_seats: Sequence[str],
        start_step: int = 0,
    ) -> None:
        if world.size > 1:
            raise ValueError("loop.mode 'async' runs in one process; launch without torchrun/accelerate, or use 'sync'")
        super().__init__(config.rollout, config.run, engine, world)
        # The whole configuration, not its sections: the worker process rebuilds the backend, the
        # adapter and the engine from it (model, rollout, run, ...), so it travels there entire.
        self.config = config
        self.trained = setup.backend
        self.update = update
        self.run_dir = run_dir
        self.model_seats = list(model_seats)
        self.eta = config.loop.max_staleness
        self.first_version = start_step
        self.published = start_step
        self.versions: dict[int, dict[str, torch.Tensor]] = {start_step: trained_parameters(setup.backend.model)}
        self.ready: dict[int, RolloutBatch] = {}
        #: The worker stopped at a game's own failure: a checkpoint keeps what it played before, no more.
        self.worker_failed = False
        self.play_seconds: dict[int, float] = {}
        self.finished_at: dict[int, float] = {}  # when the worker finished each rollout (time.time())
        self.requested = start_step  # the last update whose rollout was requested (or restored)
        self.sent_version: int | None = None
        self._process: Any = None
        self._requests: Any = None
        self._results: Any = None

    # ------------------------------------------------------------------ the worker
    def needed_version(self, step: int) -> int:
        """The version that plays update ``step``'s rollout: ``step - 1 - eta``, at least this session's first."""
        return max(step - 1 - self.eta, self.first_version)

    def _start(self) -> None:
        if self._process is not None:
            return
        context = multiprocessing.get_context("spawn")
        self._requests, self._results = context.Queue(), context.Queue()
        from tsmg import registry

        data = self.config.model_dump(mode="json")
        # The worker runs the annotators; those registered at run time exist only in this process,
        # so the worker gets the objects themselves and registers them before reading the config.
        annotators = {name: ANNOTATORS[name] for name in self.config.rollout.annotators}
        game = self.config.rollout.game_id
        spec = None if registry.is_remote(game) else registry.spec(game)
        arguments = (data, str(self.run_dir), self.model_seats, spec, self._requests, self._results, annotators)
        # Not a daemon: a vLLM engine starts processes of its own, which a daemon may not.
        self._process = context.Process(target=worker_main, args=arguments, name="tsmg-rollout-worker")
        self._process.start()
        self._request_ready()

    def _request_ready(self) -> None:
        """Ask the worker for every rollout whose version is published (in order, up to ``run.updates``)."""
        while self.requested < self.config.run.updates:
            step = self.requested + 1
            version = self.needed_version(step)
            if version > self.published:
                return
            self.requested = step
            if step in self.ready:  # restored from the checkpoint
                continue
            weights = None if version == self.sent_version else self.versions[version]
            self.sent_version = version
            self._requests.put((step, version, weights))

    def _receive(self, step: int) -> RolloutBatch:
        """Update ``step``'s rollout, reading the worker's results until it comes."""
        while step not in self.ready:
            try:
                message = self._results.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._process.is_alive():
                    raise RuntimeError(
                        f"the rollout worker process ended (exit code {self._process.exitcode}) before playing "
                        f"update {step}'s rollout"
                    ) from None
                continue
            if message[0] == "game_error":  # the game's own bug: train() records it and saves a checkpoint
                self.worker_failed = True
                raise message[2]
            if message[0] == "error":
                raise RuntimeError(f"the rollout worker failed at update {message[1]}:\n{message[2]}")
            _, played, batch, seconds, finished_at = message  # annotated by the worker
            self.ready[played], self.play_seconds[played], self.finished_at[played] = batch, seconds, finished_at
        return self.ready[step]

    # ------------------------------------------------------------------ the trainer's side
    def play(self, step: int, version: int | None = None) -> RolloutBatch:
        """Update ``step``'s rollout from the worker (waiting for it if the worker is behind)."""
        self._start()
        batch = self._receive(step)
        del self.ready[step]
        return batch

    def training_samples(
        self, steps: Sequence[StepCredit], episodes: Mapping[str, Episode], batch: RolloutBatch, step: int
    ) -> tuple[list[TrainSample], dict[str, float]]:
        """Samples, stale ones corrected: pi_old recomputed, off-policy tokens masked, kept ones weighted.

        pi_old of a stale sample is recomputed under the trainer's weights (pi_prox); its tokens whose
        pi_prox / pi_behaviour leaves the trust range are masked, the others weighted by that ratio.
        """
        samples = training_samples(steps, episodes, exact_logprobs=True)
        current = step - 1
        versions = [current if sample.policy_version is None else sample.policy_version for sample in samples]
        stale = [index for index, version in enumerate(versions) if version < current]
        corrected = list(range(len(samples))) if not batch.exact_logprobs else stale
        played_by = [episode.policy_version for episode in batch.episodes if episode.policy_version is not None]
        metrics = {
            "async/staleness": float(current - min(played_by, default=current)),
            "async/stale_samples": float(len(stale)),
            "async/worker_play_s": self.play_seconds.pop(step, 0.0),
        }
        if not corrected:
            return samples, {**metrics, "async/masked_token_fraction": 0.0, "async/importance_weight_mean": 1.0}
        temperature = batch.temperature
        unrecorded = [replace(samples[index], behaviour_logprobs=None) for index in corrected]
        proximal = self.update.old_logprobs(unrecorded, temperature)
        behaviour = self._behaviour(samples, stale, versions, batch)
        loop = self.config.loop
        masked = counted = 0
        kept_weights: list[float] = []
        for position, index in enumerate(corrected):
            keep = weights = None
            if behaviour.get(index) is not None:
                trainer, engine = torch.tensor(proximal[position]), torch.tensor(behaviour[index])
                keep = off_policy_mask(trainer, engine, loop.trust_eps_low, loop.trust_eps_high).tolist()
                # Decoupled PPO: the kept tokens count w = pi_prox / pi_behaviour times, which makes the
                # update an importance-sampled estimate of the on-policy one (masking alone would leave a
                # bias of up to the trust range's bounds).
                weights = importance_weights(trainer, engine, torch.tensor(keep)).tolist()
                masked += keep.count(False)
                counted += len(keep)
                kept_weights += [weight for weight, kept in zip(weights, keep, strict=True) if kept]
            samples[index] = replace(
                samples[index], behaviour_logprobs=proximal[position], token_mask=keep, token_weights=weights
            )
        metrics["async/masked_token_fraction"] = masked / counted if counted else 0.0
        metrics["async/importance_weight_mean"] = sum(kept_weights) / len(kept_weights) if kept_weights else 1.0
        metrics["async/unmasked_stale_samples"] = float(sum(behaviour.get(index) is None for index in stale))
        return samples, metrics

    def _behaviour(
        self, samples: Sequence[TrainSample], stale: Sequence[int], versions: Sequence[int], batch: RolloutBatch
    ) -> dict[int, Any]:
        """The log-probabilities the engine sampled the stale samples with, in the trainer's terms, by sample index.

        The HF engine's recorded ones are the trainer's (the same model, the same numerics). vLLM's
        are its own (for a constrained answer it even normalises over more tokens), so the trainer
        scores the sample under the weights of the version that played it, which it keeps until
        that version's rollouts are trained; None where it no longer has them (a rollout restored
        from a checkpoint and played by a version before the resumed one): that sample is not masked.
        """
        if batch.exact_logprobs:
            return {index: samples[index].behaviour_logprobs for index in stale}
        by_version: dict[int, list[int]] = {}
        for index in stale:
            by_version.setdefault(versions[index], []).append(index)
        found: dict[int, Any] = {}
        model = self.trained.model
        for version, indices in by_version.items():
            weights = self.versions.get(version)
            if weights is None:
                found.update(dict.fromkeys(indices))
                continue
            load_parameters(weights, model)
            try:
                unrecorded = [replace(samples[index], behaviour_logprobs=None) for index in indices]
                found.update(zip(indices, self.update.old_logprobs(unrecorded, batch.temperature), strict=True))
            finally:
                load_parameters(self.versions[self.published], model)  # the current weights again
        return found

    def publish(self, step: int) -> None:
        """Update ``step`` is done: its weights become version ``step``, and the rollouts it allows are requested."""
        self.versions[step] = trained_parameters(self.trained.model)
        self.published = step
        for old in [old for old in self.versions if old < self.needed_version(step + 1)]:
            del self.versions[old]  # no rollout left to play or to train was played by it
        if self._process is not None:
            self._request_ready()

    def save(self, folder: Path) -> None:
        """The rollouts the worker played ahead of the checkpoint's update (it finishes them first).

        After the worker stopped at a game's failure, only those it finished before (in order): a
        resumed run plays the others.
        """
        self._start()
        with open(folder / PENDING_FILE, "w", encoding="utf-8") as handle:
            for step in range(self.published + 1, min(self.published + self.eta, self.config.run.updates) + 1):
                if self.worker_failed and step not in self.ready:
                    break
                batch = self._receive(step)
                record: dict[str, Any] = {"step": step}
                record["episodes"] = [episode.model_dump(mode="json") for episode in batch.episodes]
                handle.write(json.dumps(record) + "\n")

    def load(self, folder: Path) -> None:
        """Take back the rollouts played ahead of the checkpoint ``folder`` (the worker skips them)."""
        path = folder / PENDING_FILE
        if not path.is_file():
            return
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            episodes = [Episode.model_validate(item, context={"stored": True}) for item in record["episodes"]]
            if "temperature" in record:  # written before the episodes recorded how they were sampled (schema 3)
                for episode in episodes:
                    for played in episode.steps:
                        if played.token_ids is not None and played.temperature is None:
                            played.temperature, played.exact_logprobs = record["temperature"], record["exact_logprobs"]
            self.ready[int(record["step"])] = RolloutBatch(episodes)

    def close(self) -> None:
        """Stop the worker (after the rollout it is playing); it closes its engine."""
        if self._process is None:
            return
        self._requests.put(None)
        # A worker cannot exit while its results queue holds what it played ahead (its feeder thread
        # waits for the pipe to drain), so read and drop those rollouts until it has gone: a run that
        # stops early never trains on them, and a checkpoint already holds what a resume needs.
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        while self._process.is_alive() and time.monotonic() < deadline:
            try:
                self._results.get(timeout=_POLL_S)
            except queue.Empty:
                continue
        self._process.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._process.is_alive():
            logger.warning("the rollout worker did not stop in %.0f s; terminating it", _STOP_TIMEOUT_S)
            self._process.terminate()
            self._process.join()
        self._process = None
