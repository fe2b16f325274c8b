"""`tsmg view` in a real browser: a real eval run's report opened from disk in headless Chromium.

The run is made by the real harness: random, oracle and a fixed answer ("5", legal until the
centre is taken in tic-tac-toe, never legal in Frozen Lake, so invalid answers are a mix) on a
single-agent and a two-player game.
"""

import json

import pytest
from view_helpers import SCRIPT, THINKING, chromium, click_and_wait, damage, navigate, open_report, screenshot

from tsmg.cli import main
from tsmg.evaluation import EvalConfig, run_eval
from tsmg.view import build_report

GAMES = ["FrozenLake-NoSlip-v0", "TicTacToe-v0"]
MODELS = ["random", "oracle", "fixed:5"]


@pytest.fixture(scope="module")
def eval_report(tmp_path_factory):
    run = tmp_path_factory.mktemp("view") / "eval-run"
    result = run_eval(EvalConfig(games=GAMES, models=MODELS, episodes=3), run)
    assert result.ok
    assert main(["view", str(run)]) == 0
    episodes = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    return run, run / "view" / "index.html", episodes


@pytest.fixture(scope="module")
def driver():
    with chromium() as browser:
        yield browser


def invalid_steps(episodes, game=None, model=None):
    return {
        (episode["episode_id"], position)
        for episode in episodes
        for position, step in enumerate(episode["steps"])
        if not step["valid"]
        and (game is None or episode["game_id"] == game)
        and (model is None or episode["policies"][step["agent"]] == model)
    }


def percent(value):
    return f"{100 * value:.1f}%"


def test_summary_renders_every_game_and_model_with_wilson_intervals(eval_report, driver):
    run, index_html, _ = eval_report
    open_report(driver, index_html)
    summary = json.loads((run / "summary.json").read_text())
    table = driver.find_elements("css selector", "table.summary tbody tr")
    shown = [[cell.text for cell in row.find_elements("css selector", "td")] for row in table]
    expected = [row for game in summary["games"] for row in game["rows"]]
    assert len(shown) == len(expected) == len(GAMES) * len(MODELS)
    for cells, row in zip(shown, expected, strict=True):
        if row["game"] == "TicTacToe-v0":  # a win/draw/loss game: W/D/L per seat, no success rate
            outcomes, by_seat = row["outcomes"], row["outcomes_by_seat"]
            result = f"W/D/L {outcomes['wins']}/{outcomes['draws']}/{outcomes['losses']}"
            assert row["success_rate"] is None and cells[3].startswith(result + " (")
            assert all(f"{seat} {counts['wins']}/{counts['draws']}/{counts['losses']}" in cells[3]
                       for seat, counts in by_seat.items())  # fmt: skip
            assert ("forfeited" in cells[3]) == (outcomes["forfeits"] > 0)
            continue
        low, high = row["success_ci95"]
        assert cells[:4] == [
            row["game"],
            row["model"],
            str(row["episodes"]),
            f"{percent(row['success_rate'])} ({percent(low)}–{percent(high)})",
        ]
    # The head-to-head of the two-player game, and the harness's plots, loaded from disk.
    assert "TicTacToe-v0: head to head" in driver.find_element("css selector", "table.h2h caption").text
    images = driver.find_elements("css selector", ".plots img")
    assert len(images) == 3
    assert all(driver.execute_script("return arguments[0].naturalWidth", image) > 0 for image in images)
    # The Wilson bars were drawn by the script (CSSOM, allowed by the page's CSP).
    widths = driver.execute_script(
        "return [...document.querySelectorAll('.ci-range')].map(e => e.getBoundingClientRect().width)"
    )
    with_success = [row for row in expected if row["success_rate"] is not None]
    assert len(widths) == len(with_success) == len(MODELS) and all(width > 0 for width in widths)
    screenshot(driver, "view-summary.png")


def test_invalid_answer_filter_shows_exactly_the_invalid_steps(eval_report, driver):
    _, index_html, episodes = eval_report
    open_report(driver, index_html, "#browse")
    expected = invalid_steps(episodes)
    assert expected and len(expected) < sum(len(episode["steps"]) for episode in episodes)
    click_and_wait(driver, driver.find_element("css selector", "input[name=invalid]"))
    count = driver.find_element("css selector", "p.count")
    assert count.get_attribute("data-count") == str(len(expected))
    # Every page of the list, through its "next" link.
    seen = []
    while True:
        rows = driver.find_elements("css selector", "tr.invalid-row")
        seen += [(row.get_attribute("data-episode"), int(row.get_attribute("data-step"))) for row in rows]
        pager = driver.find_element("css selector", "nav.pager")
        if pager.get_attribute("data-page") == pager.get_attribute("data-pages"):
            break
        click_and_wait(driver, pager.find_element("css selector", "a.next"))
    assert len(seen) == len(set(seen)) and set(seen) == expected
    # Each row shows the answer and the game's reason, read from the lazily loaded chunk.
    by_id = {episode["episode_id"]: episode for episode in episodes}
    row = driver.find_elements("css selector", "tr.invalid-row")[-1]
    step = by_id[row.get_attribute("data-episode")]["steps"][int(row.get_attribute("data-step"))]
    assert row.find_element("css selector", "td.reason").text == step["reason"]
    assert row.find_element("css selector", "td.answer").text == step["completion"]

    # Narrowed to one game and one model (the drop-downs), still exactly the matching steps.
    navigate(driver, "#browse?invalid=1&game=TicTacToe-v0&model=fixed%3A5&size=500")
    rows = driver.find_elements("css selector", "tr.invalid-row")
    narrowed = {(row.get_attribute("data-episode"), int(row.get_attribute("data-step"))) for row in rows}
    assert narrowed == invalid_steps(episodes, "TicTacToe-v0", "fixed:5") and narrowed < expected
    # One seat: only that seat's invalid answers, whoever played it.
    navigate(driver, "#browse?invalid=1&game=TicTacToe-v0&seat=player_1&size=500")
    rows = driver.find_elements("css selector", "tr.invalid-row")
    seat = {(row.get_attribute("data-episode"), int(row.get_attribute("data-step"))) for row in rows}
    by_id = {episode["episode_id"]: episode for episode in episodes}
    assert seat and seat == {
        (episode_id, step)
        for episode_id, step in invalid_steps(episodes, "TicTacToe-v0")
        if by_id[episode_id]["steps"][step]["agent"] == "player_1"
    }


def test_episode_steps_appear_in_order(eval_report, driver):
    _, index_html, episodes = eval_report
    # A two-player episode with invalid answers: both seats' steps, in the recorded order.
    episode = next(
        e for e in episodes if e["game_id"] == "TicTacToe-v0" and e["invalid_answers"] and len(e["steps"]) > 4
    )
    open_report(driver, index_html, "#browse?game=TicTacToe-v0&size=500")
    link = driver.find_element("css selector", f"tr.episode-row[data-episode='{episode['episode_id']}'] a.open")
    click_and_wait(driver, link)
    cards = driver.find_elements("css selector", "article.step")
    assert [int(card.get_attribute("data-index")) for card in cards] == [step["index"] for step in episode["steps"]]
    for card, step in zip(cards, episode["steps"], strict=True):
        assert card.find_element("css selector", ".observation pre").text == step["observation"].rstrip("\n")
        assert (
            f"{step['agent']} ({episode['policies'][step['agent']]})"
            in card.find_element("css selector", "header").text
        )
        verdict = card.find_element("css selector", ".verdict").text
        if step["valid"]:
            assert verdict == f"✓ move: {step['parsed_action']}"
        else:
            assert "invalid" in card.get_attribute("class") and step["reason"] in verdict
    screenshot(driver, "view-episode.png")


def test_two_models_side_by_side_on_the_same_seed(eval_report, driver):
    _, index_html, episodes = eval_report
    first = next(e for e in episodes if e["game_id"] == "FrozenLake-NoSlip-v0" and e["policies"]["player"] == "random")
    other = next(
        e for e in episodes if e["seed"] == first["seed"] and e["game_id"] == first["game_id"] and e is not first
    )
    open_report(driver, index_html, "#browse?game=FrozenLake-NoSlip-v0&size=500")
    click_and_wait(driver, driver.find_element("css selector", f"tr[data-episode='{first['episode_id']}'] a.open"))
    offers = driver.find_elements("css selector", "ul.compare li")
    assert len(offers) == len(MODELS) - 1  # the same seed, played by each other model
    offer = next(item for item in offers if other["episode_id"] in item.text)
    click_and_wait(driver, offer.find_element("css selector", "a.side-by-side"))
    heads = [
        head.find_element("css selector", "h4").text for head in driver.find_elements("css selector", ".compare-head")
    ]
    assert heads == [first["episode_id"], other["episode_id"]]
    cells = driver.find_elements("css selector", ".compare-cell")
    left = [pre.text for cell in cells[0::2] for pre in cell.find_elements("css selector", ".observation pre")]
    right = [pre.text for cell in cells[1::2] for pre in cell.find_elements("css selector", ".observation pre")]
    assert left == [step["observation"].rstrip("\n") for step in first["steps"]]
    assert right == [step["observation"].rstrip("\n") for step in other["steps"]]
    # Both start from the same map.
    assert left[0] == right[0]
    screenshot(driver, "view-side-by-side.png")


def test_bad_run_report_marks_what_it_could_not_read_and_never_runs_transcript_text(eval_report, driver, tmp_path):
    run, _, _ = eval_report
    what = damage(run, tmp_path / "damaged")
    report = build_report([tmp_path / "damaged"], tmp_path / "report")
    open_report(driver, report.index_html, "#problems")
    panel = driver.find_element("css selector", "#problems").text
    assert "truncated last line (an interrupted write): skipped" in panel
    assert "summary.json: missing: figures recomputed from episodes.jsonl" in panel
    assert "1 episode(s) with missing or malformed fields" in panel

    # The episode whose answer is markup: shown as text, nothing of it runs or renders.
    navigate(driver, "#browse?size=500")
    row = driver.find_element("css selector", f"tr[data-episode='{what['hostile']}'] a.open")
    click_and_wait(driver, row)
    first = driver.find_element("css selector", "article.step")
    assert first.find_element("css selector", ".answer pre").text == SCRIPT
    assert first.find_element("css selector", ".thinking pre").text == THINKING  # the thinking, apart
    assert first.find_element("css selector", ".thinking h5").get_attribute("textContent") == "Thinking (9 tokens)"
    assert first.find_element("css selector", ".verdict .reason").text == "<i>not a move</i>"
    assert first.find_element("css selector", ".choices").text == "offered: left | <u>down</u>"
    assert driver.execute_script("return window.__pwned") is None
    # No element made from transcript text: no image, SVG, underline or italics, nothing inside a <pre>.
    assert driver.execute_script("return document.querySelectorAll('img[src=x], svg, u, i, pre *').length") == 0
    extra = first.find_element("css selector", "details.extra")
    assert extra.find_element("css selector", "summary").text == "Other fields (1, not known to this viewer)"
    assert extra.get_attribute("textContent").endswith('field_from_the_future{"nested": ["<svg onload=alert(1)>"]}')
    screenshot(driver, "view-bad-input.png")

    # The older record: marked, with what could not be read, and its steps still shown.
    navigate(driver, "#browse?issues=1")
    rows = driver.find_elements("css selector", "tr.episode-row")
    assert [r.get_attribute("data-episode") for r in rows] == [what["older"]]
    click_and_wait(driver, rows[0].find_element("css selector", "a.open"))
    issues = driver.find_element("css selector", ".issues").text
    assert "missing agents, policies (an older or foreign record)" in issues
    assert "step 0: reward is not a finite number" in issues
    assert len(driver.find_elements("css selector", "article.step")) > 0
    assert driver.execute_script("return window.__pwned") is None


def test_a_compact_views_step_shows_what_the_model_saw_then_the_full_state(driver, tmp_path):
    from test_view import _compact_run

    run, [episode] = _compact_run(tmp_path)
    assert main(["view", str(run)]) == 0
    open_report(driver, run / "view" / "index.html", "#browse?size=500")
    click_and_wait(driver, driver.find_element("css selector", "tr.episode-row a.open"))
    for card, step in zip(driver.find_elements("css selector", "article.step"), episode.steps, strict=True):
        blocks = card.find_elements("css selector", ".observation")
        assert [block.find_element("css selector", "h5").get_attribute("textContent") for block in blocks] == [
            "Observation the model saw (the lines its prompt held)",
            "Full game state (more than the model saw)",
        ]
        seen, full = (block.find_element("css selector", "pre").text for block in blocks)
        assert seen == "\n".join(line for line in step.observation.splitlines() if set(line) <= set("_OPG"))
        assert full == step.observation.rstrip("\n") and seen in step.prompt[-1].content
    screenshot(driver, "view-compact-observation.png")


def test_a_two_player_episode_shows_each_seats_win_draw_or_loss(eval_report, driver):
    _, index_html, episodes = eval_report
    # fixed:5 against the oracle forfeits once cell 5 is taken: its loss and the oracle's win are named.
    pair = {"oracle", "fixed:5"}
    episode = next(e for e in episodes if e["game_id"] == "TicTacToe-v0" and set(e["policies"].values()) == pair)
    open_report(driver, index_html, "#browse?game=TicTacToe-v0&size=500")
    link = driver.find_element("css selector", f"tr.episode-row[data-episode='{episode['episode_id']}'] a.open")
    click_and_wait(driver, link)
    rows = driver.find_elements("css selector", "table.seats tbody tr")
    cells = [[cell.text for cell in row.find_elements("css selector", "td")] for row in rows]
    shown = {model: result for _, model, _, result in cells}
    assert shown == {"oracle": "win (by forfeit)", "fixed:5": "loss (forfeited)"}
