import pytest

from tsmg.episode import Episode, read_episodes, write_episodes
from tsmg.policies import RandomPolicy
from tsmg.rollout import rollout


def test_episode_round_trips_through_one_json_line():
    [episode] = rollout("FrozenLake-Slippery-v0", RandomPolicy(seed=3), seeds=[5])
    line = episode.to_json()
    assert "\n" not in line
    assert Episode.from_json(line) == episode
    assert episode.steps[0].state_key is not None and episode.seed == 5


def test_jsonl_append_and_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "episodes.jsonl"
    episodes = rollout("FrozenLake-v0", RandomPolicy(), seeds=[0, 1, 2])
    write_episodes(path, episodes[:2])
    write_episodes(path, episodes[2:])
    assert list(read_episodes(path)) == episodes
    with open(path, "a") as handle:
        handle.write(episodes[0].to_json()[:50])  # a writer killed mid-line
    assert len(list(read_episodes(path))) == 3


def test_corrupt_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text("not json\n" + rollout("FrozenLake-v0", RandomPolicy(), seeds=[0])[0].to_json() + "\n")
    with pytest.raises(ValueError, match="episodes.jsonl:1"):
        list(read_episodes(path))
