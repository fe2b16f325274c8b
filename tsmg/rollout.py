"""The rollout engine: many episodes at once, one batched policy call per round.

(Past 600 lines: the engine, its branching (tree rollouts) and StepwiseEpisode share the live-episode
bookkeeping.)

Each round gathers every pending decision of every live episode, groups them by policy, and
asks each policy once for the whole batch. With an in-process model backend this turns N
episodes into one batched ``generate`` per round instead of N. When an episode finishes, its
:class:`~tsmg.episode.Episode` record is handed to ``on_episode`` (e.g. appended to a JSONL file)
and the next planned episode takes its slot, up to ``max_concurrent`` live episodes.

Remote servers batch requests themselves, so for them (``schedule="independent"``) each
episode advances on its own worker thread under the same concurrency bound: a slow request
never holds the other episodes in lock-step.

A policy that raises fails only the episodes concerned: they are recorded with the error and
the rest of the run goes on. A game whose own code raises is another matter: that is a bug of the
game, never a failed answer, so the rollout stops and raises :class:`~tsmg.core.GameCodeError`
(naming the game, the call and the episode); the episodes finished before it were handed to
``on_episode`` already, and the others are dropped. :func:`record_game_error` writes it to a run
folder's ``game_errors.jsonl`` with its traceback.

Branching (tree rollouts): a ``branch`` hook sees every episode after each of its rounds and when
it ends (:class:`RoundEnd`), and may return new plans. A plan whose ``start`` is an
:class:`EpisodeSnapshot` continues that episode in progress on a fork of its game instead of
resetting a new one; the new episodes join the same lockstep batch at once, so every branch of a
round is one call of the policy (and identical prompts, the branches of one fork, are one prompt
to a backend that prefills identical prompts once). A snapshot can also be rebuilt from a finished
record by replaying its answers (:meth:`EpisodeSnapshot.replay`).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal, TypeVar

from tsmg.core import AgentID, Game, GameCodeError, GameError, Invalid
from tsmg.episode import Episode, Message, StepRecord, dumps_key
from tsmg.influence import EXACT, InfluenceGraph
from tsmg.policies import Decision, DecisionRequest, Policy, Turn
from tsmg.registry import make
from tsmg.run_folder import GAME_ERRORS_FILE as GAME_ERRORS_FILE  # importable from here as before
from tsmg.tools import exact_influence

logger = logging.getLogger(__name__)

GameFactory = Callable[[], Game]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class EpisodePlan:
    """One episode to play: its seed, its id and (optionally) its group.

    Attributes:
        seed: The game seed (the start state; None: unseeded).
        episode_id: Unique id within the run.
        group_id: The group the episode belongs to (its members share the seed).
        group_index: The episode's index in its group. It is a key of every sampling seed
            (:func:`tsmg.seeding.decision_seed`), so a group's episodes sample differently
            while the same plan replays exactly.
        start: Continue this episode in progress (a fork of its game, a copy of its record so
            far) instead of resetting a new game: a branch of a tree rollout. Its record names the
            snapshot's episode as ``parent_id`` and the round it forked at as ``fork_round``.
    """

    seed: int | None
    episode_id: str
    group_id: str | None = None
    group_index: int = 0
    start: EpisodeSnapshot | None = None


@dataclass(slots=True)
class _LiveEpisode:
    index: int
    plan: EpisodePlan
    game: Game
    record: Episode
    started: float
    observations: dict[AgentID, str]
    history: dict[AgentID, list[Turn]] = field(default_factory=dict)
    last_step: dict[AgentID, StepRecord] = field(default_factory=dict)
    unclaimed_reward: dict[AgentID, float] = field(default_factory=dict)


def _fork_live(live: _LiveEpisode, index: int, plan: EpisodePlan) -> _LiveEpisode:
    """An independent copy of ``live`` (its game forked, its record and histories copied) under ``plan``."""
    record = live.record.model_copy(deep=True)
    record.episode_id, record.group_id = plan.episode_id, plan.group_id
    return _LiveEpisode(
        index=index,
        plan=plan,
        game=live.game.fork(),
        record=record,
        started=time.perf_counter(),
        observations=dict(live.observations),
        history={agent: list(turns) for agent, turns in live.history.items()},
        last_step={agent: record.steps[step.index] for agent, step in live.last_step.items()},
        unclaimed_reward=dict(live.unclaimed_reward),
    )


class EpisodeSnapshot:
    """An episode in progress, frozen between two rounds: where branches of a tree rollout start.

    It holds a fork of the game and a copy of the record and the agents' histories; each episode
    started from it (an :class:`EpisodePlan` whose ``start`` it is) forks them again, so one
    snapshot starts any number of branches, and none of them changes the snapshot or the episode
    it was taken from. Take one with :meth:`RoundEnd.snapshot` during a rollout, or rebuild one
    from a finished record with :meth:`replay`.
    """

    def __init__(self, live: _LiveEpisode, parent_id: str) -> None:
        """Wrap a private copy of a live episode (use :meth:`RoundEnd.snapshot` or :meth:`replay`)."""
        self._live = live
        self.parent_id = parent_id

    @property
    def record(self) -> Episode:
        """The episode's record up to the snapshot (do not modify)."""
        return self._live.record

    @property
    def rounds(self) -> int:
        """Rounds played before the snapshot: the round its branches fork at."""
        return self._live.record.num_rounds

    def begin(self, index: int, plan: EpisodePlan) -> _LiveEpisode:
        """A live branch under ``plan`` (the rollout engine calls it)."""
        branch = _fork_live(self._live, index, plan)
        branch.record.parent_id, branch.record.fork_round = self.parent_id, self.rounds
        return branch

    @classmethod
    def replay(cls, record: Episode, rounds: int, game: Game) -> EpisodeSnapshot:
        """The episode of ``record`` as it stood after its first ``rounds`` rounds, rebuilt on ``game``.

        ``game`` (a fresh game made with the record's id and options) is reset with the record's
        seed and plays the recorded answers again; each step keeps what the record holds (prompt,
        tokens, log-probabilities, policy version) and the game recomputes the rest. Replaying is
        exact for a game whose episodes follow from the seed and the answers (the contract of
        every tsmg game).

        Raises:
            GameError: The record has no seed, fewer rounds, failed, or the game shows another
                observation than the record (the game does not replay it).
        """
        if record.seed is None or record.error is not None or rounds > record.num_rounds:
            raise GameError(
                f"cannot replay {record.episode_id} to round {rounds}: a replay needs a seeded episode that "
                f"finished with at least that many rounds (seed {record.seed}, {record.num_rounds} rounds, "
                f"error {record.error!r})"
            )
        plan = EpisodePlan(record.seed, record.episode_id, record.group_id)
        observations, _ = game.reset(seed=record.seed)
        header = record.model_copy(update={"steps": [], "num_rounds": 0, "invalid_answers": 0, "error": None})
        header.returns = dict.fromkeys(record.agents, 0.0)
        header.prompt_tokens = header.completion_tokens = 0
        header.reasoning_tokens, header.success = None, {}
        live = _LiveEpisode(-1, plan, game, header, time.perf_counter(), observations)
        by_round: dict[int, list[StepRecord]] = defaultdict(list)
        for step in record.steps:
            by_round[step.round].append(step)
        for number in range(rounds):
            answers = {}
            for step in by_round[number]:
                if live.observations.get(step.agent) != step.observation:
                    raise GameError(
                        f"{record.game_id} does not replay {record.episode_id}: at round {number} {step.agent} "
                        "observes something else than the record holds"
                    )
                request = DecisionRequest(
                    game=game,
                    agent=step.agent,
                    observation=step.observation,
                    legal_actions=None,
                    history=live.history.setdefault(step.agent, []),
                    episode_seed=record.seed,
                    round=number,
                )
                answers[step.agent] = (request, _recorded_decision(step))
            _play_round(live, answers)
            for step, replayed in zip(by_round[number], live.record.steps[-len(by_round[number]) :], strict=True):
                replayed.policy_version = step.policy_version
        return cls(live, record.episode_id)


class StepwiseEpisode:
    """One episode whose seat ``agent`` is played from outside, one answer at a time: the engine's record of it.

    For environments that another trainer drives (TRL's ``environment_factory`` calls a move as a
    tool; :mod:`tsmg.apps.integrations.trl`): the caller hands the seat's answers to :meth:`play`, the
    other seats' policies answer in the same rounds and in the rounds between, and the record is
    the one :func:`rollout` writes (the same round bookkeeping, rewards and invalid-answer rule).

    Example:
        >>> import games
        >>> from tsmg.policies import Decision, RandomPolicy
        >>> episode = StepwiseEpisode("TicTacToe-v0", EpisodePlan(3, "e0"), "player_0", RandomPolicy(seed=0))
        >>> episode.play(Decision("5"))
        >>> [(step.agent, step.parsed_action) for step in episode.record.steps][0]
        ('player_0', '5')
        >>> episode.request().round, len(episode.record.steps)  # the other seat moved: the caller's turn again
        (2, 2)

    Args:
        game: A registered game id or a factory.
        plan: The episode's seed and ids.
        agent: The seat the caller plays.
        others: The policy of every other seat (one policy for all, or one per seat).
        name: The caller's name in the record's ``policies``.
        game_options: Options the game is made with.

    Raises:
        ValueError: ``agent`` is not a seat of the game.
        GameError: The game could not start (the message says why).
    """

    def __init__(
        self,
        game: str | GameFactory,
        plan: EpisodePlan,
        agent: AgentID,
        others: Policy | Mapping[AgentID, Policy],
        *,
        name: str = "caller",
        game_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Start the episode and let the other seats play until ``agent`` is to move (or the game is over)."""
        options = dict(game_options or {})
        factory: GameFactory = game if callable(game) else partial(make, game, **options)
        self.agent = agent
        self._caller = _Handed(name)
        self._others = others
        policies = _Seats(agent, self._caller, others)
        started = _start_episode(0, plan, factory, policies, options)
        if isinstance(started, Episode):
            raise GameError(f"episode {plan.episode_id}: {started.error}")
        if agent not in started.game.agents:
            raise ValueError(
                f"{started.game.game_id} has no seat {agent!r}; its seats are {', '.join(started.game.agents)}"
            )
        self._live: _LiveEpisode = started
        self._policies = policies
        self.finished = False
        self._until_caller()

    @property
    def game(self) -> Game:
        """The live game."""
        return self._live.game

    @property
    def record(self) -> Episode:
        """The record so far (final once :attr:`finished`)."""
        return self._live.record

    def request(self) -> DecisionRequest:
        """What ``agent`` is asked now: its observation, legal moves and earlier turns."""
        live = self._live
        return DecisionRequest(
            game=live.game,
            agent=self.agent,
            observation=live.observations[self.agent],
            legal_actions=live.game.legal_actions(self.agent),
            history=live.history.setdefault(self.agent, []),
            episode_seed=live.plan.seed,
            round=live.record.num_rounds,
            group_index=live.plan.group_index,
        )

    def play(self, decision: Decision) -> None:
        """Play ``agent``'s answer in this round, then the other seats until ``agent`` is to move again."""
        if self.finished:
            raise GameError(f"episode {self._live.plan.episode_id} is over")
        self._caller.pending = decision
        self._round()
        self._until_caller()

    def stop(self, error: str | None = None) -> Episode:
        """End the episode here (it may be unfinished: then ``truncated``); its record."""
        if not self.finished:
            self._finish(self._live, error)
            self.record.truncated = not self.record.terminated
        return self.record

    def _round(self) -> None:
        answers, failed = _decide([self._live], self._policies)
        _advance(self._live, answers, failed, self._finish)

    def _until_caller(self) -> None:
        while not self.finished and self.agent not in self.game.active_agents:
            self._round()

    def _finish(self, episode: _LiveEpisode | Episode, error: str | None = None) -> None:
        assert isinstance(episode, _LiveEpisode)
        episode.record.error = error
        episode.record.latency_s = time.perf_counter() - episode.started
        if error is None and episode.game.done:
            _close_record(episode)
        self.finished = True


class _Handed:
    """The policy slot of the seat a :class:`StepwiseEpisode`'s caller plays: it answers what it was handed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pending: Decision | None = None

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        if self.pending is None or len(requests) != 1:
            raise RuntimeError("the caller's seat was asked without an answer handed to it")
        decision, self.pending = self.pending, None
        return [decision]


class _Seats(dict[AgentID, Any]):
    """Policies by seat: the caller's slot for ``agent``, ``others`` for the rest."""

    def __init__(self, agent: AgentID, caller: _Handed, others: Policy | Mapping[AgentID, Policy]) -> None:
        super().__init__()
        self.agent, self.caller, self.others = agent, caller, others

    def __missing__(self, seat: AgentID) -> Any:
        return self.caller if seat == self.agent else _policy_for(self.others, seat)


def _recorded_decision(step: StepRecord) -> Decision:
    """The decision a step records, as the policy returned it (the answer, its tokens and log-probabilities)."""
    action: str | Invalid = step.action if step.action is not None else Invalid(step.reason or "invalid answer")
    return Decision(
        action=action,
        completion=step.completion,
        prompt=[message.model_dump() for message in step.prompt] if step.prompt else None,
        token_ids=step.token_ids,
        logprobs=step.logprobs,
        prompt_tokens=step.prompt_tokens,
        completion_tokens=step.completion_tokens,
        attempts=step.attempts,
        latency_s=step.latency_s,
        reasoning=step.reasoning,
        reasoning_tokens=step.reasoning_tokens,
        tool_calls=step.tool_calls,
        history_trimmed=step.history_trimmed,
        prompt_token_ids=step.prompt_token_ids,
        choices=step.choices,
        tools=step.tools,
        votes=step.votes,
    )


@dataclass(frozen=True)
class RoundEnd:
    """What a ``branch`` hook of :func:`rollout` sees: an episode after one of its rounds, or at its end.

    Attributes:
        plan: The episode's plan.
        record: Its record so far (do not modify).
        done: Whether the episode has ended (finished or failed); then it cannot be snapshot.
    """

    plan: EpisodePlan
    record: Episode
    done: bool
    _live: _LiveEpisode | None = field(default=None, repr=False)

    def snapshot(self) -> EpisodeSnapshot:
        """Freeze the episode here, between this round and the next (a fork of its game).

        Raises:
            GameError: The episode has ended, or its game cannot fork.
        """
        if self.done or self._live is None:
            raise GameError(f"episode {self.plan.episode_id} has ended; only an episode in progress can be forked")
        return EpisodeSnapshot(_fork_live(self._live, -1, self.plan), self.plan.episode_id)


#: A branching hook: new plans to play, given an episode after a round or at its end (see :class:`RoundEnd`).
Brancher = Callable[[RoundEnd], Sequence[EpisodePlan]]


def plan_episodes(
    game_id: str, seeds: Sequence[int | None], group_size: int = 1, id_prefix: str | None = None
) -> list[EpisodePlan]:
    """Plan ``group_size`` episodes per seed, grouped by seed (a GRPO group shares its start).

    Ids are ``PREFIX/s{seed}/g{k}`` so the same plan always yields the same ids (resumable runs
    rely on that); ``k`` is also the plan's ``group_index``, which makes the members of a group
    sample differently. A seed listed twice is the same plan position twice: a model policy
    replays it (use ``group_size`` for distinct samples from one start).

    Example:
        >>> [(plan.episode_id, plan.group_index) for plan in plan_episodes("G-v0", [7], group_size=2)]
        [('G-v0/s7/g0', 0), ('G-v0/s7/g1', 1)]
    """
    prefix = id_prefix or game_id
    plans = []
    for seed_index, seed in enumerate(seeds):
        seed_name = f"s{seed}" if seed is not None else f"i{seed_index}"
        group = f"{prefix}/{seed_name}" if group_size > 1 else None
        for member in range(group_size):
            episode_id = f"{prefix}/{seed_name}/g{member}"
            plans.append(EpisodePlan(seed=seed, episode_id=episode_id, group_id=group, group_index=member))
    return plans


def rollout(
    game: str | GameFactory,
    policies: Policy | Mapping[AgentID, Policy],
    seeds: Sequence[int | None] | None = None,
    *,
    plans: Sequence[EpisodePlan] | None = None,
    game_options: Mapping[str, Any] | None = None,
    max_concurrent: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    schedule: Literal["auto", "lockstep", "independent"] = "auto",
    branch: Brancher | None = None,
) -> list[Episode]:
    """Play episodes concurrently and return their records in plan order.

    Args:
        game: A registered id (made with ``game_options``) or a factory returning a fresh game.
        policies: One policy for every agent, or a policy per agent.
        seeds: One episode per seed (ignored when ``plans`` is given).
        plans: Explicit episode plans (seeds, ids, groups), e.g. from :func:`plan_episodes`.
        game_options: Options for :func:`tsmg.make` when ``game`` is an id.
        max_concurrent: Most episodes live at once (default: all).
        on_episode: Called with each finished episode as soon as it finishes (never concurrently).
        schedule: ``lockstep`` gathers every live episode's decisions into one call per round
            (in-process models); ``independent`` advances each episode on its own thread
            (remote servers batch by themselves, and a slow request holds no other episode);
            ``auto`` picks ``independent`` when a policy sets ``prefers_independent_episodes``.
        branch: Called with every episode after each round and at its end (:class:`RoundEnd`);
            the plans it returns are played too, in the same lockstep batches (tree rollouts).
            Lockstep schedule only.

    Returns:
        The finished episodes, in plan order, then those the ``branch`` hook planned, in the
        order it planned them. Episodes that failed carry ``error``.

    Raises:
        GameCodeError: The game's own code raised (a bug of the game): the rollout stops, the
            episodes finished before it having been handed to ``on_episode``.
    """
    options = dict(game_options or {})
    if isinstance(game, str):
        game_id = game
        make(game_id, **options)  # fail fast on an unknown id or bad options, before any episode

        def factory() -> Game:
            return make(game_id, **options)
    else:
        factory = game
    if plans is None:
        if seeds is None:
            raise ValueError("give seeds or plans")
        probe_id = game if isinstance(game, str) else "game"
        plans = plan_episodes(probe_id, seeds)
    limit = max_concurrent or (len(plans) or 1 if branch is None else sys.maxsize)  # branches add episodes
    if schedule == "auto":
        members = policies.values() if isinstance(policies, Mapping) else [policies]
        independent = any(getattr(policy, "prefers_independent_episodes", False) for policy in members)
        schedule = "independent" if independent else "lockstep"
    if schedule == "independent" and max_concurrent is None:
        limit = min(limit, 64)  # one worker thread per live episode: keep the default bounded

    finished: dict[int, Episode] = {}
    lock = threading.Lock()
    every_plan = list(plans)
    pending = list(enumerate(plans))

    def grow(end: RoundEnd) -> None:
        """Queue the plans the branch hook returns (played next, before the plans not started yet)."""
        assert branch is not None
        for plan in branch(end):
            episode_index_of[plan.episode_id] = len(every_plan)
            pending.append((len(every_plan), plan))
            every_plan.append(plan)

    def finish(episode: _LiveEpisode | Episode, error: str | None = None) -> None:
        if isinstance(episode, Episode):  # could not even start
            record, index, plan = episode, episode_index_of[episode.episode_id], None
        else:
            record, index, plan = episode.record, episode.index, episode.plan
            record.error = error
            record.latency_s = time.perf_counter() - episode.started
            if error is None:
                _close_record(episode)
        with lock:  # on_episode (e.g. a file writer) never runs twice at once
            finished[index] = record
            if on_episode is not None:
                on_episode(record)
        if branch is not None:
            grow(RoundEnd(plan or every_plan[index], record, done=True))

    episode_index_of = {plan.episode_id: index for index, plan in enumerate(plans)}
    start = partial(_start_episode, factory=factory, policies=policies, options=options)
    if schedule == "lockstep":
        after_round = None if branch is None else (lambda live: grow(RoundEnd(live.plan, live.record, False, live)))
        _run_lockstep(pending, start, policies, limit, finish, after_round)
    elif schedule == "independent":
        if branch is not None:
            raise ValueError("branching (tree rollouts) needs the lockstep schedule; policies here ask for independent")
        _run_independent(pending, start, policies, limit, finish)
    else:
        raise ValueError(f"unknown schedule {schedule!r}: use 'lockstep', 'independent' or 'auto'")
    return [finished[index] for index in range(len(every_plan))]


Starter = Callable[[int, EpisodePlan], "_LiveEpisode | Episode"]
Finisher = Callable[["_LiveEpisode | Episode", "str | None"], None]


def _run_lockstep(
    pending: list[tuple[int, EpisodePlan]],
    start: Starter,
    policies: Policy | Mapping[AgentID, Policy],
    limit: int,
    finish: Finisher,
    after_round: Callable[[_LiveEpisode], None] | None = None,
) -> None:
    """Every round, one batched call per policy for all live episodes (in-process models).

    ``pending`` is popped from its end; what ``finish`` or ``after_round`` append to it starts next.
    """
    pending.reverse()  # pop() from the end keeps plan order
    live: list[_LiveEpisode] = []
    while pending or live:
        while pending and len(live) < limit:
            started = start(*pending.pop())
            if isinstance(started, Episode):
                finish(started, started.error)
            else:
                live.append(started)
        if not live:
            continue
        answers, failed = _decide(live, policies)
        still_live = []
        for episode in live:
            if _advance(episode, answers, failed, finish):
                still_live.append(episode)
                if after_round is not None:
                    after_round(episode)
        live = still_live


def _run_independent(
    pending: list[tuple[int, EpisodePlan]],
    start: Starter,
    policies: Policy | Mapping[AgentID, Policy],
    limit: int,
    finish: Finisher,
) -> None:
    """Each episode advances on its own worker thread (servers batch; a slow request holds no one).

    The first game failure stops every worker at its next round and is raised once they are done.
    """
    game_failures: list[GameCodeError] = []
    stop = threading.Event()

    def play(index: int, plan: EpisodePlan) -> None:
        if stop.is_set():
            return
        try:
            episode = start(index, plan)
            if isinstance(episode, Episode):
                finish(episode, episode.error)
                return
            while not stop.is_set():
                answers, failed = _decide([episode], policies)
                if not _advance(episode, answers, failed, finish):
                    return
        except GameCodeError as error:
            game_failures.append(error)
            stop.set()

    with ThreadPoolExecutor(max_workers=limit, thread_name_prefix="tsmg-rollout") as pool:
        for future in [pool.submit(play, index, plan) for index, plan in pending]:
            future.result()
    if game_failures:
        raise game_failures[0]


def _decide(
    live: Sequence[_LiveEpisode], policies: Policy | Mapping[AgentID, Policy]
) -> tuple[dict[int, dict[AgentID, tuple[DecisionRequest, Decision]]], dict[int, str]]:
    """Ask each policy once for every pending decision of ``live``; errors fail their episodes."""
    requests_by_policy: dict[int, tuple[Policy, list[tuple[_LiveEpisode, DecisionRequest]]]] = {}
    for episode in live:
        game, plan = episode.game, episode.plan
        for agent in _in_game(game, plan, "active_agents", attrgetter("active_agents"), game):
            policy = _policy_for(policies, agent)
            request = DecisionRequest(
                game=game,
                agent=agent,
                observation=episode.observations[agent],
                legal_actions=_in_game(game, plan, "legal_actions", game.legal_actions, agent),
                history=episode.history.setdefault(agent, []),
                episode_seed=plan.seed,
                episode_index=episode.index,
                round=episode.record.num_rounds,
                group_index=plan.group_index,
            )
            requests_by_policy.setdefault(id(policy), (policy, []))[1].append((episode, request))

    answers: dict[int, dict[AgentID, tuple[DecisionRequest, Decision]]] = defaultdict(dict)
    failed: dict[int, str] = {}
    for policy, batch in requests_by_policy.values():
        asked = time.perf_counter()
        try:
            decisions = policy.act([request for _, request in batch])
            if len(decisions) != len(batch):
                raise RuntimeError(f"policy {policy.name} returned {len(decisions)} decisions for {len(batch)}")
        except GameCodeError:  # the game raised under the policy (an oracle, say): the game's bug stops the run
            raise
        except Exception as error:  # one failing policy fails its episodes, not the run
            logger.exception("policy %s failed", policy.name)
            for episode, _ in batch:
                failed[episode.index] = f"policy {policy.name} failed: {error!r}"
            continue
        share = (time.perf_counter() - asked) / len(batch)
        for (episode, request), decision in zip(batch, decisions, strict=True):
            if decision.error is not None:  # no answer to play (a failed model call): the episode fails
                failed[episode.index] = decision.error
                continue
            if not decision.latency_s:
                decision.latency_s = share
            answers[episode.index][request.agent] = (request, decision)
    return answers, failed


def _advance(
    episode: _LiveEpisode,
    answers: Mapping[int, Mapping[AgentID, tuple[DecisionRequest, Decision]]],
    failed: Mapping[int, str],
    finish: Finisher,
) -> bool:
    """Play one round of ``episode``; returns whether it is still live."""
    if episode.index in failed:
        finish(episode, failed[episode.index])
        return False
    try:
        _play_round(episode, answers.get(episode.index, {}))
    except GameCodeError:
        raise  # the game's bug: the whole rollout stops (see the module's docstring)
    except Exception as error:
        logger.exception("episode %s failed", episode.plan.episode_id)
        finish(episode, f"recording the round failed: {error!r}")
        return False
    if _in_game(episode.game, episode.plan, "done", attrgetter("done"), episode.game):
        finish(episode, None)
        return False
    return True


def _in_game(game: Game, plan: EpisodePlan, call: str, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)``, a call into ``game`` (playing ``plan``): what it raises is the game's failure.

    The referee (:class:`~tsmg.core.RefereedGame`) names the game's own method that raised; a game
    without the referee is named by the :class:`~tsmg.core.Game` method (``call``). Either way the
    error learns the episode it stopped.
    """
    try:
        return function(*args)
    except GameCodeError as error:
        error.episode_id = error.episode_id or plan.episode_id
        raise
    except Exception as error:
        failure = GameCodeError(game.game_id, call, error, seed=plan.seed)
        failure.episode_id = plan.episode_id
        raise failure from error


def record_game_error(folder: str | Path, error: GameCodeError) -> Path:
    """Append ``error`` to the run folder's :data:`GAME_ERRORS_FILE`; returns the file's path.

    One JSON object a line: ``game_id``, ``episode_id``, ``seed``, ``call`` (the game's method that
    raised), ``exception`` (its type and message) and ``traceback`` (of the game's exception, the
    lines of the game's code included), so the terminal can show one sentence and the file the rest.
    """
    path = Path(folder) / GAME_ERRORS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    cause = error.error
    record = {
        "game_id": error.game_id,
        "episode_id": error.episode_id,
        "seed": error.seed,
        "call": error.call,
        "exception": f"{type(cause).__name__}: {cause}",
        "traceback": error.traceback_text or "".join(traceback.format_exception(cause)),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    error.written_to = str(path)
    return path


def _policy_for(policies: Policy | Mapping[AgentID, Policy], agent: AgentID) -> Policy:
    if isinstance(policies, Mapping):
        try:
            return policies[agent]
        except KeyError:
            raise KeyError(f"no policy given for agent {agent!r}") from None
    return policies


def _start_episode(
    index: int,
    plan: EpisodePlan,
    factory: GameFactory,
    policies: Policy | Mapping[AgentID, Policy],
    options: Mapping[str, Any],
) -> _LiveEpisode | Episode:
    started = time.perf_counter()
    if plan.start is not None:
        try:
            return plan.start.begin(index, plan)
        except GameCodeError as error:  # a replay fork runs the game's code again
            error.episode_id = error.episode_id or plan.episode_id
            raise
        except Exception as error:
            logger.exception("could not fork episode %s", plan.episode_id)
            failed = plan.start.record.model_copy(update={"episode_id": plan.episode_id, "group_id": plan.group_id})
            failed.error = f"could not fork: {error!r}"
            return failed
    game: Game | None = None
    try:
        game = factory()
        observations, _ = _in_game(game, plan, "reset", game.reset, plan.seed)
        names = {agent: _policy_for(policies, agent).name for agent in game.agents}
    except GameCodeError:
        raise
    except Exception as error:
        logger.exception("could not start episode %s", plan.episode_id)
        return Episode(
            episode_id=plan.episode_id,
            game_id=getattr(game, "game_id", "unknown"),
            game_options=dict(options),
            seed=plan.seed,
            group_id=plan.group_id,
            agents=list(getattr(game, "agents", ())),
            policies={},
            error=f"could not start: {error!r}",
        )
    record = Episode(
        episode_id=plan.episode_id,
        game_id=game.game_id,
        game_options=_recorded_options(game, options),
        seed=plan.seed,
        group_id=plan.group_id,
        agents=list(game.agents),
        policies=names,
        returns=dict.fromkeys(game.agents, 0.0),
    )
    return _LiveEpisode(index=index, plan=plan, game=game, record=record, started=started, observations=observations)


def _recorded_options(game: Game, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options an episode record keeps: those given, and the text ``view`` the game was played with.

    The view is recorded even at its default: a default can change (adapted OpenSpiel games showed
    their raw text before ``view`` existed), and a report must not pool episodes of two texts.
    """
    recorded = dict(options)
    view = getattr(getattr(game, "config", None), "view", None)
    if isinstance(view, str):
        recorded.setdefault("view", view)
    return recorded


def _play_round(episode: _LiveEpisode, answers: Mapping[AgentID, tuple[DecisionRequest, Decision]]) -> None:
    game, record = episode.game, episode.record
    state_keys = {
        agent: dumps_key(_in_game(game, episode.plan, "state_key", game.state_key, agent)) for agent in answers
    }
    result = _in_game(
        game, episode.plan, "step", game.step, {agent: decision.action for agent, (_, decision) in answers.items()}
    )
    for agent, (request, decision) in answers.items():
        info = result.infos.get(agent, {})
        completion = decision.completion
        if completion is None:
            completion = decision.action if isinstance(decision.action, str) else ""
        submitted = decision.action if isinstance(decision.action, str) else None
        valid = bool(info.get("valid", not isinstance(decision.action, Invalid)))
        reason = info.get("reason")
        step = StepRecord(
            index=len(record.steps),
            round=record.num_rounds,
            agent=agent,
            observation=request.observation,
            prompt=[Message(**message) for message in decision.prompt] if decision.prompt else None,
            completion=completion,
            action=submitted,
            parsed_action=info.get("action"),
            valid=valid,
            reason=reason,
            attempts=decision.attempts,
            reward=episode.unclaimed_reward.pop(agent, 0.0),
            state_key=state_keys[agent],
            token_ids=decision.token_ids,
            logprobs=decision.logprobs,
            prompt_tokens=decision.prompt_tokens,
            completion_tokens=decision.completion_tokens,
            latency_s=decision.latency_s,
            reasoning=decision.reasoning,
            reasoning_tokens=decision.reasoning_tokens,
            tool_calls=decision.tool_calls,
            history_trimmed=decision.history_trimmed,
            choices=decision.choices,
            prompt_token_ids=decision.prompt_token_ids,
            tools=decision.tools,
            votes=decision.votes,
        )
        record.steps.append(step)
        episode.last_step[agent] = step
        record.invalid_answers += 0 if valid else 1
        record.prompt_tokens += decision.prompt_tokens or 0
        record.completion_tokens += decision.completion_tokens or 0
        if decision.reasoning_tokens is not None:
            record.reasoning_tokens = (record.reasoning_tokens or 0) + decision.reasoning_tokens
        episode.history[agent].append(Turn(request.observation, completion, info.get("action"), valid, reason, 0.0))
    # Credit every reward to the receiving agent's latest step, so that an agent's step rewards
    # add up to its return even when it is rewarded in a round where it did not act (e.g. the
    # loser of a turn-based game).
    for agent, reward in result.rewards.items():
        record.returns[agent] = record.returns.get(agent, 0.0) + reward
        if not reward:
            continue
        last = episode.last_step.get(agent)
        if last is None:
            episode.unclaimed_reward[agent] = episode.unclaimed_reward.get(agent, 0.0) + reward
        else:
            last.reward += reward
            turns = episode.history[agent]
            previous = turns[-1]
            turns[-1] = Turn(
                previous.observation,
                previous.answer,
                previous.action,
                previous.valid,
                previous.reason,
                previous.reward + reward,
            )
    record.num_rounds += 1
    episode.observations = result.observations
    record.terminated = any(result.terminated.values())
    record.truncated = any(result.truncated.values()) and not record.terminated


def _close_record(episode: _LiveEpisode) -> None:
    """Record each agent's success, the state its last step led to and the game's influence graph, once it is over."""
    game, record = episode.game, episode.record
    record.success = {
        agent: _in_game(game, episode.plan, "is_success", game.is_success, agent) for agent in game.agents
    }
    record.final_state_keys = {agent: final_state_key(game, agent) for agent in game.agents}
    graph = _in_game(game, episode.plan, "influence_graph", _checked_influence, game, len(record.steps))
    if graph is not None:
        record.influence[EXACT] = graph


def _checked_influence(game: Game, num_steps: int) -> InfluenceGraph | None:
    """The game's own influence graph of the finished episode, its steps checked against the record's."""
    graph = exact_influence(game)
    if graph is not None:
        graph.check_steps(num_steps)  # a ValueError here is the game's bug: the record has these steps
    return graph


def final_state_key(game: Game, agent: AgentID) -> str | None:
    """The state key of a finished game as text, or None where the game gives none once it is over."""
    try:
        return dumps_key(game.state_key(agent))
    except Exception:  # a game may not define keys of finished states; credit then treats the end as unknown
        return None
