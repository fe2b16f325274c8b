"""``tsmg check``: the checker over named games or the whole catalog, each game reported as it finishes.

The whole catalog (``tsmg check --all``, 315 ids) takes many minutes, so every game's line is
printed the moment its check ends, with the time it took and an estimate of what is left;
Ctrl-C stops the run and keeps what finished: the summary still says which games were checked,
which failed and which were not reached. The last line says how long the whole run took.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tsmg.apps.evaluation.progress import duration_text
from tsmg.checker import GameCheckError, check_game
from tsmg.core import GameCodeError, GameError


@dataclass
class CheckRun:
    """What a run of the checker over several games found.

    Attributes:
        ids: The games to check, in order.
        results: One dict per game checked so far: ``id``, ``ok``, ``seconds``, and the report's
            figures (``episodes``, ``steps``, ``hostile_answers``, ``nonsense_vs_random``) or its ``error``.
        seconds: Wall time of the whole run.
        interrupted: Whether Ctrl-C stopped it before every game was checked.
    """

    ids: list[str]
    results: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        """Whether every game was checked and passed."""
        return not self.interrupted and all(result["ok"] for result in self.results)

    def remaining_text(self) -> str:
        """``about N min left`` from the mean time of the games checked so far ("" when none is left)."""
        left = len(self.ids) - len(self.results)
        if not left or not self.results:
            return ""
        mean = sum(result["seconds"] for result in self.results) / len(self.results)
        return f"about {duration_text(mean * left)} left"

    def summary_text(self) -> str:
        """The closing line: how many games passed and failed, how many were not reached, and the time taken."""
        failed = [result["id"] for result in self.results if not result["ok"]]
        checked = len(self.results)
        head = f"interrupted after {checked} of {len(self.ids)} games" if self.interrupted else f"{checked} games"
        text = f"{head} checked in {duration_text(self.seconds)}: {checked - len(failed)} ok, {len(failed)} failed"
        if failed:
            text += f" ({', '.join(failed[:10])}{', ...' if len(failed) > 10 else ''})"
        if self.interrupted:
            text += f"; not checked: {len(self.ids) - checked}"
        return text


def check_one(game_id: str, nonsense_seeds: int) -> dict[str, Any]:
    """Check one game: its result dict (``ok`` with the report's figures, or ``ok`` False with the ``error``)."""
    try:
        report = check_game(game_id, nonsense_seeds=nonsense_seeds)
    except (GameCheckError, GameError, GameCodeError, ImportError) as error:
        return {"id": game_id, "ok": False, "error": str(error)}
    return {
        "id": game_id,
        "ok": True,
        "episodes": report.episodes,
        "steps": report.steps,
        "hostile_answers": report.hostile_answers_checked,
        "nonsense_vs_random": report.nonsense,
    }


def check_games(
    ids: Sequence[str],
    nonsense_seeds: int,
    on_result: Callable[[dict[str, Any], CheckRun], None] | None = None,
    check: Callable[[str, int], dict[str, Any]] | None = None,
) -> CheckRun:
    """Check ``ids`` one after the other, handing each result to ``on_result`` as soon as it is known.

    Ctrl-C (``KeyboardInterrupt``) ends the run early: the games already checked stay in the
    returned run, marked ``interrupted``.

    Args:
        ids: Game ids.
        nonsense_seeds: Seeds of the always-invalid versus random comparison.
        on_result: Called with each game's result and the run so far (the CLI prints a line).
        check: Checks one game (default :func:`check_one`).
    """
    check = check or check_one
    run = CheckRun(list(ids))
    started = time.perf_counter()
    try:
        for game_id in run.ids:
            began = time.perf_counter()
            result = check(game_id, nonsense_seeds)
            result["seconds"] = time.perf_counter() - began
            run.results.append(result)
            run.seconds = time.perf_counter() - started
            if on_result is not None:
                on_result(result, run)
    except KeyboardInterrupt:
        run.interrupted = True
    run.seconds = time.perf_counter() - started
    return run


def result_line(result: dict[str, Any], run: CheckRun) -> str:
    """One game's line: ``ok`` or ``FAIL``, the id, its figures or error, the time, and the count (and time) left."""
    status = "ok  " if result["ok"] else "FAIL"
    if result["ok"]:
        detail = "{} episodes, {} steps, {} hostile answers".format(
            result["episodes"], result["steps"], result["hostile_answers"]
        )
    else:
        detail = result["error"]
    line = f"{status} {result['id']}: {detail} ({result['seconds']:.1f} s)"
    if len(run.ids) > 1:
        left = run.remaining_text()
        line += f"  [{len(run.results)}/{len(run.ids)}{', ' + left if left else ''}]"
    return line
