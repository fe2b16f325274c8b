"""Nothing breaks for existing users: a fixed-seed training run and evaluation write the same records as before.

The reference (``tests/data/identical-runs.json.gz``) holds the records the code before issue 25's
restructuring (main at bb20da2) wrote, normalised by :func:`identical_runs.normalise` (wall times,
the scratch folder's path, the episode schema version, the fields schemas 4 to 7 added and the
metrics added since, ``identical_runs.ADDED_METRICS``, left out; nothing else). Every text, token,
action and count must be the same, every float within a relative 1e-5
(:func:`identical_runs.differences`): float32 kernels round differently in the 7th digit from one
CPU to another (the reference was rewritten from bb20da2's code on a CPU with AMX, where that code
and today's wrote byte-identical records; the first reference, from a CPU without AMX, differed
from them only there). Schema 4 only added fields (the temperature each model step was sampled at,
whether its log-probabilities are the trainer's, whether it trains, the seats the model played), and
so did schema 5 (the episode's influence graphs): the test checks their values on their own.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tsmg.episode import SCHEMA_VERSION, read_episodes

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("identical_runs", ROOT / "scripts" / "identical_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["identical_runs"] = module
    spec.loader.exec_module(module)
    return module


def test_demo_training_and_eval_write_the_records_of_the_reference(tmp_path, monkeypatch):
    """Five demo updates and a 16-episode eval of their model: every record as the reference has it."""
    pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    script = _load_script()
    runs = script.run_both(tmp_path)
    assert script.differences(script.records(tmp_path, runs), script.read_reference()) == []
    # What schema 4 added: training records say how each step was sampled and that it trains (one
    # seat, every step credited); an evaluation's records are no training records.
    trained = list(read_episodes(runs["demo"] / "episodes.jsonl"))
    assert {episode.schema_version for episode in trained} == {SCHEMA_VERSION}
    assert all(episode.model_seats == ["player"] for episode in trained)
    assert all(episode.influence == {} for episode in trained)  # FrozenLake keeps no influence graph
    steps = [step for episode in trained for step in episode.steps]
    assert {(step.temperature, step.exact_logprobs, step.trains) for step in steps} == {(1.0, True, True)}
    # Added since: the share of padding in the training micro-batches (sorted by length), a fraction.
    metrics = [json.loads(line) for line in (runs["demo"] / "metrics.jsonl").read_text().splitlines()]
    shares = [row["optim/padding_share"] for row in metrics if "optim/padding_share" in row]
    assert shares and all(0.0 <= share < 0.5 for share in shares)  # logged by updates that stepped the optimizer
    evaluated = [step for episode in read_episodes(runs["eval"] / "episodes.jsonl") for step in episode.steps]
    assert {(step.temperature, step.exact_logprobs, step.trains) for step in evaluated} == {(None, None, None)}
    # What schema 6 added: the function schemas sent with a prompt, none under constrained choice.
    assert all(step.tools is None for step in steps + evaluated)
    # What schema 7 added: a step's majority vote, none without --votes.
    assert all(step.votes is None for step in steps + evaluated)


def test_normalise_keeps_everything_but_wall_times_paths_and_the_version(tmp_path):
    """The comparison would see any other change: only the listed fields are left out."""
    script = _load_script()
    episode = {
        "episode_id": f"x|hf:{tmp_path}/m|0",
        "latency_s": 1.5,
        "schema_version": 6,
        "model_seats": ["player"],
        "influence": {"exact": {"nodes": [], "edges": []}},
        "steps": [
            {
                "latency_s": 0.1,
                "logprobs": [-0.5],
                "temperature": 1.0,
                "exact_logprobs": True,
                "trains": True,
                "tools": None,
                "votes": None,
            },
        ],  # fmt: skip
    }
    text = script.normalise("episodes.jsonl", json.dumps(episode) + "\n", tmp_path)
    assert json.loads(text) == {"episode_id": "x|hf:$RUNS/m|0", "steps": [{"logprobs": [-0.5]}]}
    changed = {**episode, "steps": [{"latency_s": 0.1, "logprobs": [-0.25], "temperature": 1.0}]}
    assert script.normalise("episodes.jsonl", json.dumps(changed) + "\n", tmp_path) != text
    metrics = {"step": 1, "time/update_s": 2.0, "loss/value": 0.125}
    assert json.loads(script.normalise("metrics.jsonl", json.dumps(metrics), tmp_path)) == {
        "step": 1,
        "loss/value": 0.125,
    }


def test_the_comparison_allows_float_rounding_and_nothing_else():
    script = _load_script()
    expected = {"run/episodes.jsonl": [{"action": "left", "logprobs": [-1.2745720148], "token_ids": [5, 7]}]}

    def changed(**step):
        return {"run/episodes.jsonl": [{**expected["run/episodes.jsonl"][0], **step}]}

    assert script.differences(changed(logprobs=[-1.2745721340]), expected) == []  # another CPU's rounding
    assert script.differences(changed(logprobs=[-1.2746995994]), expected) == [
        "run/episodes.jsonl[0].logprobs[0]: -1.2746995994 instead of -1.2745720148"
    ]
    assert script.differences(changed(action="right"), expected) == [
        "run/episodes.jsonl[0].action: 'right' instead of 'left'"
    ]
    assert script.differences(changed(token_ids=[5, 7, 9]), expected) == [
        "run/episodes.jsonl[0].token_ids: 3 items instead of 2"
    ]
    assert script.differences(changed(token_ids=[5.0, 7]), expected)  # a float where an int was written
    assert script.differences({}, expected) == ["the records: keys [] instead of ['run/episodes.jsonl']"]
