"""Pacing requests to a provider's quotas: requests per minute and tokens per minute.

A provider's quota is easier to keep than to recover from: an evaluation that lives on 429
retries wastes its time in backoff and skews latencies. :class:`Pace` spaces out units (requests,
or tokens) so that at most ``per_minute`` of them go out in any minute, evenly, with a burst of
at most ``burst_s`` seconds' worth. It is the generic cell rate algorithm (GCRA): one number, the
time at which everything booked so far would have drained, and no timers.

>>> pace = Pace(per_minute=60)  # one a second
>>> starts = []
>>> for _ in range(4):  # the first two fit the one-second burst
...     starts.append(pace.earliest(now=0.0))
...     pace.book(1, starts[-1])
>>> starts
[0.0, 0.0, 1.0, 2.0]
>>> pace.adjust(-2)  # two units were booked that were never used: later ones may go sooner
>>> pace.earliest(now=0.0)
1.0
"""

from __future__ import annotations

__all__ = ["Pace"]


class Pace:
    """At most ``per_minute`` units a minute, evenly spaced, with a burst of ``burst_s`` seconds' worth.

    Args:
        per_minute: Units allowed per minute (> 0).
        burst_s: How far ahead of the even schedule a unit may go.

    Raises:
        ValueError: For a non-positive rate or a negative burst.
    """

    def __init__(self, per_minute: float, burst_s: float = 1.0) -> None:
        if per_minute <= 0:
            raise ValueError(f"a per-minute limit must be > 0, got {per_minute}")
        if burst_s < 0:
            raise ValueError(f"burst_s must be >= 0, got {burst_s}")
        self.per_minute = float(per_minute)
        self.burst_s = float(burst_s)
        self._drained_at = float("-inf")  # when everything booked so far would have gone out

    @property
    def _seconds_per_unit(self) -> float:
        return 60.0 / self.per_minute

    def earliest(self, now: float) -> float:
        """The earliest time a new unit may go out (``now`` if it may go at once)."""
        return max(now, self._drained_at - self.burst_s)

    def book(self, units: float, start: float) -> None:
        """Book ``units`` that go out at ``start`` (from :meth:`earliest`, or later)."""
        self._drained_at = max(self._drained_at, start) + units * self._seconds_per_unit

    def adjust(self, units: float) -> None:
        """Correct an earlier booking by ``units`` (negative: fewer were used than booked)."""
        self._drained_at += units * self._seconds_per_unit
