"""Tool-using service games: serve a scripted user over several turns with tools, then take the right final action.

Two tasks, one engine (:class:`ServiceGame`, option ``task``):

- **refund** (``ServiceRefund-v0``): the user wants a refund for one of the orders listed on their
  account. The agent asks which order (``ask_user(topic="order")``), looks it up
  (``lookup_order``: item, category, amount, days since delivery), checks the refund window of
  its category (``check_policy``) and ends with ``issue_refund(order_id, amount)`` when the order
  is inside the window, ``deny_refund(order_id)`` when not.
- **address** (``ServiceAddress-v0``): the user moved. The agent asks for their email and their
  new address, looks the customer up by email (``lookup_customer``: the customer id, the address
  on file and the household's linked accounts) and ends with ``update_address(customer_id, address)``.

Everything is drawn from the seed: the user's name, the orders (ids, items, categories,
amounts, days), the policy's windows, the accounts and addresses. The scripted user reveals a
fact only when asked for it. ``distractors`` adds other orders to the account (refund) or linked
household accounts (address): look-ups of the wrong one give wrong facts. The episode succeeds
only if the final action is the right one with the right arguments (reward 1, else 0).

Moves are tool calls in the text form of :mod:`tsmg.tools` (``lookup_order(order_id="A12")``);
their arguments must be values the conversation has shown (so the legal moves are the calls
with those values: a small set, fit for constrained choice). The tools' typed schemas are
:meth:`ServiceGame.tool_specs`.

The game knows which fields of which message each argument came from, and keeps the episode's
exact influence graph (:meth:`ServiceGame.influence_graph`, :mod:`tsmg.influence`): a node per
action (id ``a<round>``) and per message (``m<step>``: the user's opening at step 0, each
answer or result at the step after the call that produced it); an edge from the latest message
that showed an argument's value to the action, naming the argument, ``failure`` when that value
is a wrong fact for the task (another order's amount, the old address, a linked account's id)
and ``support`` otherwise; and for a refund or a decline an edge (field ``window``) from the
refund policy of the named order's category, the fact the decision rests on (``failure`` when
the order is not the user's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from tsmg.answers import normalize_answer, quote
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame
from tsmg.influence import EdgeKind, InfluenceEdge, InfluenceGraph, InfluenceNode
from tsmg.tools import ToolParam, ToolSpec, format_call, parse_call

Task = Literal["refund", "address"]

_NAMES = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Gus", "Hana", "Ivo", "Jun", "Kira", "Luis")
_ITEMS = {
    "electronics": ("headphones", "phone charger", "webcam"),
    "clothing": ("rain jacket", "wool scarf", "running shoes"),
    "home": ("desk lamp", "kettle", "bath towels"),
    "books": ("cookbook", "travel guide", "novel"),
}
_WINDOWS = (7, 14, 30, 60)
_STREETS = ("Oak St", "Elm Rd", "Pine Ave", "Lake Dr", "Hill Ln", "Park Way", "Mill Rd", "Bay St")
_CITIES = ("Springfield", "Dayton", "Fairview", "Riverton", "Salem", "Georgetown")

_ASK = ToolSpec(
    name="ask_user",
    description="Ask the user for one piece of information.",
    parameters=[ToolParam(name="topic", description="What to ask about.")],
)
_TOOLS: dict[Task, tuple[ToolSpec, ...]] = {
    "refund": (
        _ASK,
        ToolSpec(
            name="lookup_order",
            description="Look up an order: its item, category, amount and days since delivery.",
            parameters=[ToolParam(name="order_id", description="The order's id.")],
        ),
        ToolSpec(
            name="check_policy",
            description="The refund window (days since delivery) of a product category.",
            parameters=[ToolParam(name="category", description="The product category.")],
        ),
        ToolSpec(
            name="issue_refund",
            description="Refund an order (ends the conversation).",
            parameters=[
                ToolParam(name="order_id", description="The order's id."),
                ToolParam(name="amount", description="The amount to refund, as shown on the order."),
            ],
        ),
        ToolSpec(
            name="deny_refund",
            description="Decline a refund the policy does not allow (ends the conversation).",
            parameters=[ToolParam(name="order_id", description="The order's id.")],
        ),
    ),
    "address": (
        _ASK,
        ToolSpec(
            name="lookup_customer",
            description="Look up a customer by email: their id, the address on file and linked accounts.",
            parameters=[ToolParam(name="email", description="The customer's email.")],
        ),
        ToolSpec(
            name="update_address",
            description="Set a customer's address (ends the conversation).",
            parameters=[
                ToolParam(name="customer_id", description="The customer's id."),
                ToolParam(name="address", description="The new address."),
            ],
        ),
    ),
}
_TOPICS: dict[Task, tuple[str, ...]] = {"refund": ("order", "reason"), "address": ("email", "address")}
_FINAL = frozenset({"issue_refund", "deny_refund", "update_address"})


class ServiceConfig(GameConfig):
    """Options of the service games."""

    task: Task = Field(default="refund", description="'refund' (orders and a refund policy) or 'address'.")
    distractors: int = Field(
        default=1, ge=0, le=3, description="Other orders on the account (refund) or linked accounts (address)."
    )


@dataclass(frozen=True, slots=True)
class Message:
    """A message the agent was shown: who said it, the text, and the facts it carried (field, value)."""

    speaker: Literal["user", "tool"]
    text: str
    facts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Call:
    """One valid action: the round it was played in, the tool, its arguments, and the answer it got."""

    round: int
    tool: str
    arguments: tuple[tuple[str, str], ...]
    answer: Message | None  # None for a final action (the conversation ends)


@dataclass(frozen=True, slots=True)
class ServiceState:
    """The hidden world (``answers``: what each ask or look-up returns), the goal and the conversation so far."""

    task: Task
    opening: Message
    answers: tuple[tuple[str, Message], ...]  # call text -> its answer
    goal: str  # the canonical text of the right final action
    right: tuple[tuple[str, str], ...]  # argument name -> the value the task needs
    calls: tuple[Call, ...] = ()
    finished: bool = False

    @property
    def success(self) -> bool:
        """Whether the conversation ended with the right final action."""
        return self.finished and bool(self.calls) and self._text(self.calls[-1]) == self.goal

    def _text(self, call: Call) -> str:
        tool = next(spec for spec in _TOOLS[self.task] if spec.name == call.tool)
        return format_call(tool, dict(call.arguments))

    def messages(self) -> list[tuple[int, Message]]:
        """Every message shown, with the step it was first shown at (the opening at 0)."""
        shown = [(0, self.opening)]
        shown += [(call.round + 1, call.answer) for call in self.calls if call.answer is not None]
        return shown


def _refund_world(
    rng: np.random.Generator, name: str, distractors: int
) -> tuple[Message, dict[str, Message], str, dict[str, str]]:
    count = 1 + distractors
    ids = [f"{'ABCDEFGH'[number // 90]}{10 + number % 90}" for number in rng.choice(720, size=count, replace=False)]
    categories = list(_ITEMS)
    windows = {category: int(rng.choice(_WINDOWS)) for category in categories}
    answers: dict[str, Message] = {}
    orders = []
    for order_id in ids:
        category = categories[int(rng.integers(len(categories)))]
        item = _ITEMS[category][int(rng.integers(3))]
        amount = f"{int(rng.integers(8, 200))}.{int(rng.integers(0, 100)):02d}"
        days = int(rng.integers(1, 61))
        orders.append((order_id, category, amount, days))
        text = f"Order {order_id}: {item}, category {category}, amount {amount}, delivered {days} days ago."
        facts = (("order_id", order_id), ("category", category), ("amount", amount), ("days", str(days)))
        answers[f'lookup_order(order_id="{order_id}")'] = Message("tool", text, facts)
    for category, window in windows.items():
        text = f"Refund policy for {category}: refunds within {window} days of delivery."
        answers[f'check_policy(category="{category}")'] = Message(
            "tool", text, (("category", category), ("window", str(window)))
        )
    order_id, category, amount, days = orders[int(rng.integers(count))]
    answers['ask_user(topic="order")'] = Message("user", f"It's order {order_id}.", (("order_id", order_id),))
    answers['ask_user(topic="reason")'] = Message("user", "It didn't work out for me, I'd like my money back.")
    listed = ", ".join(ids)
    opening = Message(
        "user",
        f"Hi, this is {name}. I'd like a refund for one of my orders. (Account: {name}; recent orders {listed}.)",
        tuple(("order_id", order) for order in ids),
    )
    if days <= windows[category]:
        goal = f'issue_refund(order_id="{order_id}", amount="{amount}")'
    else:
        goal = f'deny_refund(order_id="{order_id}")'
    return opening, answers, goal, {"order_id": order_id, "amount": amount, "category": category}


def _address_world(
    rng: np.random.Generator, name: str, distractors: int
) -> tuple[Message, dict[str, Message], str, dict[str, str]]:
    def address() -> str:
        street, city = _STREETS[int(rng.integers(len(_STREETS)))], _CITIES[int(rng.integers(len(_CITIES)))]
        return f"{int(rng.integers(1, 99))} {street}, {city}"

    email = f"{name.lower()}.{'abcdefgh'[int(rng.integers(8))]}{int(rng.integers(10, 99))}@example.com"
    ids = [f"C{int(number)}" for number in rng.choice(np.arange(100, 1000), size=1 + distractors, replace=False)]
    old, new = address(), address()
    while new == old:
        new = address()
    linked = " ".join(f"Linked household account: {other}." for other in ids[1:])
    text = f"Customer {ids[0]} ({name}), address on file: {old}. {linked}".strip()
    facts = (("email", email), ("customer_id", ids[0]), ("address", old)) + tuple(
        ("customer_id", other) for other in ids[1:]
    )
    answers = {
        f'lookup_customer(email="{email}")': Message("tool", text, facts),
        'ask_user(topic="email")': Message("user", f"My email is {email}.", (("email", email),)),
        'ask_user(topic="address")': Message("user", f"My new address is {new}.", (("address", new),)),
    }
    opening = Message("user", f"Hi, this is {name}. I've moved and need my address updated.")
    goal = f'update_address(customer_id="{ids[0]}", address="{new}")'
    return opening, answers, goal, {"customer_id": ids[0], "address": new, "email": email}


class ServiceGame(RulesGame[ServiceState, str]):
    """Serve a scripted user with tools; succeed with the right final call.

    Example:
        >>> game = ServiceGame(task="address", distractors=0)
        >>> _ = game.reset(seed=3)
        >>> while not game.done:
        ...     _ = game.step({"player": game.oracle_action("player")})
        >>> game.is_success("player"), [node.id for node in game.influence_graph().actions()]
        (True, ['a0', 'a1', 'a2', 'a3'])
    """

    Config = ServiceConfig
    config: ServiceConfig
    AGENTS = ("player",)
    provides_influence: ClassVar[bool] = True

    @property
    def has_random_start(self) -> bool:
        """The user's name (and, for refunds, the orders listed) change with the seed."""
        return True

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The tools of this game's task, with typed arguments."""
        return _TOOLS[self.config.task]

    # --------------------------------------------------------------------------- rules
    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> ServiceState:
        """Draw the user, their orders or accounts, the policy and which one the request is about."""
        name = _NAMES[int(rng.integers(len(_NAMES)))]
        world = _refund_world if self.config.task == "refund" else _address_world
        opening, answers, goal, right = world(rng, name, self.config.distractors)
        return ServiceState(self.config.task, opening, tuple(answers.items()), goal, tuple(right.items()))

    def transition(
        self, state: ServiceState, actions: Mapping[AgentID, str], rng: np.random.Generator
    ) -> tuple[ServiceState, Mapping[AgentID, float]]:
        """Answer the call (the user or the tool); a final call ends the conversation, scoring 1 if right."""
        text = actions["player"]
        parsed = parse_call(text, self.tool_specs())
        assert not isinstance(parsed, str)  # parse_action let only legal calls through
        tool, arguments = parsed
        final = tool in _FINAL
        answer = None if final else dict(state.answers).get(text, Message("tool", f"No result for {text}."))
        call = Call(self.rounds, tool, tuple(arguments.items()), answer)  # the referee's count: this round
        after = replace(state, calls=(*state.calls, call), finished=final)
        return after, {"player": float(after.success)}

    def is_terminal(self, state: ServiceState) -> bool:
        """The final call was made."""
        return state.finished

    def legal_moves(self, state: ServiceState, agent: AgentID) -> Sequence[str]:
        """Every call whose arguments are values the conversation has shown (each ask once)."""
        if state.finished:
            return ()
        seen: dict[str, list[str]] = {}
        for _, message in state.messages():
            for field, value in message.facts:
                values = seen.setdefault(field, [])
                if value not in values:
                    values.append(value)
        seen["topic"] = list(_TOPICS[state.task])
        asked = {dict(call.arguments)["topic"] for call in state.calls if call.tool == "ask_user"}
        moves = []
        for tool in self.tool_specs():
            combos: list[dict[str, str]] = [{}]
            for param in tool.parameters:
                values = [value for value in seen.get(param.name, []) if tool.name != "ask_user" or value not in asked]
                combos = [{**combo, param.name: value} for combo in combos for value in values]
            moves += [format_call(tool, combo) for combo in combos]
        return moves

    def success(self, state: ServiceState, agent: AgentID) -> bool:
        """The right final call, with the right arguments."""
        return state.success

    def oracle(self, state: ServiceState, agent: AgentID) -> str | None:
        """Ask what is needed, look it up, check the policy, then the right final call."""
        if state.finished:
            return None
        made = {state._text(call) for call in state.calls}
        right = dict(state.right)
        if state.task == "refund":
            steps = [
                'ask_user(topic="order")',
                f'lookup_order(order_id="{right["order_id"]}")',
                f'check_policy(category="{right["category"]}")',
            ]
            if self.config.distractors == 0:
                steps = steps[1:]  # the only order is on the account already
        else:
            steps = [
                'ask_user(topic="email")',
                'ask_user(topic="address")',
                f'lookup_customer(email="{right["email"]}")',
            ]
        return next((step for step in steps if step not in made), state.goal)

    # ----------------------------------------------------------------------- text layer
    def render(self, state: ServiceState, agent: AgentID) -> str:
        """The tools, the conversation so far, and what to answer (or how it ended)."""
        lines = [
            "You are a customer-service agent. Serve the user with these tools; each answer is one tool call.",
            "Tools:",
        ]
        for tool in self.tool_specs():
            topics = f" Topics: {', '.join(_TOPICS[state.task])}." if tool.name == "ask_user" else ""
            lines.append(f"  {tool.signature()}: {tool.description}{topics}")
        lines += ["Conversation:", f"User: {state.opening.text}"]
        for call in state.calls:
            lines.append(f"Agent: {state._text(call)}")
            if call.answer is not None:
                lines.append(f"{call.answer.speaker.capitalize()}: {call.answer.text}")
        if state.finished:
            lines.append(
                "The conversation is over: " + ("resolved correctly." if state.success else "not resolved correctly.")
            )
        else:
            lines.append('Answer with one call such as ask_user(topic="...") using only values shown above.')
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: ServiceState | None) -> str | Invalid:
        """A tool call in text form whose arguments the conversation has shown (any case, as every move)."""
        if state is not None:
            moves = {normalize_answer(move): move for move in self.legal_moves(state, agent)}
            key = normalize_answer(text)
            if key is not None and key in moves:
                return moves[key]
        parsed = parse_call(text, self.tool_specs())
        if isinstance(parsed, str):
            return Invalid(parsed)
        tool = next(spec for spec in self.tool_specs() if spec.name == parsed[0])
        canonical = format_call(tool, parsed[1])
        if state is None:
            return canonical
        if state.finished:
            return Invalid("the conversation is over")
        return Invalid(f"{quote(canonical, 80)} uses a value the conversation has not shown (or asks again)")

    def action_text(self, agent: AgentID, action: str) -> str:
        """The call's canonical text."""
        return action

    # ---------------------------------------------------------------------- influence
    def influence_graph(self) -> InfluenceGraph | None:
        """The exact influence graph of the episode so far (see the module's docstring)."""
        state = self.current_state
        if state is None:
            return None
        right = dict(state.right)
        nodes = [InfluenceNode(id="m0", kind="user", step=0, label="opening")]
        shown: list[tuple[str, int, Message]] = [("m0", 0, state.opening)]
        edges = []
        for call in state.calls:
            action = f"a{call.round}"
            nodes.append(InfluenceNode(id=action, kind="action", step=call.round, label=call.tool))
            for name, value in call.arguments:
                source = next((node for node, _, message in reversed(shown) if (name, value) in message.facts), None)
                if source is None:
                    continue  # a topic: chosen, not read from a message
                kind: EdgeKind = "failure" if name in right and value != right[name] else "support"
                edges.append(InfluenceEdge(source=source, target=action, kind=kind, fields=[name]))
            basis = _policy_basis(call, shown)
            if basis is not None:  # refund or decline: decided on the order's category's refund window
                decided: EdgeKind = (
                    "support" if dict(call.arguments)["order_id"] == right.get("order_id") else "failure"
                )
                edges.append(InfluenceEdge(source=basis, target=action, kind=decided, fields=["window"]))
            if call.answer is not None and call.round + 1 < self.rounds:  # shown at the next step, if there was one
                message = f"m{call.round + 1}"
                nodes.append(
                    InfluenceNode(
                        id=message, kind=call.answer.speaker, step=call.round + 1, label=call.tool, produced_by=action
                    )
                )
                shown.append((message, call.round + 1, call.answer))
        return InfluenceGraph(nodes=nodes, edges=edges)


def _policy_basis(call: Call, shown: Sequence[tuple[str, int, Message]]) -> str | None:
    """For a refund or a decline, the latest policy message for the named order's category (None: none shown)."""
    if call.tool not in ("issue_refund", "deny_refund"):
        return None
    order_id = dict(call.arguments)["order_id"]
    category = next(
        (
            dict(message.facts)["category"]
            for _, _, message in reversed(shown)
            if ("order_id", order_id) in message.facts and "category" in dict(message.facts)
        ),
        None,
    )
    return next(
        (
            node
            for node, _, message in reversed(shown)
            if category is not None and ("category", category) in message.facts and "window" in dict(message.facts)
        ),
        None,
    )
