"""Named, versioned game suites and their score: random play is 0 on every game, the reference bot 1.

A suite is data: a name with a version (``openspiel-small-v1``), its games, the episodes per
seating and the base seed, the opponent that holds the other seats of a many-seat game, and the
reference bot. ``tsmg eval --suite NAME`` plays exactly that plan, so every model meets the same
deals and the same opponent moves. A suite is never edited in place: a changed suite is a new
version (``tests/evaluation/test_suites.py`` pins each definition's fingerprint).

Each game's score of a model is its mean return over the seats it played, normalised so that
random play scores 0 and the reference bot 1 on the suite's own episodes:
``(return - random) / (reference - random)``; the suite score is the mean over the games. The
two reference returns are measured by a shipped command (``bench/suite_reference.py --suite NAME
--write``, which plays the suite with ``random`` and the reference bot) and stored with the
definition's fingerprint in ``suite_references.json`` next to this module; a suite whose stored
figures were measured on another definition has no score until they are measured again.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any

#: Where the measured reference returns live (package data of tsmg.apps.evaluation).
REFERENCES_FILE = "suite_references.json"


@dataclass(frozen=True)
class Suite:
    """A named, versioned set of games with a fixed plan and a reference bot.

    Attributes:
        name: ``NAME-vN``: a changed suite gets a new version, never the same name.
        description: What the suite is, in one sentence.
        games: Game ids (registered ids or ``openspiel:NAME(PARAMS)``), in the order reported.
        episodes: Episodes per seating: a many-seat game is played once per seat the model takes.
        seed: The base seed of every game's seed list.
        opponent: The model spec playing every seat the evaluated model does not hold.
        reference: The model spec that defines a game score of 1.
        reference_options: The reference's model options (``simulations`` of MCTS).
        view: The text the adapted games show (their ``view`` option): ``raw``, OpenSpiel's
            observation string, for ``openspiel-small-v1``; ``full``, the readable text, from v2 on.
    """

    name: str
    description: str
    games: tuple[str, ...]
    episodes: int
    seed: int = 0
    opponent: str = "random"
    reference: str = "openspiel-mcts"
    reference_options: Mapping[str, Any] = field(default_factory=dict)
    view: str = "raw"

    def fingerprint(self) -> str:
        """SHA-256 of the definition (what the plan and the references depend on), first 16 hex digits.

        A field added after a suite was published is left out while at its default, so the
        published suites keep their fingerprints (and their stored references).
        """
        data = asdict(self)
        data["reference_options"] = dict(self.reference_options)
        data.pop("description")  # wording does not change the plan
        for name, default in _ADDED_FIELDS.items():
            if data[name] == default:
                data.pop(name)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def game_options(self) -> dict[str, dict[str, Any]]:
        """The options every game of the suite is made with: its ``view``."""
        return {game: {"view": self.view} for game in self.games}

    @property
    def reference_label(self) -> str:
        """The reference bot as reports name it, e.g. ``openspiel-mcts (simulations=100)``."""
        options = ", ".join(f"{key}={value}" for key, value in sorted(self.reference_options.items()))
        return f"{self.reference} ({options})" if options else self.reference


#: Fields added after the first suite was published, with the default that leaves them out of a fingerprint.
_ADDED_FIELDS: dict[str, Any] = {"view": "raw"}

_SMALL_GAMES = (
    "OpenSpiel/tic_tac_toe-v0",
    "OpenSpiel/connect_four-v0",
    "OpenSpiel/nim-v0",
    "OpenSpiel/dots_and_boxes-v0",
    "OpenSpiel/einstein_wurfelt_nicht-v0",
    "openspiel:pig(winscore=20)",
    "OpenSpiel/bargaining-v0",
    "OpenSpiel/oh_hell-v0",
    "OpenSpiel/clobber-v0",
    "OpenSpiel/catch-v0",
)

#: The shipped suites, by name. Never change one: add ``NAME-v(N+1)``.
SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite(
            name="openspiel-small-v1",
            description=(
                "Ten small OpenSpiel games of four families (board, dice, card, single-player; one to three seats) "
                "where OpenSpiel's MCTS bot at 100 simulations clearly beats random play and an episode is cheap."
            ),
            games=_SMALL_GAMES,
            episodes=30,
            seed=0,
            opponent="random",
            reference="openspiel-mcts",
            reference_options={"simulations": 100},
            view="raw",
        ),
        Suite(
            name="openspiel-small-v2",
            description=(
                "openspiel-small-v1's ten games, plan and reference, shown in the readable text (view 'full': role, "
                "rules card, history, moves one per line) instead of OpenSpiel's observation strings."
            ),
            games=_SMALL_GAMES,
            episodes=30,
            seed=0,
            opponent="random",
            reference="openspiel-mcts",
            reference_options={"simulations": 100},
            view="full",
        ),
    )
}


def get_suite(name: str) -> Suite:
    """The suite called ``name``.

    Raises:
        ValueError: No suite has that name (the message lists the suites and close matches).
    """
    if name in SUITES:
        return SUITES[name]
    close = difflib.get_close_matches(name, list(SUITES), n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise ValueError(f"no suite {name!r}.{hint} The suites: {', '.join(SUITES)}")


@cache
def _stored_references() -> dict[str, Any]:
    text = (resources.files("tsmg.apps.evaluation") / REFERENCES_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def references(suite: Suite) -> dict[str, Any] | None:
    """The stored reference figures of ``suite``, or None when none were measured on its current definition.

    Returns:
        ``{"random": {game: mean return}, "reference": {game: mean return}, "turns": {game: turns a
        seat takes}, "fingerprint", "command", "date", "commit"}`` (:func:`measured_references`).
    """
    stored = _stored_references().get(suite.name)
    if not isinstance(stored, dict) or stored.get("fingerprint") != suite.fingerprint():
        return None
    return stored


def game_score(mean_return: float, random_return: float, reference_return: float) -> float:
    """One game's normalised score: 0 at random play's mean return, 1 at the reference bot's.

    Example:
        >>> game_score(0.5, random_return=-0.5, reference_return=1.5)
        0.5
    """
    return (mean_return - random_return) / (reference_return - random_return)


def score_summary(suite: Suite, games: Sequence[Mapping[str, Any]], models: Sequence[str]) -> dict[str, Any]:
    """The ``suite`` section of an evaluation's summary, and ``suite_score`` on each row of ``games``.

    Args:
        suite: The suite the run played.
        games: The summary's per-game entries (their rows get ``suite_score`` and ``suite_score_stderr``).
        models: The evaluated models, in order.

    Returns:
        ``{"name", "fingerprint", "reference", "references", "scores": {model: {"score", "stderr",
        "games", "outcomes"}}}``; ``score`` is None until every game of the suite has episodes
        of that model, and every score is None when the suite has no measured references.
    """
    stored = references(suite)
    scores: dict[str, dict[str, Any]] = {}
    for model in models:
        per_game: list[tuple[float, float]] = []
        outcomes = {"wins": 0, "draws": 0, "losses": 0}
        for game in games:
            for row in game.get("rows", []):
                if row.get("model") != model or not row.get("episodes"):
                    continue
                counts = row.get("outcomes")
                if isinstance(counts, dict):
                    for key in outcomes:
                        outcomes[key] += int(counts.get(key) or 0)
                if stored is None:
                    continue
                low = stored["random"][row["game"]]
                high = stored["reference"][row["game"]]
                row["suite_score"] = game_score(row["mean_return"], low, high)
                row["suite_score_stderr"] = row["return_stderr"] / abs(high - low)
                per_game.append((row["suite_score"], row["suite_score_stderr"]))
        complete = len(per_game) == len(suite.games)
        scores[model] = {
            "score": sum(score for score, _ in per_game) / len(per_game) if complete else None,
            # The games are independent, so the mean's standard error adds theirs in quadrature.
            "stderr": math.sqrt(sum(error**2 for _, error in per_game)) / len(per_game) if complete else None,
            "games": len(per_game),
            "outcomes": outcomes,
        }
    return {
        "name": suite.name,
        "fingerprint": suite.fingerprint(),
        "reference": suite.reference_label,
        "references": None if stored is None else {key: stored[key] for key in ("command", "date", "commit")},
        "scores": scores,
    }


def score_text(entry: Mapping[str, Any]) -> str:
    """A model's suite score as a table shows it: ``0.734 ± 0.052``, or why there is none.

    Example:
        >>> score_text({"score": 0.7341, "stderr": 0.0518, "games": 10})
        '0.734 ± 0.052'
        >>> score_text({"score": None, "stderr": None, "games": 4})
        'incomplete (4 games)'
    """
    score = entry.get("score")
    if isinstance(score, int | float) and math.isfinite(score):
        stderr = entry.get("stderr")
        return f"{score:.3f}" + (f" ± {stderr:.3f}" if isinstance(stderr, int | float) else "")
    return f"incomplete ({entry.get('games', 0)} games)" if entry.get("games") else "n/a"


def reference_config(suite: Suite) -> Any:
    """The evaluation that measures ``suite``'s references: ``random`` and the reference bot, on the suite's plan.

    The same run as ``tsmg eval --suite NAME --model random --model REFERENCE --model-option
    REFERENCE:KEY=VALUE``.
    """
    from tsmg.apps.evaluation.config import EvalConfig
    from tsmg.lap import LAPConfig

    return EvalConfig(
        games=list(suite.games),
        models=["random", suite.reference],
        episodes=suite.episodes,
        seed=suite.seed,
        lap=LAPConfig(seed=suite.seed),
        game_options=suite.game_options(),
        model_options={suite.reference: dict(suite.reference_options)} if suite.reference_options else {},
        opponent=suite.opponent,
        suite=suite.name,
    )


def measured_references(suite: Suite, summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The figures a suite stores, read from the summary of :func:`reference_config`'s run.

    Returns:
        ``{"random": {game: mean return}, "reference": {game: mean return}, "turns": {game: turns}}``,
        ``turns`` the most turns a seat took on average (random play's or the bot's): what
        ``--dry-run`` plans a model's seat to take.

    Raises:
        ValueError: A game of the suite has no completed episodes of ``random`` or the reference bot.
    """
    found: dict[str, dict[str, float]] = {"random": {}, "reference": {}, "turns": {}}
    for game in summary["games"]:
        for row in game["rows"]:
            role = {"random": "random", suite.reference: "reference"}.get(row["model"])
            if role is not None and row["episodes"]:
                found[role][row["game"]] = float(row["mean_return"])
                turns = max(found["turns"].get(row["game"], 0.0), float(row["mean_turns"]))
                found["turns"][row["game"]] = round(turns, 3)
    for role, values in found.items():
        missing = [game for game in suite.games if game not in values]
        if missing:
            raise ValueError(f"the reference run of {suite.name} has no {role} episodes of {', '.join(missing)}")
    tied = [game for game in suite.games if found["reference"][game] <= found["random"][game]]
    if tied:
        raise ValueError(
            f"{suite.reference_label} does not beat random play on {', '.join(tied)}: no score can be normalised "
            "there; make a suite version without those games"
        )
    return found
