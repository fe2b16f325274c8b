"""Helpers of the `tsmg view` tests: a run folder with every kind of bad input, and headless Chromium.

The browser is Debian's package, driven through Selenium and Debian's chromedriver.

Why Selenium + chromedriver: Debian builds ``chromium-driver`` from the same source as
``chromium``, so the two always match, and Selenium is a pure-Python client of the W3C
WebDriver protocol; nothing is downloaded at run time (the driver and browser paths are given,
so Selenium Manager is never asked). Playwright's Python package would bring its own Node
driver and expects its own browser builds.

Without Chromium the browser tests skip, saying how to install it; under CI (``CI`` set) they
fail instead, because CI must run them (``make test`` installs Chromium when it can).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Flags the closed network needs (no background connections) plus a headless, sandbox-less run.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
THINKING = "The hole is <b>below</b>; I go </pre> right."
ARTIFACTS = Path(os.environ.get("TSMG_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))


def require_chromium() -> None:
    """Skip (locally) or fail (under CI) when Chromium, its driver or Selenium is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (the dev extra)")
    if not missing:
        return
    reason = (
        f"missing {', '.join(missing)}: install Debian's browser with `apt-get install -y chromium chromium-driver` "
        "(make test does it when run as root)"
    )
    if os.environ.get("CI"):
        pytest.fail("the browser tests must run under CI, but " + reason)
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium WebDriver with a fresh profile folder, closed (and the folder removed) after."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tsmg-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_until(condition: Callable[[], Any], timeout: float = 20.0, what: str = "the page") -> Any:
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def open_report(driver: Any, index_html: Path, fragment: str = "") -> None:
    """Load the report from disk (``file://``) and wait until the browser has drawn its view."""
    driver.get(index_html.resolve().as_uri() + fragment)
    wait_for_view(driver)


def wait_for_view(driver: Any) -> None:
    """Wait until the transcript browser says it is ready (its chunks loaded and drawn)."""
    wait_until(
        lambda: (
            driver.execute_script("const b = document.getElementById('browser'); return b && b.dataset.status;")
            == "ready"
        ),
        what="the transcript browser",
    )


def navigate(driver: Any, fragment: str) -> None:
    """Go to ``#fragment`` of the current report and wait for the new view."""
    driver.execute_script(
        "document.getElementById('browser').dataset.status = 'moving'; location.hash = arguments[0];", fragment
    )
    wait_for_view(driver)


def screenshot(driver: Any, name: str) -> Path:
    """Save a full-page PNG under the test artifacts folder; returns its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(int(height), 800), 6000))
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    return path


def click_and_wait(driver: Any, element: Any) -> None:
    """Click something that changes the view, and wait for the new view to be drawn."""
    driver.execute_script("document.getElementById('browser').dataset.status = 'moving';")
    element.click()
    wait_for_view(driver)


def damage(clean: Path, folder: Path) -> dict:
    """A copy of a real run with every kind of bad input the viewer must survive; returns what was done."""
    shutil.copytree(clean, folder)
    (folder / "summary.json").unlink()
    lines = (folder / "episodes.jsonl").read_text().splitlines()
    hostile = json.loads(lines[0])
    step = hostile["steps"][0]
    step.update(
        completion=SCRIPT,
        valid=False,
        reason="<i>not a move</i>",
        reasoning=THINKING,
        reasoning_tokens=9,
        choices=["left", "<u>down</u>"],
        prompt_token_ids=[1, 2, 3],
        field_from_the_future={"nested": ["<svg onload=alert(1)>"]},
    )
    hostile.update(schema_version=2, error_budget_left=3)
    older = json.loads(lines[1])
    for key in ("agents", "policies", "num_rounds"):
        older.pop(key)
    for old_step in older["steps"]:
        for key in ("round", "index", "attempts", "latency_s"):
            old_step.pop(key, None)
    older["steps"][0]["reward"] = "a lot"
    torn = lines[-1][: len(lines[-1]) // 2]
    text = "\n".join([json.dumps(hostile), json.dumps(older), "this line is not JSON", "[1, 2]", *lines[2:-1], torn])
    (folder / "episodes.jsonl").write_text(text)  # no newline at the end: a torn write
    return {"hostile": hostile["episode_id"], "older": older["episode_id"], "lines": len(lines) + 2}
