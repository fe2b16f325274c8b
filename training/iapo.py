"""IAPO's routing rule (after arXiv 2608.24588): a trajectory's advantage spread over its actions by its graph.

The trajectory's group-normalised advantage L (MS-GRPO's, :func:`training.advantages.ms_grpo`) is
redistributed over its n actions with routing weights w_i from the episode's influence graph
(:class:`tsmg.influence.InfluenceGraph`): action i gets ``w_i * L``.

**The routing rule.** Let d_i be the number of the trajectory's actions downstream of action i:
those that used i's output (i itself, or a tool message its call returned), directly or through
other actions, along the graph's ``support`` edges when L > 0 and its ``failure`` edges when L < 0
(:meth:`tsmg.influence.InfluenceGraph.downstream_actions`). Then

    w_i = n * (1 + d_i) / sum_j (1 + d_j)

so an action whose output later actions built on gets more of a success (a lookup whose order id
the refund used) and more of the blame for a failure that its failed call propagated into.

**Invariants** (tested in ``tests/training/test_iapo.py``): w_i > 0 (so every action keeps L's
sign), sum_i w_i = n (so sum_i w_i L = n L: the trajectory's total is MS-GRPO's), a graph without
edges of the relevant kind gives w_i = 1 (MS-GRPO exactly), and L = 0 gives 0 at every action.
A step with no action node in the graph (a decision the game did not record as an action) has
d = 0 and still downstream of nothing.

Example:
    >>> from tsmg.influence import InfluenceEdge, InfluenceGraph, InfluenceNode
    >>> graph = InfluenceGraph(
    ...     nodes=[InfluenceNode(id=f"a{i}", kind="action", step=i) for i in range(3)],
    ...     edges=[InfluenceEdge(source="a0", target="a2", kind="support")],
    ... )
    >>> routing_weights(graph, (0, 1, 2), "support").tolist()
    [1.5, 0.75, 0.75]
    >>> routed_advantages(graph, (0, 1, 2), -1.0).tolist()  # no failure edges: uniform
    [-1.0, -1.0, -1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from training.advantages import FloatArray
from tsmg.influence import EdgeKind, InfluenceGraph


def routing_weights(graph: InfluenceGraph, step_indices: Sequence[int], kind: EdgeKind) -> FloatArray:
    """The weight of each of the trajectory's steps (``step_indices``, episode step indices), summing to n.

    Only the trajectory's own actions count as downstream (another seat's actions in the same
    graph do not).
    """
    n = len(step_indices)
    if n == 0:
        return np.zeros(0)
    by_step = {node.step: node.id for node in graph.actions()}
    ours = {by_step[index] for index in step_indices if index in by_step}
    downstream = np.array(
        [
            len(set(graph.downstream_actions(by_step[index], kind)) & ours) if index in by_step else 0
            for index in step_indices
        ],
        dtype=np.float64,
    )
    raw = 1.0 + downstream
    return n * raw / raw.sum()


def routed_advantages(graph: InfluenceGraph, step_indices: Sequence[int], advantage: float) -> FloatArray:
    """The trajectory's advantage L routed over its steps: ``w_i * L``, support edges for L > 0, failure for L < 0."""
    if advantage == 0.0:
        return np.zeros(len(step_indices))
    kind: EdgeKind = "support" if advantage > 0 else "failure"
    return advantage * routing_weights(graph, step_indices, kind)
