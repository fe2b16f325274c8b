"""The training runs' learning curves as one data file that the page's charts draw (``data/curves.js``).

Every numeric metric of every training run's ``metrics.jsonl`` becomes a series of
``(update, value)`` points. The page (``static/curves.js``) draws one chart per metric with the
runs overlaid: hover reads values off, dragging or the wheel zooms, a slider smooths (an
exponential moving average), a legend hides runs. The metrics below are charted when the page
opens; every other numeric metric can be added from a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tsmg.apps.view.data import write_script
from tsmg.apps.view.runs import RunFolder, metric_value

#: The metrics charted when the page opens (when a run has them), each with what it measures.
CURVE_METRICS = (
    ("rollout/success_rate", "success rate of the sampled training episodes"),
    ("eval/success_rate", "success rate on held-out seeds"),
    ("rollout/mean_return", "mean return of the sampled training episodes"),
    ("eval/mean_return", "mean return on held-out seeds"),
    ("rollout/invalid_rate", "invalid answers per decision, training episodes"),
    ("eval/invalid_rate", "invalid answers per decision, held-out seeds"),
    ("loss/total", "training loss"),
    ("loss/policy", "policy-gradient loss"),
    ("loss/approx_kl", "KL to the rollout policy (estimate)"),
    ("loss/kl_ref", "KL to the reference model"),
    ("loss/entropy", "entropy of the policy"),
    ("loss/rollout_entropy", "entropy of the rollout policy"),
    ("optim/grad_norm", "gradient norm"),
    ("optim/lr", "learning rate"),
)
#: Charts drawn at first when a run has none of :data:`CURVE_METRICS` (its first metrics, by name).
FALLBACK_CHARTS = 4
CURVES_FILE = "curves.js"


def curve_data(runs: Sequence[RunFolder]) -> dict[str, Any] | None:
    """The curves of ``runs`` (training runs with metrics), or None when none has a metric to draw.

    Returns:
        ``{"runs": [name, ...], "metrics": [{"key", "title", "series": [[run, steps, values], ...]}],
        "shown": n}``: runs numbered in the order given, each series' points sorted by update (a
        resumed run's repeated update keeps its last value), values finite floats; the first
        ``shown`` metrics are charted when the page opens.
    """
    named = dict(CURVE_METRICS)
    series: dict[str, list[list[Any]]] = {}
    for number, run in enumerate(runs):
        points: dict[str, dict[int, float]] = {}
        for row in run.metrics:
            for key in row:
                value = metric_value(row, key) if key != "step" else None
                if value is not None:
                    points.setdefault(key, {})[int(row["step"])] = value
        for key, by_step in points.items():
            steps = sorted(by_step)
            series.setdefault(key, []).append([number, steps, [by_step[step] for step in steps]])
    if not series:
        return None
    known = [key for key, _ in CURVE_METRICS if key in series]
    others = sorted(key for key in series if key not in named)
    sampled = evaluation_sampling([run for run in runs if any(key.startswith("eval/") for key in run_keys(run))])

    def title(key: str) -> str:
        text = named.get(key, key)
        return f"{text} ({sampled})" if key.startswith("eval/") and key in named and sampled else text

    metrics = [{"key": key, "title": title(key), "series": series[key]} for key in known + others]
    return {
        "runs": [run.name for run in runs],
        "metrics": metrics,
        "shown": len(known) or min(FALLBACK_CHARTS, len(others)),
    }


def run_keys(run: RunFolder) -> set[str]:
    """The metric names ``run`` logged."""
    return {key for row in run.metrics for key in row}


def evaluation_temperature(run: RunFolder) -> float | None:
    """The temperature ``run``'s evaluations sampled at (0: greedy), from its configuration; None if unknown.

    ``run.eval_temperature`` (default 0); None there means the rollouts' own, ``rollout.lap.temperature``.
    """
    config = run.config
    if not isinstance(config, dict) or not isinstance(config.get("run"), dict):
        return None
    temperature = config["run"].get("eval_temperature", 0.0)
    if temperature is None:
        rollout = config.get("rollout")
        lap = rollout.get("lap") if isinstance(rollout, dict) else None
        temperature = lap.get("temperature", 1.0) if isinstance(lap, dict) else None
    return float(temperature) if isinstance(temperature, (int, float)) else None


def evaluation_sampling(runs: Sequence[RunFolder]) -> str:
    """How the evaluations of ``runs`` chose their moves, for the titles of the ``eval/`` charts.

    Example:
        >>> from pathlib import Path
        >>> greedy = RunFolder(Path("a"), "a", "train", config={"run": {"eval_temperature": 0.0}})
        >>> lap = {"lap": {"temperature": 1.0}}
        >>> hot = RunFolder(Path("b"), "b", "train", config={"run": {"eval_temperature": None}, "rollout": lap})
        >>> evaluation_sampling([greedy]), evaluation_sampling([hot]), evaluation_sampling([greedy, hot])
        ('greedy', 'sampled at temperature 1', 'a: greedy; b: sampled at temperature 1')
    """

    def said(temperature: float | None) -> str:
        if temperature is None:
            return "temperature not recorded"
        return "greedy" if temperature == 0 else f"sampled at temperature {temperature:g}"

    described = [(run.name, said(evaluation_temperature(run))) for run in runs]
    if len({text for _, text in described}) <= 1:
        return described[0][1] if described else ""
    return "; ".join(f"{name}: {text}" for name, text in described)


def write_curves(runs: Sequence[RunFolder], folder: Path) -> int:
    """Write ``data/curves.js`` for ``runs`` into ``folder``; returns the bytes written (0: nothing to draw)."""
    data = curve_data(runs)
    if data is None:
        return 0
    return write_script(folder / CURVES_FILE, "tsmgCurves", data)
