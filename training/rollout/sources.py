"""Where each update's episodes come from, and which of their steps the update trains.

The training loop (:mod:`training.trainer`) asks a :class:`RolloutSource` for the rollout of
update u (:meth:`~RolloutSource.play`), lets the credit assigner score it, and asks the source
which credited steps to train (:meth:`~RolloutSource.trained_credit`) and how to turn them into
samples (:meth:`~RolloutSource.training_samples`). Sources:

* :class:`GroupRollouts`: independent groups of ``rollout.group_size`` episodes per seed
  (``rollout.shape: groups``), or trees of as many leaves (``rollout.shape: tree``,
  :mod:`training.rollout.tree`: each shared prefix step trained once, weighted by ``rollout.tree.shared_steps``);
* :class:`training.rollout.rtpo.ReverseTurnRollouts`: RTPO's reverse-turn stages (``rollout.shape: rtpo``);
* :class:`training.rollout.async_loop.AsyncRollouts`: any of the first kind played ahead by a worker
  process with older weights (``loop.mode: async``).

:func:`training.rollout.build.build_rollouts` picks the run's source; it lives apart from this
module so that the sources (which build on :class:`RolloutSource`) and the choice among them
import in one direction.

Each episode records the policy version that played it (:func:`stamp_policy_version`): version v
is the weights after v updates, so the synchronous loop plays update u with version u - 1.
Annotators (:mod:`training.annotators`, e.g. IAPO's influence-graph annotators) run once on every
rollout as it is handed over (``_handed_over``), in the process that played it: the trainer's
under ``loop.mode: sync``, the rollout worker's under ``async`` (:mod:`training.rollout.async_loop`: the
trainer then runs none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from training.annotators import annotate
from training.config import RolloutConfig, RunConfig
from training.credit import CreditAssignment, StepCredit
from training.distributed import World
from training.rollout.engines import RolloutBatch, RolloutEngine, check_rollout, independent_groups, play_sharded
from training.rollout.selfplay import Opponents
from training.rollout.tree import TreeBrancher, share_prefix_steps, tree_plans
from training.update import TrainSample, training_samples
from tsmg.episode import Episode
from tsmg.seeding import derive_seed, seed_generator

# What each generator of update u is for: seed_generator(run.seed, u, PURPOSE) / derive_seed(...).
GAME_SEEDS, SAMPLING, SAMPLER, BRANCH_SAMPLING, REFILL = 0, 1, 2, 3, 4


def mark_trained_steps(episodes: Sequence[Episode], credit: CreditAssignment) -> None:
    """Record on every step of an update's episodes whether the update trains on it (``StepRecord.trains``).

    The one place that decides it. A step trains when the update's final credit assignment
    credits it and it holds what a sample needs (prompt ids and tokens). The final credit already
    says whose steps and which of them: the trained seats the model played (the credit
    assigner's ``agent`` and ``credit_if``, from ``Episode.model_seats``), then the steps the
    rollout's shape trains (:meth:`RolloutSource.trained_credit`: a tree's shared prefix step
    once, RTPO's re-decided turn). Every other step, failed and unchosen episodes' included,
    is marked False. :func:`training.update.training_samples` leaves out the steps marked False.
    """
    credited = {(item.episode_id, item.step_index) for item in credit.steps()}
    for episode in episodes:
        for index, step in enumerate(episode.steps):
            step.trains = (episode.episode_id, index) in credited and bool(step.token_ids and step.prompt_token_ids)


def stamp_policy_version(episodes: Sequence[Episode], version: int) -> None:
    """Record that ``version`` played ``episodes``: on each episode, and on each model step not stamped yet.

    Steps copied from an earlier episode (a tree's shared prefix, RTPO's replayed turns) keep the
    version that played them; scripted seats (no tokens) get none.
    """
    for episode in episodes:
        episode.policy_version = version
        for step in episode.steps:
            if step.policy_version is None and step.token_ids is not None:
                step.policy_version = version


class RolloutSource:
    """The rollouts of a run, update by update (the synchronous defaults; subclasses play them).

    Args:
        rollout: The rollout section (game, groups, shape, annotators).
        run: The run section (its ``seed`` and ``eval_seed_start``: the game seeds it draws from).
        engine: Plays episodes with the current policy (and evaluations: :attr:`eval_engine`).
        world: This process's place among the training processes.
        opponents: Who plays the seats the model does not, group by group (:mod:`training.rollout.selfplay`;
            None: the engine's own seating).
    """

    def __init__(
        self,
        rollout: RolloutConfig,
        run: RunConfig,
        engine: RolloutEngine,
        world: World,
        opponents: Opponents | None = None,
    ) -> None:
        self.rollout = rollout
        self.run = run
        self.engine = engine
        self.world = world
        self.opponents = opponents

    @property
    def eval_engine(self) -> RolloutEngine:
        """The engine evaluations play on: the trainer's current weights."""
        return self.engine

    def play(self, step: int, version: int | None = None) -> RolloutBatch:
        """The rollout of update ``step``, played by policy ``version`` (default ``step - 1``, the current one)."""
        raise NotImplementedError

    def play_refill(self, step: int, refill: int) -> RolloutBatch:
        """New groups for update ``step``, refill round ``refill`` (dynamic sampling; independent groups only)."""
        raise NotImplementedError(f"{type(self).__name__} plays no refill rounds (sampler.refill_zero_variance)")

    def trained_credit(self, credit: CreditAssignment, episodes: Sequence[Episode]) -> CreditAssignment:
        """The credited steps the update trains (all of them here)."""
        return credit

    def training_samples(
        self, steps: Sequence[StepCredit], episodes: Mapping[str, Episode], batch: RolloutBatch, step: int
    ) -> tuple[list[TrainSample], dict[str, float]]:
        """Samples of the drawn steps (:func:`training.update.training_samples`), and metrics of any correction."""
        return training_samples(steps, episodes), {}

    def publish(self, step: int) -> None:
        """Update ``step`` is done: the engine gets its weights."""
        self.engine.sync()

    def save(self, folder: Path) -> None:
        """Add what a resumed run needs to the checkpoint being written into ``folder`` (nothing here)."""

    def load(self, folder: Path) -> None:
        """Take back what :meth:`save` wrote, from the checkpoint ``folder`` (nothing here)."""

    def close(self) -> None:
        """Stop anything the source runs (nothing here; the engine is closed by its owner)."""

    def _seeds(self, step: int) -> tuple[Any, int]:
        """The generator of update ``step``'s game seeds and its LAP run seed."""
        run = self.run
        return seed_generator(run.seed, step, GAME_SEEDS), derive_seed(run.seed, step, SAMPLING)

    def _handed_over(self, batch: RolloutBatch, version: int) -> RolloutBatch:
        stamp_policy_version(batch.episodes, version)
        annotate(self.rollout.annotators, batch.episodes)
        return batch


class GroupRollouts(RolloutSource):
    """Independent groups, or trees (``rollout.shape``), of ``rollout.group_size`` episodes per seed."""

    def play(self, step: int, version: int | None = None) -> RolloutBatch:
        """Play update ``step``'s groups (or trees), sharded over processes by group."""
        rollout, run = self.rollout, self.run
        rng, seed = self._seeds(step)
        if rollout.shape == "tree":
            plans = tree_plans(rollout, step, rng, run.eval_seed_start)
            brancher = TreeBrancher(rollout.tree, rollout.group_size, plans)
            batch = play_sharded(self.engine, plans, rollout.tree.roots, self.world, seed=seed, branch=brancher)
        else:
            plans = independent_groups(rollout, step, rng, run.eval_seed_start)
            engine = self.engine
            if self.opponents is not None:  # a rotating seat or a pool opponent, group by group
                engine = self.opponents.engine(self.engine, self.opponents.seating(plans, step))
            batch = play_sharded(engine, plans, rollout.group_size, self.world, seed=seed)
        return self._handed_over(batch, step - 1 if version is None else version)

    def play_refill(self, step: int, refill: int) -> RolloutBatch:
        """Dynamic sampling's refill round ``refill`` (from 1) of update ``step``: new groups, new seeds, new ids.

        Independent groups only (the configuration refuses refills with trees, seats chosen group by
        group, RTPO or asynchronous rollouts); see :mod:`training.rollout.dynamic_sampling`.
        """
        rollout, run = self.rollout, self.run
        rng = seed_generator(run.seed, step, REFILL, refill)
        plans = independent_groups(rollout, step, rng, run.eval_seed_start, refill=refill)
        seed = derive_seed(run.seed, step, REFILL, refill)
        batch = play_sharded(self.engine, plans, rollout.group_size, self.world, seed=seed)
        check_rollout(batch, self.rollout)
        return self._handed_over(batch, step - 1)

    def trained_credit(self, credit: CreditAssignment, episodes: Sequence[Episode]) -> CreditAssignment:
        """Trees: each shared prefix step once, as ``rollout.tree.shared_steps`` weighs it."""
        if self.rollout.shape != "tree":
            return credit
        return share_prefix_steps(credit, episodes, self.rollout.tree.shared_steps)
