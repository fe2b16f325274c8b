"""Who plays the seats of a multi-agent game while a model trains: self-play, a fixed opponent, or a pool of its past.

Three set-ups (``rollout`` section; formulas and choices in ``docs/selfplay.md``):

* **Self-play** (``self_play: true``, or no opponent at all): the one model plays every seat and
  every seat is trained. Nothing here is needed; the rollout engine plays the model everywhere.
* **A fixed opponent** (``opponent: random``, ``oracle``, ``hf:PATH`` ...): the model plays
  ``train_agents`` (``seating: fixed``) or, with ``seating: rotate``, seat ``(k + update) mod n``
  of group ``k`` so that it learns every seat against the same opponent.
* **An opponent pool** (``opponent_pool``): each group draws one entry among past checkpoints
  (those listed, and the run's own snapshots: the initial weights, then every
  ``snapshot_every`` updates) to play every seat but the model's.

:class:`Opponents` turns that into, for each update, a :class:`Seating` per group, a rollout
engine that plays each group with its seating (:class:`SeatedEngine`, over the trainer's own
engine), the predicate that credits only the model's seats, and the rollout metrics of those
seats. Every draw comes from ``seed_generator(run.seed, update, POOL_DRAWS)``, so the same run
replays the same opponents; the run's snapshots live in ``RUN/opponent_pool/step-N`` (laid out
like checkpoints, written atomically), and a resumed run drops those taken after its checkpoint.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import TrainableModel
from training.checkpoint import checkpoint_weights, run_checkpoints, weights_saver
from training.config import ModelConfig, RolloutConfig, RunConfig
from training.distributed import World
from training.rollout.engines import RolloutBatch, RolloutEngine
from tsmg.episode import Episode
from tsmg.policies import CompactView, Policy
from tsmg.rollout import Brancher, EpisodePlan
from tsmg.seeding import derive_seed, seed_generator
from tsmg.summary import EpisodeSummary, summarize, summarize_seats

#: Purpose key of the opponent pool's draws: ``seed_generator(run.seed, update, POOL_DRAWS)``.
POOL_DRAWS = 14
#: Purpose key of the seed of the pool opponents' own sampling in an update.
POOL_SAMPLING = 15
POOL_DIR = "opponent_pool"


class OpponentPoolError(ValueError):
    """An opponent pool that cannot be used (a folder without checkpoints yet); the message says which."""


@dataclass(frozen=True)
class Seating:
    """Who plays one group: the model in ``model_seats``, ``opponent`` in the others (None: the model everywhere).

    Attributes:
        model_seats: The seats the model plays (and trains).
        opponent: The policy of the other seats.
    """

    model_seats: tuple[str, ...]
    opponent: Policy | None = None


def group_key(item: EpisodePlan | Episode) -> str:
    """The group a plan or an episode belongs to (its own id when it has no group)."""
    return item.group_id or item.episode_id


@dataclass(frozen=True)
class PoolEntry:
    """One opponent of the pool.

    Attributes:
        label: How records name it (``pool:step-20`` for a snapshot, ``pool:RUN/checkpoints/step-10``).
        path: Its checkpoint or model folder.
    """

    label: str
    path: Path


def pool_sources(paths: Sequence[str]) -> list[PoolEntry]:
    """The checkpoints listed in ``opponent_pool.checkpoints``, resolved, in order.

    Raises:
        OpponentPoolError: A path that does not exist or holds no checkpoint yet.
    """
    entries = []
    for text in paths:
        folder = Path(text).expanduser()
        if not folder.exists():
            raise OpponentPoolError(f"opponent_pool.checkpoints: {text} does not exist")
        found = run_checkpoints(folder)
        if not found:
            raise OpponentPoolError(
                f"opponent_pool.checkpoints: {text} holds no checkpoints yet (checkpoints/step-N with model/ or "
                "adapter/, or a final/ model); train that run first, or name a checkpoint or model folder"
            )
        entries += [PoolEntry(f"pool:{path}", path) for path in found]
    return entries


def check_opponents(rollout: RolloutConfig) -> None:
    """Refuse an opponent set-up that cannot start, before any model loads (the game's part: ``validate_against_game``).

    Raises:
        OpponentPoolError: A listed pool folder that holds no checkpoint yet.
    """
    pool = rollout.opponent_pool
    if pool is not None:
        pool_sources(pool.checkpoints)


class OpponentPool:
    """The pool's entries, the policies that play them, and the run's own snapshots.

    Args:
        rollout: The run's ``rollout`` section (``opponent_pool`` set; the LAP and view the entries play with).
        model: The run's ``model`` section (how snapshots are saved and entries loaded).
        run: The run's ``run`` section (the torch threads of a loaded entry).
        run_dir: The run folder (snapshots go to ``RUN/opponent_pool``).
        world: This process's place among the training processes (rank 0 writes snapshots).
        resume_step: The checkpoint a resumed run starts from (snapshots after it are dropped);
            None for a fresh run.
    """

    #: Opponents kept loaded at once (a draw of an unloaded one loads it again).
    LOADED = 8

    def __init__(
        self,
        rollout: RolloutConfig,
        model: ModelConfig,
        run: RunConfig,
        run_dir: Path,
        world: World,
        resume_step: int | None,
    ) -> None:
        pool = rollout.opponent_pool
        assert pool is not None
        self.rollout, self.model, self.run = rollout, model, run
        self.pool = pool
        self.world = world
        self.folder = run_dir / POOL_DIR
        self.listed = pool_sources(pool.checkpoints)
        self._backends: dict[Path, Any] = {}
        if world.is_main and self.folder.is_dir():
            for step, path in self._snapshots():
                if resume_step is None or step > resume_step:  # a fresh run, or taken after the checkpoint
                    shutil.rmtree(path)
        world.barrier()

    def _snapshots(self) -> list[tuple[int, Path]]:
        if not self.folder.is_dir():
            return []
        found = []
        for child in self.folder.iterdir():
            name = child.name
            if name.startswith("step-") and name[5:].isdigit() and checkpoint_weights(child) is not None:
                found.append((int(name[5:]), child))
        return sorted(found)

    def entries(self) -> list[PoolEntry]:
        """The entries draws choose among: the newest ``latest`` of the listed ones then the snapshots."""
        entries = self.listed + [PoolEntry(f"pool:step-{step}", path) for step, path in self._snapshots()]
        if self.pool.latest is not None:
            entries = entries[-self.pool.latest :]
        if not entries:
            raise OpponentPoolError("the opponent pool has no checkpoints yet")
        return entries

    def due(self, step: int) -> bool:
        """Whether the run's weights after ``step`` updates join the pool (step 0: the initial weights)."""
        every = self.pool.snapshot_every
        return bool(every) and step % every == 0 and not (self.folder / f"step-{step}").exists()

    def snapshot(self, step: int, backend: TrainableModel) -> None:
        """Add the current weights as ``step-{step}`` (rank 0 writes; every rank waits)."""
        if self.world.is_main:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary = self.folder / f".tmp-step-{step}"
            shutil.rmtree(temporary, ignore_errors=True)
            temporary.mkdir()
            weights_saver(backend, self.model.finetune)(temporary)
            temporary.replace(self.folder / f"step-{step}")
        self.world.barrier()

    def policy(self, entry: PoolEntry, seed: int) -> Policy:
        """The LAP that plays ``entry`` (the trained model's prompt, action format and view), named by its label."""
        from backends.hf import HFBackend
        from tsmg.lap import LAP

        backend = self._backends.get(entry.path)
        if backend is None:
            weights = checkpoint_weights(entry.path)
            model, adapter = (str(entry.path), None) if weights is None else (weights.model, weights.adapter)
            backend = HFBackend(
                model, adapter=adapter, name=entry.label, dtype=self.model.dtype, threads=self.run.threads
            )
            if len(self._backends) >= self.LOADED:  # the oldest loaded opponent makes room
                self._backends.pop(next(iter(self._backends)))
            self._backends[entry.path] = backend
        lap = LAP(backend, self.rollout.lap.model_copy(update={"seed": seed}), name=entry.label)
        return CompactView(lap, self.rollout.observation_lines)


class SeatedEngine:
    """A rollout engine that plays each group with its own :class:`Seating` (over an engine that plays the model).

    Plans are split by seating and each share is played by ``engine.with_seats(...)``; the
    episodes come back in plan order. Sampling seeds follow the plan positions, so the split
    changes no episode.

    Args:
        engine: The trainer's rollout engine.
        seating: The seating of every group (by :func:`group_key`).
    """

    def __init__(self, engine: Any, seating: Mapping[str, Seating]) -> None:  # Any: with_seats is the HF/vLLM engines'
        self.engine = engine
        self.seating = seating

    def play(
        self,
        plans: Sequence[EpisodePlan],
        *,
        seed: int,
        temperature: float | None = None,
        branch: Brancher | None = None,
    ) -> RolloutBatch:
        """Play ``plans``, each group with its seating; see :meth:`training.rollout.engines.RolloutEngine.play`.

        Raises:
            ValueError: ``branch`` is given: trees are not seated group by group (the configuration refuses it).
        """
        if branch is not None:
            raise ValueError("tree rollouts cannot seat their groups one by one; use rollout.shape 'groups'")
        shares: dict[tuple[tuple[str, ...], int], list[int]] = {}
        for index, plan in enumerate(plans):
            seating = self.seating[group_key(plan)]
            shares.setdefault((seating.model_seats, id(seating.opponent)), []).append(index)
        episodes: list[Episode | None] = [None] * len(plans)
        for indices in shares.values():
            seating = self.seating[group_key(plans[indices[0]])]
            engine = self.engine.with_seats(seating.model_seats, seating.opponent)
            batch = engine.play([plans[index] for index in indices], seed=seed, temperature=temperature)
            for index, episode in zip(indices, batch.episodes, strict=True):
                episodes[index] = episode
        return RolloutBatch([episode for episode in episodes if episode is not None])

    def sync(self) -> None:
        """Make the underlying engine sample from the trainer's current weights."""
        self.engine.sync()


class Opponents:
    """The seats of every update: what the trainer asks about opponents (see the module docstring).

    Args:
        rollout: The run's ``rollout`` section (who plays the other seats, and how seats are chosen).
        model: The run's ``model`` section (an opponent pool saves and loads its entries so).
        run: The run's ``run`` section (its seed draws the pool's entries).
        agents: The game's seats.
        run_dir: The run folder.
        world: This process's place among the training processes.
        fixed: The fixed opponent policy (``rollout.opponent``), if any.
        resume_step: The checkpoint a resumed run starts from (None: a fresh run).
    """

    def __init__(
        self,
        rollout: RolloutConfig,
        model: ModelConfig,
        run: RunConfig,
        agents: Sequence[str],
        run_dir: Path,
        world: World,
        *,
        fixed: Policy | None,
        resume_step: int | None,
    ) -> None:
        self.seed = run.seed
        self.agents = tuple(agents)
        self.fixed = fixed
        self.pool = OpponentPool(rollout, model, run, run_dir, world, resume_step) if rollout.opponent_pool else None
        #: Whether groups differ in who plays where (a rotating seat, or a pool draw per group).
        self.seated = rollout.seats_each_group
        if fixed is None and self.pool is None:  # self-play: the model plays every seat, trains train_agents (all)
            self.model_seats, self.train_seats = self.agents, tuple(rollout.train_agents or self.agents)
        elif self.seated:  # every seat is the model's in some group; the base engine plays self-play
            self.model_seats, self.train_seats = self.agents, self.agents
        else:  # a fixed opponent in fixed seats
            self.model_seats = self.train_seats = tuple(rollout.train_agents or self.agents[:1])

    @property
    def base_opponent(self) -> Policy | None:
        """The opponent of the trainer's own engine (None when groups are seated one by one, or self-play)."""
        return None if self.seated else self.fixed

    def start(self, step: int, backend: TrainableModel) -> None:
        """Before the first update of this session: the pool's snapshot of the initial (or restored) weights."""
        if self.pool is not None and self.pool.due(step):
            self.pool.snapshot(step, backend)

    def after_update(self, step: int, backend: TrainableModel) -> None:
        """After update ``step``: a snapshot of the new weights when one is due."""
        if self.pool is not None and self.pool.due(step):
            self.pool.snapshot(step, backend)

    def seating(self, plans: Sequence[EpisodePlan], update: int) -> dict[str, Seating]:
        """The seating of every group of ``plans`` in update ``update`` (groups in plan order)."""
        keys = list(dict.fromkeys(group_key(plan) for plan in plans))
        if not self.seated:
            return {key: Seating(self.model_seats, self.fixed) for key in keys}
        seats = len(self.agents)
        opponents: list[Policy | None] = [self.fixed] * len(keys)
        if self.pool is not None:
            entries = self.pool.entries()
            draws = seed_generator(self.seed, update, POOL_DRAWS).integers(len(entries), size=len(keys))
            seed = derive_seed(self.seed, update, POOL_SAMPLING)
            policies = {index: self.pool.policy(entries[index], seed) for index in sorted(set(draws.tolist()))}
            opponents = [policies[int(draw)] for draw in draws]
        return {
            key: Seating((self.agents[(position + update) % seats],), opponent)
            for position, (key, opponent) in enumerate(zip(keys, opponents, strict=True))
        }

    def eval_seating(self, plans: Sequence[EpisodePlan]) -> dict[str, Seating]:
        """The seating of held-out evaluations: as in training, except that a pool run evaluates in self-play."""
        if self.pool is not None:
            return {group_key(plan): Seating(self.agents) for plan in plans}
        return self.seating(plans, 0)

    def engine(self, engine: RolloutEngine, seating: Mapping[str, Seating]) -> RolloutEngine:
        """The engine that plays an update's plans with ``seating`` (``engine`` itself when nothing varies)."""
        return SeatedEngine(engine, seating) if self.seated else engine

    def credit_if(self) -> Callable[[Episode, str], bool] | None:
        """Credit only the seats the model played, as each episode records them (None: every trained seat)."""
        if not self.seated:
            return None
        return lambda episode, seat: seat in (episode.model_seats or ())

    def summary(self, episodes: Sequence[Episode]) -> EpisodeSummary:
        """The rollout's figures from the trained seats the model played (as each episode records them)."""
        if not self.seated:
            return summarize(episodes, list(self.train_seats))
        completed = [episode for episode in episodes if episode.error is None]
        seats = [
            (seat, episode) for episode in completed for seat in episode.model_seats or () if seat in self.train_seats
        ]
        return summarize_seats(seats, failed=len(episodes) - len(completed))
