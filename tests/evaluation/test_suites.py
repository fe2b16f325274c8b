"""Versioned suites: a fixed plan against a fixed opponent, each model scored between random play (0) and MCTS (1)."""

import dataclasses
import json
import math
from pathlib import Path

import pytest

import tsmg.apps.evaluation.suites as suites
from tsmg.apps.cli import main
from tsmg.apps.evaluation import EvalConfig, plan_evaluation, run_eval
from tsmg.apps.evaluation.plan import opponent_label
from tsmg.apps.evaluation.suites import SUITES, Suite, game_score, get_suite, references, score_summary
from tsmg.episode import read_episodes
from tsmg.registry import make

SUITE = get_suite("openspiel-small-v1")

#: Each shipped suite's fingerprint. A suite is never changed in place: a change is a new version.
PINNED = {"openspiel-small-v1": "16504471e0579588", "openspiel-small-v2": "cb6cdffe0cacf094"}


def test_a_suite_is_never_changed_in_place():
    found = {name: suite.fingerprint() for name, suite in SUITES.items()}
    assert found == PINNED, (
        "a shipped suite changed: restore it, and add the change as NAME-v(N+1) (pin its fingerprint here and "
        "measure its references with python bench/suite_reference.py --suite NAME-v(N+1) --write)"
    )
    assert all(name.rpartition("-v")[2].isdigit() for name in SUITES)


def test_v1_stays_on_the_raw_text_and_v2_reads_the_readable_one():
    """A field added at its default is left out of the fingerprint: v1's fingerprint and references stay."""
    v1, v2 = get_suite("openspiel-small-v1"), get_suite("openspiel-small-v2")
    assert v1.view == "raw" and v2.view == "full" and v1.games == v2.games
    assert dataclasses.replace(v1, view="full").fingerprint() not in (v1.fingerprint(), PINNED["openspiel-small-v1"])
    assert suites.reference_config(v1).game_options == {game: {"view": "raw"} for game in v1.games}
    first, _ = make(v1.games[0], **v1.game_options()[v1.games[0]]).reset(seed=0)
    assert first["player_0"].startswith("OpenSpiel game tic_tac_toe. You are player_0")


def test_the_ten_games_span_families_and_mcts_beats_random_on_each():
    assert len(SUITE.games) == 10 and len(set(SUITE.games)) == 10
    families = {_family(game) for game in SUITE.games}
    assert {"board", "dice", "card", "single-player"} <= families
    stored = references(SUITE)
    assert stored is not None, "measure them: python bench/suite_reference.py --suite openspiel-small-v1 --write"
    assert set(stored["random"]) == set(stored["reference"]) == set(stored["turns"]) == set(SUITE.games)
    assert all(stored["reference"][game] > stored["random"][game] for game in SUITE.games)
    assert stored["command"] == "python bench/suite_reference.py --suite openspiel-small-v1 --write"
    assert SUITE.reference_label == "openspiel-mcts (simulations=100)"


def _family(game_id):
    from tsmg.adapters.openspiel import family

    return family(make(game_id).pyspiel_game)


def test_a_changed_definition_has_no_references_and_so_no_score():
    changed = dataclasses.replace(SUITE, episodes=SUITE.episodes + 1)
    assert changed.fingerprint() != SUITE.fingerprint() and references(changed) is None
    assert dataclasses.replace(SUITE, description="other words").fingerprint() == SUITE.fingerprint()
    games = [{"game": SUITE.games[0], "rows": [_row(SUITE.games[0], "m", 1.0, 0.1)]}]
    assert (
        score_summary(changed, games, ["m"])["scores"]["m"]["score"] is None
        and "suite_score" not in games[0]["rows"][0]
    )


def _row(game, model, mean_return, stderr, outcomes=None):
    row = {"game": game, "model": model, "episodes": 10, "mean_return": mean_return, "return_stderr": stderr}
    return row | ({"outcomes": outcomes} if outcomes else {})


def test_each_game_is_normalised_between_random_and_the_reference_and_the_suite_score_is_their_mean(monkeypatch):
    suite = Suite(name="demo-v1", description="two games", games=("A-v0", "B-v0"), episodes=10)
    stored = {"random": {"A-v0": -1.0, "B-v0": 2.0}, "reference": {"A-v0": 1.0, "B-v0": 6.0}, "turns": {}}
    stored |= {"fingerprint": suite.fingerprint(), "command": "c", "date": "d", "commit": "x"}
    monkeypatch.setattr(suites, "_stored_references", lambda: {"demo-v1": stored})
    wins = {"wins": 3, "draws": 1, "losses": 6}
    games = [
        {"game": "A-v0", "rows": [_row("A-v0", "half", 0.0, 0.2, wins), _row("A-v0", "rand", -1.0, 0.2, wins)]},
        {"game": "B-v0", "rows": [_row("B-v0", "half", 6.0, 0.4), _row("B-v0", "rand", 2.0, 0.4)]},
    ]
    games[0]["rows"].append(_row("A-v0", "partial", 1.0, 0.0))
    section = score_summary(suite, games, ["half", "rand", "partial"])
    half, rand, partial = (section["scores"][model] for model in ("half", "rand", "partial"))
    assert [row["suite_score"] for row in games[0]["rows"]] == [0.5, 0.0, 1.0]
    assert [row["suite_score"] for row in games[1]["rows"]] == [1.0, 0.0]
    assert games[0]["rows"][0]["suite_score_stderr"] == pytest.approx(0.1)  # 0.2 over the gap of 2
    assert games[1]["rows"][0]["suite_score_stderr"] == pytest.approx(0.1)  # 0.4 over the gap of 4
    assert half["score"] == pytest.approx(0.75) and half["stderr"] == pytest.approx(math.sqrt(0.02) / 2)
    assert rand["score"] == 0.0 and half["outcomes"] == wins and half["games"] == 2
    assert partial["score"] is None and partial["games"] == 1  # a game not played: no suite score
    assert section["reference"] == "openspiel-mcts" and section["references"] == {
        "command": "c",
        "date": "d",
        "commit": "x",
    }
    assert game_score(3.0, random_return=1.0, reference_return=5.0) == 0.5


def test_with_an_opponent_each_model_takes_every_seat_and_the_opponents_seats_are_never_its_own(tmp_path):
    config = EvalConfig(games=["TicTacToe-v0"], models=["random", "oracle"], episodes=3, opponent="random")
    seats = {planned.seats for planned in plan_evaluation(config)}
    label = opponent_label("random")
    assert seats == {
        (("player_0", "random"), ("player_1", label)),
        (("player_0", label), ("player_1", "random")),
        (("player_0", "oracle"), ("player_1", label)),
        (("player_0", label), ("player_1", "oracle")),
    }
    result = run_eval(config, tmp_path / "run", write_report=False)
    rows = {row["model"]: row for row in result.summary["games"][0]["rows"]}
    assert rows["random"]["episodes"] == rows["oracle"]["episodes"] == 6  # its own seats, not the opponent's
    assert set(result.summary["games"][0]["ratings"]) == {"random", "oracle", label}
    assert json.loads((tmp_path / "run" / "config.json").read_text())["opponent"] == "random"


def test_the_suite_on_the_command_line_random_scores_zero_in_every_table(tmp_path, capsys):
    """The whole suite played by random (every game's return is random play's reference: each game scores 0)."""
    out = tmp_path / "suite"
    assert main(["eval", "--suite", SUITE.name, "--model", "random", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["suite"] == SUITE.name and summary["config"]["episodes"] == SUITE.episodes
    entry = summary["suite"]["scores"]["random"]
    assert entry["score"] == 0.0 and entry["games"] == 10 and entry["stderr"] > 0
    rows = [row for game in summary["games"] for row in game["rows"]]
    assert [row["suite_score"] for row in rows] == [0.0] * 10
    two_seats = next(row for row in rows if row["game"] == "OpenSpiel/tic_tac_toe-v0")
    assert two_seats["episodes"] == 2 * SUITE.episodes  # each seat in turn against the opponent
    wdl = entry["outcomes"]
    total = f"| **{SUITE.name}** (all games) | random | {sum(row['episodes'] for row in rows)} | "
    total += f"W/D/L {wdl['wins']}/{wdl['draws']}/{wdl['losses']} | — | — | — | — | — | **0.000 ± "
    assert total in printed and "| suite score (random 0, MCTS 1) |" in printed.splitlines()[0]
    assert "| OpenSpiel/tic_tac_toe-v0 | random | 60 | W/D/L " in printed
    assert printed.splitlines()[2].startswith(f"| **{SUITE.name}**")  # the score first, then the games
    episode = next(iter(read_episodes(out / "episodes.jsonl")))
    assert set(episode.policies.values()) == {"random", opponent_label("random")}

    assert main(["report", str(out)]) == 0
    assert f"| suite | **{SUITE.name}** (all games) | random |" in capsys.readouterr().out
    assert main(["report", str(out), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    [total_row] = [row for row in merged["rows"] if row.get("suite")]
    # random against random (the opponent) is self-play: no pairwise result, nothing pooled
    assert merged["pooled_rating"] == []
    assert total_row["suite_score"] == 0.0 and total_row["outcomes"] == wdl

    assert main(["view", str(out)]) == 0
    html = (out / "view" / "index.html").read_text()
    assert "<th>suite score (random 0, MCTS 1)</th>" in html
    assert f'<tr class="suite-total"><td><strong>{SUITE.name}</strong> (all games)</td><td>random</td>' in html
    assert f"W/D/L {wdl['wins']}/{wdl['draws']}/{wdl['losses']}" in html


def test_a_run_of_no_suite_keeps_its_table_and_config(tmp_path, capsys):
    assert (
        main(["eval", "--game", "TicTacToe-v0", "--model", "random", "--episodes", "2", "--out", str(tmp_path / "r")])
        == 0
    )
    assert "suite score" not in capsys.readouterr().out
    assert not {"suite", "opponent"} & set(json.loads((tmp_path / "r" / "config.json").read_text()))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--suite", "openspiel-small-v9"], "Did you mean openspiel-small-v2 or openspiel-small-v1?"),
        (["--suite", "openspiel-small-v1", "--episodes", "5"], "drop --episodes (a changed suite is a new suite"),
        (["--suite", "openspiel-small-v1", "--seed", "0", "--game", "TicTacToe-v0"], "drop --game, --seed"),
        ([], "tsmg eval needs --game ID (repeatable) or --suite NAME"),
    ],
)
def test_bad_suite_arguments_get_one_sentence(arguments, message, capsys, tmp_path):
    assert main(["eval", "--model", "random", "--out", str(tmp_path / "x"), *arguments]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and not (tmp_path / "x").exists()


def test_the_dry_run_of_a_suite_plans_the_turns_its_reference_run_took(capsys):
    spec = "openai:gpt-4o-mini"
    args = ["eval", "--suite", SUITE.name, "--model", spec, "--price", f"{spec}=0.15,0.6", "--dry-run"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    stored = references(SUITE)
    seats = {game: 1 if game == "OpenSpiel/catch-v0" else 3 if "oh_hell" in game else 2 for game in SUITE.games}
    turns = sum(SUITE.episodes * seats[game] * math.ceil(stored["turns"][game]) for game in SUITE.games)
    assert f"model turns: about {turns:,} (as many turns a seat as random play and MCTS took" in printed
    assert (
        "estimated cost: $" in printed
        and f"{sum(SUITE.episodes * n for n in seats.values())} episodes planned" in printed
    )


@pytest.mark.parametrize(
    ("name", "columns"), [("openspiel-small-v1", slice(3, 5)), ("openspiel-small-v2", slice(1, 3))]
)
def test_the_docs_table_holds_the_stored_references(name, columns):
    """docs/suites.md quotes each game's two reference returns in the suite's section: the ones the scores use."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "suites.md").read_text(encoding="utf-8")
    section = page.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
    suite = get_suite(name)
    stored = references(suite)
    for game in suite.games:
        [line] = [line for line in section.splitlines() if line.startswith(f"| `{game}` |")]
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[columns] == [f"{stored['random'][game]:+.3f}", f"{stored['reference'][game]:+.3f}"], line
