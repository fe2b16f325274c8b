"""Language-Agent Policy (LAP): a language model + prompt template + action format + re-prompts.

A LAP turns any :class:`~tsmg.lm.LanguageModel` into a :class:`~tsmg.policies.Policy`. For a
batch of decision requests it builds the chat prompts (system text, optional history, the
observation, format instructions), asks the model once for the whole batch, extracts the action
text by the action format, and re-prompts the invalid answers (a batch again) up to
``reprompt`` times with the reason appended. What an answer that stays invalid does to the game
(default action, penalty, termination) is the game's ``on_invalid`` option.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tsmg.core import Invalid
from tsmg.lm import Completion, GenerationRequest, LanguageModel, SamplingParams
from tsmg.policies import Decision, DecisionRequest
from tsmg.seeding import decision_seed

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

    @field_validator("user")
    @classmethod
    def _needs_observation(cls, user: str) -> str:
        if "{observation}" not in user:
            raise ValueError("the user template must contain {observation}")
        return user


class ActionFormat(BaseModel):
    """How the action is extracted from (or constrained in) the model's answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tag", "regex", "choice", "raw"] = Field(
        default="tag",
        description=(
            "tag: text inside <tag>...</tag> (last one wins); regex: group 'action' or 1 of a pattern; "
            "choice: constrained decoding among the legal actions; raw: the whole answer."
        ),
    )
    tag: str = Field(default="action", pattern=r"^[A-Za-z][\w-]*$", description="Tag name for kind='tag'.")
    pattern: str | None = Field(default=None, description="Regular expression for kind='regex'.")
    instructions: str | None = Field(default=None, description="Override the format instructions shown to the model.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        return checked_regex(pattern, "pattern")

    def instructions_for(self, legal_actions: Sequence[str] | None) -> str:
        """The format instructions shown to the model."""
        if self.instructions is not None:
            return self.instructions
        options = f" Valid actions: {', '.join(legal_actions)}." if legal_actions else ""
        if self.kind == "tag":
            return (
                f"Write your move inside <{self.tag}></{self.tag}> tags, e.g. <{self.tag}>MOVE</{self.tag}>.{options}"
            )
        if self.kind == "choice":
            return f"Answer with your move only.{options}"
        return f"Answer with your move.{options}"

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        if self.kind == "tag":
            tag = re.escape(self.tag)
            return re.compile(rf"<{tag}>(?P<action>.*?)</{tag}>", re.DOTALL | re.IGNORECASE)
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
            return Invalid(f"the answer does not match the pattern {self.pattern!r}")
        match = matches[-1]
        groups = match.groupdict()
        text = groups["action"] if "action" in groups else (match.group(1) if match.groups() else match.group(0))
        return text.strip()


class LAPConfig(BaseModel):
    """Everything that defines a Language-Agent Policy besides the model itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: PromptTemplate = Field(default_factory=PromptTemplate)
    action_format: ActionFormat = Field(default_factory=ActionFormat)
    reprompt: int = Field(default=0, ge=0, le=10, description="Retries for an invalid answer, with the reason.")
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=64, ge=1)
    seed: int = Field(
        default=0,
        description="The run seed: with each decision's plan position, it keys the sampling seed (tsmg.seeding).",
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
        template = self.config.template
        messages: list[dict[str, str]] = []
        if template.system:
            messages.append({"role": "system", "content": template.system})
        history = list(request.history)
        if template.history == "none":
            history = []
        elif template.history == "last_k":
            history = history[-template.history_k :]
        for turn in history:
            messages.append({"role": "user", "content": self._user_text(turn.observation, None)})
            messages.append({"role": "assistant", "content": turn.answer})
            if not turn.valid and turn.reason:
                messages.append({"role": "user", "content": f"That answer was invalid: {turn.reason}."})
        messages.append({"role": "user", "content": self._user_text(request.observation, request.legal_actions)})
        return messages

    def _user_text(self, observation: str, legal_actions: Sequence[str] | None) -> str:
        fmt = self.config.action_format
        return self.config.template.user.format(
            observation=observation,
            legal_actions=", ".join(legal_actions or ()),
            format_instructions=fmt.instructions_for(legal_actions),
        )

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Decide for every request: one batched model call, then batched re-prompts."""
        fmt = self.config.action_format
        conversations = [self.messages(request) for request in requests]
        decisions: list[Decision | None] = [None] * len(requests)
        todo = list(range(len(requests)))
        for attempt in range(self.config.reprompt + 1):
            batch = [self._generation_request(requests[i], conversations[i], attempt) for i in todo]
            started = time.perf_counter()
            completions = self.model.generate(batch, self.sampling)
            share = (time.perf_counter() - started) / max(len(todo), 1)
            if len(completions) != len(todo):
                raise RuntimeError(f"{self.name} returned {len(completions)} completions for {len(todo)} requests")
            retry = []
            for i, request, completion in zip(todo, batch, completions, strict=True):
                action = self._action_of(requests[i], completion)
                decisions[i] = self._merge(decisions[i], request, completion, action, share)
                if isinstance(action, Invalid) and attempt < self.config.reprompt:
                    conversations[i] = conversations[i] + [
                        {"role": "assistant", "content": completion.text},
                        {
                            "role": "user",
                            "content": f"That answer was invalid: {action.reason}. "
                            + fmt.instructions_for(requests[i].legal_actions),
                        },
                    ]
                    retry.append(i)
            todo = retry
            if not todo:
                break
        return [decision for decision in decisions if decision is not None]

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

    def _action_of(self, request: DecisionRequest, completion: Completion) -> str | Invalid:
        if completion.finish_reason == "error":
            return Invalid(f"the model call failed: {completion.error or 'unknown error'}")
        action = self.config.action_format.extract(completion.text)
        if isinstance(action, Invalid):
            return action
        parsed = request.game.parse(request.agent, action)
        return parsed if isinstance(parsed, Invalid) else action

    @staticmethod
    def _merge(
        previous: Decision | None,
        request: GenerationRequest,
        completion: Completion,
        action: str | Invalid,
        latency: float,
    ) -> Decision:
        """The decision after this attempt; token counts and latency add up over attempts.

        The prompt, its token ids, the offered choices, the tokens written and their
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
        )
        if previous is not None:
            decision.attempts = previous.attempts + 1
            decision.prompt_tokens = (previous.prompt_tokens or 0) + completion.prompt_tokens
            decision.completion_tokens = (previous.completion_tokens or 0) + completion.completion_tokens
            decision.latency_s += previous.latency_s
        return decision
