"""Credit formulas: pure functions over numpy arrays, one per method, and their building blocks.

(Past 600 lines: one home for every credit formula, so that they share their building blocks and
conventions; each function is short and stands alone.)

:func:`ms_grpo`, :func:`rloo`, :func:`dr_grpo`, :func:`gigpo`, :func:`mt_grpo`, :func:`pgpo`,
:func:`graft`, :func:`tree_grpo`, the self-play baselines (:func:`role_baseline_advantages`,
:func:`per_agent_normalized`), and the pieces they are made of (:func:`group_std`,
:func:`discounted_returns`, :func:`anchor_advantages`, :func:`state_potentials`).
``docs/algorithms.md`` states every formula with its paper. They know nothing about episodes and
are tested against hand-computed numbers; :mod:`training.credit` registers them as credit
assigners and applies them to groups of episodes. A new method adds its formula here and its
registry entry there.

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


#: How MT-GRPO lines up the non-final turns of trajectories of different lengths.
TurnAlignment = Literal["start", "end"]


def mt_grpo(
    step_rewards: Sequence[ArrayLike],
    *,
    outcome_weight: float = 1.0,
    align: TurnAlignment = "start",
    std: StdKind = "sample",
    eps: float = DEFAULT_EPS,
) -> list[FloatArray]:
    """MT-GRPO (arXiv 2505.11821) generalised to K turns: turn rewards and the outcome normalised apart.

    The two reward streams come from one trajectory's rewards: the **outcome** R^O_i is the reward
    of its final turn, the **turn rewards** r^T_{i,k} those of its other turns, so that the
    outcome term never contains the turn rewards again (they partition the return). Then

    * A^O_i = (R^O_i - mean_G R^O) / (std_G R^O + eps), over the group's outcomes;
    * A^T_{i,k} = the same normalisation of r^T_{i,k} over the group's trajectories that have a
      non-final turn in slot k (a slot only one trajectory reached gets A^T = 0);
    * a non-final turn gets A^T_{i,k} + lambda * A^O_i, the final turn A^O_i alone (the paper's
      two-turn case: turn 1 gets A^T + lambda A^O, turn 2 A^O).

    Alignment of trajectories of different lengths (``align``): ``"start"`` (default) puts turn k
    of every trajectory in slot k, counting from the first turn: the episodes of a group start
    from the same state, so their k-th moves are the comparable ones. ``"end"`` counts the
    non-final turns back from the final one (the turn before the last in one slot, and so on),
    for games where what precedes the outcome matters more than the move number. Either way the
    final turns are compared with each other only, through A^O.

    Args:
        step_rewards: Per trajectory, the reward of each of its turns (the last one is the outcome).
        outcome_weight: lambda, the weight of the outcome term on non-final turns.
        align: ``"start"`` or ``"end"`` (see above).
        std: Sample or population standard deviation.
        eps: Added to the std.

    Returns:
        Per trajectory, one advantage per turn.

    Example:
        Both episodes win (outcome 1): their final turns get the same credit, whatever their length.

        >>> [a.tolist() for a in mt_grpo([[0.0, 0.0, 1.0], [0.0, 1.0]])]
        [[0.0, 0.0, 0.0], [0.0, 0.0]]

        An apple on the first turn, the same (empty) outcome: only the first turns differ.

        >>> [a.tolist() for a in mt_grpo([[1.0, 0.0], [0.0, 0.0]], std="population", eps=0.0)]
        [[1.0, 0.0], [-1.0, 0.0]]
    """
    rewards = [np.asarray(values, dtype=np.float64) for values in step_rewards]
    outcomes = [float(values[-1]) if values.size else 0.0 for values in rewards]
    outcome_term = ms_grpo(outcomes, std=std, eps=eps) if rewards else np.zeros(0)
    advantages = [np.full(values.size, outcome_term[index]) for index, values in enumerate(rewards)]
    slots: dict[int, list[tuple[int, int]]] = defaultdict(list)  # slot -> (trajectory, turn)
    for index, values in enumerate(rewards):
        non_final = values.size - 1
        for turn in range(non_final):
            slots[turn if align == "start" else non_final - 1 - turn].append((index, turn))
    for members in slots.values():
        if len(members) < 2:
            turn_term = np.zeros(len(members))
        else:
            turn_term = ms_grpo([rewards[index][turn] for index, turn in members], std=std, eps=eps)
        for (index, turn), value in zip(members, turn_term, strict=True):
            advantages[index][turn] = value + outcome_weight * outcome_term[index]
    return advantages


def state_potentials(
    step_returns: Sequence[FloatArray], step_keys: Sequence[Sequence[Hashable]]
) -> dict[Hashable, float]:
    """PGPO's potential of each anchor state: the mean step return over every visit to it in the group.

    Example:
        >>> state_potentials([np.array([1.0, 0.5]), np.array([0.0])], [["s", "t"], ["s"]])
        {'s': 0.5, 't': 0.5}
    """
    totals: dict[Hashable, list[float]] = defaultdict(list)
    for returns, keys in zip(step_returns, step_keys, strict=True):
        for value, key in zip(returns, keys, strict=True):
            totals[key].append(float(value))
    return {key: float(np.mean(values)) for key, values in totals.items()}


def pgpo(
    step_rewards: Sequence[ArrayLike],
    step_keys: Sequence[Sequence[Hashable]],
    next_keys: Sequence[Sequence[Hashable | None]],
    terminal: Sequence[bool],
    successes: ArrayLike,
    *,
    gamma: float = 0.95,
    alpha: float = 2.0,
    beta: float = 1.0,
    std: StdKind = "sample",
    eps: float = DEFAULT_EPS,
) -> list[FloatArray]:
    """PGPO (arXiv 2609.02236): anchor-state step term plus a success-adaptive potential-difference term.

    * Potential Phi(s) = mean step return R_t = sum_{k >= t} gamma^(k-t) r_k over every visit to
      anchor state s in the group (:func:`state_potentials`); a state never visited as a decision
      state (e.g. where a truncated episode stopped) has Phi = 0: nothing was collected after it.
    * delta_t = r_t + gamma Phi(s_{t+1}) - Phi(s_t); at the last step of an episode that
      terminated, delta_t = gamma r_final - Phi(s_t) (the terminal state's potential is its
      reward). In games that pay only at the end, r_t = 0 before the last step and this is the
      paper's gamma Phi(s_{t+1}) - Phi(s_t); with per-step rewards r_t keeps an apple eaten at
      step t from counting against that step.
    * A^phi = delta standardised within the anchor group of s_t (singleton or zero spread: 0).
    * A^S = GiGPO's step term (:func:`anchor_advantages` over the step returns).
    * w = beta (1 - p_succ)^alpha, p_succ the group's success rate: the potential term weighs most
      where the group mostly fails, so that failed trajectories still tell good moves from bad.
    * A = A^S + w A^phi. The episode term is left out on purpose.

    Args:
        step_rewards: Per trajectory, the reward of each step.
        step_keys: Per trajectory, the anchor state key of each step.
        next_keys: Per trajectory, the key of the state each step led to (None: not recorded).
        terminal: Per trajectory, whether its last step ended the game.
        successes: Per trajectory, 1.0 for a success, 0.0 otherwise.
        gamma: Discount of the step returns and of the potential difference.
        alpha: Exponent of the success-adaptive weight.
        beta: Scale of the success-adaptive weight.
        std: Sample or population standard deviation of the anchor-group standardisations.
        eps: Added to the std.

    Returns:
        Per trajectory, one advantage per step.
    """
    rewards = [np.asarray(values, dtype=np.float64) for values in step_rewards]
    if not len(rewards) == len(step_keys) == len(next_keys) == len(terminal):
        raise ValueError("step_rewards, step_keys, next_keys and terminal must have one entry per trajectory")
    step_returns = [discounted_returns(values, gamma) for values in rewards]
    potential = state_potentials(step_returns, step_keys)
    deltas = []
    for values, keys, successors, ends in zip(rewards, step_keys, next_keys, terminal, strict=True):
        delta = np.zeros(values.size)
        for t in range(values.size):
            if ends and t == values.size - 1:
                delta[t] = gamma * values[t] - potential[keys[t]]
            else:
                following = potential.get(successors[t], 0.0) if successors[t] is not None else 0.0
                delta[t] = values[t] + gamma * following - potential[keys[t]]
        deltas.append(delta)
    flat_keys = [key for keys in step_keys for key in keys]
    lengths = np.cumsum([values.size for values in rewards])[:-1]
    anchor_term = anchor_advantages(_flat(step_returns), flat_keys, std=std, eps=eps)
    potential_term = anchor_advantages(_flat(deltas), flat_keys, std=std, eps=eps)
    success_rate = float(np.mean(np.asarray(successes, dtype=np.float64))) if len(rewards) else 0.0
    weight = beta * (1.0 - success_rate) ** alpha
    return list(np.split(anchor_term + weight * potential_term, lengths)) if rewards else []


def _flat(arrays: Sequence[FloatArray]) -> FloatArray:
    return np.concatenate(arrays) if arrays else np.zeros(0)


def _graph(
    step_keys: Sequence[Sequence[Hashable]],
    next_keys: Sequence[Sequence[Hashable | None]],
    terminal: Sequence[bool],
) -> tuple[list[list[Hashable]], list[list[Hashable]]]:
    """GRAFT's nodes: each step's own node and its successor node (terminal and unknown ends kept apart)."""
    sources: list[list[Hashable]] = []
    targets: list[list[Hashable]] = []
    for index, (keys, successors, ends) in enumerate(zip(step_keys, next_keys, terminal, strict=True)):
        sources.append([("state", key) for key in keys])
        row: list[Hashable] = []
        for t, successor in enumerate(successors):
            if ends and t == len(keys) - 1:
                row.append(("terminal", successor))  # every terminal node has V = 0
            elif successor is None:
                row.append(("unknown", index, t))  # an end nobody can share: a sink of its own
            else:
                row.append(("state", successor))
        targets.append(row)
    return sources, targets


def _solve_on_graph(
    edges: dict[Hashable, list[tuple[float, Hashable]]], discount: float, sweeps: int | None, tol: float
) -> dict[Hashable, float]:
    """Gauss-Seidel for X(s) = mean over the out-edges (c, s') of s of c + discount X(s'); sinks are 0.

    Nodes are swept from the sinks backwards (fewest hops to a sink first), so an acyclic graph
    converges in one sweep; cycles (a move into a wall keeps the state) take a few more.
    """
    hops: dict[Hashable, int] = {}
    frontier = [node for targets in edges.values() for _, node in targets if node not in edges]
    predecessors: dict[Hashable, list[Hashable]] = defaultdict(list)
    for node, targets in edges.items():
        for _, successor in targets:
            predecessors[successor].append(node)
    distance = 0
    seen = set(frontier)
    while frontier:
        distance += 1
        following = []
        for node in frontier:
            for parent in predecessors[node]:
                if parent not in seen:
                    seen.add(parent)
                    hops[parent] = distance
                    following.append(parent)
        frontier = following
    order = sorted(edges, key=lambda node: hops.get(node, distance + 1))
    values: dict[Hashable, float] = dict.fromkeys(edges, 0.0)
    limit = sweeps if sweeps is not None else 10_000
    for _ in range(limit):
        change = 0.0
        for node in order:
            targets = edges[node]
            updated = sum(cost + discount * values.get(successor, 0.0) for cost, successor in targets) / len(targets)
            change = max(change, abs(updated - values[node]))
            values[node] = updated
        if change <= tol:
            break
    return values


def graft(
    step_rewards: Sequence[ArrayLike],
    step_keys: Sequence[Sequence[Hashable]],
    next_keys: Sequence[Sequence[Hashable | None]],
    terminal: Sequence[bool],
    *,
    gamma: float = 0.95,
    lam: float = 0.95,
    sweeps: int | None = None,
    tol: float = 1e-10,
) -> list[FloatArray]:
    """GRAFT (arXiv 2609.28963): Bellman values on the group's state graph, step credit by Graph GAE.

    * Graph: the group's steps merged by state key; each step is an edge s -> s' carrying its
      reward r. A terminal end is a node of value 0 (the final reward is on the edge into it: the
      paper's "terminal nodes take the outcome", with the outcome moved onto the last edge so
      that per-step rewards are counted once). A state where a truncated episode stopped and that
      no step left is a sink of value 0 too (nothing was collected after it).
    * Values: V(s) = sum_{(s,a,s')} n(s,a,s')/n(s) (r + gamma V(s')), the empirical Bellman
      equation, solved by Gauss-Seidel sweeps from the sinks (to ``tol``, or ``sweeps`` at most).
    * Edge advantage delta = r + gamma V(s') - V(s).
    * Graph GAE: A_t = delta_t + gamma lam G(s'_t), G(s) = mean over the out-edges e of s of
      (delta_e + gamma lam G(s'_e)), G = 0 at sinks: the (gamma lam)^h-weighted mean delta over
      the edges h hops on. With V solved to convergence every node's mean out-edge delta is 0,
      so G = 0 and Graph GAE equals one-step TD (the invariant the tests check); with a sweep
      cap, lam carries V's remaining error forward.

    A state reached once and left once has V = r + gamma V(s') and delta = 0: credit goes to the
    steps where trajectories through the same state went different ways.

    Args:
        step_rewards: Per trajectory, the reward of each step.
        step_keys: Per trajectory, the state key of each step.
        next_keys: Per trajectory, the key of the state each step led to (None: not recorded).
        terminal: Per trajectory, whether its last step ended the game.
        gamma: Discount.
        lam: Graph GAE's lambda.
        sweeps: Most Gauss-Seidel sweeps (None: until the largest change is below ``tol``).
        tol: Convergence tolerance of the sweeps.

    Returns:
        Per trajectory, one advantage per step.

    Example:
        One state, two moves: one to the goal (reward 1), one into a hole. V(start) = 0.5.

        >>> [a.tolist() for a in graft([[1.0], [0.0]], [["start"], ["start"]], [["goal"], ["hole"]], [True, True])]
        [[0.5], [-0.5]]
    """
    rewards = [np.asarray(values, dtype=np.float64) for values in step_rewards]
    if not len(rewards) == len(step_keys) == len(next_keys) == len(terminal):
        raise ValueError("step_rewards, step_keys, next_keys and terminal must have one entry per trajectory")
    sources, targets = _graph(step_keys, next_keys, terminal)
    reward_edges: dict[Hashable, list[tuple[float, Hashable]]] = defaultdict(list)
    for values, row_sources, row_targets in zip(rewards, sources, targets, strict=True):
        for reward, source, target in zip(values, row_sources, row_targets, strict=True):
            reward_edges[source].append((float(reward), target))
    value = _solve_on_graph(reward_edges, gamma, sweeps, tol)
    deltas = [
        np.array(
            [r + gamma * value.get(target, 0.0) - value[source] for r, source, target in zip(values, s, t, strict=True)]
        )
        for values, s, t in zip(rewards, sources, targets, strict=True)
    ]
    delta_edges: dict[Hashable, list[tuple[float, Hashable]]] = defaultdict(list)
    for delta, row_sources, row_targets in zip(deltas, sources, targets, strict=True):
        for value_delta, source, target in zip(delta, row_sources, row_targets, strict=True):
            delta_edges[source].append((float(value_delta), target))
    onward = _solve_on_graph(delta_edges, gamma * lam, None, tol)
    return [
        delta + gamma * lam * np.array([onward.get(target, 0.0) for target in row_targets])
        for delta, row_targets in zip(deltas, targets, strict=True)
    ]


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
