"""Build the report: read run folders, write chunked data, plots and the page into one folder.

The output folder holds ``index.html``, ``assets/`` (the page's script and style),
``data/`` (``meta.js``, ``index-NNN.js``, ``e-NNNNN.js``, ``curves.js``) and ``plots/``. It
opens from disk (``file://``) with no network; ``tsmg view --serve`` only adds a local HTTP
server.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tsmg.apps.evaluation.report import (
    comparison_rows,
    current_summary,
    pooled_rating_of_folders,
    predates_outcomes,
    suite_rows,
)
from tsmg.apps.view import page
from tsmg.apps.view.configs import config_section
from tsmg.apps.view.curves import write_curves
from tsmg.apps.view.data import ChunkWriter, EpisodeIndex, write_script
from tsmg.apps.view.records import ReadProblem
from tsmg.apps.view.runs import RunFolder, expand_run_paths, metric_value, open_run, recompute_summary, update_rows

logger = logging.getLogger(__name__)

#: A file that marks a folder as a report this module wrote (and may therefore rewrite).
MARKER = ".tsmg-view"


class ReportFolderError(ValueError):
    """The output folder exists and is not a report this command wrote."""


@dataclass
class ViewReport:
    """What :func:`build_report` wrote.

    Attributes:
        out_dir: The report folder.
        index_html: Its page.
        episodes: Episodes in the transcript browser.
        chunks: Episode chunk files.
        data_bytes: Bytes of the data files.
        problems: Everything that could not be read, per run name.
        flagged_episodes: Episodes shown with issues (missing or malformed fields).
    """

    out_dir: Path
    index_html: Path
    episodes: int = 0
    chunks: int = 0
    data_bytes: int = 0
    problems: dict[str, list[ReadProblem]] = field(default_factory=dict)
    flagged_episodes: int = 0


def build_report(
    runs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    updates: Sequence[int] | None = None,
    plots: bool = True,
) -> ViewReport:
    """Write the report of ``runs`` into ``out_dir``.

    Args:
        runs: Run folders (evaluation, training, or episodes-only), or folders of them
            (:func:`~tsmg.apps.view.runs.expand_run_paths`).
        out_dir: The report folder: created, or rewritten if it holds an earlier report.
        updates: For training runs, the updates whose stored episodes to include (None: all).
        plots: Draw the PNG plots (matplotlib).

    Raises:
        NotARunError: a path is not a run folder.
        ReportFolderError: ``out_dir`` exists, is not empty and is not a report.
    """
    folders: list[RunFolder] = []
    for path in expand_run_paths([Path(run) for run in runs]):
        folders.append(open_run(path, [folder.name for folder in folders]))
    out = _prepare(Path(out_dir))
    report = ViewReport(out_dir=out, index_html=out / "index.html")
    wanted = set(updates) if updates is not None else None

    index = EpisodeIndex()
    chunks = ChunkWriter(out / "data")
    runs_meta: list[dict[str, Any]] = []
    flagged_by_run = []
    for number, run in enumerate(folders):
        stored = flagged = 0
        for episode in run.episodes():
            if run.kind == "train" and wanted is not None and episode["update"] not in wanted:
                continue
            chunk, position = chunks.add(episode)
            index.add(number, episode, chunk, position)
            stored += 1
            flagged += bool(episode["issues"])
        runs_meta.append({"name": run.name, "kind": run.kind, "path": str(run.path), "episodes": stored})
        flagged_by_run.append(flagged)
        report.episodes += stored
        report.flagged_episodes += flagged
    chunks.flush()

    sections, navigation = [], []
    problems_by_run = []
    evaluated = [(number, run) for number, run in enumerate(folders) if run.kind != "train"]
    trained = [(number, run) for number, run in enumerate(folders) if run.kind == "train"]
    if evaluated:
        sections.append(_summary_section(evaluated, out, plots))
        navigation.append(("summary", "Summary"))
    if trained:
        curves_bytes = write_curves([run for _, run in trained], out / "data")
        report.data_bytes += curves_bytes
        runs_shown = [_training_section(number, run, wanted) for number, run in trained]
        sections.append(page.training_section(runs_shown, curves=curves_bytes > 0))
        navigation.append(("training", "Training"))
    settings = config_section(folders)
    if settings:
        sections.append(settings)
        navigation.append(("config", "Configuration"))
    for number, run in enumerate(folders):
        problems_by_run.append((run.name, run.problems, flagged_by_run[number]))
        report.problems[run.name] = list(run.problems)
    navigation.append(("browse", "Transcripts"))
    panel = page.problems_panel(problems_by_run)
    if panel:
        sections.append(panel)
        total = sum(len(problems) for _, problems, _ in problems_by_run) + report.flagged_episodes
        navigation.append(("problems", f"Could not read ({total})"))

    parts, index_bytes = index.write(out / "data")
    meta = {
        "runs": runs_meta,
        **index.tables(),
        "index_parts": parts,
        "episodes": report.episodes,
        "chunks": chunks.chunks,
    }
    meta_bytes = write_script(out / "data" / "meta.js", "tsmgMeta", meta)
    report.chunks = chunks.chunks
    report.data_bytes += chunks.bytes_written + index_bytes + meta_bytes
    title = "tsmg view: " + ", ".join(run.name for run in folders)
    report.index_html.write_text(page.page(title, sections, navigation), encoding="utf-8")
    _copy_assets(out / "assets")
    return report


def _prepare(out: Path) -> Path:
    """Create the report folder, or clear the files an earlier report left in it."""
    if out.exists():
        if not out.is_dir():
            raise ReportFolderError(f"{out} is a file: give --out a folder for the report")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise ReportFolderError(f"{out} exists and is not a tsmg view report: give --out a new or empty folder")
        for name in ("data", "plots", "assets"):
            shutil.rmtree(out / name, ignore_errors=True)
        (out / "index.html").unlink(missing_ok=True)
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "plots").mkdir(exist_ok=True)
    (out / MARKER).write_text("written by tsmg view; the folder is rewritten by the next build\n")
    return out


def _copy_assets(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    static = resources.files("tsmg.apps.view") / "static"
    for name in ("view.js", "curves.js", "view.css"):
        (folder / name).write_bytes((static / name).read_bytes())


def _summary_section(evaluated: Sequence[tuple[int, RunFolder]], out: Path, plots: bool) -> str:
    """The model × game table across the evaluation runs, then each run's head-to-head tables and plots.

    The table's rows are ``tsmg report``'s (:func:`~tsmg.apps.evaluation.report.comparison_rows` of the
    same summaries), grouped by game so that the runs' models on one game sit together.
    """
    summaries, details = [], []
    for _, run in evaluated:
        summary, source = _eval_summary(run)
        parts = [
            f"<h3>{page.escape(run.name)} <small>({page.escape(run.kind)} run, {page.escape(run.path)})</small></h3>"
        ]
        if summary is None:
            parts.append("<p>No summary and no readable episodes: nothing to tabulate.</p>")
            details.append("\n".join(parts))
            continue
        summaries.append((run.name, summary))
        counts = [summary.get(key) for key in ("planned", "completed", "failed")]
        note = f"Figures {source}."
        if all(isinstance(count, int) for count in counts):
            note += f" Planned episodes: {counts[0]}, completed: {counts[1]}, failed: {counts[2]}."
        parts.append(f'<p class="source">{page.escape(note)}</p>')
        for game in summary["games"]:
            parts.append(page.head_to_head_table(game))
        if plots:
            rows = [row for game in summary["games"] for row in game["rows"]]
            parts.append(_eval_plots(run, rows, out))
        details.append("\n".join(parts))
    rows = comparison_rows(summaries)
    games = list(dict.fromkeys(row["game"] for row in rows))
    rows.sort(key=lambda row: games.index(row["game"]))  # stable: the runs' order within a game
    tabulated = {name for name, _ in summaries}
    numbers = {run.name: number for number, run in evaluated if run.name in tabulated}
    title = "Model × game" + (f" across {len(summaries)} runs" if len(summaries) > 1 else "")
    table = [f"<h3>{page.escape(title)}</h3>", page.summary_table(rows, numbers, suite_rows(summaries))] if rows else []
    folders = {run.name: run.path for _, run in evaluated}
    pooled = pooled_rating_of_folders([(name, summary, folders[name]) for name, summary in summaries])
    table.append(page.pooled_rating_table(*pooled))
    return '<section id="summary"><h2>Summary</h2>' + "\n".join([*table, *details]) + "</section>"


def _eval_summary(run: RunFolder) -> tuple[dict[str, Any] | None, str]:
    """The run's summary (current, or recomputed from its episodes) and where its figures come from."""
    summary, source = run.summary, "from summary.json"
    if summary is not None and predates_outcomes(summary):
        summary = current_summary(summary, run.path)
        if not predates_outcomes(summary):
            source = "from summary.json, wins, draws and losses recounted from episodes.jsonl (it predates them)"
    if summary is None:
        summary, source = recompute_summary(run), "recomputed from episodes.jsonl (no usable summary.json)"
    return summary, source


def _eval_plots(run: RunFolder, rows: list[dict[str, Any]], out: Path) -> str:
    """The harness's own plots (success with Wilson bars, returns, invalid rates) for this run."""
    usable = [row for row in rows if _plottable(row)]
    if not usable:
        return ""
    from tsmg.apps.evaluation.report import plot_rows

    try:  # plot_rows imports matplotlib when it draws, so a base install (no eval extra) fails here
        paths = plot_rows(usable, out / "plots", prefix=f"{_slug(run.name)}-")
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("matplotlib"):
            raise
        run.problems.append(ReadProblem("(plots)", None, "matplotlib is not installed: no plots"))
        return ""
    return '<div class="plots">' + "".join(_image(path.name) for path in paths) + "</div>"


def _plottable(row: dict[str, Any]) -> bool:
    keys = ("success_rate", "success_ci95", "mean_return", "return_stderr", "returns", "invalid_rate")
    if not all(key in row for key in keys) or not isinstance(row.get("episodes"), int) or row["episodes"] == 0:
        return False
    return row["success_rate"] is None or isinstance(row["success_ci95"], list)


def _image(name: str) -> str:
    return f'<img src="plots/{page.escape(name)}" alt="{page.escape(name)}">'


def _slug(name: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name)


def _training_section(number: int, run: RunFolder, wanted: set[int] | None) -> str:
    """A training run's figures: its metrics' last values and the stored episodes per update (curves: ``curves.js``)."""
    parts = [f"<h3>{page.escape(run.name)} <small>(training run, {page.escape(run.path)})</small></h3>"]
    if run.metrics:
        steps = [int(row["step"]) for row in run.metrics]
        success = [metric_value(row, "eval/success_rate") for row in run.metrics]
        last = next((value for value in reversed(success) if value is not None), None)
        line = f"{len(run.metrics)} metrics rows, updates {min(steps)}–{max(steps)}"
        if last is not None:
            line += f"; last held-out success {page.percent(last)}"
        parts.append(f"<p>{page.escape(line)}.</p>")
        parts.append(
            f"<details><summary>Every metric's last value</summary>{page.metrics_table(run.metrics)}</details>"
        )
    else:
        parts.append("<p>No metrics.jsonl: no learning curves.</p>")
    rows = update_rows(run, wanted)
    if rows:
        parts.append("<h4>Sampled training episodes by update</h4>")
        parts.append(page.update_table(number, rows))
    else:
        parts.append(
            "<p>No training episodes stored (set <code>run.episodes_every</code> in the training config "
            "to keep every k-th update's episodes).</p>"
        )
    return "\n".join(parts)
