"""`tsmg view` in a real browser: a real eval run's report opened from disk in headless Chromium.

The run is made by the real harness: random, oracle and a fixed answer ("5", legal until the
centre is taken in tic-tac-toe, never legal in Frozen Lake, so invalid answers are a mix) on a
single-agent and a two-player game.
"""

import json
import math

import pytest
from view_helpers import (
    SCRIPT,
    THINKING,
    chromium,
    click_and_wait,
    damage,
    navigate,
    open_report,
    screenshot,
    wait_for_view,
    wait_until,
)

from tsmg.apps.cli import main
from tsmg.apps.evaluation import EvalConfig, run_eval
from tsmg.apps.evaluation.report import comparison_rows, result_text
from tsmg.apps.view import build_report

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


# ---------------------------------------------------------------------------------------------
# Several runs in one report: the model × game table across eval runs, two training runs'
# curves overlaid, and text search over the transcripts.

SEARCHED = "ALREADY taken by o"  # in the reasons of tic-tac-toe's invalid answers, in another case


def write_training_run(folder, phase, updates):
    """A training run folder holding only its metrics: success rate every update, held-out every 5th."""
    folder.mkdir(parents=True)
    rows = []
    for step in range(1, updates + 1):
        row = {"step": step, "rollout/success_rate": round(0.5 + 0.4 * math.sin(step / 3 + phase), 4)}
        row["loss/total"] = round(1.5 / step + phase, 5)
        row["optim/lr"] = 1e-5
        if step % 5 == 0:
            row["eval/success_rate"] = round(step / (updates + 5), 4)
        rows.append(row)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def matching_steps(episodes, text):
    """(episode id, step position) of every step whose texts hold ``text``, in any case: what the search reads."""
    fields = ("completion", "action", "parsed_action", "reason", "reasoning", "observation")
    return {
        (episode["episode_id"], position)
        for episode in episodes
        for position, step in enumerate(episode["steps"])
        if any(text.lower() in (step.get(field) or "").lower() for field in fields)
        or any(text.lower() in message["content"].lower() for message in step.get("prompt") or [])
    }


def ema(values, weight):
    smoothed, last = [], values[0]
    for value in values:
        last = weight * last + (1 - weight) * value
        smoothed.append(last)
    return smoothed


@pytest.fixture(scope="module")
def runs_report(eval_report, tmp_path_factory):
    run, _, episodes = eval_report
    folder = tmp_path_factory.mktemp("view-runs")
    other = folder / "eval-random"
    assert run_eval(EvalConfig(games=["FrozenLake-NoSlip-v0"], models=["random"], episodes=2, seed=7), other).ok
    metrics = {
        "train-a": write_training_run(folder / "train-a", 0.0, 20),
        "train-b": write_training_run(folder / "train-b", 1.0, 16),
    }
    report = build_report([run, other, folder / "train-a", folder / "train-b"], folder / "report", plots=False)
    return report, [run, other], metrics, episodes


def test_the_model_by_game_table_holds_every_eval_runs_rows_by_game(runs_report, driver):
    report, eval_runs, _, _ = runs_report
    open_report(driver, report.index_html, "#summary")
    summaries = [(path.name, json.loads((path / "summary.json").read_text())) for path in eval_runs]
    rows = comparison_rows(summaries)  # the figures `tsmg report` prints
    expected = [row for game in ("FrozenLake-NoSlip-v0", "TicTacToe-v0") for row in rows if row["game"] == game]
    table = driver.find_element("css selector", "table.summary")
    header = [th.text for th in table.find_elements("css selector", "thead th")]
    assert header[:4] == ["run", "game", "model", "episodes"]
    shown = [
        [td.text for td in row.find_elements("css selector", "td")]
        for row in table.find_elements("css selector", "tbody tr")
    ]
    assert [cells[:4] for cells in shown] == [
        [row["run"], row["game"], row["model"], str(row["episodes"])] for row in expected
    ]
    assert [cells[4] for cells in shown] == [result_text(row) for row in expected]
    assert len(driver.find_elements("css selector", "table.summary")) == 1  # one table, not one per run
    # Each row's transcript link opens that run's episodes of that model and game.
    link = table.find_elements("css selector", "tbody tr")[3].find_element("css selector", "a.browse")
    click_and_wait(driver, link)
    episodes = driver.find_elements("css selector", "tr.episode-row")
    assert len(episodes) == 2 and all("eval-random" in row.text for row in episodes)


def test_two_training_runs_overlaid_with_hover_smoothing_legend_and_zoom(runs_report, driver):
    from selenium.webdriver import ActionChains

    report, _, metrics, _ = runs_report
    open_report(driver, report.index_html, "#training")
    wait_until(lambda: driver.execute_script("return document.getElementById('curves').dataset.status") == "ready")
    charts = driver.find_elements("css selector", "figure.chart")
    assert [chart.get_attribute("data-metric") for chart in charts] == [
        "rollout/success_rate", "eval/success_rate", "loss/total", "optim/lr"
    ]  # fmt: skip
    chart = charts[0]
    lines = chart.find_elements("css selector", "path.series:not(.raw)")
    assert sorted(line.get_attribute("data-run") for line in lines) == ["0", "1"]  # both runs in one chart
    overlay = chart.find_element("css selector", "rect.overlay")
    svg = chart.find_element("css selector", "svg")

    def hover(step):
        x0, x1 = float(svg.get_attribute("data-x0")), float(svg.get_attribute("data-x1"))
        width = overlay.rect["width"]
        offset = (step - x0) / (x1 - x0) * width - width / 2
        ActionChains(driver).move_to_element_with_offset(overlay, round(offset), 0).perform()
        readout = chart.find_element("css selector", ".readout")
        wait_until(lambda: readout.get_attribute("data-step") == str(step), what=f"the readout of update {step}")
        return {
            int(item.get_attribute("data-run")): item
            for item in readout.find_elements("css selector", "li.value")
        }  # fmt: skip

    def values(name, key="rollout/success_rate"):
        return {row["step"]: row[key] for row in metrics[name] if key in row}

    a, b = values("train-a"), values("train-b")
    shown = hover(7)
    assert float(shown[0].find_element("css selector", ".raw").text) == pytest.approx(a[7], rel=1e-3)
    assert float(shown[1].find_element("css selector", ".raw").text) == pytest.approx(b[7], rel=1e-3)
    assert a[7] != b[7]
    # The hover dots sit where the axes put update 7 and each run's value (read back through the tick labels).
    x0, x1 = float(svg.get_attribute("data-x0")), float(svg.get_attribute("data-x1"))
    left, width = (float(overlay.get_attribute(name)) for name in ("x", "width"))
    labels = chart.find_elements("css selector", "text.y-tick")
    (low, low_y), (high, high_y) = (
        (float(label.text), float(label.get_attribute("y"))) for label in (labels[0], labels[-1])
    )
    dots = chart.find_elements("css selector", "g.hover circle")
    for dot, value in zip(dots, (a[7], b[7]), strict=True):
        assert float(dot.get_attribute("cx")) == pytest.approx(left + (7 - x0) / (x1 - x0) * width, abs=0.01)
        read = low + (float(dot.get_attribute("cy")) - low_y) / (high_y - low_y) * (high - low)
        assert read == pytest.approx(value, abs=1e-3)
    # Past the end of the shorter run: the longer one's value, and a dash for the other.
    shown = hover(19)
    assert float(shown[0].find_element("css selector", ".raw").text) == pytest.approx(a[19], rel=1e-3)
    assert shown[1].find_element("css selector", ".raw").text == "—"

    # Smoothing: the readout gives the moving average next to the raw value.
    slider = driver.find_element("css selector", "input[name=smoothing]")
    driver.execute_script("arguments[0].value = '0.6'; arguments[0].dispatchEvent(new Event('input'));", slider)
    shown = hover(7)
    smoothed = ema([a[step] for step in sorted(a)], 0.6)[sorted(a).index(7)]
    assert float(shown[0].find_element("css selector", ".ema").text) == pytest.approx(smoothed, rel=1e-3)
    assert smoothed != pytest.approx(a[7], rel=1e-2)
    assert len(chart.find_elements("css selector", "path.series.raw")) == 2  # the raw lines stay, faint

    # The legend hides a run in every chart.
    driver.find_element("css selector", ".legend-run[data-run='1'] input").click()
    for each in driver.find_elements("css selector", "figure.chart"):
        assert {line.get_attribute("data-run") for line in each.find_elements("css selector", "path.series")} == {"0"}
    assert list(hover(7)) == [0]
    driver.find_element("css selector", ".legend-run[data-run='1'] input").click()

    # Zoom: a drag from update 5 to 15, then the wheel, then reset.
    width = overlay.rect["width"]
    actions = ActionChains(driver).move_to_element_with_offset(overlay, round(-width / 2 + (5 - 1) / 19 * width), 0)
    actions.click_and_hold().move_by_offset(round(10 / 19 * width), 0).release().perform()
    domain = [float(svg.get_attribute(name)) for name in ("data-x0", "data-x1")]
    assert domain == pytest.approx([5, 15], abs=0.2)
    ticks = [float(tick.text) for tick in chart.find_elements("css selector", "text.x-tick")]
    assert 5 <= min(ticks) and max(ticks) <= 15
    shown = hover(11)  # values are still read off the zoomed chart
    assert float(shown[0].find_element("css selector", ".raw").text) == pytest.approx(a[11], rel=1e-3)
    driver.execute_script(
        "const box = arguments[0].getBoundingClientRect();"
        "arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: box.left + box.width / 2,"
        " clientY: box.top + 5, bubbles: true, cancelable: true}));",
        overlay,
    )
    zoomed = [float(svg.get_attribute(name)) for name in ("data-x0", "data-x1")]
    assert zoomed[1] - zoomed[0] == pytest.approx(0.8 * (domain[1] - domain[0]), rel=1e-6)
    chart.find_element("css selector", "button.reset-zoom").click()
    assert [svg.get_attribute(name) for name in ("data-x0", "data-x1")] == ["1", "20"]
    screenshot(driver, "view-curves.png")


def test_text_search_lists_every_matching_step_and_opens_it_highlighted(runs_report, driver):
    from selenium.webdriver.common.keys import Keys

    report, _, _, episodes = runs_report
    open_report(driver, report.index_html, "#browse")
    expected = matching_steps(episodes, SEARCHED)
    assert 0 < len(expected) < sum(len(episode["steps"]) for episode in episodes)
    box = driver.find_element("css selector", "input[name=q]")
    box.send_keys(SEARCHED)
    driver.execute_script("document.getElementById('browser').dataset.status = 'moving';")
    box.send_keys(Keys.ENTER)
    wait_for_view(driver)
    hits = driver.find_elements("css selector", "li.search-hit")
    found = {(hit.get_attribute("data-episode"), int(hit.get_attribute("data-step"))) for hit in hits}
    assert found == expected and len(hits) == len(expected)
    assert driver.find_element("css selector", "p.count").get_attribute("data-count") == str(len(expected))
    marks = driver.find_elements("css selector", "li.search-hit mark")
    assert marks and all(mark.text.lower() == SEARCHED.lower() for mark in marks)
    # Narrowed by the filters: the search reads only what the selected seat played.
    navigate(driver, "#browse?q=taken&game=TicTacToe-v0&seat=player_0")
    narrowed = {
        (hit.get_attribute("data-episode"), int(hit.get_attribute("data-step")))
        for hit in driver.find_elements("css selector", "li.search-hit")
    }
    everywhere = matching_steps(episodes, "taken")
    by_id = {episode["episode_id"]: episode for episode in episodes}
    assert narrowed == {(id_, step) for id_, step in everywhere if by_id[id_]["steps"][step]["agent"] == "player_0"}
    assert narrowed and narrowed < everywhere

    # A result opens its episode at that step, the searched text marked.
    hit = driver.find_elements("css selector", "li.search-hit")[-1]
    episode_id, step = hit.get_attribute("data-episode"), int(hit.get_attribute("data-step"))
    click_and_wait(driver, hit.find_element("css selector", "a.open"))
    assert driver.find_element("css selector", ".episode").get_attribute("data-episode") == episode_id
    card = driver.find_element("css selector", "article.step.highlighted")
    assert int(card.get_attribute("data-step")) == step
    marks = card.find_elements("css selector", "mark")
    assert marks and all(mark.text.lower() == "taken" for mark in marks)
    assert by_id[episode_id]["steps"][step]["reason"] in card.find_element("css selector", ".verdict .reason").text
    screenshot(driver, "view-search.png")
    # Back to the results (at the top of the page): the search is kept in the link.
    driver.execute_script("window.scrollTo(0, 0)")
    click_and_wait(driver, driver.find_element("css selector", "a.back"))
    assert len(driver.find_elements("css selector", "li.search-hit")) == len(narrowed)
    assert driver.find_element("css selector", "input[name=q]").get_attribute("value") == "taken"


def test_a_long_run_is_drawn_with_a_few_points_per_pixel_and_keeps_its_extremes(driver, tmp_path):
    run = tmp_path / "long"
    run.mkdir()
    updates = 5000
    values = [0.5 + 0.1 * math.sin(step / 50) for step in range(updates)]
    values[1234], values[3210] = 3.0, -2.0  # one update each far above and below the rest
    lines = (json.dumps({"step": step, "loss/total": value}) for step, value in enumerate(values))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    report = build_report([run], tmp_path / "report", plots=False)
    open_report(driver, report.index_html, "#training")
    wait_until(lambda: driver.execute_script("return document.getElementById('curves').dataset.status") == "ready")
    chart = driver.find_element("css selector", "figure.chart[data-metric='loss/total']")
    path = chart.find_element("css selector", "path.series").get_attribute("d")
    points = [tuple(map(float, point.split(","))) for point in path[1:].split("L")]
    width = float(chart.find_element("css selector", "rect.overlay").get_attribute("width"))
    assert len(points) <= 4 * (width + 1) < updates
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    # The spikes are drawn: the line reaches the y of 3.0 and of -2.0 (read through the tick labels).
    labels = chart.find_elements("css selector", "text.y-tick")
    (low, low_y), (high, high_y) = (
        (float(label.text), float(label.get_attribute("y"))) for label in (labels[0], labels[-1])
    )
    values_drawn = [low + (y - low_y) / (high_y - low_y) * (high - low) for _, y in points]
    assert max(values_drawn) == pytest.approx(3.0, abs=0.02) and min(values_drawn) == pytest.approx(-2.0, abs=0.02)
