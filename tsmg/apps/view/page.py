"""The report's HTML page: summary tables, plots, the training tab and the problems panel.

Everything here is static HTML written by Python; every value from a run goes through
:func:`html.escape`. The transcript browser is drawn by ``assets/view.js`` from the data
files, the learning curves by ``assets/curves.js``. The page's Content-Security-Policy allows
scripts and styles from the report's own files only, so even markup that slipped into the page
could not run a script.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from tsmg.apps.evaluation.report import result_text, suite_score_cell, wdl_text
from tsmg.apps.view.records import ReadProblem

#: Problems listed per run before "and N more".
PROBLEMS_SHOWN = 50

CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'"


def escape(value: Any) -> str:
    """Text for HTML content or a quoted attribute."""
    return html.escape(str(value), quote=True)


def percent(value: Any) -> str:
    """``12.5%``, or ``n/a`` for a missing or non-finite value."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "n/a"
    return f"{100 * value:.1f}%"


def number(value: Any, form: str) -> str:
    """``value`` formatted with ``form``, or ``n/a``."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "n/a"
    return format(value, form)


def browse_link(text: str, **filters: Any) -> str:
    """A link that opens the transcript browser with ``filters`` set."""
    query = urlencode({key: value for key, value in filters.items() if value is not None})
    return f'<a class="browse" href="#browse?{escape(query)}">{escape(text)}</a>'


def summary_table(
    rows: Sequence[dict[str, Any]], run_numbers: Mapping[str, int], totals: Sequence[dict[str, Any]] = ()
) -> str:
    """Game × model figures: success with its Wilson 95 % interval or W/D/L, return, invalid rate, turns, tokens, cost.

    ``rows`` are ``tsmg report``'s (:func:`tsmg.apps.evaluation.report.comparison_rows`: a summary row
    with its ``run`` name); ``run_numbers`` numbers the runs for the transcript links, and with
    several runs the table starts with a run column. A row of a win/draw/loss game shows its
    wins, draws and losses (by seat, forfeits named) where a goal game's shows success:
    :func:`tsmg.apps.evaluation.report.result_text`. A suite's run adds the suite score column and,
    above the games, ``totals`` (:func:`tsmg.apps.evaluation.report.suite_rows`): each model's suite
    score and W/D/L.
    """
    header = [
        "game",
        "model",
        "episodes",
        "success (Wilson 95% CI) or W/D/L",
        "return ± s.e.",
        "invalid",
        "turns",
        "tokens in/out",
        "cost $",
        "transcripts",
    ]
    scored = bool(totals) or any("suite_score" in row for row in rows)
    if scored:
        header.append("suite score (random 0, MCTS 1)")
    with_run = len(run_numbers) > 1
    if with_run:
        header.insert(0, "run")
    lines = ['<table class="summary"><thead><tr>']
    lines += [f"<th>{escape(name)}</th>" for name in header]
    lines.append("</tr></thead><tbody>")
    for row in totals:
        run_number = run_numbers[row["run"]]
        model = str(row.get("model", "?"))
        cells = [f"<strong>{escape(row.get('game', '?'))}</strong> (all games)", escape(model)]
        cells += [escape(row.get("episodes", "?")), f'<span class="outcomes">{escape(result_text(row))}</span>']
        cells += ["—"] * 5 + [browse_link("browse", run=run_number, model=model)]
        cells.append(f"<strong>{escape(suite_score_cell(row))}</strong>")
        if with_run:
            cells.insert(0, escape(row["run"]))
        lines.append('<tr class="suite-total">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    for row in rows:
        run_number = run_numbers[row["run"]]
        game, model = str(row.get("game", "?")), str(row.get("model", "?"))
        rate = row.get("success_rate")
        interval = row.get("success_ci95")
        success = result_text(row)
        bar = ""
        if isinstance(interval, list | tuple) and len(interval) == 2 and not isinstance(row.get("outcomes"), dict):
            low, high = interval
            if all(isinstance(value, int | float) and math.isfinite(value) for value in (rate, low, high)):
                bar = (
                    f'<span class="ci" title="{escape(success)}"><span class="ci-range" data-low="{low:.4f}" '
                    f'data-high="{high:.4f}"></span><span class="ci-point" data-at="{rate:.4f}"></span></span>'
                )
        invalid_rate = row.get("invalid_rate")
        invalid = percent(invalid_rate)
        if isinstance(invalid_rate, int | float) and invalid_rate > 0:
            invalid = browse_link(invalid, run=run_number, game=game, model=model, invalid=1)
        else:
            invalid = escape(invalid)
        cells = [
            escape(game),
            escape(model),
            escape(row.get("episodes", "?")),
            f'<span class="{"outcomes" if isinstance(row.get("outcomes"), dict) else "success"}">'
            f"{escape(success)}</span>{bar}",
            escape(f"{number(row.get('mean_return'), '+.3f')} ± {number(row.get('return_stderr'), '.3f')}"),
            invalid,
            escape(number(row.get("mean_turns"), ".2f")),
            escape(
                f"{number(row.get('tokens_in_per_episode'), '.0f')}/{number(row.get('tokens_out_per_episode'), '.0f')}"
            ),
            escape("unknown" if row.get("cost_usd") is None else number(row.get("cost_usd"), ".4f")),
            browse_link("browse", run=run_number, game=game, model=model),
        ]
        if scored:
            cells.append(escape(suite_score_cell(row)))
        if with_run:
            cells.insert(0, escape(row["run"]))
        lines.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def head_to_head_table(game: dict[str, Any]) -> str:
    """Win/draw/loss of each row model against each column model, and the OpenSkill ratings."""
    table = game.get("head_to_head")
    if not isinstance(table, dict):
        return ""
    models = [str(row.get("model")) for row in game.get("rows", []) if isinstance(row, dict)]
    parts = [f'<table class="h2h"><caption>{escape(game.get("game", "?"))}: head to head (W/D/L)</caption>']
    parts.append("<thead><tr><th></th>" + "".join(f"<th>{escape(model)}</th>" for model in models) + "</tr></thead>")
    parts.append("<tbody>")
    for row_model in models:
        cells = []
        for column in models:
            record = table.get(row_model, {}).get(column) if isinstance(table.get(row_model), dict) else None
            text = "—" if not isinstance(record, dict) else f"{record.get('W')}/{record.get('D')}/{record.get('L')}"
            cells.append(f"<td>{escape(text)}</td>")
        parts.append(f"<tr><th>{escape(row_model)}</th>{''.join(cells)}</tr>")
    parts.append("</tbody></table>")
    ratings = game.get("ratings")
    if isinstance(ratings, dict) and ratings:
        records = {str(row.get("model")): row.get("outcomes") for row in game.get("rows", []) if isinstance(row, dict)}
        parts.append('<table class="ratings"><thead><tr><th>model</th><th>rating μ</th><th>σ</th>')
        parts.append("<th>ordinal (μ − 3σ)</th><th>W/D/L</th></tr></thead><tbody>")
        for model, rating in ratings.items():
            if isinstance(rating, dict):
                figures = [number(rating.get(key), ".2f") for key in ("mu", "sigma", "ordinal")]
                record = records.get(model)
                figures.append(wdl_text(record) if isinstance(record, dict) else "—")
                parts.append(
                    f"<tr><td>{escape(model)}</td>" + "".join(f"<td>{escape(v)}</td>" for v in figures) + "</tr>"
                )
        parts.append("</tbody></table>")
    return "\n".join(parts)


def pooled_rating_table(rows: Sequence[dict[str, Any]], refusal: str | None) -> str:
    """``tsmg report``'s pooled Bradley-Terry rating (:mod:`tsmg.apps.evaluation.pooled_rating`), or why there is none.

    Empty when no game of the runs has two players.
    """
    if refusal is not None:
        return f'<h3>One rating across games</h3><p class="source">Not pooled: {escape(refusal)}</p>'
    if not rows:
        return ""
    parts = ['<h3>One rating across games</h3><table class="pooled"><thead><tr><th>model</th><th>rating</th>']
    parts.append("<th>95% CI</th><th>games</th><th>missing games</th></tr></thead><tbody>")
    for row in rows:
        ci = row.get("ci95")
        cells = [
            str(row.get("model")),
            number(row.get("rating"), ".0f"),
            "—" if not ci else f"{number(ci[0], '.0f')}–{number(ci[1], '.0f')}",
            str(row.get("games")),
            ", ".join(row.get("missing_games") or []) or "—",
        ]
        parts.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>")
    parts.append("</tbody></table>")
    parts.append(
        '<p class="source">Bradley-Terry over every pairwise result of every game, each game weighing the same, a '
        "draw half a win; Elo-like scale 1000 + 400/ln 10 · θ (mean 1000), prior θ ~ N(0, 2²); 95% CI from 1,000 "
        "bootstrap resamples of the episodes within each run and game.</p>"
    )
    return "\n".join(parts)


def update_table(run_number: int, rows: Sequence[dict[str, Any]]) -> str:
    """Per stored update: the sampled training episodes' figures, each with a link to them."""
    lines = ['<table class="updates"><thead><tr>']
    for name in ("update", "game", "model", "episodes", "success (Wilson 95% CI)", "return ± s.e.", "invalid", ""):
        lines.append(f"<th>{escape(name)}</th>")
    lines.append("</tr></thead><tbody>")
    for row in rows:
        interval = row.get("success_ci95")
        success = percent(row.get("success_rate"))
        if isinstance(interval, list | tuple) and len(interval) == 2:
            success += f" ({percent(interval[0])}–{percent(interval[1])})"
        cells = [
            escape(row["update"]),
            escape(row["game"]),
            escape(row["model"]),
            escape(row["episodes"]),
            escape(success),
            escape(f"{number(row.get('mean_return'), '+.3f')} ± {number(row.get('return_stderr'), '.3f')}"),
            escape(percent(row.get("invalid_rate"))),
            browse_link("episodes", run=run_number, game=row["game"], model=row["model"], update=row["update"]),
        ]
        lines.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def metrics_table(rows: Sequence[dict[str, Any]]) -> str:
    """The last value of every metric of a training run, by namespace."""
    latest: dict[str, tuple[int, Any]] = {}
    for row in rows:
        for key, value in row.items():
            if key != "step" and value is not None:
                latest[key] = (int(row["step"]), value)
    lines = [
        '<table class="metrics"><thead><tr><th>metric</th><th>last value</th><th>at update</th></tr></thead><tbody>'
    ]
    for key in sorted(latest):
        step, value = latest[key]
        shown = number(value, ".4g") if isinstance(value, int | float) else str(value)
        lines.append(f"<tr><td>{escape(key)}</td><td>{escape(shown)}</td><td>{escape(step)}</td></tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def training_section(runs: Sequence[str], curves: bool) -> str:
    """The training tab: the curves' mount point (drawn by ``assets/curves.js``), then each run's figures.

    ``runs`` holds each training run's HTML (already escaped); ``curves`` says whether
    ``data/curves.js`` was written (some run has metrics).
    """
    mount = (
        '<div id="curves" class="curves"><noscript>The learning curves need JavaScript; '
        "their data is in data/curves.js.</noscript></div>"
        if curves
        else ""
    )
    return '<section id="training"><h2>Training</h2>' + mount + "\n".join(runs) + "</section>"


def problems_panel(problems_by_run: Sequence[tuple[str, Sequence[ReadProblem], int]]) -> str:
    """The "could not read" panel: per run, the problems found and how many episodes carry issues."""
    if not any(problems or flagged for _, problems, flagged in problems_by_run):
        return ""
    parts = ['<section id="problems" class="problems"><h2>Could not read everything</h2>']
    for name, problems, flagged in problems_by_run:
        if not problems and not flagged:
            continue
        parts.append(f"<h3>{escape(name)}</h3><ul>")
        for problem in problems[:PROBLEMS_SHOWN]:
            where = problem.file + (f" line {problem.line}" if problem.line is not None else "")
            parts.append(f"<li><code>{escape(where)}</code>: {escape(problem.message)}</li>")
        if len(problems) > PROBLEMS_SHOWN:
            parts.append(f"<li>… and {len(problems) - PROBLEMS_SHOWN} more</li>")
        if flagged:
            parts.append(
                f"<li>{flagged} episode(s) with missing or malformed fields: shown with what they hold, "
                f'marked ⚠ in the <a href="#browse?issues=1">transcript browser</a></li>'
            )
        parts.append("</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def page(title: str, sections: Sequence[str], navigation: Sequence[tuple[str, str]]) -> str:
    """The whole ``index.html``: ``sections`` (HTML already escaped) and the browser's mount point.

    ``navigation`` holds the header's links, (anchor, text); ``browse`` opens the transcript browser.
    """
    links = " ".join(f'<a href="#{escape(anchor)}">{escape(text)}</a>' for anchor, text in navigation)
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            '<link rel="stylesheet" href="assets/view.css">',
            "</head><body>",
            f"<header><h1>{escape(title)}</h1><nav>{links}</nav></header>",
            "<main>",
            *sections,
            '<section id="transcripts"><h2>Transcripts</h2>',
            "<noscript>The transcript browser needs JavaScript; the episodes are in data/e-*.js.</noscript>",
            '<div id="browser"><p class="loading">Loading the episode index…</p></div></section>',
            "</main>",
            '<script src="assets/curves.js"></script>',
            '<script src="assets/view.js"></script>',
            "</body></html>",
            "",
        ]
    )
