"""Write every screenshot of ``tsmg view`` that the docs show (docs/view-*.png), from runs made on the spot.

    .venv/bin/python scripts/view_screenshots.py            # about 2 minutes on 2 shared cores

It builds the runs the pictures show, deterministically (fixed seeds, scripted players and a
model built from scratch, nothing downloaded):

* ``eval``: ``tsmg eval`` of ``random``, ``oracle`` and ``fixed:5`` (always answers "5": never a
  move on Frozen Lake, a cell that is soon taken in tic-tac-toe) on FrozenLake-NoSlip-v0 and
  TicTacToe-v0, 5 episodes each from seed 0: invalid answers with the game's reasons, and forfeits;
* ``votes``: ``tsmg eval --lap arena --votes 3`` of a scripted chat model on Frozen Lake, served by
  the loopback OpenAI-compatible server of the tests (tests/backends/fault_server.py), whose
  answers reason, then name a move or none: split votes, and a re-prompt that votes again;
* ``fl-lr1e-3`` and ``fl-lr3e-4``: the demo's training config (configs/frozen_lake_tiny.yaml) for
  ``--updates`` updates at two learning rates, evaluated every 5 updates on 50 held-out maps;

then ``tsmg view`` builds a report of each eval run and one of the two training runs, and headless
Chromium (Debian's ``chromium`` and ``chromium-driver``, through Selenium) opens each page of
:data:`SHOTS`, checks that every section the table lists is there and visible, and saves the PNG
into docs/. ``tests/test_view_screenshots.py`` opens the same pages, built the same way with fewer
updates, and checks the same sections: a page that loses one of them fails the test, and so does
a docs/view-*.png that the docs show and the table does not list.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
WIDTH = 1300


@dataclass(frozen=True)
class Shot:
    """One screenshot: its file, the page and state it shows, and the sections it must show.

    ``fragment`` is the report URL's fragment; ``{forfeit}`` in it stands for the row of an
    episode in which a seat forfeits (found in the run). ``sections`` are CSS selectors, each of
    which must match at least one visible element before the picture is taken.
    """

    file: str
    report: str  # "eval", "votes" or "training": which report the page belongs to
    fragment: str
    sections: tuple[str, ...]
    height: int
    shows: str
    script: str = ""  # JavaScript run once the page is drawn (e.g. to unfold a folded part)


#: Every screenshot of the docs, what it shows, and the sections that must be on it.
SHOTS: tuple[Shot, ...] = (
    Shot(
        "view-summary.png",
        "eval",
        "#summary",
        ("header nav a.current[href='#summary']", "table.summary tbody tr", ".ci-range", "table.pooled", "table.h2h"),
        1100,
        "the summary: the model x game table with Wilson intervals, tic-tac-toe's W/D/L, one rating, the head-to-head",
    ),
    Shot(
        "view-invalid.png",
        "eval",
        "#browse?invalid=1&game=TicTacToe-v0",
        (
            "form.filters select[name=model]",
            "form.filters input[name=q]",
            "form.filters input[name=invalid]:checked",
            "p.count",
            "tr.invalid-row td.answer",
            "tr.invalid-row td.reason",
        ),
        900,
        "the invalid answers only (tic-tac-toe): what each model wrote and why the game refused it",
    ),
    Shot(
        "view-episode.png",
        "eval",
        "#browse?ep={forfeit}",
        (
            "a.back",
            ".episode-head table.seats",
            "article.step .observation pre",
            "article.step .answer pre",
            "article.step .verdict",
            "ul.compare a.side-by-side",
        ),
        1250,
        "a tic-tac-toe episode that ends in a forfeit: each seat's result named, then step by step",
    ),
    Shot(
        "view-votes.png",
        "votes",
        "#browse?ep=0",
        (
            "article.step .votes details.vote[open] summary",
            "article.step .votes li.ballot",
            "article.step .verdict",
        ),
        1450,
        "a majority vote of 3 answers per decision: each answer beside the move it names, the tally, the move played",
    ),
    Shot(
        "view-curves.png",
        "training",
        "#training",
        (
            "figure.chart[data-metric='rollout/success_rate'] path.series[data-run='1']",
            "figure.chart[data-metric='eval/success_rate'] path.series[data-run='1']",
            ".legend-run[data-run='1']",
            "input[name=smoothing]",
            "button.reset-zoom",
        ),
        1250,
        "two training runs' learning curves overlaid, one chart per metric",
    ),
    Shot(
        "view-config.png",
        "training",
        "#config",
        ("header nav a.current[href='#config']", "table.config tr.differs", "#config details[open] table.config td"),
        1000,
        "the configuration tab: both runs' settings side by side, the ones that differ first",
        script="document.querySelectorAll('#config details').forEach((box) => { box.open = true; })",
    ),
)


def build_runs(folder: Path, *, updates: int = 30, episodes: int = 5) -> dict[str, Path]:
    """Make the runs and the two reports under ``folder``; returns each report's ``index.html``.

    The commands run in ``folder`` with relative paths (``runs/eval``), so that the pictures show
    the paths a reader's own runs would have, not a temporary folder's.

    Args:
        folder: Where the runs and reports go (created).
        updates: Updates of each training run (the test makes fewer).
        episodes: Episodes per game and matchup of the eval run.
    """
    from tsmg.apps.cli import main

    folder.mkdir(parents=True, exist_ok=True)
    quiet = StringIO()
    with redirect_stdout(quiet), contextlib.chdir(folder):  # the commands' own output; a failure is raised below
        eval_run = Path("runs/eval")
        models = ["--model", "random", "--model", "oracle", "--model", "fixed:5"]
        games = ["--game", "FrozenLake-NoSlip-v0", "--game", "TicTacToe-v0"]
        command = ["eval", *games, *models, "--episodes", str(episodes), "--seed", "0", "--no-progress"]
        _run(main, [*command, "--out", str(eval_run)], quiet)
        _run(main, ["view", str(eval_run)], quiet)
        _vote_run(main, Path("runs/votes"), quiet)
        _run(main, ["view", "runs/votes"], quiet)
        training = []
        for name, lr in (("fl-lr1e-3", "1e-3"), ("fl-lr3e-4", "3e-4")):
            sets = [f"run.updates={updates}", "run.eval_every=5", "run.eval_episodes=50", "run.max_seconds=null"]
            config = ["--config", str(ROOT / "configs" / "frozen_lake_tiny.yaml"), "--set", f"optim.lr={lr}"]
            arguments = ["train", *config, *[word for value in sets for word in ("--set", value)], "--quiet"]
            _run(main, [*arguments, "--out", f"runs/{name}"], quiet)
            training.append(f"runs/{name}")
        _run(main, ["view", *training, "--out", "runs/lr"], quiet)
    return {
        "eval": folder / eval_run / "view" / "index.html",
        "votes": folder / "runs" / "votes" / "view" / "index.html",
        "training": folder / "runs" / "lr" / "index.html",
    }


def _vote_answer(body: Mapping[str, Any]) -> str:
    """The scripted model's answer: a reason, then a move; at the start no legal move, then a split vote."""
    prompt = body["messages"][-1]["content"]
    if "That answer was invalid" in prompt:  # a re-prompt carries the reason: the model corrects itself
        return "I see: the lake is below me.\nFinal Answer: down"
    if "You are at (0, 3)" in prompt:  # the start square: every sample names a move that does not exist
        return "Up is the sky.\nFinal Answer: fly"
    move = ("fly", "down", "right", "down")[body["seed"] % 4]
    return f"Holes lie around; the goal is at the bottom right.\nFinal Answer: {move}"


def _vote_run(main: Callable[[list[str]], int], out: Path, printed: StringIO) -> None:
    """``tsmg eval --lap arena --votes 3`` of the scripted model, served on the loopback."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.backends.fault_server import FaultServer

    spec = "openai:vote-model"
    with FaultServer() as server:
        server.reply = _vote_answer
        options = ["--model-option", f"{spec}:base_url={server.base_url}", "--model-option", f"{spec}:api_key=sk-x"]
        command = ["eval", "--game", "FrozenLake-v0", "--model", spec, "--episodes", "2", "--no-progress", *options]
        _run(main, [*command, "--lap", "arena", "--votes", "3", "-o", "max_steps=4", "--out", str(out)], printed)


def _run(main: Callable[[list[str]], int], arguments: list[str], printed: StringIO) -> None:
    if main(arguments) != 0:
        raise RuntimeError(f"tsmg {' '.join(arguments)} failed:\n{printed.getvalue()}")


def forfeit_row(index_html: Path) -> int:
    """The row (in the report's index) of the first tic-tac-toe episode that ``fixed:5`` forfeits to the oracle.

    ``fixed:5`` answers "5" again once the centre is taken: an invalid answer, and the game's
    forfeit (the report's rows are the eval run's episodes, in their order).
    """
    import json

    episodes = (index_html.parent.parent / "episodes.jsonl").read_text().splitlines()
    for row, line in enumerate(episodes):
        episode = json.loads(line)
        if set(episode["policies"].values()) == {"oracle", "fixed:5"} and episode["invalid_answers"]:
            return row
    raise RuntimeError(f"no episode of {index_html.parent.parent} ends in a forfeit")


def fragment_of(shot: Shot, reports: Mapping[str, Path]) -> str:
    """The shot's URL fragment with its placeholders filled in from the runs."""
    if "{forfeit}" in shot.fragment:
        return shot.fragment.format(forfeit=forfeit_row(reports[shot.report]))
    return shot.fragment


def open_shot(driver: Any, shot: Shot, reports: Mapping[str, Path]) -> None:
    """Load the shot's page at its window size and wait until the page (and its curves) are drawn."""
    driver.set_window_size(WIDTH, shot.height)
    driver.get("about:blank")  # a fresh load: the fragment alone would not reload the page
    driver.get(reports[shot.report].resolve().as_uri() + fragment_of(shot, reports))
    _wait(driver, "return (document.getElementById('browser') || {dataset: {}}).dataset.status === 'ready'")
    if shot.report == "training":
        _wait(driver, "const c = document.getElementById('curves'); return !c || c.dataset.status === 'ready'")
    if shot.script:
        driver.execute_script(shot.script)
    time.sleep(0.3)  # layout settles (fonts, the Wilson bars drawn by script)


#: Whether an element matching the selector is drawn inside the window: what the screenshot holds.
_IN_PICTURE = """
return [...document.querySelectorAll(arguments[0])].some((element) => {
  const box = element.getBoundingClientRect();
  return element.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })
    && (box.width > 0 || box.height > 0) && box.top < window.innerHeight && box.bottom > 0
    && box.left < window.innerWidth && box.right > 0;
});
"""


def missing_sections(driver: Any, shot: Shot) -> list[str]:
    """The selectors of ``shot.sections`` that match no element drawn in the window (the picture) now."""
    return [selector for selector in shot.sections if not driver.execute_script(_IN_PICTURE, selector)]


def _wait(driver: Any, script: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not get ready: {script}")
        time.sleep(0.05)


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (Debian's package and driver) with a fresh profile, closed after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tsmg-screenshots-")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars"]
    for flag in (*flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Build the runs, open every page of :data:`SHOTS`, check its sections and save its PNG; 1 if one is missing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DOCS, help="where the PNGs go (default: docs/)")
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary folder, removed)")
    parser.add_argument("--updates", type=int, default=30, help="updates of each training run (default: 30)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="tsmg-screenshots-"))
    try:
        began = time.perf_counter()
        reports = build_runs(work, updates=args.updates)
        print(f"runs and reports built in {time.perf_counter() - began:.0f} s under {work}")
        args.out.mkdir(parents=True, exist_ok=True)
        with chromium() as driver:
            for shot in SHOTS:
                open_shot(driver, shot, reports)
                missing = missing_sections(driver, shot)
                if missing:
                    print(f"error: {shot.file}: the page shows none of {missing}", file=sys.stderr)
                    return 1
                path = args.out / shot.file
                driver.save_screenshot(str(path))
                print(f"{path}  {path.stat().st_size // 1024} KB  {shot.shows}")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
