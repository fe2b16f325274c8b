"""Asynchronous training: a rollout worker plays ahead with older weights while the trainer updates.

What ``loop.mode: async`` does, with eta = ``loop.max_staleness`` (:class:`AsyncRollouts`):

* **Versions.** Version v is the weights after v updates. The rollout of update u is played by
  version ``u - 1 - eta`` exactly (never older, never newer; after a resume from update s, by
  version s at the oldest). So the trainer, while it computes update u, has the worker play
  update u + 1 (eta = 1) or up to u + eta; eta = 0 is the synchronous loop, with the same
  episodes and the same weights. A fixed lag rather than "the newest weights available" keeps a
  run reproducible whatever the timing: same seed, same episodes.
* **The worker** (a thread) owns a copy of the model: for the HF engine it is the rollout model;
  for vLLM the engine gets each version pushed from it (weights, or the LoRA adapter). For each
  update in turn it waits until the version it needs is published, loads it, plays the update's
  rollout exactly as the synchronous loop would (independent groups or trees,
  :class:`training.sources.GroupRollouts`), stamps the version on every episode and model step,
  and hands it over. A whole episode is played by one version, so a long episode is admitted by
  the version it started under; nothing is dropped or played again.
* **The trainer** takes update u's rollout (waiting only if the worker is behind), credits it,
  and corrects what is stale: a sample played by a version older than the trainer's gets pi_old
  recomputed under the trainer's current weights (the proximal policy of decoupled PPO), and its
  tokens whose ratio pi_trainer / pi_engine, against the log-probabilities the engine recorded,
  leaves ``[1 - loop.trust_eps_low, 1 + loop.trust_eps_high]`` are masked out of the loss (not
  clipped: they add no gradient and do not count in the token mean). Fresh samples keep their
  recorded log-probabilities, as in the synchronous loop. After the update it publishes a copy of
  the trained parameters as the next version.
* **Checkpoints** after update s hold the rollouts s + 1 .. s + eta the worker played already
  (it finishes them first: they need versions up to s - 1), so a resumed run plays exactly what
  the uninterrupted one would: no credited sample is lost and none is trained on twice.
* **Evaluations** play on the trainer's own weights (its HF model), in the trainer's thread.

One process only (data-parallel async is not done); RTPO cannot run asynchronously (its stages
need the updated weights), which the configuration refuses.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training.config import TrainConfig
from training.credit import StepCredit
from training.distributed import World
from training.engines import RolloutBatch, RolloutEngine
from training.losses import off_policy_mask
from training.sources import GroupRollouts, RolloutSource
from training.update import PolicyUpdate, TrainSample, training_samples
from tsmg.episode import Episode

logger = logging.getLogger(__name__)

PENDING_FILE = "async_rollouts.jsonl"
#: How long a waiting thread sleeps between checks that the other side is still alive.
_POLL_S = 0.05


class PolicyVersions:
    """The trainer's published weights by version: the trainer publishes, the worker loads an older one.

    Only the trained parameters are kept (the frozen ones never change), until no rollout needs them.

    Args:
        model: The trained model.
        version: The version its weights are now.
    """

    def __init__(self, model: Any, version: int) -> None:
        self._weights: dict[int, dict[str, torch.Tensor]] = {}
        self._changed = threading.Condition()
        self.publish(version, model)

    def publish(self, version: int, model: Any) -> None:
        """Keep a copy of ``model``'s trained parameters as ``version``."""
        weights = {name: value.detach().clone() for name, value in model.named_parameters() if value.requires_grad}
        with self._changed:
            self._weights[version] = weights
            self._changed.notify_all()

    def wait(self, version: int, stopped: threading.Event) -> dict[str, torch.Tensor] | None:
        """The weights of ``version``, once published (None if ``stopped`` is set first)."""
        with self._changed:
            while version not in self._weights:
                if stopped.is_set():
                    return None
                self._changed.wait(_POLL_S)
            return self._weights[version]

    def forget_before(self, version: int) -> None:
        """Drop the versions older than ``version`` (no rollout will need them)."""
        with self._changed:
            for old in [old for old in self._weights if old < version]:
                del self._weights[old]

    def wake(self) -> None:
        """Wake a waiting worker (to see that it is stopped)."""
        with self._changed:
            self._changed.notify_all()

    @staticmethod
    def load(weights: Mapping[str, torch.Tensor], model: Any) -> None:
        """Copy ``weights`` into ``model``'s parameters of the same names."""
        parameters = dict(model.named_parameters())
        with torch.no_grad():
            for name, value in weights.items():
                parameters[name].copy_(value)


def worker_copy(backend: Any) -> Any:
    """A copy of an HF backend for another thread: its own model, tokenizer and choice tries.

    Fast tokenizers must not be used by two threads at once, and the choice tries are a cache
    without a lock, so the copy shares neither with the trainer's backend.
    """
    from backends.hf_constraints import ChoiceTries

    shadow = copy.copy(backend)
    shadow.model = copy.deepcopy(backend.model).eval()
    shadow.tokenizer = copy.deepcopy(backend.tokenizer)
    shadow.choice_tries = ChoiceTries(shadow.tokenizer, end_token=backend.eos_ids[0] if backend.eos_ids else None)
    shadow._entropy = np.random.default_rng()
    return shadow


class AsyncRollouts(RolloutSource):
    """Rollouts played ahead by a worker thread under bounded staleness (see the module docstring).

    Args:
        config: The run's configuration (``loop.mode: async``).
        engine: The engine on the trainer's own weights (evaluations).
        world: One process.
        setup: The training setup (its backend's model is copied for the worker and versioned).
        update: The update stage (recomputes stale samples' pi_old).
        make_engine: ``make_engine(backend)``: the worker's engine over its copy of the model.
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
        setup: Any,
        update: PolicyUpdate,
        make_engine: Callable[[Any], RolloutEngine],
        start_step: int = 0,
    ) -> None:
        if world.size > 1:
            raise ValueError("loop.mode 'async' runs in one process; launch without torchrun/accelerate, or use 'sync'")
        super().__init__(config, engine, world)
        self.trained = setup.backend
        self.update = update
        self.eta = config.loop.max_staleness
        self.first_version = start_step
        self.published = start_step
        self.shadow = worker_copy(setup.backend)
        self.worker = GroupRollouts(config, make_engine(self.shadow), world)
        self.versions = PolicyVersions(setup.backend.model, start_step)
        self.ready: dict[int, RolloutBatch | BaseException] = {}
        self.play_seconds: dict[int, float] = {}
        self._handed = threading.Condition()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._loaded_version = start_step

    # ------------------------------------------------------------------ the worker
    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="tsmg-rollout-worker", daemon=True)
            self._thread.start()

    def needed_version(self, step: int) -> int:
        """The version that plays update ``step``'s rollout: ``step - 1 - eta``, at least this session's first."""
        return max(step - 1 - self.eta, self.first_version)

    def _work(self) -> None:
        step = self.first_version + 1
        try:
            while step <= self.config.run.updates and not self._stopped.is_set():
                if step in self.ready:  # restored from the checkpoint
                    step += 1
                    continue
                version = self.needed_version(step)
                weights = self.versions.wait(version, self._stopped)
                if weights is None:
                    return
                if version != self._loaded_version:
                    PolicyVersions.load(weights, self.shadow.model)
                    self.worker.engine.sync()  # vLLM: push the version in; HF: the copy is the rollout model
                    self._loaded_version = version
                self.versions.forget_before(version)
                began = time.perf_counter()
                batch = self.worker.play(step, version=version)
                self.play_seconds[step] = time.perf_counter() - began
                with self._handed:
                    self.ready[step] = batch
                    self._handed.notify_all()
                step += 1
        except BaseException as error:  # handed to the trainer, which raises it
            logger.exception("the rollout worker failed at update %d", step)
            with self._handed:
                self.ready[step] = error
                self._handed.notify_all()

    def _take(self, step: int, *, keep: bool) -> RolloutBatch:
        with self._handed:
            while step not in self.ready:
                if self._thread is None or not self._thread.is_alive():
                    raise RuntimeError(f"the rollout worker stopped before playing update {step}'s rollout")
                self._handed.wait(_POLL_S)
            item = self.ready[step] if keep else self.ready.pop(step)
        if isinstance(item, BaseException):
            raise RuntimeError(f"the rollout worker failed playing update {step}: {item!r}") from item
        return item

    # ------------------------------------------------------------------ the trainer's side
    def play(self, step: int, version: int | None = None) -> RolloutBatch:
        """Update ``step``'s rollout from the worker (waiting for it if the worker is behind)."""
        self._start()
        return self._take(step, keep=False)

    def trained_credit(self, credit: Any, episodes: Sequence[Episode]) -> Any:
        """As the worker's source (trees: each shared step once)."""
        return self.worker.trained_credit(credit, episodes)

    def training_samples(
        self, steps: Sequence[StepCredit], episodes: Mapping[str, Episode], batch: RolloutBatch, step: int
    ) -> tuple[list[TrainSample], dict[str, float]]:
        """Samples, stale ones corrected: pi_old recomputed under the trainer's weights, off-policy tokens masked."""
        samples = training_samples(steps, episodes, exact_logprobs=True)
        current = step - 1
        versions = [current if sample.policy_version is None else sample.policy_version for sample in samples]
        stale = [index for index, version in enumerate(versions) if version < current]
        corrected = list(range(len(samples))) if not batch.exact_logprobs else stale
        metrics = {
            "async/staleness": float(current - min(versions, default=current)),
            "async/stale_samples": float(len(stale)),
            "async/worker_play_s": self.play_seconds.pop(step, 0.0),
        }
        if not corrected:
            return samples, {**metrics, "async/masked_token_fraction": 0.0}
        temperature = batch.temperature
        unrecorded = [replace(samples[index], behaviour_logprobs=None) for index in corrected]
        proximal = self.update.old_logprobs(unrecorded, temperature)
        # The engine's log-probabilities live in its own space: the constrained distribution
        # (HF) or the raw next-token one (vLLM); the trainer's are compared in the same space.
        comparable = proximal
        if not batch.exact_logprobs:
            comparable = self.update.old_logprobs([replace(sample, choices=None) for sample in unrecorded], temperature)
        loop = self.config.loop
        masked = counted = 0
        for position, index in enumerate(corrected):
            sample = samples[index]
            keep = None
            if versions[index] < current and sample.behaviour_logprobs is not None:
                trainer, engine = torch.tensor(comparable[position]), torch.tensor(sample.behaviour_logprobs)
                keep = off_policy_mask(trainer, engine, loop.trust_eps_low, loop.trust_eps_high).tolist()
                masked += keep.count(False)
                counted += len(keep)
            samples[index] = replace(sample, behaviour_logprobs=proximal[position], token_mask=keep)
        metrics["async/masked_token_fraction"] = masked / counted if counted else 0.0
        return samples, metrics

    def publish(self, step: int) -> None:
        """Update ``step`` is done: its weights become version ``step``."""
        self.versions.publish(step, self.trained.model)
        self.published = step

    def save(self, folder: Path) -> None:
        """The rollouts the worker played ahead of the checkpoint's update (it finishes them first)."""
        self._start()
        with open(folder / PENDING_FILE, "w", encoding="utf-8") as handle:
            for step in range(self.published + 1, min(self.published + self.eta, self.config.run.updates) + 1):
                batch = self._take(step, keep=True)
                record: dict[str, Any] = {"step": step, "temperature": batch.temperature}
                record["exact_logprobs"] = batch.exact_logprobs
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
            self.ready[int(record["step"])] = RolloutBatch(episodes, record["temperature"], record["exact_logprobs"])

    def close(self) -> None:
        """Stop the worker (after the rollout it is playing) and close its engine."""
        self._stopped.set()
        self.versions.wake()
        if self._thread is not None:
            self._thread.join()
        close_engine = getattr(self.worker.engine, "close", None)
        if close_engine is not None:
            close_engine()
