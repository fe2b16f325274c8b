"""The docs' screenshots of ``tsmg view`` stay true: every section they show is still on its page.

``scripts/view_screenshots.py`` writes docs/view-*.png from runs it makes on the spot; its table
(``SHOTS``) lists each picture with its page and the CSS selectors of the sections it shows. This
test builds the same runs (2 training updates instead of 30), opens every listed page in headless
Chromium and checks that each section is there and visible, so a page that loses a section the
screenshot shows fails here; and it checks that the table and the docs name the same pictures.

Mutations that make it fail (tried): the configuration tab left out of the report
(``config_section`` returning ""); the search box dropped from the filter bar (view.js); the seat
table dropped from an episode's head (view.js ``seatTable`` not appended); the legend's runs not
drawn (curves.js); a docs/view-*.png referenced by view.md and missing from the table.
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from view_helpers import chromium

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("view_screenshots", ROOT / "scripts" / "view_screenshots.py")
assert _spec is not None and _spec.loader is not None
screenshots = importlib.util.module_from_spec(_spec)
sys.modules["view_screenshots"] = screenshots  # its dataclass looks its module up while the class is made
_spec.loader.exec_module(screenshots)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return screenshots.build_runs(tmp_path_factory.mktemp("screenshots"), updates=2)


@pytest.fixture(scope="module")
def driver():
    with chromium() as browser:
        yield browser


@pytest.mark.parametrize("shot", screenshots.SHOTS, ids=lambda shot: shot.file)
def test_every_section_a_screenshot_shows_is_on_its_page(shot, reports, driver):
    screenshots.open_shot(driver, shot, reports)
    assert screenshots.missing_sections(driver, shot) == [], f"{shot.file} shows sections its page no longer has"


def test_the_table_lists_exactly_the_view_screenshots_the_docs_show():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    shown = {name for page in pages for name in re.findall(r"\((?:docs/)?(view-[\w-]+\.png)\)", page.read_text())}
    listed = [shot.file for shot in screenshots.SHOTS]
    assert len(listed) == len(set(listed))
    assert shown == set(listed)
    for name in listed:
        size = (ROOT / "docs" / name).stat().st_size
        assert 0 < size < 300_000, f"docs/{name} is {size} bytes"
