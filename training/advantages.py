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
from collections.abc import Hashable, Mapping, Sequence
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


# --------------------------------------------------------------------------- self-play (zero-sum games)
# SPIRAL's role-conditioned baseline and MARSHAL's per-agent normalisation; docs/selfplay.md derives both.
def role_baseline_advantages(
    returns: ArrayLike, roles: Sequence[str], baselines: Mapping[str, float], *, alpha: float = 0.95
) -> tuple[FloatArray, dict[str, float]]:
    """SPIRAL's role-conditioned advantages (RAE), trajectory by trajectory in the order given.

    For trajectory i played in role p = roles[i] (a game and a seat):
    A_i = R_i - b_p, then b_p <- alpha * b_p + (1 - alpha) * R_i. The advantage uses the baseline
    *before* R_i enters it, as SPIRAL's code does ("get the baseline before updating to be
    unbiased"), so with alpha = 0 it is R_i minus the previous return of the same role. A role
    seen for the first time starts from b = 0 (SPIRAL's EMA starts at 0).

    Why per role: in a zero-sum game seat 1 and seat 2 face different expected returns (the first
    mover's advantage in tic-tac-toe, the second player's +1/18 in Kuhn poker); one shared
    baseline would credit a seat for where it sits instead of how it played. A role's baseline
    reads only that role's returns. Derivation and choices: ``docs/selfplay.md``.

    Args:
        returns: R_i of each trajectory, in the order they update the baselines.
        roles: The role of each trajectory (e.g. ``"KuhnPoker-v0/player_1"``).
        baselines: b_p of every role seen so far (not modified).
        alpha: The baseline's decay (SPIRAL uses 0.95).

    Returns:
        One advantage per trajectory, and the baselines after all of them.

    Example:
        >>> advantages, after = role_baseline_advantages([1.0, -1.0, 1.0], ["x", "o", "x"], {}, alpha=0.5)
        >>> advantages.tolist(), after
        ([1.0, -1.0, 0.5], {'x': 0.75, 'o': -0.5})
    """
    values = np.asarray(returns, dtype=np.float64)
    if len(roles) != values.size:
        raise ValueError(f"got {values.size} returns but {len(roles)} roles")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    updated = dict(baselines)
    advantages = np.zeros_like(values)
    for index, role in enumerate(roles):
        baseline = updated.get(role, 0.0)
        advantages[index] = values[index] - baseline
        updated[role] = alpha * baseline + (1.0 - alpha) * float(values[index])
    return advantages, updated


def per_agent_normalized(
    step_values: Sequence[ArrayLike],
    agents: Sequence[Hashable],
    *,
    normalizer: Normalizer = "std",
    std: StdKind = "sample",
    eps: float = DEFAULT_EPS,
) -> list[FloatArray]:
    """MARSHAL's agent-specific normalisation: each agent's step values standardised over its own steps only.

    For agent p, over every step t of every trajectory that p played: A_t = (v_t - mean_p) / F_p,
    F_p = std_p + eps (``normalizer="std"``) or 1 (``"none"``: centring only). Each agent's
    advantages then have mean 0, whatever the other agents' values are.

    Why per agent: seats of one game see returns of different scale and sign (the first player
    wins more; a cooperative helper's returns may barely move); one batch-wide normaliser would
    leave one seat's advantages all positive and the other's all negative. See ``docs/selfplay.md``.

    Args:
        step_values: Per trajectory, one value per step (e.g. turn-level returns).
        agents: The agent of each trajectory.
        normalizer: F = the agent's std + eps ("std") or 1 ("none").
        std: Sample or population standard deviation.
        eps: Added to the std.

    Returns:
        Per trajectory, one advantage per step.

    Example:
        >>> [a.tolist() for a in per_agent_normalized([[1.0], [3.0], [5.0, 5.0]], ["a", "a", "b"], normalizer="none")]
        [[-1.0], [1.0], [0.0, 0.0]]
    """
    arrays = [np.asarray(values, dtype=np.float64) for values in step_values]
    if len(agents) != len(arrays):
        raise ValueError(f"got {len(arrays)} trajectories but {len(agents)} agents")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, agent in enumerate(agents):
        members[agent].append(index)
    normalized = [np.zeros_like(values) for values in arrays]
    for indices in members.values():
        lengths = [arrays[index].size for index in indices]
        flat = np.concatenate([arrays[index] for index in indices])
        scaled = _normalised(flat, normalizer, std, eps) if flat.size else flat
        for index, part in zip(indices, np.split(scaled, np.cumsum(lengths)[:-1]), strict=True):
            normalized[index] = part
    return normalized


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
