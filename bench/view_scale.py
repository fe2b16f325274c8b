"""How `tsmg view` scales: 100,000 real episodes against a 1,000-episode baseline in the same run.

Both runs come from the real harness: random, oracle and a fixed answer ("5", never a legal
Frozen Lake move, so a third of the episodes are all invalid answers) on FrozenLake-NoSlip-v0.
For each run the script times the report build and measures what the page loads when it opens
(the index) against the whole report; then, in headless Chromium (the browser tests' own set-up),
it times opening the report from disk, the invalid-answer filter over every episode, opening
the last episode, a text search that stops at its first 500 matching steps and one that reads
every episode (a text no step holds), and records the longest main-thread task (a frozen page
shows up there). Last, two training runs of ``--curve-updates`` updates each (their metrics
written by this script: random walks, seeded, 14 metrics) are charted: the time until the
curves are drawn, a hover readout, and redrawing every chart when the smoothing changes.

Usage: python bench/view_scale.py [--episodes 100000] [--baseline 1000] [--out runs/view-scale]
       [--reuse-runs] [--curve-updates 10000]
``--reuse-runs`` keeps eval run folders already in ``--out`` (their eval time is then not measured).
The last line printed is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tsmg.apps.evaluation import EvalConfig, run_eval
from tsmg.apps.view import build_report
from tsmg.apps.view.curves import CURVE_METRICS

REPO = Path(__file__).resolve().parents[1]
GAME = "FrozenLake-NoSlip-v0"
MODELS = ["random", "oracle", "fixed:5"]
# Collects main-thread tasks over 50 ms from the first moment of the page (Long Tasks API).
LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => { for (const entry of list.getEntries()) window.__longTasks.push(entry.duration); })
  .observe({ type: "longtask", buffered: true });
"""


def make_run(folder: Path, episodes: int, reuse: bool = False) -> float | None:
    """A real eval run of about ``episodes`` episodes; returns its wall time (None: an earlier run reused)."""
    if reuse and (folder / "summary.json").exists():
        return None
    if folder.exists():
        shutil.rmtree(folder)
    started = time.perf_counter()
    per_model = -(-episodes // len(MODELS))
    assert run_eval(EvalConfig(games=[GAME], models=MODELS, episodes=per_model), folder, write_report=False).ok
    return time.perf_counter() - started


def build(folder: Path) -> dict[str, Any]:
    """Build the report; its time and sizes."""
    started = time.perf_counter()
    report = build_report([folder], folder / "view", plots=False)
    seconds = time.perf_counter() - started
    data = folder / "view" / "data"
    opened = sum(path.stat().st_size for path in data.glob("index-*.js")) + (data / "meta.js").stat().st_size
    chunks = [path.stat().st_size for path in data.glob("e-*.js")]
    return {
        "episodes": report.episodes,
        "build_s": seconds,
        "jsonl_bytes": (folder / "episodes.jsonl").stat().st_size,
        "report_bytes": report.data_bytes,
        "opened_bytes": opened,
        "largest_chunk_bytes": max(chunks),
    }


def chromium_helpers() -> Any:
    """The browser tests' helpers, or None when Chromium is not installed."""
    sys.path.insert(0, str(REPO / "tests"))
    import view_helpers

    if not (Path(view_helpers.CHROMIUM).exists() and Path(view_helpers.CHROMEDRIVER).exists()):
        return None
    return view_helpers


def timed_view(view_helpers: Any, driver: Any, fragment: str) -> float:
    """Seconds from setting ``#fragment`` until the page has drawn it (a search may read every chunk)."""
    started = time.perf_counter()
    driver.execute_script(
        "document.getElementById('browser').dataset.status = 'moving'; location.hash = arguments[0];", fragment
    )
    view_helpers.wait_until(
        lambda: driver.execute_script("return document.getElementById('browser').dataset.status") == "ready",
        timeout=3600,
        what=fragment,
    )
    return time.perf_counter() - started


def browse(index_html: Path, episodes: int) -> dict[str, float] | None:
    """Page timings in headless Chromium; None when Chromium is not installed."""
    view_helpers = chromium_helpers()
    if view_helpers is None:
        return None
    with view_helpers.chromium() as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": LONG_TASKS})
        started = time.perf_counter()
        view_helpers.open_report(driver, index_html, "#browse")
        open_s = time.perf_counter() - started
        started = time.perf_counter()
        view_helpers.navigate(driver, "#browse?invalid=1")
        invalid_s = time.perf_counter() - started
        matches = int(driver.find_element("css selector", "p.count").get_attribute("data-count"))
        started = time.perf_counter()
        view_helpers.navigate(driver, f"#browse?ep={episodes - 1}")
        episode_s = time.perf_counter() - started
        longest = driver.execute_script("return Math.max(0, ...window.__longTasks)")
        heap = driver.execute_script("return performance.memory ? performance.memory.usedJSHeapSize : 0")
        search_first_s = timed_view(view_helpers, driver, "#browse?q=holes%20are%20at")
        first_hits = int(driver.find_element("css selector", "p.count").get_attribute("data-count"))
        driver.execute_script("window.__longTasks = [];")
        search_all_s = timed_view(view_helpers, driver, "#browse?q=no%20step%20holds%20this")
        searched = driver.find_element("css selector", "p.count").text
        search_longest = driver.execute_script("return Math.max(0, ...window.__longTasks)")
        search_heap = driver.execute_script("return performance.memory ? performance.memory.usedJSHeapSize : 0")
    return {
        "open_s": open_s,
        "invalid_filter_s": invalid_s,
        "invalid_matches": matches,
        "open_last_episode_s": episode_s,
        "longest_task_ms": float(longest),
        "js_heap_mb": heap / 1e6,
        "search_first_500_s": search_first_s,
        "search_first_500_hits": first_hits,
        "search_every_episode_s": search_all_s,
        "search_every_episode_says": searched,
        "search_longest_task_ms": float(search_longest),
        "search_js_heap_mb": search_heap / 1e6,
    }


def write_metrics(folder: Path, updates: int, seed: int) -> None:
    """A training run folder whose metrics.jsonl holds ``updates`` rows of seeded random walks."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    levels = {key: rng.random() for key, _ in CURVE_METRICS}
    with (folder / "metrics.jsonl").open("w") as file:
        for step in range(1, updates + 1):
            for key in levels:
                levels[key] += rng.gauss(0, 0.01)
            file.write(json.dumps({"step": step, **levels}) + "\n")


def curves(folder: Path, updates: int) -> dict[str, Any]:
    """Two training runs of ``updates`` updates charted: build time, data size, time until drawn, a hover."""
    for number in range(2):
        write_metrics(folder / f"train-{number}", updates, seed=number)
    started = time.perf_counter()
    report = build_report([folder / "train-0", folder / "train-1"], folder / "view", plots=False)
    figures: dict[str, Any] = {
        "updates": updates,
        "build_s": time.perf_counter() - started,
        "curves_bytes": (folder / "view" / "data" / "curves.js").stat().st_size,
    }
    view_helpers = chromium_helpers()
    if view_helpers is None:
        return figures
    from selenium.webdriver import ActionChains

    with view_helpers.chromium() as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": LONG_TASKS})
        started = time.perf_counter()
        driver.get(report.index_html.resolve().as_uri() + "#training")
        view_helpers.wait_until(
            lambda: driver.execute_script("return document.getElementById('curves').dataset.status") == "ready",
            timeout=600,
            what="the curves",
        )
        figures["draw_s"] = time.perf_counter() - started
        figures["charts"] = len(driver.find_elements("css selector", "figure.chart"))
        overlay = driver.find_element("css selector", "figure.chart rect.overlay")
        readout = driver.find_element("css selector", "figure.chart .readout")
        started = time.perf_counter()
        ActionChains(driver).move_to_element_with_offset(overlay, 10, 0).perform()
        view_helpers.wait_until(lambda: readout.get_attribute("data-step"), what="the hover readout")
        figures["hover_s"] = time.perf_counter() - started
        figures["smoothing_redraw_ms"] = driver.execute_async_script(
            "const done = arguments[0], slider = document.querySelector('input[name=smoothing]');"
            "const started = performance.now(); slider.value = '0.9'; slider.dispatchEvent(new Event('input'));"
            "requestAnimationFrame(() => setTimeout(() => done(performance.now() - started), 0));"
        )
        figures["longest_task_ms"] = float(driver.execute_script("return Math.max(0, ...window.__longTasks)"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--baseline", type=int, default=1_000)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "view-scale")
    parser.add_argument("--reuse-runs", action="store_true", help="keep eval runs already in --out")
    parser.add_argument("--curve-updates", type=int, default=10_000, help="updates of each charted training run")
    args = parser.parse_args()
    results = {}
    for label, count in (("baseline", args.baseline), ("large", args.episodes)):
        folder = args.out / label
        eval_s = make_run(folder, count, reuse=args.reuse_runs)
        figures = {"eval_s": eval_s, **build(folder)}
        figures["browser"] = browse(folder / "view" / "index.html", figures["episodes"])
        results[label] = figures
        print(f"{label}: {json.dumps(figures)}", flush=True)
    base, large = results["baseline"], results["large"]
    scale = large["episodes"] / base["episodes"]
    headline: dict[str, Any] = {
        "episodes": large["episodes"],
        "baseline_episodes": base["episodes"],
        "build_s": round(large["build_s"], 2),
        "build_time_ratio_per_episode": round(large["build_s"] / base["build_s"] / scale, 3),
        "report_over_jsonl": round(large["report_bytes"] / large["jsonl_bytes"], 3),
        "opened_bytes_per_episode": round(large["opened_bytes"] / large["episodes"], 1),
        "opened_share_of_report": round(large["opened_bytes"] / large["report_bytes"], 4),
        "largest_chunk_kb": round(large["largest_chunk_bytes"] / 1e3, 1),
    }
    if base["browser"] and large["browser"]:
        for key in ("open_s", "invalid_filter_s", "open_last_episode_s", "js_heap_mb"):
            headline[key] = round(large["browser"][key], 3)
            headline[f"{key}_ratio_to_baseline"] = round(large["browser"][key] / base["browser"][key], 2)
        headline["longest_task_ms"] = large["browser"]["longest_task_ms"]  # 0 when no task passed 50 ms
        headline["invalid_matches"] = large["browser"]["invalid_matches"]
        for key in ("search_first_500_s", "search_every_episode_s", "search_longest_task_ms", "search_js_heap_mb"):
            headline[key] = round(large["browser"][key], 3)
    else:
        headline["browser"] = "skipped: chromium not installed (apt-get install chromium chromium-driver)"
    charted = curves(args.out / "curves", args.curve_updates)
    print(f"curves: {json.dumps(charted)}", flush=True)
    headline["curves"] = {key: round(value, 3) if isinstance(value, float) else value for key, value in charted.items()}
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
