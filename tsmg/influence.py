"""The typed influence graph of an episode: which earlier messages and actions each action used.

IAPO-style credit (:mod:`training.iapo`) routes a trajectory's advantage over its actions along
this graph, so it says, for one episode, what information flowed into each action of the agent.

**Nodes** (:class:`InfluenceNode`) are the agent's actions and the user and tool messages of the
episode. Every node is tied to ``step``, an index into the episode's ``steps``:

- an ``"action"`` node is the decision recorded at ``steps[step]`` (at most one action node per step);
- a ``"user"`` or ``"tool"`` message node is a message the agent was first shown in the observation
  of ``steps[step]`` (so it precedes that step's action); a tool message names the action whose
  call returned it in ``produced_by`` (None for a message no action of the episode asked for).

Time runs by ``(step, message before action)``: a message of step ``s`` comes before the action
of step ``s``, which comes before everything of step ``s + 1``.

**Edges** (:class:`InfluenceEdge`) point from an earlier node (``source``) to a later *action*
(``target``) and are typed:

- ``"support"``: the action used information from the source (an order id read from a lookup's
  result, a fact the user gave, an earlier action it continued);
- ``"failure"``: the action built on a failed call or a wrong fact (an id from an error message, an
  amount a policy check refused).

An edge may name the ``fields`` it carried (``["order_id", "amount"]``: which fields of the
source's content the target's arguments came from). An action's *outputs* are the action itself
and the tool messages it ``produced_by``: an edge from either says the target used the action's output.

Validation (on construction and on reading JSON) refuses duplicate ids, edges naming unknown
nodes, edges to a non-action, edges that do not point backwards in time, two actions at one step
and ``produced_by`` naming a non-action or a later action; :meth:`InfluenceGraph.check_steps`
adds the bound on ``step`` once the episode's length is known.

The graph is a field of the episode record, keyed by who made it
(``Episode.influence = {"exact": graph, "model": graph}``): ``"exact"`` is written by the rollout from
the game's own :meth:`tsmg.tools.ToolGame.influence_graph`; annotators (:mod:`training.annotators`)
write theirs under their own name. JSON round trip: :meth:`InfluenceGraph.to_json` and
:meth:`InfluenceGraph.from_json` (or the pydantic model's own dump and validate).

Example:
    >>> graph = InfluenceGraph(
    ...     nodes=[
    ...         InfluenceNode(id="a0", kind="action", step=0, label="lookup_order"),
    ...         InfluenceNode(id="t0", kind="tool", step=1, produced_by="a0"),
    ...         InfluenceNode(id="a1", kind="action", step=1, label="issue_refund"),
    ...     ],
    ...     edges=[InfluenceEdge(source="t0", target="a1", kind="support", fields=["order_id", "amount"])],
    ... )
    >>> graph.downstream_actions("a0", "support")
    ['a1']
    >>> InfluenceGraph.from_json(graph.to_json()) == graph
    True
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: What a node stands for: one of the agent's actions, or a message from the user or a tool.
NodeKind = Literal["action", "user", "tool"]
#: What an edge says: the target used the source's information, or built on its failure.
EdgeKind = Literal["support", "failure"]
#: The names of the graphs' makers that tsmg writes itself: the game's own record.
EXACT = "exact"


class InfluenceNode(BaseModel):
    """An action of the agent, or a user or tool message, tied to a step of the episode.

    Attributes:
        id: Unique within the graph (e.g. ``"a3"``, ``"t3"``).
        kind: ``"action"``, ``"user"`` or ``"tool"``.
        step: Index into the episode's ``steps``: the step that took the action, or the step whose
            observation first showed the message.
        label: A short name (the tool called, the question asked); for reading only.
        produced_by: For a tool message, the id of the action whose call returned it.
        failed: For a tool message, whether the call failed (an error, a refusal).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: NodeKind
    step: int = Field(ge=0)
    label: str | None = None
    produced_by: str | None = None
    failed: bool = False


class InfluenceEdge(BaseModel):
    """``target`` (a later action) used ``source`` (``support``) or built on its failure (``failure``).

    Attributes:
        source: Id of the earlier node.
        target: Id of the later action.
        kind: ``"support"`` or ``"failure"``.
        fields: The fields of the source's content the target's arguments came from (may be empty).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    target: str
    kind: EdgeKind
    fields: list[str] = Field(default_factory=list)


def _time(node: InfluenceNode) -> tuple[int, int]:
    """Where a node sits in time: its step, a message before the step's action."""
    return (node.step, 1 if node.kind == "action" else 0)


class InfluenceGraph(BaseModel):
    """The typed influence graph of one episode (validated: see the module's docstring)."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[InfluenceNode] = Field(default_factory=list)
    edges: list[InfluenceEdge] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> InfluenceGraph:
        by_id: dict[str, InfluenceNode] = {}
        action_steps: dict[int, str] = {}
        for node in self.nodes:
            if node.id in by_id:
                raise ValueError(f"influence graph: two nodes have the id {node.id!r}; give each node its own id")
            by_id[node.id] = node
            if node.kind == "action":
                if node.step in action_steps:
                    raise ValueError(
                        f"influence graph: actions {action_steps[node.step]!r} and {node.id!r} both sit at step "
                        f"{node.step}; a step holds one action"
                    )
                action_steps[node.step] = node.id
        for node in self.nodes:
            if node.produced_by is None:
                continue
            producer = by_id.get(node.produced_by)
            if producer is None or producer.kind != "action" or _time(producer) > _time(node):
                raise ValueError(
                    f"influence graph: node {node.id!r} is produced_by {node.produced_by!r}, which is not an "
                    "earlier action of the graph"
                )
        for edge in self.edges:
            source, target = by_id.get(edge.source), by_id.get(edge.target)
            if source is None or target is None:
                missing = edge.source if source is None else edge.target
                raise ValueError(f"influence graph: an edge names {missing!r}, which is not a node of the graph")
            if target.kind != "action":
                raise ValueError(
                    f"influence graph: edge {edge.source!r} -> {edge.target!r} ends at a {target.kind} message; "
                    "edges end at actions"
                )
            if _time(source) >= _time(target):
                raise ValueError(
                    f"influence graph: edge {edge.source!r} -> {edge.target!r} does not point backwards in time "
                    f"(step {source.step} {source.kind} -> step {target.step} action)"
                )
        return self

    def check_steps(self, num_steps: int) -> None:
        """Raise ValueError unless every node's step is an index of an episode of ``num_steps`` steps."""
        outside = [node.id for node in self.nodes if node.step >= num_steps]
        if outside:
            raise ValueError(f"influence graph: node(s) {outside} name steps beyond the episode's {num_steps} step(s)")

    def node(self, node_id: str) -> InfluenceNode:
        """The node ``node_id`` (KeyError if there is none)."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def actions(self) -> list[InfluenceNode]:
        """The action nodes, in time order."""
        return sorted((node for node in self.nodes if node.kind == "action"), key=lambda node: node.step)

    def outputs(self, action_id: str) -> set[str]:
        """The ids that carry ``action_id``'s output: the action itself and the tool messages it produced."""
        return {action_id} | {node.id for node in self.nodes if node.produced_by == action_id}

    def downstream_actions(self, action_id: str, kind: EdgeKind) -> list[str]:
        """The actions that used ``action_id``'s output along ``kind`` edges, directly or through other actions.

        Transitive: if action ``b`` used ``a``'s output and ``c`` used ``b``'s, both are downstream of
        ``a``. Returned in time order, without ``action_id`` itself.
        """
        edges = [edge for edge in self.edges if edge.kind == kind]
        reached: set[str] = set()
        frontier = [action_id]
        while frontier:
            carriers = self.outputs(frontier.pop())
            for edge in edges:
                if edge.source in carriers and edge.target not in reached and edge.target != action_id:
                    reached.add(edge.target)
                    frontier.append(edge.target)
        return [node.id for node in self.actions() if node.id in reached]

    def to_json(self) -> str:
        """The graph as one JSON object (no newline inside)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> InfluenceGraph:
        """Read a graph written by :meth:`to_json` (validated; ValueError for a bad one)."""
        return cls.model_validate_json(text)
