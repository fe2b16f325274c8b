"""The prompt part of the dry run's token bound, counted on the messages the LAP would send.

The LAP sends, at every decision, a system message, the game's rules and observation, the format
line with the legal moves and, with ``--history``, the earlier turns; a chat template wraps each
message in its own tokens (SmolLM2's adds a default system message of its own). A bound that
guesses a prompt from the first observation's characters misses most of that: on main before
this module, ``--dry-run`` said "at most 62,400" input tokens for a SmolLM2 run on
FrozenLake-NoSlip-v0 that used 88,584 tokens.

So :func:`measure_prompts` plays a few of the run's episodes with random moves and, at every
decision, has the LAP build its real requests for a stand-in model that records them (as
``tsmg prompt`` does): the decision's own prompt, the prompt with one earlier turn shown, and the
re-prompt after an invalid answer. :func:`prompt_counter` counts them with the model's tokenizer
and chat template where the model has one on this machine (``smollm2``, ``hf:``, ``vllm:`` with a
local folder), exactly as the Hugging Face backend feeds them; elsewhere (``openai:``) with a
stated rule, :data:`RULE`. Each earlier answer shown again is taken at the whole token budget,
and every earlier answer as invalid, with its reason (:func:`placeholder_reason`).

What the bound assumes: no observation is longer than the longest seen in the probe episodes
(random play may not reach a game's longest positions), a reason is no longer than the
placeholder, and an answer re-tokenised as part of a later prompt takes no more tokens than it
took to write.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tsmg.answers import quote
from tsmg.decisions import Decision, DecisionRequest, Turn
from tsmg.lap import LAP, MAX_LISTED_ACTIONS, LAPConfig
from tsmg.lm import Completion, GenerationRequest, SamplingParams
from tsmg.model_spec import parse_model_spec
from tsmg.rollout import EpisodePlan, rollout

__all__ = ["RULE", "PromptCounter", "PromptSizes", "measure_prompts", "prompt_counter", "seat_prompt_tokens"]

#: The counting rule where no tokenizer is at hand (a hosted model): it errs on the long side, as the
#: OpenAI-compatible backend's own estimate does (2 characters a token) and byte-level tokenizers
#: never take more than one token a byte.
RULE = "UTF-8 bytes / 2 + 8 a message + 8 (an estimate by rule: no tokenizer for this model here)"

#: Random-play episodes whose decisions are measured, per game (the run's first seeds).
PROBE_EPISODES = 4


@dataclass(frozen=True)
class PromptCounter:
    """Counts a request's prompt tokens.

    Attributes:
        count: Tokens of one request's prompt (messages, and tools where offered).
        how: How it counts, for the dry run's text.
        exact: Whether it is the model's own tokenizer (and chat template).
    """

    count: Callable[[GenerationRequest], int]
    how: str
    exact: bool


def _rule_count(request: GenerationRequest) -> int:
    """:data:`RULE` applied to ``request``."""
    messages = request.messages or []
    size = sum(len(message["content"].encode()) for message in messages)
    if request.tools:
        size += len(json.dumps(request.tools).encode())
    return math.ceil(size / 2) + 8 * len(messages) + 8


def prompt_counter(spec: str, model_options: Mapping[str, Any] | None = None) -> PromptCounter:
    """The counter of ``spec``'s prompts: its tokenizer and chat template where they are here, else :data:`RULE`.

    Example:
        >>> counter = prompt_counter("openai:gpt-4o-mini")
        >>> counter.exact, counter.count(GenerationRequest(messages=[{"role": "user", "content": "abcd"}]))
        (False, 18)
    """
    from backends import BackendError

    options = dict(model_options or {})
    try:
        folder = _tokenizer_folder(spec, options)
        if folder is None:
            return PromptCounter(_rule_count, RULE, exact=False)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, BackendError) as error:  # no tokenizer here after all: the rule, saying why
        why = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return PromptCounter(_rule_count, f"{RULE}; {spec}'s tokenizer did not load: {why}", exact=False)
    chat = options.get("chat")
    chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else bool(chat)

    def count(request: GenerationRequest) -> int:
        # As backends.hf.HFBackend.prompt_text and encode_prompts render and tokenise a request.
        messages = request.messages or []
        if chat:
            tools: Any = request.tools or None
            text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        else:
            text = "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages) + "\n\nAssistant:"
        return len(tokenizer(str(text), add_special_tokens=False)["input_ids"])

    how = f"{spec}'s tokenizer" + (" and chat template" if chat else " ('Role: text' lines: no chat template)")
    return PromptCounter(count, how, exact=True)


def _tokenizer_folder(spec: str, options: Mapping[str, Any]) -> str | None:
    """The local folder (or cached hub id) of ``spec``'s tokenizer; None for a hosted model or none found."""
    parsed = parse_model_spec(spec)
    if parsed.kind == "smollm2":
        from backends.embedded import embedded_model_dir

        return str(embedded_model_dir())
    if parsed.kind == "vllm" and options.get("tokenizer"):
        return str(options["tokenizer"])
    if parsed.kind not in ("hf", "vllm"):
        return None
    folder = Path(parsed.target).expanduser()
    if folder.is_dir() and not (folder / "config.json").is_file():  # a training checkpoint: its model's folder
        from backends.checkpoints import checkpoint_weights

        try:
            weights = checkpoint_weights(folder)
        except FileNotFoundError:
            return None
        return None if weights is None else str(weights.model)
    return parsed.target  # a model folder, or a hub id the local cache may hold (else the rule)


def placeholder_reason(legal_actions: Sequence[str] | None) -> str:
    """An invalid answer's reason as long as the answer rule writes them: the expected moves, then the answer quoted.

    Example:
        >>> placeholder_reason(["left", "up"])[55:]
        "expected one of left, up; got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"
    """
    moves = ", ".join(legal_actions[:MAX_LISTED_ACTIONS]) if legal_actions else "a move the game accepts"
    return f"the token budget ran out while the model was thinking; expected one of {moves}; got {quote('x' * 80)}"


@dataclass(frozen=True)
class PromptSizes:
    """What the LAP's prompts of one game take, in tokens, the longest over the measured decisions.

    Attributes:
        decision: A decision's prompt with no earlier turn shown (system, rules, observation,
            format line and legal moves, in the chat template).
        history_turn: What one earlier turn shown adds, its answer left empty (0 with ``--history none``).
        reprompt: What one re-prompt adds (the invalid answer's message and the format line again), its
            answer left empty.
        decisions: Decisions measured.
        episodes: Random-play episodes they came from.
        how: How the tokens were counted (:attr:`PromptCounter.how`).
    """

    decision: int
    history_turn: int
    reprompt: int
    decisions: int
    episodes: int
    how: str


def seat_prompt_tokens(sizes: PromptSizes, lap: LAPConfig, turns: int, budget: int) -> int:
    """Prompt tokens one seat sends at most over ``turns`` decisions, each answer of up to ``budget`` tokens.

    Decision ``r`` (0-based) shows ``h(r)`` earlier turns (0, ``min(r, k)`` or ``r`` by the
    template's history), each re-sending an answer of the whole budget; each of its ``1 +
    reprompt`` attempts samples ``votes`` answers, attempt ``a`` carrying ``a`` earlier answers and
    their re-prompts.

    Example:
        >>> sizes = PromptSizes(decision=100, history_turn=20, reprompt=30, decisions=1, episodes=1, how="")
        >>> from tsmg.lap import PromptTemplate
        >>> seat_prompt_tokens(sizes, LAPConfig(), turns=3, budget=10)  # history none: 3 x 100
        300
        >>> full = LAPConfig(template=PromptTemplate(history="full"), reprompt=1)
        >>> seat_prompt_tokens(sizes, full, turns=2, budget=10)  # 2 attempts x (100 + 130) + 2 re-prompts x (30+10)
        540
    """
    template = lap.template
    repeats = lap.reprompt * (lap.reprompt + 1) // 2  # earlier attempts re-sent over one decision's attempts
    total = 0
    for decision in range(turns):
        shown = {"none": 0, "last_k": min(decision, template.history_k), "full": decision}[template.history]
        prompt = sizes.decision + shown * (sizes.history_turn + budget)
        total += lap.votes * ((lap.reprompt + 1) * prompt + repeats * (sizes.reprompt + budget))
    return total


def measure_prompts(
    game_id: str,
    seeds: Sequence[int],
    lap: LAPConfig,
    counters: Sequence[PromptCounter],
    game_options: Mapping[str, Any] | None = None,
) -> list[PromptSizes]:
    """The prompt sizes of ``game_id`` under ``lap``, counted by each of ``counters`` (one result each).

    Plays one episode per seed (the first :data:`PROBE_EPISODES`) with random legal moves for every
    seat; at each decision the LAP builds its requests for a stand-in model, and they are counted.

    Raises:
        ValueError: The LAP refuses the game (``choice`` answers on a game that lists no moves, ...),
            as the run would.
    """
    probe = _Probe(lap)
    plans = [EpisodePlan(seed=seed, episode_id=f"{game_id}/probe-{n}") for n, seed in enumerate(seeds[:PROBE_EPISODES])]
    played = rollout(game_id, probe, plans=plans, game_options=dict(game_options or {}))
    if probe.refusal is not None:
        raise probe.refusal
    if not probe.requests:  # the run would fail the same way: say so before it starts
        error = next((episode.error for episode in played if episode.error), "no decision to make")
        raise ValueError(f"{game_id}: the dry run could not reach a decision to measure its prompt: {error}")
    sizes = []
    for counter in counters:
        decision = history = reprompt = 0
        for own, shown, reprompted in probe.requests:
            base = counter.count(own)
            decision = max(decision, base)
            history = max(history, counter.count(shown) - base)
            reprompt = max(reprompt, counter.count(reprompted) - base)
        sizes.append(PromptSizes(decision, history, reprompt, len(probe.requests), len(plans), counter.how))
    return sizes


class _Recorder:
    """A stand-in model: keeps every request and answers each with nothing (an invalid answer, re-prompted)."""

    name = "probe"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        self.requests.extend(requests)
        return [Completion(text="", finish_reason="stop") for _ in requests]


class _Probe:
    """Every seat's policy in the probe episodes: records the LAP's requests at a decision, then plays a random move."""

    name = "probe"

    def __init__(self, lap: LAPConfig) -> None:
        self.recorder = _Recorder()
        # one vote and one re-prompt: the requests of a first attempt and of a re-prompt, each once
        self.lap = LAP(self.recorder, lap.model_copy(update={"votes": 1, "reprompt": 1}))
        self.shows_history = lap.template.history != "none"
        self.seed = lap.seed
        #: Per decision: its own request, the same with one earlier turn shown, and its re-prompt.
        self.requests: list[tuple[GenerationRequest, GenerationRequest, GenerationRequest]] = []
        self.refusal: ValueError | None = None

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Measure each request, then answer with a random legal move (the episode goes on to later positions)."""
        for request in requests:
            try:
                self.requests.append(self._measure(request))
            except ValueError as error:  # the LAP refuses this game: the run would too
                self.refusal = self.refusal or error
        return [self._random_move(request) for request in requests]

    def _measure(self, request: DecisionRequest) -> tuple[GenerationRequest, GenerationRequest, GenerationRequest]:
        reason = placeholder_reason(request.legal_actions)
        own, reprompted = self._requests(replace(request, history=()), 2, reason)
        shown = own
        if self.shows_history:
            earlier = Turn(request.observation, answer="", action=None, valid=False, reason=reason, reward=0.0)
            shown = self._requests(replace(request, history=[earlier]), 1, reason)[0]
        return own, shown, reprompted

    def _requests(self, request: DecisionRequest, wanted: int, reason: str) -> list[GenerationRequest]:
        """The LAP's requests at ``request``: the first attempt, then (``wanted`` 2) its re-prompt, with ``reason``."""
        self.recorder.requests.clear()
        [decision] = self.lap.act([request])
        made = list(self.recorder.requests)
        if wanted == 1:
            return made[:1]
        if len(made) < 2:  # an empty answer was valid here: no re-prompt to see; count the earlier turn's size
            earlier = Turn(request.observation, answer="", action=None, valid=False, reason=reason, reward=0.0)
            return [made[0], self._requests(replace(request, history=[earlier]), 1, reason)[0]]
        real = getattr(decision.action, "reason", "")
        messages = [dict(message) for message in made[1].messages or []]
        if real:  # the re-prompt as long as the longest reason, not the empty answer's short one
            messages[-1]["content"] = messages[-1]["content"].replace(real, reason, 1)
        return [made[0], replace(made[1], messages=messages)]

    def _random_move(self, request: DecisionRequest) -> Decision:
        if not request.legal_actions:
            return Decision(action="")  # a game that lists no moves: the episode ends where the game says
        pick = int(request.rng(self.seed).integers(len(request.legal_actions)))
        return Decision(action=request.legal_actions[pick])
