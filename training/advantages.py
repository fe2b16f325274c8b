"""Credit formulas: pure functions over numpy arrays, one per method, and their building blocks.

:func:`ms_grpo`, :func:`rloo`, :func:`dr_grpo`, :func:`gigpo`, :func:`mt_grpo`, and the pieces
they are made of (:func:`group_std`, :func:`discounted_returns`, :func:`anchor_advantages`). They
know nothing about episodes and are tested against hand-computed numbers; :mod:`training.credit`
registers them as credit assigners and applies them to groups of episodes. A new method adds its
formula here and its registry entry there.

Conventions chosen where the methods' papers leave room (each repeated where it applies):

* Standard deviation: the *sample* standard deviation (ddof = 1) by default, as TRL's GRPO and
  verl / verl-agent compute it (``torch.std``); ``std="population"`` (ddof = 0) is available.
  A group of one has no spread: its advantages are 0 under either choice.
* Equal returns: returns whose spread is at most :data:`EQUAL_RETURNS_ATOL` count as equal and give
  exactly zero advantages, so float rounding (0.1 + 0.2 vs 0.3) never turns into a signal.
* Multi-agent: credit is assigned per agent; an agent's trajectories are compared only with the
  same agent's trajectories in the same group, and its return is its episode return.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

#: Which standard deviation normalises a group: ddof = 1 ("sample") or ddof = 0 ("population").
StdKind = Literal["sample", "population"]
#: GiGPO's normaliser F: the group's standard deviation (plus eps) or 1.
Normalizer = Literal["std", "none"]

#: Returns whose max - min is at most this are treated as equal (zero signal).
EQUAL_RETURNS_ATOL = 1e-9
DEFAULT_EPS = 1e-6


# --------------------------------------------------------------------------- pure functions
def returns_are_equal(returns: ArrayLike, atol: float = EQUAL_RETURNS_ATOL) -> bool:
    """Whether a group's returns are all equal (then it carries no signal).

    Example:
        >>> returns_are_equal([1.0, 1.0, 1.0]), returns_are_equal([0.0, 1.0])
        (True, False)
    """
    values = np.asarray(returns, dtype=np.float64)
    return values.size == 0 or float(np.ptp(values)) <= atol


def group_std(returns: ArrayLike, std: StdKind = "sample") -> float:
    """Standard deviation of a group's returns.

    Why a choice: GRPO's papers write σ without saying which; the reference implementations
    (TRL, verl, verl-agent) use the sample standard deviation (ddof = 1), the default here. It
    is undefined for one value, where this returns 0 (a group of one carries no signal anyway).

    Example:
        >>> group_std([0.0, 1.0]), group_std([0.0, 1.0], std="population")
        (0.7071067811865476, 0.5)
    """
    values = np.asarray(returns, dtype=np.float64)
    ddof = 1 if std == "sample" else 0
    if values.size <= ddof:
        return 0.0
    return float(np.std(values, ddof=ddof))


def _centred(returns: ArrayLike) -> FloatArray:
    """R - mean(R), exactly zero for a group whose returns are equal."""
    values = np.asarray(returns, dtype=np.float64)
    if returns_are_equal(values):
        return np.zeros_like(values)
    centred: FloatArray = values - values.mean()
    return centred


def _divide(centred: FloatArray, scale: float) -> FloatArray:
    """Divide ``centred`` by ``scale``; a zero scale only occurs with all-zero ``centred`` (equal values, eps = 0)."""
    if scale <= 0.0:
        return centred
    divided: FloatArray = centred / scale
    return divided


def ms_grpo(returns: ArrayLike, *, std: StdKind = "sample", eps: float = DEFAULT_EPS) -> FloatArray:
    """MS-GRPO / GRPO episode advantages: A_i = (R_i - mean_G) / (std_G + eps).

    Every step (and every token) of episode i then carries A_i.

    Args:
        returns: The return R_i of each episode of one group.
        std: Sample (ddof = 1, default) or population (ddof = 0) standard deviation.
        eps: Keeps the division finite for a group of (nearly) equal returns.

    Returns:
        One advantage per episode; all zero when the returns are all equal.

    Example:
        >>> ms_grpo([1.0, 0.0, 0.0, 0.0], std="population").round(3).tolist()
        [1.732, -0.577, -0.577, -0.577]
    """
    return _divide(_centred(returns), group_std(returns, std) + eps)


def dr_grpo(returns: ArrayLike) -> FloatArray:
    """Dr.GRPO episode advantages: A_i = R_i - mean_G (no division by the standard deviation).

    Why: dividing by std up-weights groups whose returns barely differ (a question that is
    almost always solved or almost never), a difficulty bias Dr.GRPO removes.

    Example:
        >>> dr_grpo([1.0, 0.0, 0.0, 0.0]).tolist()
        [0.75, -0.25, -0.25, -0.25]
    """
    return _centred(returns)


def rloo(returns: ArrayLike) -> FloatArray:
    """RLOO advantages: A_i = R_i - mean_{j != i} R_j = G / (G - 1) * (R_i - mean_G).

    A group of one has no other episode to compare with; its advantage is 0.

    Example:
        >>> rloo([1.0, 0.0, 0.0, 0.0]).tolist()
        [1.0, -0.3333333333333333, -0.3333333333333333, -0.3333333333333333]
    """
    centred = _centred(returns)
    size = centred.size
    if size < 2:
        return np.zeros_like(centred)
    scaled: FloatArray = centred * (size / (size - 1))
    return scaled


def discounted_returns(rewards: ArrayLike, gamma: float = 0.95) -> FloatArray:
    """Step returns R_t = sum_{k >= t} gamma^(k - t) r_k of one trajectory.

    Example:
        >>> discounted_returns([0.0, 0.0, 1.0], gamma=0.5).tolist()
        [0.25, 0.5, 1.0]
    """
    values = np.asarray(rewards, dtype=np.float64)
    step_returns = np.zeros_like(values)
    running = 0.0
    for index in range(values.size - 1, -1, -1):
        running = float(values[index]) + gamma * running
        step_returns[index] = running
    return step_returns


def _normalised(values: FloatArray, normalizer: Normalizer, std: StdKind, eps: float) -> FloatArray:
    """(v - mean) / F with F = std + eps or 1; zero for equal values."""
    centred = _centred(values)
    if normalizer == "none":
        return centred
    return _divide(centred, group_std(values, std) + eps)


def anchor_advantages(
    values: ArrayLike,
    keys: Sequence[Hashable],
    *,
    normalizer: Normalizer = "std",
    std: StdKind = "sample",
    eps: float = DEFAULT_EPS,
) -> FloatArray:
    """GiGPO step term: normalise each value within the anchor group of steps sharing its key.

    A^S_t = (R_t - mean over its anchor group) / F. A key seen once forms a singleton group and
    gets 0 (there is nothing to compare with); so does a group whose values are all equal.

    Why singletons get 0: the step term is relative; a state no other step of the group visited
    offers no other action to compare with, so it adds nothing and the step keeps its episode
    term. (Some GiGPO forks use mean 0 and F = 1 for a singleton, which turns its raw step return
    into an advantage.)

    Args:
        values: One step return per step (all steps of one group's trajectories, flattened).
        keys: The anchor state key of each step (same length as ``values``).
        normalizer: F = the anchor group's std + eps ("std") or 1 ("none").
        std: Sample or population standard deviation for F.
        eps: Added to the std.

    Returns:
        One step advantage per value.

    Example:
        >>> anchor_advantages([1.0, 0.0, 5.0], ["a", "a", "b"], normalizer="none").tolist()
        [0.5, -0.5, 0.0]
    """
    array = np.asarray(values, dtype=np.float64)
    if len(keys) != array.size:
        raise ValueError(f"got {array.size} values but {len(keys)} keys")
    positions: dict[Hashable, list[int]] = defaultdict(list)
    for position, key in enumerate(keys):
        positions[key].append(position)
    advantages = np.zeros_like(array)
    for members in positions.values():
        if len(members) > 1:
            advantages[members] = _normalised(array[members], normalizer, std, eps)
    return advantages


def gigpo(
    episode_returns: ArrayLike,
    step_rewards: Sequence[ArrayLike],
    step_keys: Sequence[Sequence[Hashable]],
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    normalizer: Normalizer = "std",
    std: StdKind = "sample",
    eps: float = DEFAULT_EPS,
) -> list[FloatArray]:
    """GiGPO advantages of one group: A = A^E + omega * A^S per step.

    A^E_i = (R_i - mean_G) / F is the episode term (F = std_G + eps or 1); A^S is the step term
    of :func:`anchor_advantages` over the discounted step returns of every step of the group,
    anchored by state key.

    Args:
        episode_returns: R_i of each trajectory.
        step_rewards: Per trajectory, the reward of each of its steps.
        step_keys: Per trajectory, the state key of each of its steps.
        gamma: Discount of the step returns.
        omega: Weight of the step term.
        normalizer: F for both terms: "std" or "none" (F = 1).
        std: Sample or population standard deviation.
        eps: Added to the std.

    Returns:
        Per trajectory, one advantage per step.

    Example:
        >>> [a.tolist() for a in gigpo([1.0, 0.0], [[0.0, 1.0], [0.0]], [["s", "t"], ["s"]], normalizer="none")]
        [[0.975, 0.5], [-0.975]]
    """
    returns = np.asarray(episode_returns, dtype=np.float64)
    if not len(step_rewards) == len(step_keys) == returns.size:
        raise ValueError("episode_returns, step_rewards and step_keys must have one entry per trajectory")
    episode_term = _normalised(returns, normalizer, std, eps)
    step_returns = [discounted_returns(rewards, gamma) for rewards in step_rewards]
    lengths = [values.size for values in step_returns]
    flat_keys = [key for keys in step_keys for key in keys]
    flat_returns = np.concatenate(step_returns) if step_returns else np.zeros(0)
    step_term = anchor_advantages(flat_returns, flat_keys, normalizer=normalizer, std=std, eps=eps)
    per_trajectory = np.split(step_term, np.cumsum(lengths)[:-1]) if lengths else []
    return [episode_term[index] + omega * term for index, term in enumerate(per_trajectory)]


def mt_grpo(
    step_rewards: Sequence[ArrayLike],
    *,
    outcome_weight: float = 1.0,
    std: StdKind = "sample",
    eps: float = DEFAULT_EPS,
) -> list[FloatArray]:
    """MT-GRPO generalised to K turns: turn k gets A^T_k + lambda * A^O.

    A^O_i is the group-normalised return (as :func:`ms_grpo`); A^T_{i,k} normalises the reward of
    turn k over the trajectories of the group that have a turn k (a turn index only one
    trajectory reached gets A^T = 0).

    Why turns are aligned by index: the games here give a reward every turn and MT-GRPO compares
    "the same turn" across a group; trajectories of different lengths simply leave later turns
    with fewer members.

    Args:
        step_rewards: Per trajectory, the reward of each of its turns.
        outcome_weight: lambda, the weight of the outcome term.
        std: Sample or population standard deviation.
        eps: Added to the std.

    Returns:
        Per trajectory, one advantage per turn.
    """
    rewards = [np.asarray(values, dtype=np.float64) for values in step_rewards]
    outcome = ms_grpo([float(values.sum()) for values in rewards], std=std, eps=eps)
    turn_terms = [np.zeros_like(values) for values in rewards]
    longest = max((values.size for values in rewards), default=0)
    for turn in range(longest):
        members = [index for index, values in enumerate(rewards) if values.size > turn]
        if len(members) < 2:
            continue
        normalised = ms_grpo([rewards[index][turn] for index in members], std=std, eps=eps)
        for index, value in zip(members, normalised, strict=True):
            turn_terms[index][turn] = value
    return [turn_terms[index] + outcome_weight * outcome[index] for index in range(len(rewards))]


# --------------------------------------------------------------------------- tree rollouts
#: How a step shared by n leaves of a tree (a prefix before a fork) is trained: once with the mean
#: of its leaves' advantages ("mean": each leaf counts 1/n), once with sqrt(n) x that mean ("sqrt":
#: each leaf counts 1/sqrt(n)), or once per leaf ("each": the flat, over-weighting baseline).
SharedSteps = Literal["mean", "sqrt", "each"]


def tree_grpo(
    returns: ArrayLike, trees: Sequence[Hashable], *, std: StdKind = "sample", eps: float = DEFAULT_EPS
) -> FloatArray:
    """Tree-GRPO leaf advantages: inter-tree plus intra-tree group normalisation.

    A_i = (R_i - mean_G) / (std_G + eps) + (R_i - mean_T(i)) / (std_T(i) + eps), where G is the
    group (every leaf from one start state) and T(i) the tree of leaf i (the leaves that share
    its root). The inter-tree term compares a tree's leaves with every leaf of the group; the
    intra-tree term compares leaves that share a prefix, so it reflects only the decisions after
    their forks. A tree of one leaf has no intra-tree term.

    Args:
        returns: The return of each leaf (each episode of the group).
        trees: The tree (any hashable, e.g. the root episode's id) of each leaf.
        std: Sample (ddof = 1, default) or population (ddof = 0) standard deviation.
        eps: Keeps the divisions finite.

    Example:
        >>> tree_grpo([1.0, 0.0, 0.0, 0.0], ["a", "a", "b", "b"], std="population").round(3).tolist()
        [2.732, -1.577, -0.577, -0.577]
    """
    values = np.asarray(returns, dtype=np.float64)
    if len(trees) != values.size:
        raise ValueError(f"one tree per return: {len(trees)} trees for {values.size} returns")
    advantages = ms_grpo(values, std=std, eps=eps)
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, tree in enumerate(trees):
        members[tree].append(index)
    for indices in members.values():
        advantages[indices] += ms_grpo(values[indices], std=std, eps=eps)
    return advantages


def shared_step_advantage(leaf_advantages: ArrayLike, shared_steps: SharedSteps) -> float:
    """The advantage a step shared by n leaves is trained with once: n^p x the mean of its leaves' advantages.

    p = 0 for "mean" (each leaf weighs 1/n), 1/2 for "sqrt" (1/sqrt(n)), 1 for "each" (what training
    the step once per leaf adds up to in the gradient).

    Example:
        >>> [shared_step_advantage([1.0, 0.0, 0.0, -3.0], rule) for rule in ("mean", "sqrt", "each")]
        [-0.5, -1.0, -2.0]
    """
    values = np.asarray(leaf_advantages, dtype=np.float64)
    if values.size == 0:
        raise ValueError("a shared step has at least one leaf")
    power = {"mean": 0.0, "sqrt": 0.5, "each": 1.0}[shared_steps]
    return float(values.size**power * values.mean())
