"""Which of TextArena's environments tsmg can play offline: start each with the network closed, then check it.

For every environment TextArena registers (its ``-train``/``-raw`` variants aside), with a timeout
each and every socket connection refused: start it (the first player count its reset accepts),
then, where it started, run :func:`tsmg.checker.check_game` on ``textarena:<EnvId>`` with the
test's settings (two seeds of 15 rounds, three nonsense seeds per seat, episodes cut at 15
rounds). Prints one JSON line per environment, then one JSON object with the counts. This is
what ``tsmg.adapters.textarena_refusals`` and ``games/registrations_textarena.py`` were made from::

    python scripts/textarena_survey.py [ENV_ID ...]
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
from typing import Any

TIMEOUT_S = 120


class _Timeout(Exception):
    pass


def _no_network(self: socket.socket, address: Any, *args: Any, **kwargs: Any) -> None:
    raise OSError(f"network closed by the survey: {address}")


def _alarm(*_: Any) -> None:
    raise _Timeout(f"over {TIMEOUT_S} s")


def survey(env_id: str) -> dict[str, Any]:
    """Start and check one environment: its player count, whether it passed, or why not."""
    import tsmg
    from tsmg.checker import check_game

    started = time.monotonic()
    row: dict[str, Any] = {"id": env_id}
    signal.alarm(TIMEOUT_S)
    try:
        game = tsmg.make(f"textarena:{env_id}", max_steps=15)
        row["players"] = game.num_agents
        report = check_game(game, seeds=(0, 1), max_rounds=15, nonsense_seeds=3, end_within=200)
        row.update(ok=True, steps=report.steps, hostile_answers=report.hostile_answers_checked)
    except Exception as error:  # a survey reports every failure, whatever it is
        row.update(ok=False, error=f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.monotonic() - started, 2)
    return row


def main(env_ids: list[str]) -> dict[str, Any]:
    """Survey ``env_ids`` (every base id TextArena registers when empty); print a line each; the counts."""
    socket.socket.connect = _no_network  # type: ignore[method-assign]
    signal.signal(signal.SIGALRM, _alarm)
    from tsmg.adapters.textarena import base_env_ids

    rows = []
    for env_id in env_ids or base_env_ids():
        rows.append(survey(env_id))
        print(json.dumps(rows[-1]), flush=True)
    return {
        "environments": len(rows),
        "passed": sum(row["ok"] for row in rows),
        "started_but_failed": sum(not row["ok"] and "players" in row for row in rows),
        "did_not_start": sum("players" not in row for row in rows),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
