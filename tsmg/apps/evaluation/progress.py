"""Progress of an evaluation that tells the truth: decisions as well as episodes, and an ETA from throughput.

A language model's episodes often finish together: an in-process model plays every live
episode's turn in one batched call, so 50 episodes can show 0 done for six minutes and then 50
at once, and an ETA drawn from finished episodes says nothing until then (and "1 s" just after
a batch lands). Decisions (one agent's turn) move all the time, so :class:`EvalProgress` counts
them and estimates what is left from the decisions played per second since the run began:

* the decisions the plan still needs are the unfinished episodes times the decisions a
  finished episode took on average, less those the live episodes have already played (at
  least one each); before any episode has finished, each is taken to last the game's step
  limit (every seat deciding every round), and the ETA says so (``to the step limit``);
* the rate is decisions over the wall time since the first decision was asked for: between
  two batches of a model that answers in batches it falls, so the ETA grows while nothing
  lands rather than counting down to "1 s" with minutes left. It is a measurement, not a
  bound: later turns carry longer prompts (the history grows) and may be slower.

The tracker is pure (a clock is passed in) and thread-safe: episodes against a server decide
on worker threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tsmg.episode import Episode


def duration_text(seconds: float) -> str:
    """``seconds`` for a person: ``42 s``, ``12.5 min`` or ``3.2 h``.

    Example:
        >>> duration_text(42.0), duration_text(750.0), duration_text(11520.0)
        ('42 s', '12.5 min', '3.2 h')
    """
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class EvalProgress:
    """Episodes and decisions of a run so far, with an estimate of the time left.

    Args:
        episodes: Episodes to play.
        decisions_bound: Most decisions one episode can take (its step limit times its seats),
            used until an episode finishes (None: no estimate until then).
        clock: Seconds, monotonic (``time.monotonic``; tests pass their own).

    Example:
        >>> now = [0.0]
        >>> progress = EvalProgress(episodes=4, decisions_bound=10, clock=lambda: now[0])
        >>> progress.decided(4); now[0] = 2.0          # four decisions in 2 s: 2 a second
        >>> progress.eta()                              # 4 x 10 planned, 4 played: 36 / 2
        (18.0, True)
        >>> progress.finished(steps=6, failed=False, success=True); now[0] = 3.0
        >>> progress.decided(6)                         # 10 decisions in 3 s
        >>> progress.eta()                              # 3 left x 6 = 18, less the 4 live ones played: 14 / (10/3)
        (4.2, False)
    """

    def __init__(
        self, episodes: int, decisions_bound: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.episodes = episodes
        self.decisions_bound = decisions_bound
        self.clock = clock
        self.started: float | None = None
        self.decisions = 0
        self.done = 0
        self.failed = 0
        self.successes = 0
        self._finished_decisions = 0  # decisions of finished episodes (their steps)
        self._lock = threading.Lock()

    def asked(self) -> None:
        """A policy was asked for decisions: the clock of the throughput starts at the first request."""
        with self._lock:
            if self.started is None:
                self.started = self.clock()

    def decided(self, count: int) -> None:
        """``count`` decisions were made."""
        with self._lock:
            if self.started is None:
                self.started = self.clock()
            self.decisions += count

    def finished(self, steps: int, failed: bool, success: bool) -> None:
        """An episode ended after ``steps`` decisions (failed: with an error; success: some seat succeeded)."""
        with self._lock:
            self.done += 1
            self.failed += failed
            self.successes += success and not failed
            self._finished_decisions += steps

    def rate(self) -> float | None:
        """Decisions per second since the first request (None before any decision)."""
        with self._lock:
            if self.started is None or self.decisions == 0:
                return None
            elapsed = self.clock() - self.started
            return self.decisions / elapsed if elapsed > 0 else None

    def eta(self) -> tuple[float, bool] | None:
        """Seconds left and whether that is an upper bound (no episode finished yet), or None if unknown."""
        rate = self.rate()
        with self._lock:
            left = self.episodes - self.done
            if left <= 0:
                return (0.0, False)
            finished_episodes = self.done
            if finished_episodes:
                per_episode = self._finished_decisions / finished_episodes
                bound = False
            elif self.decisions_bound:
                per_episode, bound = float(self.decisions_bound), True
            else:
                return None
            live = max(self.decisions - self._finished_decisions, 0)  # played by episodes not yet finished
            needed = max(left * per_episode - live, float(left))  # every unfinished episode decides once more
        if rate is None:
            return None
        return (round(needed / rate, 1), bound)

    def text(self) -> str:
        """The progress line's text: decisions and their rate, the ETA, the live success rate, failures."""
        rate = self.rate()
        parts = []
        eta = self.eta()
        if eta is None:
            parts.append("ETA after the first episode")
        elif self.done < self.episodes:
            seconds, bound = eta
            parts.append(f"ETA ~{duration_text(seconds)}{' (to the step limit)' if bound else ''}")
        parts.append(f"decisions {self.decisions:,}" + (f" ({rate:.3g}/s)" if rate is not None else ""))
        played = self.done - self.failed
        parts.append(f"success {100 * self.successes / max(played, 1):.1f}%")
        if self.failed:
            parts.append(f"failed {self.failed}")
        return "  ".join(parts)


class CountingPolicy:
    """A policy that tells an :class:`EvalProgress` how many decisions it was asked for and made."""

    def __init__(self, policy: Any, progress: EvalProgress) -> None:
        """Wrap ``policy``, counting into ``progress`` (the display redraws itself from it)."""
        self.policy = policy
        self.name = policy.name
        self.progress = progress
        self.prefers_independent_episodes = bool(getattr(policy, "prefers_independent_episodes", False))

    def __getattr__(self, name: str) -> Any:
        """Anything else is the wrapped policy's (its model, its options)."""
        return getattr(self.policy, name)

    def act(self, requests: Sequence[Any]) -> list[Any]:
        """The wrapped policy's decisions, counted."""
        self.progress.asked()
        decisions = self.policy.act(requests)
        self.progress.decided(len(requests))
        return decisions


def decisions_bound(game: Any) -> int | None:
    """Most decisions an episode of ``game`` can take: its step limit times its agents (None without a limit)."""
    limit = getattr(getattr(game, "config", None), "max_steps", None)
    return int(limit) * len(game.agents) if isinstance(limit, int) and limit > 0 else None


def episode_steps(episode: Episode) -> int:
    """Decisions an episode took (its steps)."""
    return len(episode.steps)
