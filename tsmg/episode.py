"""Episode records: everything needed to replay, score and train on a finished episode.

One :class:`Episode` serialises to one JSON line (:meth:`Episode.to_json`), so an evaluation or
training run keeps its episodes in an append-only ``episodes.jsonl`` file.

The Episode is the training record: each model step carries the prompt's token ids, the
offered choices, the tokens written and their behaviour log-probabilities, so a trainer needs
nothing else (no re-tokenising, no side tables). Records carry ``schema_version``
(:data:`SCHEMA_VERSION`); :func:`read_episodes` reads every version up to this one (a record
without the field is version 1, written before prompt ids and choices were recorded) and
refuses a newer one, naming the versions it reads. Version 2 added prompt ids, choices, the
model's thinking (`reasoning`), tool calls and trimmed-history counts. Version 3 added the state key
each agent's last step led to (``final_state_keys``, for credit assigners that follow a step to
its successor state: PGPO, GRAFT), the policy version each sample was drawn under (asynchronous
training), for a branch of a tree rollout its parent and the round it forked at (its steps before
that round are the parent's), and annotations. Version 4 made the episode the whole training record:
each step of the trained model records the temperature it was sampled at (``temperature``),
whether its log-probabilities are the trainer's own numerics (``exact_logprobs``) and whether
the update trains on it (``trains``), and the episode the seats the trained model played
(``model_seats``); before, these travelled beside the episodes. Older records read with these
fields None. Version 5 added the typed influence graphs of the episode (``influence``, keyed by who
made them: ``"exact"`` from the game's own record, an annotator's name for its graph; see
:mod:`tsmg.influence`); older records read with it empty. Version 6 completed each model step's
prompt with the function schemas offered beside its messages (``tools``, under the ``tool`` action
format; ``tsmg prompt`` shows the same); older records read with it None. Version 7 added each step's
majority vote (``votes``: per attempt the sampled answers, the move each names, the tally and the move
played; :attr:`tsmg.lap.LAPConfig.votes`); older records read with it None.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from tsmg.influence import InfluenceGraph


class Message(BaseModel):
    """One chat message of a prompt."""

    model_config = ConfigDict(extra="forbid")

    role: str
    content: str


class StepRecord(BaseModel):
    """One decision of one agent: what it saw, what it wrote, what it got.

    Attributes:
        index: Position of this record in the episode's step list.
        round: The game round (``Game.step`` call) the decision belongs to.
        agent: Who decided.
        observation: The observation text the agent was given.
        prompt: Chat messages sent to the model (None for scripted policies).
        tools: The function schemas sent with ``prompt`` (the ``tool`` action format; None: none,
            and in records older than version 6).
        completion: Raw text the policy wrote (the action text for scripted policies).
        action: Text submitted to the game (after the LAP's action extraction).
        parsed_action: Canonical text of the action the game played (None if none was played).
        valid: Whether the answer was a valid action.
        reason: Why the answer was invalid (None when valid).
        attempts: Answers the policy wrote for this decision (>1 after re-prompts).
        reward: Reward the agent received in this round.
        state_key: String form of the game's state key at decision time.
        token_ids: Tokens the model wrote (local backends).
        logprobs: Behaviour log-probabilities of those tokens (local backends).
        prompt_tokens: Prompt length in tokens, where known.
        completion_tokens: Completion length in tokens, where known.
        latency_s: Wall time spent deciding.
        reasoning: The model's thinking, apart from its answer (a separate field the server
            returned, or ``<think>...</think>`` written inline, which ``completion`` also holds).
        reasoning_tokens: Tokens spent thinking, where the backend reports them (part of
            ``completion_tokens``).
        tool_calls: Function calls of the answer (``name``, ``arguments``, ``id``) under the
            tool-call action format.
        history_trimmed: Earlier turns left out of the prompt to fit the model's context window.
        choices: The answers a constrained decision allowed (None: free text); with the token
            ids, what a trainer needs to recompute the distribution the answer was sampled from.
        prompt_token_ids: The prompt's token ids exactly as the model read them (local backends
            and vLLM's server; None where the backend does not say).
        policy_version: The trainer's policy version (updates done) whose weights sampled this
            answer (None outside training, and for seats the model does not play).
        temperature: The temperature the trained model sampled this answer at (None outside
            training, and for seats the model does not play).
        exact_logprobs: Whether ``logprobs`` are what the trainer's own model gives (False: an
            engine with its own numerics, e.g. vLLM, so the trainer recomputes pi_old; None
            outside training).
        trains: Whether the training update trains on this step (None: not decided, e.g. outside
            training, or an update that did not look at it); see :func:`training.credit.mark_trained_steps`.
        votes: With a majority vote (``votes`` > 1), one record per attempt (re-prompts add one each):
            ``answers`` (the k answers), ``moves`` (the legal move each names, None if invalid),
            ``reasons`` (why each invalid one is), ``tally`` (move → answers naming it) and
            ``played`` (the move the vote chose, None when no answer was valid). ``completion``
            holds the played answer; the token counts add up all k. None without a vote (and in
            records older than version 7).
    """

    model_config = ConfigDict(extra="forbid")

    index: int
    round: int
    agent: str
    observation: str
    prompt: list[Message] | None = None
    tools: list[dict[str, Any]] | None = None
    completion: str | None = None
    action: str | None = None
    parsed_action: str | None = None
    valid: bool = True
    reason: str | None = None
    attempts: int = 1
    reward: float = 0.0
    state_key: str | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    tool_calls: list[dict[str, str | None]] | None = None
    history_trimmed: int = 0
    choices: list[str] | None = None
    prompt_token_ids: list[int] | None = None
    policy_version: int | None = None
    temperature: float | None = None
    exact_logprobs: bool | None = None
    trains: bool | None = None
    votes: list[dict[str, Any]] | None = None


#: The version of the episode record this code writes; :func:`read_episodes` reads 1 to this.
SCHEMA_VERSION = 7


class EpisodeSchemaError(ValueError):
    """An episode record of a version this code cannot read (the message names the versions it reads)."""


class Episode(BaseModel):
    """A finished (or failed) episode.

    Attributes:
        episode_id: Unique id within a run (stable across reruns of the same plan).
        game_id: Registered id of the game.
        game_options: Options the game was made with (beyond its registered defaults).
        seed: Seed passed to ``reset``.
        group_id: Group the episode belongs to (episodes of a group share their start).
        agents: Agents of the game.
        policies: Name of the policy that played each agent.
        steps: Every decision, in order.
        returns: Cumulative reward of each agent.
        success: Whether each agent succeeded (None where the game does not define it).
        terminated: The game ended.
        truncated: A step limit ended the episode.
        num_rounds: Number of game rounds played.
        invalid_answers: Number of decisions that ended invalid.
        prompt_tokens: Total prompt tokens.
        completion_tokens: Total completion tokens.
        latency_s: Wall time of the whole episode.
        error: Why the episode could not finish (None if it did).
        reasoning_tokens: Total tokens spent thinking, part of ``completion_tokens`` (None when
            no step reported any).
        final_state_keys: Per agent, the string form of the game's state key once the episode
            was over: the state the agent's last step led to (None where the game gave none).
        schema_version: The record's version (:data:`SCHEMA_VERSION` when written by this code).
        policy_version: The trainer's policy version the episode started under (asynchronous
            training admits an episode by it; None outside training).
        parent_id: For a branch of a tree rollout, the episode it forked from (None: a root).
        fork_round: For a branch, the round it forked at: its steps of earlier rounds are copies
            of the parent's (the same prompts and answers), and a trainer must not count them twice.
        annotations: What annotators added for credit assignment, by annotator name
            (:mod:`training.annotators`; e.g. an influence graph between tool calls).
        model_seats: The seats the trained model played (None outside training; the other seats
            were played by an opponent).
        influence: Typed influence graphs between the episode's actions and the user and tool
            messages they used (:class:`tsmg.influence.InfluenceGraph`), keyed by who made them:
            ``"exact"`` is the game's own record (:meth:`tsmg.tools.ToolGame.influence_graph`), other keys
            are annotators' names. Empty where nobody made one.
    """

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    game_id: str
    game_options: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    group_id: str | None = None
    agents: list[str]
    policies: dict[str, str]
    steps: list[StepRecord] = Field(default_factory=list)
    returns: dict[str, float] = Field(default_factory=dict)
    success: dict[str, bool | None] = Field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    num_rounds: int = 0
    invalid_answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    reasoning_tokens: int | None = None
    final_state_keys: dict[str, str | None] = Field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    policy_version: int | None = None
    parent_id: str | None = None
    fork_round: int | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)
    model_seats: list[str] | None = None
    influence: dict[str, InfluenceGraph] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _readable_version(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        # A stored record without the field was written before versions existed: version 1.
        stored = bool(info.context and info.context.get("stored"))
        version = data.get("schema_version", 1 if stored else SCHEMA_VERSION)
        if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
            raise EpisodeSchemaError(
                f"episode record of schema version {version!r}; this tsmg reads versions 1 to {SCHEMA_VERSION} "
                "(a newer tsmg wrote it: upgrade tsmg to read it)"
            )
        return {**data, "schema_version": version}

    def to_json(self, *, token_ids: bool = True) -> str:
        """One JSON line (no newline inside); ``token_ids=False`` leaves out the token ids and logprobs."""
        if token_ids:
            return self.model_dump_json()
        return self.model_dump_json(exclude={"steps": {"__all__": set(TOKEN_FIELDS)}})

    @classmethod
    def from_json(cls, line: str) -> Episode:
        """Parse one JSON line written by :meth:`to_json`.

        Raises:
            EpisodeSchemaError: The record is of a newer schema version.
            ValueError: The line is not an episode record.
        """
        try:
            return cls.model_validate_json(line, context={"stored": True})
        except ValidationError as error:
            for problem in error.errors():
                if isinstance(problem.get("ctx", {}).get("error"), EpisodeSchemaError):
                    raise problem["ctx"]["error"] from None
            raise

    def steps_of(self, agent: str) -> list[StepRecord]:
        """The steps taken by ``agent``."""
        return [step for step in self.steps if step.agent == agent]


#: The per-step fields ``to_json(token_ids=False)`` leaves out: what only training needs.
TOKEN_FIELDS = ("token_ids", "logprobs", "prompt_token_ids")


def write_episodes(path: str | Path, episodes: Iterable[Episode], *, token_ids: bool = True) -> int:
    """Append episodes to a JSONL file, flushing after each line; returns how many were written.

    ``token_ids=False`` leaves the token ids and logprobs out (a smaller file that training cannot use).
    """
    count = 0
    with open(path, "a", encoding="utf-8") as handle:
        for episode in episodes:
            handle.write(episode.to_json(token_ids=token_ids) + "\n")
            handle.flush()
            count += 1
    return count


def read_episodes(path: str | Path) -> Iterator[Episode]:
    """Read episodes from a JSONL file, skipping a torn last line left by a killed writer."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield Episode.from_json(line)
        except EpisodeSchemaError as error:
            raise EpisodeSchemaError(f"{path}:{number}: {error}") from None
        except ValueError:
            if number == len(lines) and not line.endswith("\n"):
                return  # torn write at the end of the file: the episode was never completed
            raise ValueError(f"{path}:{number}: not an episode record") from None


def dumps_key(key: Any) -> str | None:
    """A stable string form of a state key (for the JSON record)."""
    if key is None:
        return None
    if isinstance(key, str):
        return key
    return json.dumps(key, default=repr, separators=(",", ":"))
