"""Credit assigners: groups of episodes in, per-step advantages out.

(Past 600 lines: the registry is one table of every method with its parameter model and compute
function, so that a configuration can be checked against all of them in one place.)

The registry :data:`CREDIT_ASSIGNERS` names each assigner, says in one line what it does, what it
needs (``groups``, ``state_keys``, ``next_state_keys``, ``per_step_rewards``, ``teacher``, ``tree``,
``fork``, ``multi_agent``, ``influence``), which
parameters it takes and the loss aggregation its paper uses (Dr.GRPO's constant), so that a
configuration can refuse a bad combination before any model loads. The arithmetic is in
:mod:`training.advantages`; this module is the thin layer over :class:`tsmg.episode.Episode`
records: :func:`assign_credit` groups episodes by ``group_id`` and, per agent, turns each group
into a :class:`TrajectoryGroup` of arrays, calls the registered assigner and returns one
:class:`TrajectoryCredit` per (episode, agent) plus :class:`CreditStats` for the metrics.

Multi-agent: credit is assigned per agent; an agent's trajectories are compared only with the
same agent's trajectories in the same group, and its return is its episode return. Self-play
assigners (``rae``, ``marshal``; ``docs/selfplay.md``) compare a seat's trajectories across the
whole update instead (``scope="batch"``), and ``rae`` keeps a baseline per game and seat from one
update to the next (``stateful``: the trainer passes the same ``state`` every update and stores
it in its checkpoints).

To add an assigner: its formula in :mod:`training.advantages`, a ``compute(group, params)``
function and a :class:`CreditAssignerSpec` entry here (with its parameter model and needs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from training.advantages import (
    DEFAULT_EPS,
    FloatArray,
    Normalizer,
    StdKind,
    TurnAlignment,
    discounted_returns,
    dr_grpo,
    gigpo,
    graft,
    ms_grpo,
    mt_grpo,
    per_agent_normalized,
    pgpo,
    rloo,
    role_baseline_advantages,
    tree_grpo,
)
from training.iapo import routed_advantages
from training.loss_specs import Aggregation
from tsmg.episode import Episode
from tsmg.influence import EXACT, InfluenceGraph

#: What a credit assigner may need from the rollout and the game (``teacher``: a teacher model's
#: log-probabilities, configured in the ``distill`` section; ``tree``: tree-shaped rollouts,
#: ``rollout.shape: tree``; ``fork``: a game whose episodes can be forked, :meth:`tsmg.core.Game.fork`;
#: ``multi_agent``: a game of two or more seats; ``influence``: an influence graph of every episode,
#: the game's own or an annotator's, :mod:`tsmg.influence`).
Need = Literal[
    "groups",
    "state_keys",
    "next_state_keys",
    "per_step_rewards",
    "teacher",
    "tree",
    "fork",
    "multi_agent",
    "influence",
]
#: What an assigner compares a trajectory with: the same seat in its group, or the same seat in the whole update.
Scope = Literal["group", "batch"]


class AssignerParams(BaseModel):
    """Base of every assigner's parameters: unknown fields are refused, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(AssignerParams):
    """The assigner takes no parameters."""


class GroupNormParams(AssignerParams):
    """Parameters of a group-normalised (std-dividing) assigner."""

    std: StdKind = Field(default="sample", description="Sample (ddof=1) or population (ddof=0) standard deviation.")
    eps: float = Field(default=DEFAULT_EPS, gt=0.0, description="Added to the standard deviation.")


class GigpoParams(GroupNormParams):
    """Parameters of GiGPO."""

    gamma: float = Field(default=0.95, ge=0.0, le=1.0, description="Discount of the step returns.")
    omega: float = Field(default=1.0, ge=0.0, description="Weight of the step (anchor) term.")
    normalizer: Normalizer = Field(default="std", description="F: the group's std + eps ('std') or 1 ('none').")


class MtGrpoParams(GroupNormParams):
    """Parameters of MT-GRPO."""

    outcome_weight: float = Field(default=1.0, ge=0.0, description="lambda, the weight of the outcome term.")
    align: TurnAlignment = Field(
        default="start",
        description="Non-final turns of different-length episodes compared by index from the 'start' or the 'end'.",
    )


class PgpoParams(GroupNormParams):
    """Parameters of PGPO."""

    gamma: float = Field(default=0.95, ge=0.0, le=1.0, description="Discount of step returns and potentials.")
    alpha: float = Field(default=2.0, ge=0.0, description="Exponent of the success-adaptive weight (1 - p)^alpha.")
    beta: float = Field(default=1.0, ge=0.0, description="Scale of the success-adaptive weight.")


class GraftParams(AssignerParams):
    """Parameters of GRAFT."""

    gamma: float = Field(default=0.95, ge=0.0, le=1.0, description="Discount of the Bellman values.")
    lam: float = Field(default=0.95, ge=0.0, le=1.0, description="Graph GAE's lambda.")
    sweeps: int | None = Field(
        default=None, ge=1, description="Most Gauss-Seidel sweeps of the values (None: until converged)."
    )


class RaeParams(GroupNormParams):
    """Parameters of SPIRAL's role-conditioned advantage estimation."""

    alpha: float = Field(default=0.95, ge=0.0, le=1.0, description="Decay of each role's moving baseline.")
    per_agent_norm: bool = Field(
        default=False, description="Also standardise each seat's advantages over its steps of the update (MARSHAL)."
    )


class MarshalParams(GroupNormParams):
    """Parameters of MARSHAL's turn-level, per-agent normalised advantages."""

    gamma: float = Field(default=1.0, ge=0.0, le=1.0, description="Discount of the turn-level returns.")
    normalizer: Normalizer = Field(
        default="std", description="Per seat: centre and divide by std + eps ('std'), or centre only ('none')."
    )


class IapoParams(GroupNormParams):
    """Parameters of IAPO."""

    graph: str = Field(
        default=EXACT,
        min_length=1,
        description=(
            "Which of each episode's influence graphs routes the advantage: 'exact' (the game's own record) or "
            "the name of an influence annotator listed in rollout.annotators."
        ),
    )


@dataclass(frozen=True)
class TrajectoryGroup:
    """One agent's trajectories in one group, as arrays (what a credit assigner computes on).

    Attributes:
        returns: The agent's episode return of each trajectory.
        step_rewards: Per trajectory, the reward of each of the agent's steps.
        step_keys: Per trajectory, the state key of each of the agent's steps (None if unrecorded).
        next_keys: Per trajectory, the key of the state each step led to: the agent's next step's
            key, and for its last step the state the episode ended in (None if unrecorded).
        terminal: Per trajectory, whether the game ended (rather than a step limit) after its last step.
        successes: Per trajectory, 1.0 if the agent succeeded, else 0.0 (a game without a notion
            of success: a positive return counts as one).
        trees: Per trajectory, the id of the root episode of its tree (its own id outside tree
            rollouts).
        agent: The agent (seat) whose trajectories these are.
        game_ids: The game of each trajectory.
        state: What a stateful assigner keeps from one update to the next (its own mapping; None
            for a stateless one).
        influence: Per trajectory, its episode's influence graphs by maker (``Episode.influence``).
        step_indices: Per trajectory, the episode step index of each of the agent's steps (what
            an influence graph's nodes name).
    """

    returns: FloatArray
    step_rewards: list[FloatArray]
    step_keys: list[list[str | None]]
    next_keys: list[list[str | None]] = field(default_factory=list)
    terminal: list[bool] = field(default_factory=list)
    successes: FloatArray = field(default_factory=lambda: np.zeros(0))
    trees: list[str] = field(default_factory=list)
    agent: str = ""
    game_ids: tuple[str, ...] = ()
    state: dict[str, Any] | None = None
    influence: list[dict[str, InfluenceGraph]] = field(default_factory=list)
    step_indices: list[tuple[int, ...]] = field(default_factory=list)

    def broadcast(self, episode_advantages: FloatArray) -> list[FloatArray]:
        """Copy each trajectory's advantage to every one of its steps."""
        return [np.full(rewards.size, episode_advantages[index]) for index, rewards in enumerate(self.step_rewards)]


Compute = Callable[[TrajectoryGroup, Any], list[FloatArray]]


@dataclass(frozen=True)
class CreditAssignerSpec:
    """A registered credit assigner.

    Attributes:
        name: The name a configuration selects it by.
        description: One line saying what it does.
        needs: What it needs from the rollout and the game.
        params: Pydantic model of its parameters (validated when a configuration is built).
        compute: ``compute(group, params) -> per-trajectory step advantages``.
        aggregation: The loss aggregation the method's paper pairs it with (None: the loss's
            own); a configuration that leaves ``loss.aggregation`` unset gets it.
        scope: ``group``: ``compute`` sees one seat's trajectories of one group; ``batch``: one
            seat's trajectories of the whole update, in episode order.
        stateful: ``compute`` reads and updates ``group.state``, which must persist across updates.
    """

    name: str
    description: str
    needs: frozenset[Need]
    params: type[AssignerParams]
    compute: Compute = field(repr=False)
    aggregation: Aggregation | None = None
    scope: Scope = "group"
    stateful: bool = False


def _ms_grpo_group(group: TrajectoryGroup, params: GroupNormParams) -> list[FloatArray]:
    return group.broadcast(ms_grpo(group.returns, std=params.std, eps=params.eps))


def _rloo_group(group: TrajectoryGroup, params: NoParams) -> list[FloatArray]:
    return group.broadcast(rloo(group.returns))


def _dr_grpo_group(group: TrajectoryGroup, params: NoParams) -> list[FloatArray]:
    return group.broadcast(dr_grpo(group.returns))


def _keyed(group: TrajectoryGroup, name: str) -> None:
    """Refuse a group whose steps lack the state keys ``name`` merges them by."""
    if any(key is None for keys in group.step_keys for key in keys):
        raise ValueError(f"{name} needs the state key of every step, and a step was recorded without one")


def _gigpo_group(group: TrajectoryGroup, params: GigpoParams) -> list[FloatArray]:
    _keyed(group, "gigpo")
    return gigpo(
        group.returns,
        group.step_rewards,
        group.step_keys,
        gamma=params.gamma,
        omega=params.omega,
        normalizer=params.normalizer,
        std=params.std,
        eps=params.eps,
    )


def _mt_grpo_group(group: TrajectoryGroup, params: MtGrpoParams) -> list[FloatArray]:
    return mt_grpo(
        group.step_rewards, outcome_weight=params.outcome_weight, align=params.align, std=params.std, eps=params.eps
    )


def _pgpo_group(group: TrajectoryGroup, params: PgpoParams) -> list[FloatArray]:
    _keyed(group, "pgpo")
    return pgpo(
        group.step_rewards,
        group.step_keys,
        group.next_keys,
        group.terminal,
        group.successes,
        gamma=params.gamma,
        alpha=params.alpha,
        beta=params.beta,
        std=params.std,
        eps=params.eps,
    )


def _graft_group(group: TrajectoryGroup, params: GraftParams) -> list[FloatArray]:
    _keyed(group, "graft")
    return graft(
        group.step_rewards,
        group.step_keys,
        group.next_keys,
        group.terminal,
        gamma=params.gamma,
        lam=params.lam,
        sweeps=params.sweeps,
    )


def _iapo_group(group: TrajectoryGroup, params: IapoParams) -> list[FloatArray]:
    advantages = ms_grpo(group.returns, std=params.std, eps=params.eps)
    routed = []
    for graphs, indices, advantage in zip(group.influence, group.step_indices, advantages, strict=True):
        graph = graphs.get(params.graph)
        if graph is None:
            raise ValueError(
                f"iapo routes each trajectory's advantage along its influence graph {params.graph!r}, and an "
                f"episode has none (it has {sorted(graphs) or 'no graphs'}): use a game that keeps its own influence "
                "record, or list an influence annotator in rollout.annotators and name it in credit.params.graph"
            )
        routed.append(routed_advantages(graph, indices, float(advantage)))
    return routed


def _no_rl_group(group: TrajectoryGroup, params: NoParams) -> list[FloatArray]:
    return [np.zeros(rewards.size) for rewards in group.step_rewards]


def _tree_grpo_group(group: TrajectoryGroup, params: GroupNormParams) -> list[FloatArray]:
    return group.broadcast(tree_grpo(group.returns, group.trees, std=params.std, eps=params.eps))


def _rae_seat(group: TrajectoryGroup, params: RaeParams) -> list[FloatArray]:
    """One seat's trajectories of the update against its role baselines (kept in ``group.state``)."""
    if group.state is None:
        raise ValueError("rae keeps a baseline per game and seat across updates and needs a state mapping")
    roles = [role_key(game_id, group.agent) for game_id in group.game_ids]
    advantages, baselines = role_baseline_advantages(group.returns, roles, group.state, alpha=params.alpha)
    group.state.update(baselines)
    per_step = group.broadcast(advantages)
    if params.per_agent_norm:
        per_step = per_agent_normalized(per_step, [group.agent] * len(per_step), std=params.std, eps=params.eps)
    return per_step


def _marshal_seat(group: TrajectoryGroup, params: MarshalParams) -> list[FloatArray]:
    """Turn-level returns of one seat's steps, standardised over that seat's steps of the update."""
    turn_returns = [discounted_returns(rewards, params.gamma) for rewards in group.step_rewards]
    return per_agent_normalized(
        turn_returns, [group.agent] * len(turn_returns), normalizer=params.normalizer, std=params.std, eps=params.eps
    )


def role_key(game_id: str, agent: str) -> str:
    """The role a baseline is kept for: a game and a seat (``"KuhnPoker-v0/player_1"``)."""
    return f"{game_id}/{agent}"


CREDIT_ASSIGNERS: dict[str, CreditAssignerSpec] = {
    spec.name: spec
    for spec in (
        CreditAssignerSpec(
            "ms-grpo",
            "group-normalised episode return (R - mean) / (std + eps), copied to every step (MS-GRPO)",
            frozenset({"groups"}),
            GroupNormParams,
            _ms_grpo_group,
        ),
        CreditAssignerSpec(
            "rloo",
            "leave-one-out baseline R_i - mean of the others, copied to every step (RLOO)",
            frozenset({"groups"}),
            NoParams,
            _rloo_group,
        ),
        CreditAssignerSpec(
            "dr-grpo",
            "episode return minus the group mean, no std division, copied to every step; loss summed over tokens "
            "/ a constant (Dr.GRPO)",
            frozenset({"groups"}),
            NoParams,
            _dr_grpo_group,
            aggregation="constant",
        ),
        CreditAssignerSpec(
            "gigpo",
            "episode term plus omega x step term over anchor states grouped by state key (GiGPO)",
            frozenset({"groups", "state_keys"}),
            GigpoParams,
            _gigpo_group,
        ),
        CreditAssignerSpec(
            "mt-grpo",
            "turn k: its reward normalised over the group's turn k + lambda x the normalised final-turn outcome; "
            "the final turn: the outcome term alone (MT-GRPO, K turns)",
            frozenset({"groups", "per_step_rewards"}),
            MtGrpoParams,
            _mt_grpo_group,
        ),
        CreditAssignerSpec(
            "pgpo",
            "GiGPO's anchor-state term + (1 - success rate)^alpha x the standardised potential difference "
            "gamma Phi(s') - Phi(s), Phi = mean step return of a state (PGPO)",
            frozenset({"groups", "state_keys", "next_state_keys"}),
            PgpoParams,
            _pgpo_group,
        ),
        CreditAssignerSpec(
            "graft",
            "state graph of the group, Bellman values by Gauss-Seidel, step credit r + gamma V(s') - V(s) "
            "by Graph GAE (GRAFT)",
            frozenset({"groups", "state_keys", "next_state_keys"}),
            GraftParams,
            _graft_group,
        ),
        CreditAssignerSpec(
            "iapo",
            "MS-GRPO's advantage L routed over a trajectory's actions by its influence graph: w_i L, "
            "w_i = n (1 + d_i) / sum_j (1 + d_j), d_i = actions that used i's output (support edges if L > 0, "
            "failure if L < 0); conserves n L and L's sign (IAPO)",
            frozenset({"groups", "influence"}),
            IapoParams,
            _iapo_group,
        ),
        CreditAssignerSpec(
            "opd",
            "on-policy distillation alone: every token's advantage is log pi_teacher - log pi_student "
            "(distill.teacher); with any other assigner, distill.teacher adds lambda x that term (OPD)",
            frozenset({"teacher"}),
            NoParams,
            _no_rl_group,
        ),
        CreditAssignerSpec(
            "tree-grpo",
            "tree rollouts: inter-tree plus intra-tree normalised leaf return; shared prefix steps weighted by "
            "rollout.tree.shared_steps (Tree-GRPO)",
            frozenset({"groups", "tree"}),
            GroupNormParams,
            _tree_grpo_group,
        ),
        CreditAssignerSpec(
            "rae",
            "R minus a moving baseline per game and seat, b <- alpha b + (1 - alpha) R, kept across updates (SPIRAL)",
            frozenset({"multi_agent"}),
            RaeParams,
            _rae_seat,
            scope="batch",
            stateful=True,
        ),
        CreditAssignerSpec(
            "marshal",
            "turn-level returns standardised per seat over that seat's steps of the whole update (MARSHAL)",
            frozenset({"multi_agent"}),
            MarshalParams,
            _marshal_seat,
            scope="batch",
        ),
    )
}


def credit_assigner(name: str) -> CreditAssignerSpec:
    """The registered assigner called ``name``.

    Raises:
        ValueError: No assigner has that name (the message lists the valid names).
    """
    try:
        return CREDIT_ASSIGNERS[name]
    except KeyError:
        raise ValueError(f"unknown credit assigner {name!r}; choose one of {sorted(CREDIT_ASSIGNERS)}") from None


def resolve_params(name: str, params: Mapping[str, Any] | AssignerParams | None = None) -> AssignerParams:
    """Validate ``params`` for the assigner ``name`` and fill in its defaults.

    Raises:
        ValueError: Unknown assigner, or parameters it does not accept (pydantic says which).
    """
    spec = credit_assigner(name)
    if isinstance(params, spec.params):
        return params
    if isinstance(params, AssignerParams):
        params = params.model_dump()
    return spec.params.model_validate(dict(params or {}))


# --------------------------------------------------------------------------- over episodes
@dataclass(frozen=True)
class TrajectoryCredit:
    """The advantages of one agent's steps in one episode.

    Attributes:
        episode_id: The episode.
        group_id: Its group (the episode id for an episode without a group).
        agent: The agent whose steps these are.
        episode_return: The agent's return in the episode.
        step_indices: Index in ``episode.steps`` of each of the agent's steps.
        advantages: One advantage per entry of ``step_indices``.
    """

    episode_id: str
    group_id: str
    agent: str
    episode_return: float
    step_indices: tuple[int, ...]
    advantages: FloatArray

    @property
    def sampling_advantage(self) -> float:
        """Mean |A| over the steps: the |A_i| that advantage-weighted sampling draws by.

        Why the mean of |A_t|: for the episode-constant assigners (MS-GRPO, RLOO, Dr.GRPO) it is
        exactly |A_i|; for step-level assigners (GiGPO) a trajectory whose episode term is 0 but
        whose steps carry signal must stay drawable. A trajectory without steps has 0.
        """
        return float(np.abs(self.advantages).mean()) if self.advantages.size else 0.0


@dataclass(frozen=True)
class CreditStats:
    """What a credit assignment saw, for the metrics.

    Attributes:
        groups: Comparison sets (one per group and agent).
        zero_signal_groups: Comparison sets that give the update nothing: every step's advantage is
            0 (for the group-normalised assigners, a group whose returns are all equal, singletons
            included). None where the count means nothing and is not reported: an assigner that
            compares no groups (``opd``, whose signal is the teacher's; ``rae``, ``marshal``).
        singleton_groups: Comparison sets of one trajectory.
        trajectories: Trajectories credited.
        steps: Steps credited.
        zero_advantage_steps: Steps whose advantage is exactly 0.
        mean_abs_advantage: Mean |A| over steps (0 without steps).
    """

    groups: int = 0
    zero_signal_groups: int | None = 0
    singleton_groups: int = 0
    trajectories: int = 0
    steps: int = 0
    zero_advantage_steps: int = 0
    mean_abs_advantage: float = 0.0

    def as_metrics(self, prefix: str = "credit/") -> dict[str, float]:
        """The stats as namespaced metrics, plus the zero-signal fraction (both left out where they mean nothing)."""
        metrics = {f"{prefix}{name}": float(value) for name, value in vars(self).items() if value is not None}
        if self.zero_signal_groups is not None:
            metrics[f"{prefix}zero_signal_fraction"] = self.zero_signal_groups / self.groups if self.groups else 0.0
        return metrics


@dataclass(frozen=True)
class StepCredit:
    """One credited step: the unit of training (prompt at that step, the answer written there).

    Attributes:
        trajectory: Index of its trajectory in :attr:`CreditAssignment.trajectories`.
        episode_id: The episode.
        agent: Who took the step.
        step_index: Index in ``episode.steps``.
        advantage: The step's advantage (every token of the answer carries it).
        draw: Which draw of the sampler brought the step in (the steps of one drawn trajectory
            share it; a sequence-level loss takes them as one sequence).
    """

    trajectory: int
    episode_id: str
    agent: str
    step_index: int
    advantage: float
    draw: int = 0


@dataclass(frozen=True)
class CreditAssignment:
    """Result of :func:`assign_credit`: per-trajectory advantages and their stats."""

    trajectories: list[TrajectoryCredit]
    stats: CreditStats

    def sampling_advantages(self) -> FloatArray:
        """One |A| per trajectory, in order (the input of the episode samplers)."""
        return np.array([credit.sampling_advantage for credit in self.trajectories], dtype=np.float64)

    def steps(self, trajectories: Iterable[int] | None = None) -> list[StepCredit]:
        """The credited steps of the given trajectory indices (repeats kept; None: every trajectory).

        Example (after drawing trajectories with a sampler):
            ``credit.steps(sample("aaw", credit.sampling_advantages(), 32, rng).indices)``
        """
        chosen = range(len(self.trajectories)) if trajectories is None else trajectories
        return [
            StepCredit(int(position), credit.episode_id, credit.agent, index, float(value), draw)
            for draw, position in enumerate(chosen)
            for credit in (self.trajectories[int(position)],)
            for index, value in zip(credit.step_indices, credit.advantages, strict=True)
        ]

    def step_advantages(self) -> dict[tuple[str, int], float]:
        """Advantage keyed by (episode id, step index) for every credited step."""
        return {
            (credit.episode_id, index): float(value)
            for credit in self.trajectories
            for index, value in zip(credit.step_indices, credit.advantages, strict=True)
        }


def agent_return(episode: Episode, agent: str) -> float:
    """The agent's episode return (its recorded return, else the sum of its step rewards)."""
    if agent in episode.returns:
        return float(episode.returns[agent])
    return float(sum(step.reward for step in episode.steps_of(agent)))


def trajectory_group(episodes: Sequence[Episode], agent: str, state: dict[str, Any] | None = None) -> TrajectoryGroup:
    """Arrays of one agent's trajectories in a group of episodes (``state``: a stateful assigner's memory)."""
    returns = np.array([agent_return(episode, agent) for episode in episodes], dtype=np.float64)
    step_keys = [[step.state_key for step in episode.steps_of(agent)] for episode in episodes]
    return TrajectoryGroup(
        returns=returns,
        step_rewards=[
            np.array([step.reward for step in episode.steps_of(agent)], dtype=np.float64) for episode in episodes
        ],
        step_keys=step_keys,
        next_keys=[
            [*keys[1:], episode.final_state_keys.get(agent)] if keys else []
            for keys, episode in zip(step_keys, episodes, strict=True)
        ],
        terminal=[episode.terminated for episode in episodes],
        successes=np.array(
            [
                float(success) if (success := episode.success.get(agent)) is not None else float(value > 0)
                for episode, value in zip(episodes, returns, strict=True)
            ],
            dtype=np.float64,
        ),
        trees=tree_roots(episodes),
        agent=agent,
        game_ids=tuple(episode.game_id for episode in episodes),
        state=state,
        influence=[episode.influence for episode in episodes],
        step_indices=[
            tuple(index for index, step in enumerate(episode.steps) if step.agent == agent) for episode in episodes
        ],
    )


def tree_roots(episodes: Sequence[Episode]) -> list[str]:
    """The id of each episode's tree: its root, following ``parent_id`` within ``episodes`` (its own id if none).

    Example:
        >>> names = [("a", None), ("b", "a"), ("c", "b"), ("d", None)]
        >>> tree_roots([Episode(episode_id=i, parent_id=p, game_id="g", agents=[], policies={}) for i, p in names])
        ['a', 'a', 'a', 'd']
    """
    parent = {episode.episode_id: episode.parent_id for episode in episodes}
    roots = []
    for episode in episodes:
        node, seen = episode.episode_id, {episode.episode_id}
        while (up := parent.get(node)) is not None and up in parent and up not in seen:
            node = up
            seen.add(up)
        roots.append(node)
    return roots


def _selected_agents(episodes: Sequence[Episode], agent: str | Iterable[str] | None) -> list[str]:
    present = list(dict.fromkeys(name for episode in episodes for name in episode.agents))
    if agent is None:
        return present
    wanted = [agent] if isinstance(agent, str) else list(agent)
    missing = [name for name in wanted if name not in present]
    if missing:
        raise ValueError(f"agent(s) {missing} play in none of the episodes; their agents are {present}")
    return wanted


def assign_credit(
    name: str,
    episodes: Sequence[Episode],
    *,
    agent: str | Iterable[str] | None = None,
    params: Mapping[str, Any] | AssignerParams | None = None,
    credit_if: Callable[[Episode, str], bool] | None = None,
    state: dict[str, Any] | None = None,
) -> CreditAssignment:
    """Per-step advantages of every (episode, agent) with the registered assigner ``name``.

    Episodes are grouped by ``group_id``; within a group each agent's trajectories are compared
    with the same agent's trajectories only. An assigner of ``scope="batch"`` compares each
    agent's trajectories across all the episodes instead, in their order.

    Args:
        name: A registered assigner (see :data:`CREDIT_ASSIGNERS`).
        episodes: Finished episodes; episodes of a group share their start.
        agent: The agent(s) to credit (the seats being trained); None credits every agent.
        params: The assigner's parameters (defaults where missing).
        credit_if: Whether to credit a seat of an episode at all (e.g. only the seats the trained
            model played when it shares a game with opponents); None credits every seat in ``agent``.
        state: The memory of a stateful assigner, updated in place; pass the same mapping every
            update (and keep it with the checkpoints). None: a fresh one for this call.

    Returns:
        One :class:`TrajectoryCredit` per (episode, credited agent) that plays in the episode, in
        the order of ``episodes`` then agents, and the stats.

    Raises:
        ValueError: Unknown assigner or parameters, an unknown agent, or a need the episodes do
            not meet (e.g. GiGPO on steps without state keys).
    """
    spec = credit_assigner(name)
    resolved = resolve_params(name, params)
    agents = _selected_agents(episodes, agent)
    memory = None
    if spec.stateful:
        memory = (state if state is not None else {}).setdefault(spec.name, {})
    positions: dict[str, list[int]] = {}
    for position, episode in enumerate(episodes):
        key = (episode.group_id or episode.episode_id) if spec.scope == "group" else ""
        positions.setdefault(key, []).append(position)
    credits: dict[tuple[int, str], TrajectoryCredit] = {}
    groups = zero_signal = singletons = 0
    for members in positions.values():
        for seat in agents:
            playing = [
                position
                for position in members
                if seat in episodes[position].agents and (credit_if is None or credit_if(episodes[position], seat))
            ]
            if not playing:
                continue
            group = trajectory_group([episodes[position] for position in playing], seat, memory)
            advantages = spec.compute(group, resolved)
            groups += 1
            singletons += len(playing) == 1
            zero_signal += not carries_signal(advantages)
            for position, episode_return, values in zip(playing, group.returns, advantages, strict=True):
                episode = episodes[position]
                indices = tuple(index for index, step in enumerate(episode.steps) if step.agent == seat)
                group_id = episode.group_id or episode.episode_id
                credits[(position, seat)] = TrajectoryCredit(
                    episode.episode_id, group_id, seat, float(episode_return), indices, values
                )
    ordered = [credits[key] for key in sorted(credits, key=lambda key: (key[0], agents.index(key[1])))]
    compares_groups = "groups" in spec.needs  # else a "group" is no comparison set and its signal no measure
    return CreditAssignment(ordered, _stats(ordered, groups, zero_signal if compares_groups else None, singletons))


def carries_signal(advantages: Iterable[FloatArray]) -> bool:
    """Whether a comparison set's trajectories give the update anything: some step's advantage is not 0.

    Example:
        >>> carries_signal([np.zeros(2), np.zeros(1)]), carries_signal([np.zeros(2), np.array([0.5])])
        (False, True)
    """
    return any(bool(np.any(values != 0.0)) for values in advantages)


def comparison_sets(trajectories: Sequence[TrajectoryCredit]) -> tuple[int, int, int]:
    """(comparison sets, those without signal, singletons) of credited trajectories (a set: one agent's in one group).

    Example:
        >>> one = TrajectoryCredit("e1", "g1", "p", 1.0, (0,), np.array([0.7]))
        >>> two = TrajectoryCredit("e2", "g1", "p", 0.0, (0,), np.array([-0.7]))
        >>> alone = TrajectoryCredit("e3", "g2", "p", 0.0, (0,), np.array([0.0]))
        >>> comparison_sets([one, two, alone])
        (2, 1, 1)
    """
    sets: dict[tuple[str, str], list[FloatArray]] = {}
    for trajectory in trajectories:
        sets.setdefault((trajectory.group_id, trajectory.agent), []).append(trajectory.advantages)
    zero_signal = sum(not carries_signal(members) for members in sets.values())
    return len(sets), zero_signal, sum(len(members) == 1 for members in sets.values())


def credit_state_metrics(state: Mapping[str, Any], prefix: str = "credit/") -> dict[str, float]:
    """The numbers stateful assigners keep, as metrics: ``credit/rae/KuhnPoker-v0/player_1`` is a role's baseline.

    Example:
        >>> credit_state_metrics({"rae": {"TicTacToe-v0/player_0": 0.25}})
        {'credit/rae/TicTacToe-v0/player_0': 0.25}
    """
    return {
        f"{prefix}{assigner}/{key}": float(value)
        for assigner, memory in state.items()
        if isinstance(memory, Mapping)
        for key, value in memory.items()
        if isinstance(value, int | float)
    }


def _stats(credits: Sequence[TrajectoryCredit], groups: int, zero_signal: int | None, singletons: int) -> CreditStats:
    values = np.concatenate([credit.advantages for credit in credits]) if credits else np.zeros(0)
    return CreditStats(
        groups=groups,
        zero_signal_groups=zero_signal,
        singleton_groups=singletons,
        trajectories=len(credits),
        steps=int(values.size),
        zero_advantage_steps=int(np.count_nonzero(values == 0.0)),
        mean_abs_advantage=float(np.abs(values).mean()) if values.size else 0.0,
    )
