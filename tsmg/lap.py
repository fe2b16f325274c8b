"""Language-Agent Policy (LAP): a language model + prompt template + action format + re-prompts.

A LAP turns any :class:`~tsmg.lm.LanguageModel` into a :class:`~tsmg.policies.Policy`. For a
batch of decision requests it builds the chat prompts (system text, optional history, the
observation, format instructions), asks the model once for the whole batch, extracts the action
text by the action format, and re-prompts the invalid answers (a batch again) up to
``reprompt`` times with the reason appended. What an answer that stays invalid does to the game
(default action, penalty, termination) is the game's ``on_invalid`` option.

Thinking is never the answer: what a reasoning model writes inside ``<think>...</think>`` (or
returns in a separate field) is stored with the step but the action is read from the rest. With
the ``tool`` action format the move is a function call whose schema lists the legal moves. A
model call that fails (the server refused the request, or never answered) fails the episode
instead of passing for an invalid answer. When the backend states a context window, history
that would overflow it is trimmed by the template's rule and the step records it.

(Past 600 lines: the configuration, the action formats' reading and the batched decide loop with its
re-prompts, reasoning and trimming share one decision's state; split, each would pass it around.)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tsmg.arena import majority
from tsmg.core import Invalid
from tsmg.decisions import Decision, DecisionRequest, Turn
from tsmg.lm import Completion, GenerationRequest, LanguageModel, SamplingParams, ToolCall
from tsmg.seeding import decision_seed
from tsmg.tools import ToolSpec, call_from_json, game_tools

DEFAULT_SYSTEM = (
    "You are playing a text game. Read the observation, think briefly if you need to, then answer with your move."
)


def checked_regex(pattern: str | None, field: str) -> str | None:
    """``pattern`` as given if it compiles (or is None); otherwise a ValueError naming ``field`` (for validators).

    Example:
        >>> checked_regex("[_OPG]+", "observation_lines")
        '[_OPG]+'
    """
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{field} does not compile: {error}") from None
    return pattern


class PromptTemplate(BaseModel):
    """How prompts are laid out.

    ``user`` may use ``{observation}``, ``{legal_actions}`` (comma-separated) and
    ``{format_instructions}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: str | None = Field(default=DEFAULT_SYSTEM, description="System message (None: no system message).")
    user: str = Field(default="{observation}\n\n{format_instructions}", description="Template of each user turn.")
    history: Literal["none", "last_k", "full"] = Field(
        default="none", description="Earlier turns shown: none (the MS-GRPO setting), the last k, or all."
    )
    history_k: int = Field(default=2, ge=1, description="Turns kept with history='last_k'.")
    trim: Literal["oldest", "none"] = Field(
        default="oldest",
        description=(
            "When the prompt with its history would not fit the model's context window (a backend's "
            "max_context): drop the oldest turns first (the step records how many), or none (the "
            "request then fails with the backend's reason)."
        ),
    )

    observation_last: bool = Field(
        default=False,
        description=(
            "Lay the user turn out with the game's observation at its end, the rest of the user template (format "
            "instructions, legal actions) before it: prompts of different states then share a longer token "
            "prefix, which generation and training compute once. The model reads the same texts in another order "
            "(the instructions before the board). False: the user template as written."
        ),
    )

    @field_validator("user")
    @classmethod
    def _needs_observation(cls, user: str) -> str:
        if "{observation}" not in user:
            raise ValueError("the user template must contain {observation}")
        return user

    def user_layout(self) -> str:
        r"""The user template as rendered: ``user``, or with ``observation_last`` the observation moved to its end.

        Example:
            >>> PromptTemplate(observation_last=True).user_layout()
            '{format_instructions}\n\n{observation}'
        """
        if not self.observation_last:
            return self.user
        rest = re.sub(r"\n{3,}", "\n\n", self.user.replace("{observation}", "")).strip()
        return f"{rest}\n\n{{observation}}" if rest else "{observation}"


#: The ``final`` action format's line: "Final Answer: MOVE" at a line's start (any case, markdown emphasis
#: or a heading mark around the words allowed); the move is the rest of that line, read by the game's answer rule.
_FINAL_ANSWER = re.compile(r"^[ \t>#*_-]*final[ \t]+answer[ \t*_]*:(?P<action>[^\n]*)$", re.IGNORECASE | re.MULTILINE)

#: Decisions with more legal actions than this do not list them in the format instructions (a model
#: cannot read hundreds of go points or Wordle's 1,571 words; the answer is read against all of them).
MAX_LISTED_ACTIONS = 64


class ActionFormat(BaseModel):
    """How the action is extracted from (or constrained in) the model's answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tag", "regex", "choice", "raw", "tool", "final"] = Field(
        default="tag",
        description=(
            "tag: text inside <tag>...</tag> (last one wins); regex: group 'action' or 1 of a pattern; "
            "final: free reasoning, then the move on a last line 'Final Answer: MOVE' (the last such line wins); "
            "choice: constrained decoding among the legal actions; raw: the whole answer; "
            "tool: a call of a function whose 'move' argument is the move (an enum of the legal moves)."
        ),
    )
    tag: str = Field(default="action", pattern=r"^[A-Za-z][\w-]*$", description="Tag name for kind='tag'.")
    tool_name: str = Field(
        default="make_move", pattern=r"^[A-Za-z_][\w-]{0,63}$", description="Function name for kind='tool'."
    )
    tool_choice: Literal["auto", "required"] = Field(
        default="auto",
        description="kind='tool': the model decides whether to call (auto), or must call a function (required).",
    )
    pattern: str | None = Field(default=None, description="Regular expression for kind='regex'.")
    instructions: str | None = Field(default=None, description="Override the format instructions shown to the model.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        return checked_regex(pattern, "pattern")

    def instructions_for(self, legal_actions: Sequence[str] | None, tools: Sequence[ToolSpec] | None = None) -> str:
        """The format instructions shown to the model (the valid actions listed up to :data:`MAX_LISTED_ACTIONS`).

        ``tools``: a tool-using game's tools (:func:`tsmg.tools.game_tools`), called directly under kind 'tool'.
        """
        if self.instructions is not None:
            return self.instructions
        options = f" Valid actions: {', '.join(legal_actions)}." if legal_actions else ""
        if legal_actions and len(legal_actions) > MAX_LISTED_ACTIONS:
            options = f" {len(legal_actions)} actions are valid, too many to list: name one as the game writes it."
        if self.kind == "tag":
            return (
                f"Write your move inside <{self.tag}></{self.tag}> tags, e.g. <{self.tag}>MOVE</{self.tag}>.{options}"
            )
        if self.kind == "choice":
            return f"Answer with your move only.{options}"
        if self.kind == "final":
            return (
                "Reason step by step as long as you need, then end your answer with one line "
                f'"Final Answer: MOVE", naming exactly one move as the game writes it.{options}'
            )
        if self.kind == "tool" and tools:
            return f"Call one of the functions {', '.join(tool.name for tool in tools)} with its arguments.{options}"
        if self.kind == "tool":
            return f"Call the {self.tool_name} function with your move.{options}"
        return f"Answer with your move.{options}"

    def tool_schema(self, legal_actions: Sequence[str] | None) -> dict[str, Any]:
        """The OpenAI-style function schema of a move: an enum of the legal moves, or any text.

        Example:
            >>> schema = ActionFormat(kind="tool").tool_schema(["left", "right"])
            >>> schema["function"]["name"], schema["function"]["parameters"]["properties"]["move"]["enum"]
            ('make_move', ['left', 'right'])
        """
        move: dict[str, Any] = {"type": "string", "description": "Your move."}
        if legal_actions:
            move["enum"] = list(legal_actions)
        return {
            "type": "function",
            "function": {
                "name": self.tool_name,
                "description": "Play your move in the game.",
                # Strict: servers that enforce schemas (OpenAI, vLLM) then keep the move to the enum.
                "strict": True,
                "parameters": {
                    "type": "object",
                    "properties": {"move": move},
                    "required": ["move"],
                    "additionalProperties": False,
                },
            },
        }

    def extract_tool_call(self, calls: Sequence[ToolCall]) -> str | Invalid:
        """The move in the calls of ``tool_name``, or :class:`Invalid` saying what is wrong with them.

        Example:
            >>> fmt = ActionFormat(kind="tool")
            >>> fmt.extract_tool_call([ToolCall("make_move", '{"move": "up"}')])
            'up'
            >>> fmt.extract_tool_call([ToolCall("make_move", '{"move": up}')]).reason[:40]
            'the arguments of the make_move call are '
        """
        name = self.tool_name
        if not calls:
            return Invalid(f"no function call in the answer: call {name} with your move")
        mine = [call for call in calls if call.name == name]
        if not mine:
            return Invalid(f"called {', '.join(sorted({call.name for call in calls}))} instead of {name}")
        moves = []
        for call in mine:
            try:
                arguments = json.loads(call.arguments or "{}")
            except json.JSONDecodeError as error:
                return Invalid(f"the arguments of the {name} call are not JSON ({error.msg}): {call.arguments[:80]!r}")
            move = arguments.get("move") if isinstance(arguments, dict) else None
            if not isinstance(move, str):
                return Invalid(f"the {name} call has no text argument 'move': {call.arguments[:80]!r}")
            moves.append(move.strip())
        if len(set(moves)) > 1:
            return Invalid(f"several different moves in one answer: {moves}")
        return moves[0]

    def extract_game_call(self, calls: Sequence[ToolCall], tools: Sequence[ToolSpec]) -> str | Invalid:
        """The one call of a tool-using game's tools, in its text form (``name(arg="value")``) for the game to parse.

        Example:
            >>> from tsmg.tools import ToolParam, ToolSpec
            >>> ask = ToolSpec(name="ask_user", description="Ask.", parameters=[ToolParam(name="topic")])
            >>> ActionFormat(kind="tool").extract_game_call([ToolCall("ask_user", '{"topic": "order"}')], [ask])
            'ask_user(topic="order")'
        """
        names = ", ".join(tool.name for tool in tools)
        if not calls:
            return Invalid(f"no function call in the answer: call one of {names}")
        texts = list(dict.fromkeys(call_from_json(call.name, call.arguments, tools) for call in calls))
        if len(texts) > 1:
            return Invalid(f"several different calls in one answer: {texts}; make one call")
        return texts[0]

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        if self.kind == "tag":
            tag = re.escape(self.tag)
            return re.compile(rf"<{tag}>(?P<action>.*?)</{tag}>", re.DOTALL | re.IGNORECASE)
        if self.kind == "final":
            return _FINAL_ANSWER
        if self.kind == "regex":
            if self.pattern is None:
                raise ValueError("ActionFormat(kind='regex') needs a pattern")
            return re.compile(self.pattern, re.DOTALL)
        return re.compile(r"(?P<action>.*)", re.DOTALL)

    def extract(self, answer: str) -> str | Invalid:
        """The action text in ``answer``, or :class:`Invalid` saying what was missing."""
        if self.kind in ("raw", "choice"):
            return answer.strip()
        matches = list(self._regex.finditer(answer))
        if not matches:
            if self.kind == "tag":
                return Invalid(f"no <{self.tag}>...</{self.tag}> in the answer")
            if self.kind == "final":
                return Invalid('no line "Final Answer: MOVE" in the answer: end it with one')
            return Invalid(f"the answer does not match the pattern {self.pattern!r}")
        match = matches[-1]
        groups = match.groupdict()
        text = groups["action"] if "action" in groups else (match.group(1) if match.groups() else match.group(0))
        if self.kind == "final" and not text.strip(" \t*_:`"):
            return Invalid('the "Final Answer:" line names no move: write the move after the colon')
        return text.strip()


class Thought(NamedTuple):
    """An answer split into its thinking and the answer proper (see :func:`split_thinking`)."""

    thinking: str | None
    answer: str
    unfinished: bool


_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def split_thinking(text: str) -> Thought:
    """Split inline ``<think>...</think>`` off an answer (Qwen3, DeepSeek-R1 and the like served plainly).

    Everything up to the last ``</think>`` is thinking (the opening tag may be missing: chat
    templates that start the answer inside ``<think>`` put it in the prompt). An opening tag that
    is never closed means the model was still thinking when it stopped.

    Example:
        >>> split_thinking("<think>left is a hole</think><action>down</action>")
        Thought(thinking='left is a hole', answer='<action>down</action>', unfinished=False)
        >>> split_thinking("hmm</think> down").answer, split_thinking("<think>still going").unfinished
        ('down', True)
        >>> split_thinking("down")
        Thought(thinking=None, answer='down', unfinished=False)
    """
    close = text.rfind(_THINK_CLOSE)
    if close >= 0:
        thinking = text[:close].replace(_THINK_OPEN, "").replace(_THINK_CLOSE, "").strip()
        return Thought(thinking, text[close + len(_THINK_CLOSE) :].strip(), False)
    start = text.find(_THINK_OPEN)
    if start >= 0:
        return Thought(text[start + len(_THINK_OPEN) :].strip(), text[:start].strip(), True)
    return Thought(None, text, False)


def tool_calls_in_text(text: str) -> list[ToolCall] | Invalid:
    """Function calls written as text, the Hermes way chat templates ask for them (Qwen2.5, Qwen3, ...).

    Each ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block is one call; a block
    that is not such a JSON object makes the answer :class:`Invalid`.

    Example:
        >>> tool_calls_in_text('<tool_call>{"name": "make_move", "arguments": {"move": "up"}}</tool_call>')
        [ToolCall(name='make_move', arguments='{"move": "up"}', id=None)]
        >>> tool_calls_in_text("up")
        []
    """
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            call = json.loads(block)
        except json.JSONDecodeError as error:
            return Invalid(f"a <tool_call> block is not JSON ({error.msg}): {block[:80]!r}")
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return Invalid(f"a <tool_call> block has no function name: {block[:80]!r}")
        arguments = call.get("arguments", call.get("parameters", {}))
        calls.append(ToolCall(call["name"], arguments if isinstance(arguments, str) else json.dumps(arguments)))
    return calls


class LAPConfig(BaseModel):
    """Everything that defines a Language-Agent Policy besides the model itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: PromptTemplate = Field(
        default_factory=PromptTemplate, description="What the model reads: system message, user turn, history."
    )
    action_format: ActionFormat = Field(
        default_factory=ActionFormat, description="How a move is read from the model's answer."
    )
    reprompt: int = Field(default=0, ge=0, le=10, description="Retries for an invalid answer, with the reason.")
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature (0: greedy).")
    top_p: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description="Nucleus sampling: the smallest set of tokens holding this much probability.",
    )
    max_tokens: int = Field(default=64, ge=1, description="The most tokens of one answer.")
    seed: int = Field(
        default=0,
        description="The run seed: with each decision's plan position, it keys the sampling seed (tsmg.seeding).",
    )
    legal_moves: Literal["list", "none"] = Field(
        default="list",
        description=(
            "list: the format line names the legal moves (unless the game's text lists them); none: the prompt "
            "names none, the model must know the game's notation (a game whose text lists them refuses it)."
        ),
    )
    votes: int = Field(
        default=1,
        ge=1,
        le=32,
        description=(
            "Answers sampled per decision (one batched call, each with its own seed); the move most valid answers "
            "name is played, a tie broken by the decision's seeded generator; none valid: the re-prompt path."
        ),
    )


class LAP:
    """A Language-Agent Policy: decides for a batch of observations with one model call per attempt.

    Example:
        >>> from tsmg.lm import Completion
        >>> class Echo:  # a stand-in model that always answers "<action>up</action>"
        ...     name = "echo"
        ...     def generate(self, requests, sampling):
        ...         return [Completion(text="<action>up</action>") for _ in requests]
        >>> from tsmg.rollout import rollout
        >>> [episode] = rollout("FrozenLake-v0", LAP(Echo()), seeds=[0])
        >>> episode.steps[0].parsed_action, episode.steps[0].prompt[0].role
        ('up', 'system')
    """

    def __init__(self, model: LanguageModel, config: LAPConfig | None = None, name: str | None = None) -> None:
        """Wrap ``model`` with a prompt template, action format and re-prompt budget."""
        self.model = model
        self.config = config or LAPConfig()
        self.name: str = name or str(getattr(model, "name", "lap"))
        self.sampling = SamplingParams(
            temperature=self.config.temperature, top_p=self.config.top_p, max_tokens=self.config.max_tokens
        )

    @property
    def prefers_independent_episodes(self) -> bool:
        """Remote models batch by themselves: let episodes advance independently (see rollout)."""
        return bool(getattr(self.model, "prefers_independent_episodes", False))

    def messages(self, request: DecisionRequest) -> list[dict[str, str]]:
        """The chat messages for one decision (system, history turns, then the observation)."""
        return self._messages(request, self._history(request))

    def _history(self, request: DecisionRequest) -> list[Turn]:
        template = self.config.template
        if template.history == "none":
            return []
        if template.history == "last_k":
            return list(request.history)[-template.history_k :]
        return list(request.history)

    def _messages(self, request: DecisionRequest, history: Sequence[Turn]) -> list[dict[str, str]]:
        template = self.config.template
        messages: list[dict[str, str]] = []
        if template.system:
            messages.append({"role": "system", "content": template.system})
        tools = self._game_tools(request)
        for turn in history:
            messages.append({"role": "user", "content": self._user_text(turn.observation, None, tools)})
            messages.append({"role": "assistant", "content": self._earlier_answer(turn, tools)})
            if not turn.valid and turn.reason:
                messages.append({"role": "user", "content": f"That answer was invalid: {turn.reason}."})
        last = self._user_text(request.observation, self._listed(request), tools)
        messages.append({"role": "user", "content": last})
        return messages

    def _game_tools(self, request: DecisionRequest) -> Sequence[ToolSpec] | None:
        """A tool-using game's own tools, which the ``tool`` action format offers instead of ``make_move``."""
        if self.config.action_format.kind != "tool":
            return None
        return game_tools(request.game) or None

    def _earlier_answer(self, turn: Turn, tools: Sequence[ToolSpec] | None = None) -> str:
        """An earlier answer as the model sees it again: without its thinking (as chat templates do)."""
        answer = split_thinking(turn.answer).answer
        fmt = self.config.action_format
        if not answer and fmt.kind == "tool" and turn.action is not None:
            # A game's own tool call is its action's text form; a plain game's move went through make_move.
            answer = turn.action if tools else f"{fmt.tool_name}({json.dumps({'move': turn.action})})"
        return answer

    def _fitted_messages(self, request: DecisionRequest) -> tuple[list[dict[str, str]], int]:
        """The messages of a decision, the oldest history turns dropped until the prompt fits the context.

        Applies when the model states ``context_window`` and counts prompt tokens
        (``count_prompt_tokens``) and the template's ``trim`` is ``oldest``; returns the messages
        and how many turns were dropped.
        """
        history = self._history(request)
        messages = self._messages(request, history)
        window = getattr(self.model, "context_window", None)
        count = getattr(self.model, "count_prompt_tokens", None)
        if not history or window is None or count is None or self.config.template.trim == "none":
            return messages, 0
        room = window - self.config.max_tokens

        def fits(kept: int) -> bool:
            candidate = self._messages(request, history[len(history) - kept :])
            return bool(count(self._tool_request(request, GenerationRequest(messages=candidate))) <= room)

        if fits(len(history)):
            return messages, 0
        low, high = 0, len(history) - 1  # the most recent turns that fit: binary search
        while low < high:
            middle = (low + high + 1) // 2
            if fits(middle):
                low = middle
            else:
                high = middle - 1
        return self._messages(request, history[len(history) - low :]), len(history) - low

    def _user_text(
        self,
        observation: str,
        legal_actions: Sequence[str] | None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> str:
        """The user turn; ``legal_actions``: the moves the format line names (None: none, see :meth:`_listed`)."""
        fmt = self.config.action_format
        return self.config.template.user_layout().format(
            observation=observation,
            legal_actions=", ".join(legal_actions or ()),
            format_instructions=fmt.instructions_for(legal_actions, tools),
        )

    def _listed(self, request: DecisionRequest) -> Sequence[str] | None:
        """The legal moves the prompt names: none where the game's text lists them or ``legal_moves`` is none."""
        if self.config.legal_moves == "none":
            if _lists_moves(request):
                raise ValueError(
                    f"legal_moves='none': {request.game.game_id} lists the legal moves in its observation; "
                    "give it the option that leaves them out (OpenSpiel games: list_moves=false) or list them"
                )
            return None
        return None if _lists_moves(request) else request.legal_actions

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Decide for every request: one batched model call, then batched re-prompts.

        A completion that failed (``finish_reason="error"``) gives a decision with ``error`` set:
        the episode fails with the backend's message rather than scoring an invalid answer.
        """
        fmt = self.config.action_format
        fitted = [self._fitted_messages(request) for request in requests]
        conversations = [messages for messages, _ in fitted]
        decisions: list[Decision | None] = [None] * len(requests)
        todo = list(range(len(requests)))
        votes = self.config.votes
        for attempt in range(self.config.reprompt + 1):
            # With votes, each decision asks for k answers in the same batch, each with its own seed.
            batch = [
                self._tool_request(
                    requests[i], self._generation_request(requests[i], conversations[i], attempt * votes + vote)
                )
                for i in todo
                for vote in range(votes)
            ]
            started = time.perf_counter()
            completions = self._complete([requests[i] for i in todo for _ in range(votes)], batch)
            share = (time.perf_counter() - started) / max(len(todo), 1)
            if len(completions) != len(batch):
                raise RuntimeError(f"{self.name} returned {len(completions)} completions for {len(batch)} requests")
            retry = []
            for n, i in enumerate(todo):
                group = completions[n * votes : (n + 1) * votes]
                actions = [self._action_of(requests[i], completion) for completion in group]
                chosen, record = self._vote(requests[i], group, actions) if votes > 1 else (0, None)
                completion, action, request = group[chosen], actions[chosen], batch[n * votes + chosen]
                decision = self._merge(decisions[i], request, completion, action, share)
                decisions[i] = self._with_reasoning(decision, completion, fitted[i][1])
                if record is not None:
                    _count_votes(decision, group, chosen, record)
                if completion.finish_reason == "error":
                    continue  # a failed call is not re-prompted: the episode fails with its message
                if isinstance(action, Invalid) and attempt < self.config.reprompt:
                    conversations[i] = conversations[i] + [
                        {"role": "assistant", "content": _answer_text(completion)},
                        {
                            "role": "user",
                            "content": f"That answer was invalid: {action.reason}. "
                            + fmt.instructions_for(self._listed(requests[i]), self._game_tools(requests[i])),
                        },
                    ]
                    retry.append(i)
            todo = retry
            if not todo:
                break
        return [decision for decision in decisions if decision is not None]

    def _vote(
        self, request: DecisionRequest, group: Sequence[Completion], actions: Sequence[str | Invalid]
    ) -> tuple[int, dict[str, Any]]:
        """The answer of ``group`` the decision plays (see :func:`tsmg.arena.majority`) and the vote's record.

        A failed call wins outright (the episode fails with its message); with no valid answer the
        first answer stands, invalid, and goes the re-prompt way.
        """
        moves = [None if isinstance(action, Invalid) else self._move_key(request, action) for action in actions]
        winner, tally = majority(moves, request.rng(self.config.seed))
        failed = [n for n, completion in enumerate(group) if completion.finish_reason == "error"]
        chosen = failed[0] if failed else (0 if winner is None else winner)
        record = {
            "answers": [_answer_text(completion) for completion in group],
            "moves": moves,
            "reasons": [action.reason if isinstance(action, Invalid) else None for action in actions],
            "tally": tally,
            "played": None if failed else moves[chosen],
        }
        return chosen, record

    @staticmethod
    def _move_key(request: DecisionRequest, action: str) -> str:
        """The canonical text of the legal move a valid answer names (its own text where moves are not listed)."""
        if request.legal_actions and action not in request.legal_actions:
            parsed = request.game.parse(request.agent, action)
            for text in request.legal_actions:
                if request.game.parse(request.agent, text) == parsed:
                    return text
        return action

    def _complete(self, requests: Sequence[DecisionRequest], batch: list[GenerationRequest]) -> list[Completion]:
        """One model call for ``batch`` (``requests[i]`` is the decision ``batch[i]`` asks for).

        The one place a LAP calls its model: a subclass that keeps per-episode state around the
        call (:class:`tsmg.apps.integrations.conversation.ConversationLAP`) overrides it.
        """
        return self.model.generate(batch, self.sampling)

    def _generation_request(
        self, request: DecisionRequest, messages: list[dict[str, str]], attempt: int
    ) -> GenerationRequest:
        choices = request.legal_actions if self.config.action_format.kind == "choice" else None
        if self.config.action_format.kind == "choice" and not choices:
            raise ValueError(
                f"{request.game.game_id} does not enumerate legal actions; action_format kind='choice' needs them"
            )
        seed = decision_seed(
            self.config.seed,
            game_seed=request.episode_seed,
            group_index=request.group_index,
            round=request.round,
            agent=request.game.agents.index(request.agent),
            attempt=attempt,
            episode_index=request.episode_index,
        )
        return GenerationRequest(messages=messages, choices=list(choices) if choices else None, seed=seed)

    def _tool_request(self, request: DecisionRequest, generation: GenerationRequest) -> GenerationRequest:
        """``generation`` with the move's function schema when the action format is ``tool``."""
        fmt = self.config.action_format
        if fmt.kind != "tool":
            return generation
        tools = self._game_tools(request)
        schemas = [tool.openai_schema() for tool in tools] if tools else [fmt.tool_schema(request.legal_actions)]
        return replace(generation, tools=schemas, tool_choice=fmt.tool_choice)

    def _action_of(self, request: DecisionRequest, completion: Completion) -> str | Invalid:
        if completion.finish_reason == "error":
            return Invalid(f"the model call failed: {completion.error or 'unknown error'}")
        action = self._extract(completion, self._game_tools(request))
        if isinstance(action, Invalid):
            return action
        parsed = request.game.parse(request.agent, action)
        return parsed if isinstance(parsed, Invalid) else action

    def _extract(self, completion: Completion, tools: Sequence[ToolSpec] | None = None) -> str | Invalid:
        """The action text of an answer, read from outside its thinking (``tools``: a tool-using game's own)."""
        fmt = self.config.action_format
        inline = split_thinking(completion.text)
        thinking = "\n".join(part for part in (completion.reasoning, inline.thinking) if part)
        if fmt.kind == "tool":
            if not completion.tool_calls and inline.unfinished:
                return Invalid(f"the token budget ran out while the model was thinking: no call of {fmt.tool_name}")
            if not completion.tool_calls and inline.answer.count("<tool_call>") > inline.answer.count("</tool_call>"):
                return Invalid("the answer ended inside a <tool_call> (the token budget ran out?)")
            calls = completion.tool_calls or tool_calls_in_text(inline.answer)
            if isinstance(calls, Invalid):
                return calls
            action = fmt.extract_game_call(calls, tools) if tools else fmt.extract_tool_call(calls)
            if isinstance(action, Invalid) and thinking and tool_calls_in_text(thinking):
                return Invalid(f"{action.reason} (one appears only inside the thinking, which is not the answer)")
            return action
        if thinking and not inline.answer.strip():
            if inline.unfinished or completion.finish_reason == "length":
                return Invalid("the token budget ran out while the model was thinking: no answer after the thinking")
            return Invalid("an empty answer after the thinking")
        action = fmt.extract(inline.answer)
        if isinstance(action, Invalid) and thinking and not isinstance(fmt.extract(thinking), Invalid):
            return Invalid(f"{action.reason} (one appears only inside the thinking, which is not the answer)")
        return action

    @staticmethod
    def _with_reasoning(decision: Decision, completion: Completion, trimmed: int) -> Decision:
        """The thinking, its tokens, tool calls, trimmed history and failure of this attempt on the decision."""
        inline = split_thinking(completion.text).thinking
        decision.reasoning = "\n".join(part for part in (completion.reasoning, inline) if part) or None
        if completion.reasoning_tokens is not None:
            decision.reasoning_tokens = (decision.reasoning_tokens or 0) + completion.reasoning_tokens
        decision.tool_calls = (
            [{"name": call.name, "arguments": call.arguments, "id": call.id} for call in completion.tool_calls]
            if completion.tool_calls
            else None
        )
        decision.history_trimmed = trimmed
        if completion.finish_reason == "error":
            decision.error = f"the model call failed: {completion.error or 'unknown error'}"
        return decision

    @staticmethod
    def _merge(
        previous: Decision | None,
        request: GenerationRequest,
        completion: Completion,
        action: str | Invalid,
        latency: float,
    ) -> Decision:
        """The decision after this attempt; token counts and latency add up over attempts.

        The prompt, its token ids, the offered choices and tools, the tokens written and their
        log-probabilities are the last attempt's: the one whose answer the game received.
        """
        decision = Decision(
            action=action,
            completion=completion.text,
            prompt=request.messages,
            token_ids=completion.token_ids,
            logprobs=completion.logprobs,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s or latency,
            prompt_token_ids=completion.prompt_token_ids,
            choices=request.choices,
            tools=request.tools,
        )
        if previous is not None:
            decision.reasoning_tokens = previous.reasoning_tokens  # this attempt's are added on top
            decision.votes = previous.votes
            decision.attempts = previous.attempts + 1
            decision.prompt_tokens = (previous.prompt_tokens or 0) + completion.prompt_tokens
            decision.completion_tokens = (previous.completion_tokens or 0) + completion.completion_tokens
            decision.latency_s += previous.latency_s
        return decision


def _lists_moves(request: DecisionRequest) -> bool:
    """Whether the request's game lists the legal moves in its observation (the format line then does not)."""
    return bool(getattr(request.game, "observation_lists_moves", False))


def _count_votes(decision: Decision, group: Sequence[Completion], chosen: int, record: dict[str, Any]) -> None:
    """Add the vote's other answers to ``decision``'s token counts and its record to ``decision.votes``."""
    for n, completion in enumerate(group):
        if n == chosen:
            continue
        decision.prompt_tokens = (decision.prompt_tokens or 0) + completion.prompt_tokens
        decision.completion_tokens = (decision.completion_tokens or 0) + completion.completion_tokens
        if completion.reasoning_tokens is not None:
            decision.reasoning_tokens = (decision.reasoning_tokens or 0) + completion.reasoning_tokens
    decision.votes = [*(decision.votes or []), record]


def _answer_text(completion: Completion) -> str:
    """What the model said, as text for a re-prompt: its content, or its function calls written out."""
    if completion.text.strip() or not completion.tool_calls:
        return completion.text
    return "\n".join(f"{call.name}({call.arguments})" for call in completion.tool_calls)
