"""``report.md`` and PNG plots from one or more run summaries."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tsmg.episode import Episode, read_episodes
from tsmg.run_folder import EPISODES_FILE, REPORT_FILE


def _percent(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def predates_outcomes(summary: dict[str, Any]) -> bool:
    """Whether ``summary`` was written before rows said what a result is (no row has ``outcome``)."""
    rows = [row for game in summary.get("games", []) for row in game.get("rows", [])]
    return bool(rows) and not any(isinstance(row, dict) and "outcome" in row for row in rows)


def current_summary(summary: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``summary`` of the run in ``folder``, its games recounted from ``episodes.jsonl`` if it predates outcomes.

    A summary written before wins, draws and losses were counted shows a win/draw/loss game's
    draws and wins by forfeit as failures; its episodes hold what is needed to count them. The
    summary is returned as it is when it is current, or when the episodes are missing or cannot
    be read.
    """
    path = folder / EPISODES_FILE
    if not predates_outcomes(summary) or not path.is_file():
        return summary
    from tsmg.apps.evaluation.config import EvalConfig
    from tsmg.apps.evaluation.metrics import summarize_eval

    try:
        config = EvalConfig.model_validate(summary["config"])
        by_game: dict[str, list[Episode]] = defaultdict(list)
        for episode in read_episodes(path):
            if episode.error is None:
                by_game[episode.game_id].append(episode)
    except (KeyError, TypeError, ValueError):  # an unreadable config or episode: keep what the run wrote
        return summary
    return {**summary, "games": summarize_eval(config, by_game)["games"]}


def played_views(folder: Path) -> dict[str, str]:
    """The text ``view`` each game of the run in ``folder`` was played with, read from its episodes.

    An episode recorded before views were recorded read ``raw`` in an adapted OpenSpiel game (its
    text then) and ``full`` in any other (a game's own default).
    """
    path = folder / EPISODES_FILE
    views: dict[str, str] = {}
    if not path.is_file():
        return views
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
                game, options = record["game_id"], record.get("game_options") or {}
            except (ValueError, KeyError, TypeError):
                continue
            if game not in views:
                adapted = game.startswith(("OpenSpiel/", "openspiel:"))
                views[game] = str(options.get("view", "raw" if adapted else "full"))
    return views


def check_one_view_per_game(folders: Sequence[Path]) -> None:
    """Refuse to put runs side by side that played one game under different text views.

    Raises:
        ValueError: Naming the game, the views and the runs (the message says what to do).
    """
    seen: dict[str, dict[str, str]] = defaultdict(dict)
    for folder in folders:
        for game, view in played_views(folder).items():
            seen[game].setdefault(view, folder.name)
    for game, views in seen.items():
        if len(views) > 1:
            listed = ", ".join(f"{view} in {run}" for view, run in sorted(views.items()))
            raise ValueError(
                f"the runs played {game} under different text views ({listed}): their rows measure different "
                "prompts and are not pooled; report the runs of each view separately"
            )


def comparison_rows(summaries: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Flatten (run name, summary) pairs into one row per run, game and model."""
    rows = []
    for run, summary in summaries:
        for game in summary["games"]:
            for row in game["rows"]:
                rows.append({"run": run, **row})
    return rows


def suite_rows(summaries: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per run of a suite and model: its suite score, and its wins, draws and losses over the suite's games.

    A row holds ``run``, ``game`` (the suite's name), ``suite`` (True), ``model``, ``episodes``
    (the model's seats over all games), ``outcomes`` (wins, draws and losses summed over the
    win/draw/loss games), ``suite_score`` and ``suite_score_stderr`` (None until every game is
    played); runs of no suite give none.
    """
    rows = []
    for run, summary in summaries:
        suite = summary.get("suite")
        if not isinstance(suite, dict):
            continue
        for model, entry in suite.get("scores", {}).items():
            seats = sum(
                row.get("episodes", 0) for game in summary["games"] for row in game["rows"] if row["model"] == model
            )
            rows.append(
                {
                    "run": run,
                    "game": suite["name"],
                    "suite": True,
                    "model": model,
                    "episodes": seats,
                    "outcomes": entry.get("outcomes"),
                    "suite_score": entry.get("score"),
                    "suite_score_stderr": entry.get("stderr"),
                    "suite_games": entry.get("games"),
                    "reference": suite.get("reference"),
                }
            )
    return rows


def suite_score_cell(row: dict[str, Any]) -> str:
    """A row's suite score (a game's or the whole suite's) with its standard error; ``—`` outside a suite.

    Example:
        >>> suite_score_cell({"suite_score": 0.5, "suite_score_stderr": 0.1})
        '0.500 ± 0.100'
        >>> suite_score_cell({"suite": True, "suite_score": None, "suite_games": 3})
        'incomplete (3 games)'
    """
    if "suite_score" not in row:
        return "—"
    from tsmg.apps.evaluation.suites import score_text

    return score_text(
        {"score": row["suite_score"], "stderr": row.get("suite_score_stderr"), "games": row.get("suite_games")}
    )


def result_text(row: dict[str, Any]) -> str:
    """A row's result: success with its Wilson 95 % interval, or, in a win/draw/loss game, W/D/L.

    W/D/L counts every seat the model played, then (in a game of several seats) each seat's own;
    forfeits are named where there were any. A row of a summary written before outcomes were
    counted has no ``outcomes`` and shows its success rate.

    Example:
        >>> result_text({"outcomes": {"wins": 3, "draws": 1, "losses": 2, "forfeits": 1, "wins_by_forfeit": 0}})
        'W/D/L 3/1/2 (1 forfeited)'
    """
    outcomes = row.get("outcomes")
    if not isinstance(outcomes, dict):
        text = _percent(row.get("success_rate"))
        ci = row.get("success_ci95")
        if isinstance(ci, list | tuple) and len(ci) == 2:
            text += f" ({_percent(ci[0])}–{_percent(ci[1])})"
        return text
    text = f"W/D/L {wdl_text(outcomes)}"
    notes = []
    if outcomes.get("forfeits"):
        notes.append(f"{outcomes['forfeits']} forfeited")
    if outcomes.get("wins_by_forfeit"):
        notes.append(f"{outcomes['wins_by_forfeit']} won by forfeit")
    by_seat = row.get("outcomes_by_seat")
    if isinstance(by_seat, dict) and len(by_seat) > 1:
        seats = [f"{seat} {wdl_text(counts)}" for seat, counts in by_seat.items() if isinstance(counts, dict)]
        notes.append(", ".join(seats))
    return text + (f" ({'; '.join(notes)})" if notes else "")


def wdl_text(counts: dict[str, Any]) -> str:
    """``wins/draws/losses`` of an ``outcomes`` dict."""
    return "/".join(str(counts.get(key, "?")) for key in ("wins", "draws", "losses"))


def markdown_table(
    rows: Sequence[dict[str, Any]], with_run: bool = False, totals: Sequence[dict[str, Any]] = ()
) -> str:
    """A Markdown table of success (Wilson 95 %) or W/D/L, return ± s.e., invalid rate, turns, tokens, cost.

    A suite's run adds the suite score column (each game's normalised score) and ``totals``, its
    :func:`suite_rows`: each model's suite score and W/D/L over the suite, below the games.
    """
    header = ["game", "model", "episodes", "success (95% CI) or W/D/L", "return ± s.e.", "invalid", "turns"]
    header += ["tokens in/out"]
    header += ["cost $"]
    scored = bool(totals) or any("suite_score" in row for row in rows)
    if scored:
        header.append("suite score (random 0, MCTS 1)")
    if with_run:
        header.insert(0, "run")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in totals:
        cells = [f"**{row['game']}** (all games)", row["model"], str(row["episodes"]), result_text(row)]
        cells += ["—"] * 5 + [f"**{suite_score_cell(row)}**"]
        if with_run:
            cells.insert(0, row["run"])
        lines.append("| " + " | ".join(cells) + " |")
    for row in rows:
        cells = [
            row["game"],
            row["model"],
            str(row["episodes"]),
            result_text(row),
            f"{row['mean_return']:+.3f} ± {row['return_stderr']:.3f}",
            _percent(row["invalid_rate"]),
            f"{row['mean_turns']:.2f}",
            f"{row['tokens_in_per_episode']:.0f}/{row['tokens_out_per_episode']:.0f}" + _thinking(row),
            cost_text(row),
        ]
        if scored:
            cells.append(suite_score_cell(row))
        if with_run:
            cells.insert(0, row["run"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_text(row: dict[str, Any]) -> str:
    """The cost cell of a row: USD to four places (thinking's part apart), or ``unknown`` where it has no price.

    Example:
        >>> cost_text({"cost_usd": 0.01234, "reasoning_cost_usd": None}), cost_text({"cost_usd": None})
        ('0.0123', 'unknown')
    """
    cost = row.get("cost_usd")
    if cost is None:  # a hosted model run without --price: never shown as 0
        return "unknown"
    thinking = row.get("reasoning_cost_usd")
    return f"{cost:.4f}" + ("" if thinking is None else f" ({thinking:.4f} thinking)")


def _thinking(row: dict[str, Any]) -> str:
    """`` (thinking N)`` after the tokens out, where the model reported thinking tokens."""
    thinking = row.get("reasoning_tokens_per_episode")
    return "" if thinking is None else f" (thinking {thinking:.0f})"


def head_to_head_table(game: dict[str, Any]) -> str:
    """A Markdown win/draw/loss matrix (row model against column model) with ratings and each model's W/D/L."""
    table = game.get("head_to_head") or {}
    models = [row["model"] for row in game["rows"]]
    lines = ["| W/D/L | " + " | ".join(models) + " |", "|" + "---|" * (len(models) + 1)]
    for row_model in models:
        cells = []
        for column in models:
            record = table.get(row_model, {}).get(column)
            cells.append("—" if record is None else f"{record['W']}/{record['D']}/{record['L']}")
        lines.append(f"| {row_model} | " + " | ".join(cells) + " |")
    ratings = game.get("ratings") or {}
    if ratings:
        lines.append("")
        rows = {row["model"]: row for row in game["rows"]}
        lines.append("| model | rating μ | σ | ordinal (μ − 3σ) | W/D/L |")
        lines.append("|---|---|---|---|---|")
        for model, rating in sorted(ratings.items(), key=lambda item: -item[1]["ordinal"]):
            outcomes = rows.get(model, {}).get("outcomes")
            record = wdl_text(outcomes) if isinstance(outcomes, dict) else "—"
            lines.append(
                f"| {model} | {rating['mu']:.2f} | {rating['sigma']:.2f} | {rating['ordinal']:.2f} | {record} |"
            )
    return "\n".join(lines)


def pooled_rating_of_folders(
    runs: Sequence[tuple[str, dict[str, Any], Path]],
) -> tuple[list[dict[str, Any]], str | None]:
    """The pooled Bradley-Terry rating of ``(run name, summary, folder)`` runs, or no rows and why not.

    Returns the rows of :func:`tsmg.apps.evaluation.pooled_rating.pooled_rating` (empty when no
    game has two players) and None, or no rows and the one sentence that says why there are none:
    pooling refused, a run's episodes missing or unreadable, or SciPy (the ``eval`` extra) absent.
    """
    from tsmg.apps.evaluation.pooled_rating import PoolingRefused, pooled_rating_of_runs

    loaded = []
    for name, summary, folder in runs:
        path = folder / EPISODES_FILE
        if not any("head_to_head" in game for game in summary.get("games", [])):
            continue  # single-seat games only: no pairwise result to read
        if not path.is_file():
            return [], f"run {name} has no {EPISODES_FILE}, which the pooled rating reads: copy the whole folder."
        try:
            episodes = list(read_episodes(path))
        except (OSError, ValueError) as error:  # a damaged record: the table above still stands
            return [], f"run {name}'s {EPISODES_FILE} cannot be read ({error}), so nothing is pooled."
        loaded.append((name, summary, episodes))
    try:
        return pooled_rating_of_runs(loaded), None
    except PoolingRefused as refusal:
        return [], str(refusal)
    except ImportError:
        return [], "SciPy is not installed, which the pooled rating's fit needs: pip install 'tsmg[eval]'."


def pooled_rating_table(rows: Sequence[dict[str, Any]], refusal: str | None = None) -> str:
    """The pooled rating as Markdown: a table with the scale stated, the refusal, or "" when no game has two players.

    Example:
        >>> print(pooled_rating_table([{"model": "oracle", "rating": 1100.4, "ci95": [1050.0, 1160.2],
        ...                             "games": 2, "missing_games": []}]))
        | model | rating | 95% CI | games | missing games |
        |---|---|---|---|---|
        | oracle | 1100 | 1050–1160 | 2 | — |
        <BLANKLINE>
        Bradley-Terry over every pairwise result of every game, each game weighing the same, a draw half a \
win; Elo-like scale 1000 + 400/ln 10 · θ (mean 1000), prior θ ~ N(0, 2²); 95% CI from 1,000 bootstrap \
resamples of the episodes within each run and game.
    """
    if refusal is not None:
        return f"Not pooled: {refusal}"
    if not rows:
        return ""
    lines = ["| model | rating | 95% CI | games | missing games |", "|---|---|---|---|---|"]
    for row in rows:
        ci = row.get("ci95")
        interval = "—" if not ci else f"{ci[0]:.0f}–{ci[1]:.0f}"
        missing = ", ".join(row["missing_games"]) or "—"
        lines.append(f"| {row['model']} | {row['rating']:.0f} | {interval} | {row['games']} | {missing} |")
    lines += [
        "",
        "Bradley-Terry over every pairwise result of every game, each game weighing the same, a draw half a win; "
        "Elo-like scale 1000 + 400/ln 10 · θ (mean 1000), prior θ ~ N(0, 2²); 95% CI from 1,000 bootstrap "
        "resamples of the episodes within each run and game.",
    ]
    return "\n".join(lines)


def write_report(summary: dict[str, Any], folder: Path) -> None:
    """Write ``report.md`` and the plots of one run into ``folder``."""
    rows = comparison_rows([(folder.name, summary)])
    parts = [
        f"# Evaluation report: {folder.name}",
        "",
        f"Planned episodes: {summary.get('planned')}, completed: {summary.get('completed')}, "
        f"failed: {summary.get('failed')}.",
        "",
        markdown_table(rows, totals=suite_rows([(folder.name, summary)])),
    ]
    if any(row.get("reasoning_tokens_per_episode") is not None for row in rows):
        parts += [
            "",
            "Tokens are per episode. Thinking tokens are part of tokens out and are billed as output "
            "tokens, so the cost includes them.",
        ]
    if summary.get("stopped"):
        parts[2:2] = [f"**Stopped early:** {summary['stopped']}", ""]
    for game in summary["games"]:
        if "head_to_head" in game:
            parts += ["", f"## {game['game']}: head to head", "", head_to_head_table(game)]
    plots = plot_rows(rows, folder)
    if plots:
        parts += ["", "## Plots", ""] + [f"![{path.stem}]({path.name})" for path in plots]
    (folder / REPORT_FILE).write_text("\n".join(parts) + "\n")


def plot_rows(rows: Sequence[dict[str, Any]], folder: Path, prefix: str = "") -> list[Path]:
    """Success (or mean return) with error bars, return distributions and invalid rates as PNGs."""
    if not rows:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{row['game']}\n{row['model']}" + (f"\n{row['run']}" if "run" in row and prefix else "") for row in rows]
    positions = list(range(len(rows)))
    paths = []
    width = max(6.0, 1.9 * len(rows))

    figure, axis = plt.subplots(figsize=(width, 4))
    if all(row["success_rate"] is not None for row in rows):
        values = [row["success_rate"] for row in rows]
        low = [row["success_rate"] - row["success_ci95"][0] for row in rows]
        high = [row["success_ci95"][1] - row["success_rate"] for row in rows]
        axis.bar(positions, values, yerr=[low, high], capsize=4, color="tab:blue")
        axis.set_ylabel("success rate (Wilson 95% CI)")
        axis.set_ylim(0, 1.05)
        name = "success.png"
    else:
        values = [row["mean_return"] for row in rows]
        axis.bar(positions, values, yerr=[1.96 * row["return_stderr"] for row in rows], capsize=4, color="tab:blue")
        axis.set_ylabel("mean return (95% CI)")
        name = "return.png"
    axis.set_xticks(positions, labels, fontsize=7)
    figure.tight_layout()
    paths.append(_save(figure, folder / f"{prefix}{name}"))

    figure, axis = plt.subplots(figsize=(width, 4))
    axis.boxplot([row["returns"] or [0.0] for row in rows], positions=positions)
    axis.set_xticks(positions, labels, fontsize=7)
    axis.set_ylabel("episode return")
    figure.tight_layout()
    paths.append(_save(figure, folder / f"{prefix}returns.png"))

    figure, axis = plt.subplots(figsize=(width, 4))
    axis.bar(positions, [row["invalid_rate"] for row in rows], color="tab:red")
    axis.set_xticks(positions, labels, fontsize=7)
    axis.set_ylabel("invalid answers per decision")
    axis.set_ylim(0, 1.05)
    figure.tight_layout()
    paths.append(_save(figure, folder / f"{prefix}invalid.png"))
    plt.close("all")
    return paths


def _save(figure: Any, path: Path) -> Path:
    figure.savefig(path, dpi=100)
    return path
