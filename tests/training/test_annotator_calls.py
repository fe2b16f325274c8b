"""Annotators run once per rollout: in the trainer's process when synchronous, in the rollout worker's when async."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.small_lake import make_config
from training.annotators import ANNOTATORS, register_annotator
from training.trainer import train
from tsmg.episode import Episode, read_episodes

UPDATES = 2


class CountingAnnotator:
    """Writes a line per call (the calling process, the episodes it got) and counts its visits on each episode.

    A file, not a counter in memory: under ``loop.mode: async`` the worker process calls it.
    """

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __call__(self, episodes: list[Episode]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {len(episodes)}\n")
        for episode in episodes:
            episode.annotations["counting"] = int(episode.annotations.get("counting", 0)) + 1


@pytest.fixture
def counting(tmp_path):
    path = tmp_path / "calls.txt"
    register_annotator("counting", CountingAnnotator(path))
    yield path
    ANNOTATORS.pop("counting", None)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_annotators_run_once_per_rollout_where_it_is_played(tiny_model, tmp_path, counting, mode):
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"annotators": ["counting"]},
        run={"updates": UPDATES, "episodes_every": 1, "checkpoint_every": 0},
        loop={"mode": mode, "max_staleness": 1} if mode == "async" else {"mode": "sync"},
    )
    train(config)
    calls = [line.split() for line in counting.read_text(encoding="utf-8").splitlines()]
    assert len(calls) == UPDATES  # once per rollout, never again in the trainer
    assert all(int(count) == 4 * 4 for _, count in calls)
    processes = {int(pid) for pid, _ in calls}
    if mode == "sync":
        assert processes == {os.getpid()}
    else:  # the worker annotates, overlapping the trainer's update
        assert len(processes) == 1 and os.getpid() not in processes
    episodes = list(read_episodes(tmp_path / "run" / "episodes.jsonl"))
    assert len(episodes) == UPDATES * 4 * 4
    assert all(episode.annotations["counting"] == 1 for episode in episodes)
