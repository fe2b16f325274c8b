"""``report.md`` and PNG plots from one or more run summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _percent(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def comparison_rows(summaries: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Flatten (run name, summary) pairs into one row per run, game and model."""
    rows = []
    for run, summary in summaries:
        for game in summary["games"]:
            for row in game["rows"]:
                rows.append({"run": run, **row})
    return rows


def markdown_table(rows: Sequence[dict[str, Any]], with_run: bool = False) -> str:
    """A Markdown table of success (Wilson 95 %), return ± s.e., invalid rate, turns, tokens, cost."""
    header = ["game", "model", "episodes", "success (95% CI)", "return ± s.e.", "invalid", "turns", "tokens in/out"]
    header += ["cost $"]
    if with_run:
        header.insert(0, "run")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        ci = row["success_ci95"]
        success = _percent(row["success_rate"])
        if ci is not None:
            success += f" ({_percent(ci[0])}–{_percent(ci[1])})"
        cells = [
            row["game"],
            row["model"],
            str(row["episodes"]),
            success,
            f"{row['mean_return']:+.3f} ± {row['return_stderr']:.3f}",
            _percent(row["invalid_rate"]),
            f"{row['mean_turns']:.2f}",
            f"{row['tokens_in_per_episode']:.0f}/{row['tokens_out_per_episode']:.0f}" + _thinking(row),
            f"{row['cost_usd']:.4f}"
            + ("" if row.get("reasoning_cost_usd") is None else f" ({row['reasoning_cost_usd']:.4f} thinking)"),
        ]
        if with_run:
            cells.insert(0, row["run"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _thinking(row: dict[str, Any]) -> str:
    """`` (thinking N)`` after the tokens out, where the model reported thinking tokens."""
    thinking = row.get("reasoning_tokens_per_episode")
    return "" if thinking is None else f" (thinking {thinking:.0f})"


def head_to_head_table(game: dict[str, Any]) -> str:
    """A Markdown win/draw/loss matrix (row model against column model) with ratings."""
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
        lines.append("| model | rating μ | σ | ordinal (μ − 3σ) |")
        lines.append("|---|---|---|---|")
        for model, rating in sorted(ratings.items(), key=lambda item: -item[1]["ordinal"]):
            lines.append(f"| {model} | {rating['mu']:.2f} | {rating['sigma']:.2f} | {rating['ordinal']:.2f} |")
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
        markdown_table(rows),
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
    (folder / "report.md").write_text("\n".join(parts) + "\n")


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
