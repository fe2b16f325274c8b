"""`tsmg view` without a browser: bad run folders still build, the data stays inert, training runs.

The browser half (the page really shows these things, and nothing in a transcript runs) is in
test_view_browser.py.
"""

import json
import shutil

import pytest
from view_helpers import SCRIPT, THINKING, damage

from tsmg.apps.cli import main
from tsmg.apps.evaluation import EvalConfig, run_eval
from tsmg.apps.view import build_report
from tsmg.apps.view.curves import curve_data
from tsmg.apps.view.data import script_literal
from tsmg.apps.view.records import normalise_episode, read_jsonl
from tsmg.apps.view.runs import open_run, recompute_summary

GAMES = ["FrozenLake-NoSlip-v0", "TicTacToe-v0"]


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("view-bad") / "clean"
    assert run_eval(EvalConfig(games=GAMES, models=["random", "oracle"], episodes=3), run).ok
    return run


@pytest.fixture(scope="module")
def bad_report(eval_run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("view-bad") / "damaged"
    what = damage(eval_run, folder)
    report = build_report([folder], folder / "view")
    return folder, report, what


def test_bad_run_folder_still_builds_and_lists_what_it_could_not_read(bad_report):
    folder, report, what = bad_report
    problems = {(p.file, p.line): p.message for p in report.problems[folder.name]}
    assert problems[("summary.json", None)].startswith("missing: figures recomputed")
    assert problems[("episodes.jsonl", 3)] == "not a JSON line: skipped"
    assert problems[("episodes.jsonl", 4)].startswith("a JSON list")
    assert problems[("episodes.jsonl", what["lines"])].startswith("truncated last line")
    assert len(problems) == 4
    # The clean episodes, the hostile one and the old one are all there; only the torn one is not.
    assert report.episodes == what["lines"] - 3
    assert report.flagged_episodes == 1  # the old one; the newer one only has fields shown as "other fields"
    page = report.index_html.read_text()
    assert "Figures recomputed from episodes.jsonl (no usable summary.json)." in page
    assert "truncated last line" in page and 'href="#browse?issues=1"' in page


def test_episode_records_of_other_versions_show_what_they_hold(bad_report):
    folder, report, what = bad_report
    episodes = list(open_run(folder).episodes())
    hostile = next(e for e in episodes if e["episode_id"] == what["hostile"])
    first = hostile["steps"][0]
    assert first["completion"] == SCRIPT and first["reasoning"] == THINKING and first["reasoning_tokens"] == 9
    assert first["choices"] == ["left", "<u>down</u>"] and first["token_counts"] == {"prompt_token_ids": 3}
    assert first["extra"] == {"field_from_the_future": '{"nested": ["<svg onload=alert(1)>"]}'}
    assert hostile["schema_version"] == "2" and hostile["extra"] == {"error_budget_left": "3"}
    older = next(e for e in episodes if e["episode_id"] == what["older"])
    assert any("missing agents, policies" in issue for issue in older["issues"])
    assert any("step 0: reward is not a finite number" in issue for issue in older["issues"])
    assert older["agents"] == list(older["returns"]) and older["policies"] == dict.fromkeys(older["agents"], "?")
    assert [step["index"] for step in older["steps"]] == list(range(len(older["steps"])))


def test_transcript_text_is_escaped_in_every_data_file(bad_report):
    _, report, _ = bad_report
    data = report.out_dir / "data"
    texts = {path.name: path.read_text() for path in data.iterdir()}
    assert any("\\u003cscript\\u003ewindow.__pwned" in text for text in texts.values())
    for name, text in texts.items():
        assert "<" not in text and ">" not in text, name
    assert "__pwned" not in report.index_html.read_text()


def test_script_literal_survives_every_separator_and_stays_json():
    value = {"text": "a\u2028b\u2029c</script>&<!--", "nan": float("nan"), "list": [float("inf"), 1.5]}
    literal = script_literal(value)
    assert not set("<>&\u2028\u2029") & set(literal)
    assert json.loads(literal) == {"text": "a\u2028b\u2029c</script>&<!--", "nan": None, "list": [None, 1.5]}


def test_missing_summary_is_recomputed_with_the_harness_statistics(eval_run, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(eval_run, folder)
    original = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").unlink()
    recomputed = recompute_summary(open_run(folder))

    def figures(summary):
        return [{k: v for k, v in row.items() if k != "timing"} for game in summary["games"] for row in game["rows"]]

    assert figures(recomputed) == figures(original)
    assert [game.get("head_to_head") for game in recomputed["games"]] == [
        game.get("head_to_head") for game in original["games"]
    ]


def test_read_jsonl_cuts_only_a_torn_last_line(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(b'{"a": 1}\n{"broken\n\n{"b": 2}\n{"c": 3')
    results = list(read_jsonl(path))
    assert [(line, value) for line, value, _ in results if value] == [(1, {"a": 1}), (4, {"b": 2})]
    assert [(p.line, p.message) for _, _, p in results if p] == [
        (2, "not a JSON line: skipped"),
        (5, "truncated last line (an interrupted write): skipped"),
    ]
    path.write_bytes(b'{"a": 1}\n{"complete": true}')  # a last line without newline that parses is kept
    assert [value for _, value, _ in read_jsonl(path)] == [{"a": 1}, {"complete": True}]
    path.write_bytes(b'{"a": "caf\xe9"}\n')
    [(_, value, _)] = list(read_jsonl(path))
    assert value["a"] == "caf\ufffd"
    assert normalise_episode(value, 1)["issues"][0] == "bytes that are not UTF-8 were replaced"


def test_normalise_episode_never_raises_on_wrong_types():
    raw = {
        "episode_id": 7,
        "game_id": "G",
        "seed": "twelve",
        "agents": ["a"],
        "policies": "nobody",
        "returns": {"a": "NaN"},
        "success": {"a": "yes"},
        "steps": [{"agent": "a", "observation": ["x"], "valid": "no", "prompt": [{"role": "user", "content": [1]}]}, 3],
        "terminated": 1,
    }
    episode = normalise_episode(raw, 9)
    assert episode["episode_id"] == "7" and episode["seed"] is None and episode["policies"] == {"a": "?"}
    assert episode["returns"] == {"a": None} and episode["success"] == {"a": None} and episode["terminated"] is False
    [step] = episode["steps"]
    assert step["observation"] == '["x"]' and step["valid"] is True and step["prompt"] == [["user", "[1]"]]
    assert len(episode["issues"]) == 9, episode["issues"]


def test_cli_refuses_what_is_not_a_run_in_one_sentence(tmp_path, capsys, eval_run):
    assert main(["view", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path / 'nowhere'} is not a folder: give a run folder made by `tsmg eval` or `tsmg train`"
    )
    (tmp_path / "empty").mkdir()
    assert main(["view", str(tmp_path / "empty")]) == 2
    assert "holds no episodes.jsonl, summary.json or metrics.jsonl" in capsys.readouterr().err
    assert main(["view", str(eval_run), str(eval_run)]) == 2
    assert "give its folder with --out" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    assert main(["view", str(eval_run), "--out", str(tmp_path / "taken")]) == 2
    assert "is not a tsmg view report" in capsys.readouterr().err
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    # The same folder twice, into a report folder built before: rebuilt in place, names kept apart.
    out = tmp_path / "both"
    assert main(["view", str(eval_run), str(eval_run), "--out", str(out), "--no-plots"]) == 0
    assert main(["view", str(eval_run), str(eval_run), "--out", str(out), "--no-plots"]) == 0
    meta = json.loads((out / "data" / "meta.js").read_text().removeprefix("tsmgMeta(").rstrip().removesuffix(");"))
    assert [run["name"] for run in meta["runs"]] == ["clean", f"{eval_run.parent.name}/clean"]


def test_training_run_report_has_curves_and_the_chosen_updates(tmp_path):
    pytest.importorskip("torch")
    from tests.small_lake import make_config
    from training.config import TrainConfig
    from training.trainer import base_model_source, train

    lake = {"rollout": {"game_id": "FrozenLake-v0"}, "model": {"spec": "tiny", "tiny": {"tokenizer_corpus": "prose"}}}
    model_dir = base_model_source(TrainConfig.model_validate(lake).model, tmp_path / "models", seed=0)
    # The trainer tests' 2x2 lake: 3 updates of 2 groups of 4, every update's episodes kept.
    config = make_config(
        tmp_path / "train",
        model_dir,
        rollout={"groups_per_update": 2},
        optim={"micro_batch_size": 8},
        run={"updates": 3, "episodes_every": 1, "eval_every": 3, "eval_episodes": 8},
    )
    train(config)
    run = tmp_path / "train"
    assert main(["view", str(run), "--updates", "1,3"]) == 0
    out = run / "view"
    meta = json.loads((out / "data" / "meta.js").read_text().removeprefix("tsmgMeta(").rstrip().removesuffix(");"))
    assert meta["runs"][0]["kind"] == "train" and meta["episodes"] == 2 * 8
    index = json.loads(
        (out / "data" / "index-000.js").read_text().removeprefix("tsmgIndex(0,").rstrip().removesuffix(");")
    )
    assert sorted({row[11] for row in index}) == [1, 3]  # the update column
    page = (out / "index.html").read_text()
    # The learning curves are data the page draws (data/curves.js), every metric of metrics.jsonl in it.
    assert '<div id="curves"' in page and not list((out / "plots").iterdir())
    curves = _script_value(out / "data" / "curves.js", "tsmgCurves(")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert curves["runs"] == ["train"]
    by_key = {metric["key"]: metric["series"] for metric in curves["metrics"]}
    success = {row["step"]: row["rollout/success_rate"] for row in rows if "rollout/success_rate" in row}
    [[number, steps, values]] = by_key["rollout/success_rate"]
    assert number == 0 and steps == [1, 2, 3] and values == [success[step] for step in steps]
    [[_, steps, _]] = by_key["eval/success_rate"]
    assert steps == [0, 3]  # held out before training and every 3rd update
    assert page.count('href="#browse?run=0&amp;game=FrozenLake-v0&amp;model=') == 2  # one link per stored update
    assert main(["view", str(run), "--updates", "1,x"]) == 2


def _script_value(path, callback):
    text = path.read_text()
    assert text.startswith(callback) and text.endswith(");\n")
    return json.loads(text[len(callback) : -3])


def test_curve_data_holds_each_runs_finite_metrics_by_update(tmp_path):
    runs = []
    for name, lines in {
        "a": [
            {"step": 2, "rollout/success_rate": 0.5, "loss/total": float("nan"), "note": "text", "z/custom": 3},
            {"step": 1, "rollout/success_rate": 0.25, "loss/total": 1.5, "flag": True},
            {"step": 2, "rollout/success_rate": 0.75},  # a resumed run wrote update 2 again: the last one counts
        ],
        "b": [{"step": 5, "a/custom": -1.0}, {"step": 6, "rollout/success_rate": 1}],
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        runs.append(open_run(tmp_path / name))
    data = curve_data(runs)
    assert data["runs"] == ["a", "b"]
    assert [(metric["key"], metric["series"]) for metric in data["metrics"]] == [
        ("rollout/success_rate", [[0, [1, 2], [0.25, 0.75]], [1, [6], [1.0]]]),
        ("loss/total", [[0, [1], [1.5]]]),
        ("a/custom", [[1, [5], [-1.0]]]),
        ("z/custom", [[0, [2], [3.0]]]),
    ]
    assert data["metrics"][0]["title"] == "success rate of the sampled training episodes"
    assert data["shown"] == 2  # the known metrics; the others are offered in a list
    assert curve_data([open_run(tmp_path / "b")])["shown"] == 1  # its one known metric
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "metrics.jsonl").write_text('{"step": 1, "x": 1}\n{"step": 2, "y": 2}\n')
    assert curve_data([open_run(tmp_path / "c")])["shown"] == 2  # none known: the first ones by name
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "metrics.jsonl").write_text('{"step": 1, "note": "no numbers"}\n')
    assert curve_data([open_run(tmp_path / "d")]) is None


def test_evaluation_curves_say_the_temperature_their_runs_evaluated_at(tmp_path):
    """The ``eval/`` charts' titles come from each run's ``run.eval_temperature`` (None: the rollouts')."""
    import yaml

    def run(name, eval_temperature, rollout_temperature=1.0):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "metrics.jsonl").write_text('{"step": 1, "eval/success_rate": 0.5, "rollout/success_rate": 0.25}\n')
        lap = {"temperature": rollout_temperature}
        config = {"run": {"eval_temperature": eval_temperature}, "rollout": {"lap": lap}}
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        return open_run(folder)

    def titles(*runs):
        return {metric["key"]: metric["title"] for metric in curve_data(list(runs))["metrics"]}

    greedy, hot, inherited = run("greedy", 0.0), run("hot", 0.7), run("inherited", None, 1.3)
    assert titles(greedy)["eval/success_rate"] == "success rate on held-out seeds (greedy)"
    assert titles(hot)["eval/success_rate"] == "success rate on held-out seeds (sampled at temperature 0.7)"
    assert titles(inherited)["eval/success_rate"].endswith("(sampled at temperature 1.3)")
    assert titles(greedy, hot)["eval/success_rate"].endswith("(greedy: greedy; hot: sampled at temperature 0.7)")
    assert titles(greedy)["rollout/success_rate"] == "success rate of the sampled training episodes"


def test_the_configuration_tab_sets_two_runs_side_by_side_differences_first(tmp_path):
    """Two real evaluations that differ in episodes and temperature: those keys head the table, marked."""
    import html
    import re

    from tsmg.apps.view.configs import differing_keys, flat_config

    for name, episodes, temperature in (("cold", 2, 0.0), ("warm", 3, 0.7)):
        command = ["eval", "--game", "TicTacToe-v0", "--model", "random", "--episodes", str(episodes)]
        assert main([*command, "--temperature", str(temperature), "--no-progress", "--out", str(tmp_path / name)]) == 0
    report = build_report([tmp_path / "cold", tmp_path / "warm"], tmp_path / "report", plots=False)
    text = report.index_html.read_text()
    assert '<a href="#config">Configuration</a>' in text
    section = text.split('<section id="config">', 1)[1].split("</section>", 1)[0]
    flats = [flat_config(json.loads((tmp_path / name / "config.json").read_text())) for name in ("cold", "warm")]
    differing = differing_keys(flats)
    assert "episodes" in differing and any(key.endswith("temperature") for key in differing)
    rows = re.findall(
        r'<tr class="differs"><td>([^<]*)</td><td><code>([^<]*)</code></td><td><code>([^<]*)</code>', section
    )
    assert [(key, html.unescape(a), html.unescape(b)) for key, a, b in rows] == [
        (key, flats[0].get(key, "—"), flats[1].get(key, "—")) for key in differing
    ]
    assert section.count("<tr><td>") == len(set(flats[0]) | set(flats[1])) - len(differing)  # the rest, once each
    assert f"{len(differing)} differ between them" in section


def test_serve_hands_out_the_report_on_loopback(bad_report):
    import threading
    import urllib.request

    from tsmg.apps.view.serve import make_server

    _, report, _ = bad_report
    server = make_server(report.out_dir, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/e-00000.js", timeout=10) as response:
            assert response.read() == (report.out_dir / "data" / "e-00000.js").read_bytes()
    finally:
        server.shutdown()
        server.server_close()


def _compact_run(tmp_path):
    """An episodes-only run whose model saw only the grid lines (the demo's compact view, for real)."""
    from tsmg.episode import write_episodes
    from tsmg.lap import LAP
    from tsmg.lm import Completion
    from tsmg.policies import CompactView
    from tsmg.rollout import rollout

    class Right:
        name = "right"

        def generate(self, requests, sampling):
            return [Completion(text="<action>right</action>") for _ in requests]

    run = tmp_path / "compact"
    run.mkdir()
    episodes = rollout("FrozenLake-v0", CompactView(LAP(Right()), "[_OPG]+"), seeds=[0])
    write_episodes(run / "episodes.jsonl", episodes)
    return run, episodes


def test_a_compact_view_shows_what_the_model_saw_first_and_the_full_state_second(tmp_path):
    """The issue's case: the observation block showed the whole text the model's prompt never held."""
    from tsmg.policies import compact_observation

    run, [episode] = _compact_run(tmp_path)
    build_report([run], tmp_path / "view", plots=False)
    chunk = (tmp_path / "view" / "data" / "e-00000.js").read_text()
    [shown] = json.loads(chunk[chunk.index("[") : chunk.rindex("]") + 1])
    for step, record in zip(shown["steps"], episode.steps, strict=True):
        seen = compact_observation(record.observation, "[_OPG]+")
        assert step["model_observation"] == seen and seen.count("\n") == 3  # the 4x4 grid
        assert seen in record.prompt[-1].content and record.observation not in record.prompt[-1].content
        assert step["observation"] == record.observation  # the full state is still shown, after it
    # Without a compact view the prompt holds the whole observation: one block, as before.
    plain = tmp_path / "plain"
    assert run_eval(EvalConfig(games=["FrozenLake-v0"], models=["random"], episodes=1), plain).ok
    build_report([plain], tmp_path / "plain-view", plots=False)
    assert "model_observation" not in (tmp_path / "plain-view" / "data" / "e-00000.js").read_text()
