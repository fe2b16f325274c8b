"""The report's data files: episodes in chunks and a compact index, as scripts a page can load from disk.

A browser refuses ``fetch`` of ``file://`` URLs, but it does run ``<script src>`` from the
report's own folder. So every data file is a script that hands one JSON value to a global
callback (``tsmgChunk(3, [...])``), and the page loads a chunk only when it shows one of its
episodes: a report of 100,000 episodes opens with its index (a few bytes per episode) and
reads transcripts on demand.

Every value goes through :func:`script_literal`, which escapes ``<``, ``>``, ``&`` and the two
line separators JavaScript treats specially, so no transcript text can end the script or start
markup. The page itself only ever puts this text into the DOM as text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: Start a new chunk once this many bytes of episodes are in the current one.
CHUNK_BYTES = 400_000
#: Episodes per index file.
INDEX_ROWS_PER_FILE = 25_000

_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def _clean(value: Any) -> Any:
    """NaN and infinities become null (JSON has no spelling for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return value


def script_literal(value: Any) -> str:
    r"""JSON text of ``value`` that is safe anywhere in a script or an HTML page.

    >>> print(script_literal({"answer": "</script><b>&"}))
    {"answer":"\u003c/script\u003e\u003cb\u003e\u0026"}
    """
    text = json.dumps(_clean(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_ESCAPE_TABLE)


def write_script(path: Path, callback: str, *arguments: Any) -> int:
    """Write ``callback(arg, ...);`` to ``path``; returns the bytes written."""
    text = f"{callback}({','.join(script_literal(argument) for argument in arguments)});\n"
    data = text.encode("utf-8")
    path.write_bytes(data)
    return len(data)


class ChunkWriter:
    """Packs display episodes into ``data/e-NNNNN.js`` files of about :data:`CHUNK_BYTES` each."""

    def __init__(self, folder: Path, chunk_bytes: int = CHUNK_BYTES) -> None:
        """Write chunks into ``folder`` (created)."""
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.chunk_bytes = chunk_bytes
        self.chunks = 0
        self.bytes_written = 0
        self._pending: list[str] = []
        self._pending_bytes = 0

    def add(self, episode: dict[str, Any]) -> tuple[int, int]:
        """Queue one episode; returns ``(chunk number, position in chunk)``."""
        literal = script_literal(compact_episode(episode))
        if self._pending and self._pending_bytes + len(literal) > self.chunk_bytes:
            self.flush()
        self._pending.append(literal)
        self._pending_bytes += len(literal)
        return self.chunks, len(self._pending) - 1

    def flush(self) -> None:
        """Write the queued episodes as one chunk."""
        if not self._pending:
            return
        text = f"tsmgChunk({self.chunks},[{','.join(self._pending)}]);\n"
        data = text.encode("utf-8")
        (self.folder / chunk_name(self.chunks)).write_bytes(data)
        self.bytes_written += len(data)
        self.chunks += 1
        self._pending, self._pending_bytes = [], 0


def chunk_name(number: int) -> str:
    """File name of episode chunk ``number`` (the page builds the same name)."""
    return f"e-{number:05d}.js"


def index_name(number: int) -> str:
    """File name of index part ``number`` (the page builds the same name)."""
    return f"index-{number:03d}.js"


class StringTable:
    """Distinct strings numbered in order of first use (game ids, models, agents in the index)."""

    def __init__(self) -> None:
        """An empty table."""
        self.values: list[str] = []
        self._numbers: dict[str, int] = {}

    def number(self, value: str) -> int:
        """The number of ``value`` (added if new)."""
        if value not in self._numbers:
            self._numbers[value] = len(self.values)
            self.values.append(value)
        return self._numbers[value]


class EpisodeIndex:
    """One compact row per episode: what the page filters on, and where the episode is stored.

    A row is ``[run, game, options, seed, agents, models, success, returns, error, steps,
    invalid steps, update, chunk, position, issues, id prefix, id suffix]`` where games, options,
    agents, models and id prefixes are numbers into string tables, ``success`` holds 1/0/null per
    seat, and ``invalid steps`` lists ``[step position, agent]`` for every invalid answer. An
    episode id is cut after its last ``|`` or ``/`` (``game|matchup|`` + ``17``): ids share
    their prefixes, and 100,000 rows stay a few MB.
    """

    def __init__(self) -> None:
        """An empty index."""
        self.games = StringTable()
        self.options = StringTable()
        self.agents = StringTable()
        self.models = StringTable()
        self.id_prefixes = StringTable()
        self.rows: list[list[Any]] = []

    def add(self, run: int, episode: dict[str, Any], chunk: int, position: int) -> None:
        """Index one display episode stored at ``(chunk, position)``."""
        agents = episode["agents"]
        prefix, suffix = split_id(episode["episode_id"])
        success = [episode["success"].get(agent) for agent in agents]
        invalid = [
            [place, self.agents.number(step["agent"])]
            for place, step in enumerate(episode["steps"])
            if not step["valid"]
        ]
        self.rows.append(
            [
                run,
                self.games.number(episode["game_id"]),
                self.options.number(json.dumps(episode["game_options"], sort_keys=True, default=str)),
                episode["seed"],
                [self.agents.number(agent) for agent in agents],
                [self.models.number(episode["policies"].get(agent, "?")) for agent in agents],
                [None if value is None else int(value) for value in success],
                [_compact_number(episode["returns"].get(agent)) for agent in agents],
                1 if episode["error"] else 0,
                len(episode["steps"]),
                invalid,
                episode.get("update"),
                chunk,
                position,
                len(episode["issues"]),
                self.id_prefixes.number(prefix),
                suffix,
            ]
        )

    def write(self, folder: Path) -> tuple[int, int]:
        """Write the rows as ``data/index-NNN.js`` parts; returns ``(parts, bytes)``."""
        parts = 0
        size = 0
        for first in range(0, max(len(self.rows), 1), INDEX_ROWS_PER_FILE):
            size += write_script(
                folder / index_name(parts), "tsmgIndex", parts, self.rows[first : first + INDEX_ROWS_PER_FILE]
            )
            parts += 1
        return parts, size

    def tables(self) -> dict[str, list[str]]:
        """The string tables, for the report's metadata."""
        return {
            "games": self.games.values,
            "options": self.options.values,
            "agents": self.agents.values,
            "models": self.models.values,
            "id_prefixes": self.id_prefixes.values,
        }


def split_id(episode_id: str) -> tuple[str, str]:
    """An episode id cut after its last ``|`` or ``/``.

    >>> split_id("TicTacToe-v0|random vs oracle|17"), split_id("u5/s382133/g0"), split_id("plain")
    (('TicTacToe-v0|random vs oracle|', '17'), ('u5/s382133/', 'g0'), ('', 'plain'))
    """
    cut = max(episode_id.rfind("|"), episode_id.rfind("/")) + 1
    return episode_id[:cut], episode_id[cut:]


def _compact_number(value: float | None) -> float | int | None:
    """Whole floats as ints (``1`` rather than ``1.0``: the index has one per seat and episode)."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 else value


def compact_episode(episode: dict[str, Any]) -> dict[str, Any]:
    """The display episode without empty fields (the page reads a missing field as null).

    Steps repeat every field name; leaving out the null ones keeps a chunk close to the size of
    the text it shows.
    """
    steps = [
        {key: value for key, value in step.items() if value is not None and value != {}} for step in episode["steps"]
    ]
    return {**{key: value for key, value in episode.items() if value is not None}, "steps": steps}
