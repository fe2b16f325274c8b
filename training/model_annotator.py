"""The model-based influence annotator: a language model labels which earlier messages each action used.

IAPO's paper builds its influence graph with a model; this is that annotator (registered as
``model`` in :mod:`training.annotators`, beside the game's own ``exact`` record). For every
finished episode of a rollout it

1. reads the episode's **transcript** (:func:`transcript`): one node per valid action (``a<step>``,
   the action's canonical text) and one per user or tool message the agent was shown
   (``m<step>``: the lines of step ``step``'s observation that were not in the previous step's
   and start with ``User:`` or ``Tool:``, the transcript form of the service games and of
   :mod:`tsmg.tools`; a message shown after an action is that action's answer, ``produced_by``);
2. asks the model one **question** (:func:`question`): the numbered transcript, and "for each
   action, which earlier items did it use; support or failure", answered one dependency a line,
   ``a3 <- m2 support order_id,amount`` (the fields are optional);
3. **parses** the answer (:func:`parse_answer`) into typed edges; a line that is not a dependency,
   names an unknown item, points forwards in time or repeats one is dropped, and the episode's
   ``annotations["model"]`` says which lines were dropped and why (never a crash);
4. writes the typed graph (:class:`tsmg.influence.InfluenceGraph`) into ``episode.influence["model"]``.

All the episodes' questions go to the model in **one batched call** per rollout
(:meth:`tsmg.lm.LanguageModel.generate`): a local model (``smollm2``, ``hf:PATH``) or an
OpenAI-compatible server (``openai:MODEL``), built by :func:`backends.load_model` on first use.
A failed completion leaves that episode a graph without edges (its credit is then MS-GRPO's)
and says so under ``annotations["model"]["error"]``.

The built-in ``model`` annotator asks ``smollm2`` unless the environment variable
``TSMG_ANNOTATOR_MODEL`` names another spec (read when the annotator first runs, in the process
that runs it: the rollout's); register your own instance for anything else::

    register_annotator("model", ModelAnnotator("openai:gpt-4o-mini", max_tokens=300))

:func:`edge_agreement` scores a graph against a reference (the exact one): edges are matched by
their endpoints' kind and step and their type, not by ids, so graphs of different makers compare.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tsmg.episode import Episode
from tsmg.influence import EdgeKind, InfluenceEdge, InfluenceGraph, InfluenceNode, NodeKind
from tsmg.lm import GenerationRequest, LanguageModel, SamplingParams

#: The name the built-in model annotator registers and writes its graph and report under.
MODEL = "model"
#: The environment variable naming the built-in annotator's model spec.
MODEL_ENV = "TSMG_ANNOTATOR_MODEL"
#: The spec the built-in annotator asks when ``TSMG_ANNOTATOR_MODEL`` is unset.
DEFAULT_ANNOTATOR_MODEL = "smollm2"
#: Dropped lines kept in an episode's report (a model that rambles should not bloat the record).
_MAX_DROPPED = 20

_ROLES: dict[str, NodeKind] = {"User:": "user", "Tool:": "tool"}
_LINE = re.compile(
    r"^\s*[-*]?\s*\[?(?P<target>[am]\d+)\]?\s*(?:<-|<=|←|:)\s*\[?(?P<source>[am]\d+)\]?"
    r"\s*[,:]?\s*(?P<kind>[A-Za-z]+)?\s*[,:]?\s*(?P<fields>[\w ,]*?)\s*\.?\s*$"
)

SYSTEM = (
    "You annotate conversations between a service agent and a user. For each agent action, say which "
    "earlier items (user or tool messages, or earlier actions) it took information from."
)
INSTRUCTIONS = (
    "Answer with one line per dependency, in the form\n"
    "  ACTION <- ITEM support FIELDS\n"
    "or\n"
    "  ACTION <- ITEM failure FIELDS\n"
    "where ACTION is an agent item (a1), ITEM an earlier item (m1), 'support' means the action used "
    "correct information from the item, 'failure' that it built on an error, a refusal or a wrong fact "
    "there, and FIELDS (optional, comma-separated) names what it took (order_id, amount). "
    "Example: a1 <- m1 support order_id\n"
    "Write nothing else."
)


@dataclass(frozen=True)
class TranscriptItem:
    """One numbered item of an episode's transcript: an action or a message, with its text.

    Attributes:
        node: The graph node it becomes (its id is what the question and the answer call it).
        text: What the question shows: the action's text, or the message's lines.
    """

    node: InfluenceNode
    text: str


def _new_lines(previous: str | None, current: str) -> list[str]:
    """The lines of ``current`` after its common prefix with ``previous`` (all of them at the first step)."""
    lines = current.splitlines()
    if previous is None:
        return lines
    before = previous.splitlines()
    shared = 0
    while shared < min(len(before), len(lines)) and before[shared] == lines[shared]:
        shared += 1
    return lines[shared:]


def transcript(episode: Episode) -> list[TranscriptItem]:
    """The episode's user and tool messages and the agent's valid actions, in the order the agent met them.

    A message node ``m<s>`` gathers the ``User:``/``Tool:`` lines step ``s``'s observation added; at
    ``s > 0`` it answers the previous step's action (``produced_by``) when that action was valid.
    An action node ``a<s>`` is step ``s``'s played action (invalid answers are not actions).
    """
    items: list[TranscriptItem] = []
    previous: str | None = None
    last_action: str | None = None
    for step in episode.steps:
        shown = [line for line in _new_lines(previous, step.observation) if line.startswith(tuple(_ROLES))]
        if shown:
            kind = _ROLES[next(role for role in _ROLES if shown[-1].startswith(role))]
            node = InfluenceNode(id=f"m{step.index}", kind=kind, step=step.index, label=kind, produced_by=last_action)
            items.append(TranscriptItem(node, "\n".join(shown)))
        previous = step.observation
        last_action = None
        action = step.parsed_action if step.valid else None
        if action is not None:
            last_action = f"a{step.index}"
            label = action.split("(", 1)[0].strip() or None
            items.append(
                TranscriptItem(InfluenceNode(id=last_action, kind="action", step=step.index, label=label), action)
            )
    return items


def question(items: Sequence[TranscriptItem]) -> list[dict[str, str]]:
    """The chat messages asking for one episode's dependencies (system, then the numbered transcript)."""
    lines = []
    for item in items:
        if item.node.kind == "action":
            lines.append(f"[{item.node.id}] Agent: {item.text}")
        else:
            text = item.text.replace("\n", "\n      ")
            lines.append(f"[{item.node.id}] {text}")
    actions = ", ".join(item.node.id for item in items if item.node.kind == "action")
    body = "Conversation:\n" + "\n".join(lines) + f"\n\nActions to annotate: {actions}.\n{INSTRUCTIONS}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def parse_answer(text: str, items: Sequence[TranscriptItem]) -> tuple[list[InfluenceEdge], list[dict[str, str]]]:
    """The typed edges an answer names, and every other non-empty line with the reason it was dropped.

    A kept line is ``ACTION <- ITEM KIND [FIELDS]`` (``<-``, ``<=``, ``←`` or ``:``; brackets and a
    list bullet allowed) with ACTION a node of kind action, ITEM a node earlier in time and KIND
    ``support`` or ``failure``. Nothing here raises: a malformed answer yields fewer edges.
    """
    nodes = {item.node.id: item.node for item in items}
    edges: list[InfluenceEdge] = []
    seen: set[tuple[str, str, str]] = set()
    dropped: list[dict[str, str]] = []

    def drop(line: str, reason: str) -> None:
        dropped.append({"line": line[:200], "reason": reason})

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _LINE.match(line)
        if match is None:
            drop(line, "not a dependency line (ACTION <- ITEM support|failure)")
            continue
        target, source = nodes.get(match["target"]), nodes.get(match["source"])
        kind = (match["kind"] or "").lower()
        if target is None or source is None:
            drop(
                line, f"names {match['target'] if target is None else match['source']!r}, not an item of the transcript"
            )
        elif target.kind != "action":
            drop(line, f"{target.id!r} is a message; dependencies end at actions")
        elif kind not in ("support", "failure"):
            drop(line, f"kind {kind or 'missing'!r} is neither support nor failure")
        elif (source.step, source.kind == "action") >= (target.step, True):
            drop(line, f"{source.id!r} does not come before {target.id!r}")
        elif (source.id, target.id, kind) in seen:
            drop(line, f"repeats the dependency {target.id} <- {source.id} {kind}")
        else:
            seen.add((source.id, target.id, kind))
            fields = [name for name in re.split(r"[\s,]+", match["fields"] or "") if name]
            edge_kind: EdgeKind = "support" if kind == "support" else "failure"
            edges.append(InfluenceEdge(source=source.id, target=target.id, kind=edge_kind, fields=fields))
    return edges, dropped


class ModelAnnotator:
    """The ``model`` annotator: a language model labels which earlier messages each action used (one batched call).

    Args:
        model: A model spec (``smollm2``, ``hf:PATH``, ``openai:MODEL``) built on first use by
            :func:`backends.load_model`, or a :class:`tsmg.lm.LanguageModel` already built. None:
            ``TSMG_ANNOTATOR_MODEL``, else ``smollm2``.
        name: The key of its graph in ``episode.influence`` and of its report in ``episode.annotations``.
        max_tokens: Most tokens of one answer.
        temperature: Sampling temperature (0: greedy, the same answer for the same question).
        options: Passed to :func:`backends.load_model` with a spec.
    """

    def __init__(
        self,
        model: str | LanguageModel | None = None,
        *,
        name: str = MODEL,
        max_tokens: int = 160,
        temperature: float = 0.0,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.name = name
        self.sampling = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=0)
        self.options = dict(options or {})
        self._backend: LanguageModel | None = model if model is not None and not isinstance(model, str) else None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without a backend built from a spec (a rollout worker builds its own)."""
        state = dict(self.__dict__)
        if isinstance(self.model, str) or self.model is None:
            state["_backend"] = None
        return state

    def backend(self) -> LanguageModel:
        """The model asked (built on first use)."""
        if self._backend is None:
            from backends import load_model

            spec = self.model if isinstance(self.model, str) else os.environ.get(MODEL_ENV, DEFAULT_ANNOTATOR_MODEL)
            self._backend = load_model(spec, **self.options)
        return self._backend

    def __call__(self, episodes: list[Episode]) -> None:
        """Label every finished episode's dependencies: ``influence[name]`` and the report ``annotations[name]``."""
        asked = [(episode, transcript(episode)) for episode in episodes if episode.error is None]
        asked = [(episode, items) for episode, items in asked if any(item.node.kind == "action" for item in items)]
        if not asked:
            return
        requests = [GenerationRequest(messages=question(items)) for _, items in asked]
        completions = self.backend().generate(requests, self.sampling)
        for (episode, items), completion in zip(asked, completions, strict=True):
            report: dict[str, Any] = {"answer": completion.text[:2000]}
            edges: list[InfluenceEdge] = []
            dropped: list[dict[str, str]] = []
            if completion.finish_reason == "error":
                report["error"] = completion.error or "the model's call failed"
            else:
                edges, dropped = parse_answer(completion.text, items)
            report["edges"] = len(edges)
            report["dropped"] = dropped[:_MAX_DROPPED]
            report["dropped_count"] = len(dropped)
            episode.influence[self.name] = InfluenceGraph(nodes=[item.node for item in items], edges=edges)
            episode.annotations[self.name] = report


def _edge_keys(graph: InfluenceGraph) -> set[tuple[str, int, int, str]]:
    """Each edge as (source is an action or a message, source step, target step, kind): id-free."""
    by_id = {node.id: node for node in graph.nodes}
    return {
        (
            "action" if by_id[edge.source].kind == "action" else "message",
            by_id[edge.source].step,
            by_id[edge.target].step,
            edge.kind,
        )
        for edge in graph.edges
    }


def edge_agreement(reference: InfluenceGraph, candidate: InfluenceGraph, *, typed: bool = True) -> dict[str, int]:
    """True positives, false positives and false negatives of ``candidate``'s edges against ``reference``'s.

    Edges match by their source's kind (action or message) and step, their target's step and,
    with ``typed``, their kind (support or failure); the fields they name do not count.

    Example:
        >>> nodes = [InfluenceNode(id="m0", kind="user", step=0), InfluenceNode(id="a0", kind="action", step=0),
        ...          InfluenceNode(id="a1", kind="action", step=1)]
        >>> exact = InfluenceGraph(nodes=nodes, edges=[InfluenceEdge(source="m0", target="a0", kind="support")])
        >>> guess = InfluenceGraph(nodes=nodes, edges=[InfluenceEdge(source="m0", target="a0", kind="support"),
        ...                                            InfluenceEdge(source="a0", target="a1", kind="support")])
        >>> edge_agreement(exact, guess)
        {'tp': 1, 'fp': 1, 'fn': 0}
    """
    width = 4 if typed else 3  # the kind is the key's last part
    truth = {key[:width] for key in _edge_keys(reference)}
    guess = {key[:width] for key in _edge_keys(candidate)}
    return {"tp": len(truth & guess), "fp": len(guess - truth), "fn": len(truth - guess)}
