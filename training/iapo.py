"""IAPO's routing rule (after arXiv 2608.24588): a trajectory's advantage spread over its actions by its graph.

The trajectory's group-normalised advantage L (MS-GRPO's, :func:`training.advantages.ms_grpo`) is
redistributed over its n actions with routing weights w_i from the episode's influence graph
(:class:`tsmg.influence.InfluenceGraph`): action i gets ``w_i * L``.

**The routing rule** (the project's own; the seed gives no formula). The outcome selects the
kind of edge that explains it: ``support`` when L > 0, ``failure`` when L < 0. An action is
*involved* in the outcome when it sits on such an edge between the trajectory's own actions and
what they used:

* as the **user** of the edge: it is the edge's target (under failure: it used a wrong fact or
  built on a failed call — the action that erred);
* as the **producer** of the edge: the edge's source is the action or a tool message its call
  returned (under failure: its output carried the wrong fact or the failure into the action that
  erred).

With b_i = 1 for an involved action and 0 otherwise, and B = Σ_j b_j,

    w_i = n * (1 + b_i) / (n + B)

so involved actions share twice the weight of the others. Under failure the action that erred and
the one whose output misled it carry at least their share (w ≥ 1: 2n / (n + B) ≥ 1 since B ≤ n),
and an action that had nothing to do with the failure carries less; under success the actions that
produced and used the facts the outcome rests on get more than an action whose output nothing used.
The final decision is not penalised for being last, as a count of downstream actions would
(an earlier rule, w ∝ 1 + the number of actions downstream, gave the erring refund of a
look-up-then-refund trajectory the smallest blame: 0.67 against the look-up's 1.33).

**Invariants** (tested in ``tests/training/test_iapo.py``): w_i > 0 (so every action keeps L's
sign), sum_i w_i = n (so sum_i w_i L = n L: the trajectory's total is MS-GRPO's), a graph without
edges of the relevant kind gives w_i = 1 (MS-GRPO exactly), every involved action has w_i ≥ 1, and
L = 0 gives 0 at every action. A step with no action node in the graph (a decision the game did not
record as an action) is involved in nothing. Another seat's actions in the same graph are never
involved, and an edge into another seat's action involves none of ours.

Example (a look-up whose tool message ``t0`` showed the wrong amount, then a refund that used it):
    >>> from tsmg.influence import InfluenceEdge, InfluenceGraph, InfluenceNode
    >>> graph = InfluenceGraph(
    ...     nodes=[
    ...         InfluenceNode(id="a0", kind="action", step=0, label="lookup_order"),
    ...         InfluenceNode(id="t0", kind="tool", step=1, produced_by="a0"),
    ...         InfluenceNode(id="a1", kind="action", step=1, label="check_policy"),
    ...         InfluenceNode(id="a2", kind="action", step=2, label="issue_refund"),
    ...     ],
    ...     edges=[InfluenceEdge(source="t0", target="a2", kind="failure", fields=["amount"])],
    ... )
    >>> routing_weights(graph, (0, 1, 2), "failure").tolist()  # look-up and refund involved, check not
    [1.2, 0.6, 1.2]
    >>> routed_advantages(graph, (0, 1, 2), 1.0).tolist()  # no support edges: uniform
    [1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from training.advantages import FloatArray
from tsmg.influence import EdgeKind, InfluenceGraph


def involved_actions(graph: InfluenceGraph, action_ids: set[str], kind: EdgeKind) -> set[str]:
    """The actions of ``action_ids`` that use or produce an edge of ``kind`` ending at one of ``action_ids``.

    An edge's producer is its source when that is an action, or the action whose call returned the
    source message (``produced_by``); a message no action asked for (the user's) has no producer.
    """
    producer_of = {node.id: node.id if node.kind == "action" else node.produced_by for node in graph.nodes}
    involved: set[str] = set()
    for edge in graph.edges:
        if edge.kind != kind or edge.target not in action_ids:
            continue
        involved.add(edge.target)
        producer = producer_of.get(edge.source)
        if producer in action_ids:
            involved.add(producer)
    return involved


def routing_weights(graph: InfluenceGraph, step_indices: Sequence[int], kind: EdgeKind) -> FloatArray:
    """The weight of each of the trajectory's steps (``step_indices``, episode step indices), summing to n.

    Only the trajectory's own actions can be involved (see the module's docstring for the rule).
    """
    n = len(step_indices)
    if n == 0:
        return np.zeros(0)
    by_step = {node.step: node.id for node in graph.actions()}
    ours = {by_step[index] for index in step_indices if index in by_step}
    involved = involved_actions(graph, ours, kind)
    flags = np.array([index in by_step and by_step[index] in involved for index in step_indices], dtype=np.float64)
    return n * (1.0 + flags) / (n + flags.sum())


def routed_advantages(graph: InfluenceGraph, step_indices: Sequence[int], advantage: float) -> FloatArray:
    """The trajectory's advantage L routed over its steps: ``w_i * L``, support edges for L > 0, failure for L < 0."""
    if advantage == 0.0:
        return np.zeros(len(step_indices))
    kind: EdgeKind = "support" if advantage > 0 else "failure"
    return advantage * routing_weights(graph, step_indices, kind)
