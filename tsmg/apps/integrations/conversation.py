"""An episode as one growing token sequence: the data of trainers that train on whole episodes.

TRL's ``GRPOTrainer`` takes one sequence per episode: the first prompt, then every answer the
model wrote and every message the game sent back, with a mask that marks the model's own
tokens. For the trainer to score the tokens the model sampled *in the context it sampled them
in*, each turn's prompt must extend the previous prompt and answer token by token. Re-rendering
the whole conversation with the chat template each turn does not guarantee that: a template
may close an assistant turn differently from the end-of-turn token the model sampled (ChatML
writes a newline after ``<|im_end|>``), and re-tokenising an answer's text may split it differently from
the tokens sampled ("le" + "ft" against "left").

:class:`ConversationLAP` keeps the ids instead. The first prompt of each seat is rendered as
usual; every later prompt is the previous prompt, the tokens the model sampled, and the tokens
of the new messages only (the next observation, or the reason an answer was invalid) rendered by
the chat template as a continuation. The model reads ``prompt_token_ids`` as they are, so every
step's record holds the exact sequence, and :func:`episode_sequence` reads the episode back as
prompt ids, completion ids, the model-token mask and the behaviour log-probabilities.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tsmg.core import Game
from tsmg.episode import Episode
from tsmg.lap import LAP, LAPConfig
from tsmg.lm import Completion, GenerationRequest
from tsmg.policies import DecisionRequest

_DUMMY_TURN = [{"role": "user", "content": "?"}, {"role": "assistant", "content": "!"}]


class ConversationLAP(LAP):
    """A LAP whose every seat plays its episode as one token sequence (see the module docstring).

    The history is the conversation itself, so the template's ``history`` is ``full`` and
    nothing is trimmed (a conversation that outgrows the context window fails its episode with
    the backend's reason). The model must take token-id prompts: :class:`backends.hf.HFBackend`
    (``HFBackend.from_model`` wraps a model a trainer holds).

    Example:
        >>> import tempfile
        >>> from backends.hf import HFBackend
        >>> from backends.tiny import build_tiny_model
        >>> from tsmg.lap import ActionFormat
        >>> from tsmg.rollout import rollout
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     model = HFBackend(build_tiny_model(folder))
        >>> lap = ConversationLAP(model, LAPConfig(action_format=ActionFormat(kind="choice")))
        >>> [episode] = rollout("FrozenLake-v0", lap, seeds=[3])
        >>> sequence = episode_sequence(episode, "player")
        >>> sum(sequence.model_mask) == sum(len(step.token_ids) for step in episode.steps)
        True
    """

    def __init__(self, model: Any, config: LAPConfig | None = None, name: str | None = None) -> None:
        """Wrap ``model`` (which must take token-id prompts); ``config``'s history settings are replaced."""
        config = config or LAPConfig()
        if config.votes > 1:  # the conversation continues one answer per seat: k sampled answers have no one thread
            raise ValueError(f"ConversationLAP continues one answer per seat: votes must be 1, not {config.votes}")
        template = config.template.model_copy(update={"history": "full", "trim": "none"})
        super().__init__(model, config.model_copy(update={"template": template}), name)
        self.model: Any = model  # an HFBackend-like model: encode_prompts, tokenizer, chat, eos_ids
        for needed in ("encode_prompts", "tokenizer"):
            if not hasattr(model, needed):
                raise TypeError(
                    f"ConversationLAP needs a local model that takes token-id prompts (backends.hf.HFBackend); "
                    f"{type(model).__name__} has no {needed}"
                )
        # Per live game and seat, the conversation so far in tokens (prompt + answers + game messages).
        self._sequences: weakref.WeakKeyDictionary[Game, dict[str, list[int]]] = weakref.WeakKeyDictionary()

    def _complete(self, requests: Sequence[DecisionRequest], batch: list[GenerationRequest]) -> list[Completion]:
        """Feed each request the conversation so far plus its new messages, as token ids; remember the answer."""
        firsts = [index for index, request in enumerate(requests) if self._so_far(request) is None]
        first_ids = dict(zip(firsts, self.model.encode_prompts([batch[index] for index in firsts]), strict=True))
        prompts = []
        for index, (request, generation) in enumerate(zip(requests, batch, strict=True)):
            so_far = self._so_far(request)
            if so_far is None:
                ids = list(first_ids[index])
            else:
                ids = so_far + self._continuation(so_far, _new_messages(generation.messages or []))
            prompts.append(replace(generation, prompt_token_ids=ids))
        completions: list[Completion] = self.model.generate(prompts, self.sampling)
        for request, prompt, completion in zip(requests, prompts, completions, strict=True):
            if completion.finish_reason != "error" and completion.token_ids is not None:
                seats = self._sequences.setdefault(request.game, {})
                seats[request.agent] = list(prompt.prompt_token_ids or []) + list(completion.token_ids)
        return completions

    def _so_far(self, request: DecisionRequest) -> list[int] | None:
        return self._sequences.get(request.game, {}).get(request.agent)

    def _continuation(self, so_far: list[int], messages: list[dict[str, str]]) -> list[int]:
        """The tokens that follow an answer: its end of turn where the model did not write it, then the new messages."""
        tokenizer = self.model.tokenizer
        if not getattr(self.model, "chat", True):  # plain-prompt layout: "Role: text" blocks, then "Assistant:"
            text = "".join(f"\n\n{message['role'].capitalize()}: {message['content']}" for message in messages)
            return list(tokenizer(text + "\n\nAssistant:", add_special_tokens=False)["input_ids"])
        before = _template_ids(tokenizer, _DUMMY_TURN, generation_prompt=False)
        after = _template_ids(tokenizer, _DUMMY_TURN + messages, generation_prompt=True)
        if after[: len(before)] != before:
            raise ValueError("the chat template renders an earlier turn differently once a later one follows it")
        eos = set(getattr(self.model, "eos_ids", ())) or {tokenizer.eos_token_id}
        ends = [position for position, token in enumerate(before) if token in eos]
        if not ends:  # the template closes a turn with no end-of-sequence token: nothing to align
            return after[len(before) :]
        # The template closes the dummy answer with its end-of-turn token and what follows it (ChatML:
        # "<|im_end|>" "\n"); an answer the model ended itself already holds the token.
        closing = before[ends[-1] + 1 :] if so_far and so_far[-1] in eos else before[ends[-1] :]
        return closing + after[len(before) :]


def _template_ids(tokenizer: Any, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    return list(tokenizer(str(text), add_special_tokens=False)["input_ids"])


def _new_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The messages after the last assistant turn (what the game said since the model last answered)."""
    for position in range(len(messages) - 1, -1, -1):
        if messages[position]["role"] == "assistant":
            return messages[position + 1 :]
    raise ValueError("a later turn of a conversation without an earlier answer in its messages")


@dataclass(frozen=True)
class EpisodeSequence:
    """One seat's episode as one token sequence.

    Attributes:
        prompt_ids: The first prompt's token ids.
        completion_ids: Everything after it: the model's answers and the game's messages between them.
        model_mask: 1 for a token the model wrote, 0 for one the game (or the template) wrote.
        logprobs: The behaviour log-probability of each model token, 0.0 at the game's tokens.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    model_mask: list[int]
    logprobs: list[float]


def episode_sequence(episode: Episode, agent: str) -> EpisodeSequence:
    """``agent``'s steps of ``episode`` as one token sequence (the episode must be played by :class:`ConversationLAP`).

    Raises:
        ValueError: The agent took no step, a step lacks token ids, or a step's prompt does not
            extend the sequence so far (the episode was not played as one conversation).
    """
    steps = episode.steps_of(agent)
    if not steps:
        raise ValueError(f"{agent} took no step in episode {episode.episode_id}")
    sequence: list[int] = []
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    for number, step in enumerate(steps):
        if step.prompt_token_ids is None or step.token_ids is None or step.logprobs is None:
            raise ValueError(f"episode {episode.episode_id}, step {step.index}: recorded without token ids")
        if step.prompt_token_ids[: len(sequence)] != sequence:
            raise ValueError(
                f"episode {episode.episode_id}, step {step.index}: its prompt does not extend the conversation "
                "so far (play it with tsmg.apps.integrations.conversation.ConversationLAP)"
            )
        between = step.prompt_token_ids[len(sequence) :] if number else []
        completion += between + step.token_ids
        mask += [0] * len(between) + [1] * len(step.token_ids)
        logprobs += [0.0] * len(between) + list(step.logprobs)
        sequence = step.prompt_token_ids + step.token_ids
    return EpisodeSequence(list(steps[0].prompt_token_ids or []), completion, mask, logprobs)
