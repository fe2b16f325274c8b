import json

import pytest

from tsmg.episode import SCHEMA_VERSION, Episode, EpisodeSchemaError, read_episodes, write_episodes
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


def test_records_written_before_schema_versions_are_read_as_version_1(tmp_path):
    [episode] = rollout("FrozenLake-v0", RandomPolicy(), seeds=[0])
    assert episode.schema_version == SCHEMA_VERSION == 7
    # A line as written before this change: no schema_version, no choices or prompt ids in its steps.
    old = episode.model_dump(
        mode="json", exclude={"schema_version": True, "steps": {"__all__": {"choices", "prompt_token_ids"}}}
    )
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(old) + "\n")
    [loaded] = read_episodes(path)
    assert loaded.schema_version == 1 and loaded.steps[0].prompt_token_ids is None
    assert loaded.model_dump(exclude={"schema_version"}) == episode.model_dump(exclude={"schema_version"})


def test_version_2_records_are_read_without_versions_or_tree_fields(tmp_path):
    [episode] = rollout("FrozenLake-v0", RandomPolicy(), seeds=[0])
    episode.policy_version, episode.steps[0].policy_version = 4, 4
    # A line as version 2 wrote it: no policy versions, no parent or fork round.
    old = episode.model_dump(
        mode="json",
        exclude={
            "policy_version": True,
            "parent_id": True,
            "fork_round": True,
            "annotations": True,
            "steps": {"__all__": {"policy_version"}},
        },
    )
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps({**old, "schema_version": 2}) + "\n")
    [loaded] = read_episodes(path)
    assert loaded.schema_version == 2 and loaded.policy_version is None and loaded.steps[0].policy_version is None
    assert loaded.parent_id is None and loaded.fork_round is None
    assert Episode.from_json(episode.to_json()).steps[0].policy_version == 4


def test_version_4_records_read_with_no_influence_graph(tmp_path):
    [episode] = rollout("FrozenLake-v0", RandomPolicy(), seeds=[0])
    old = episode.model_dump(mode="json", exclude={"influence"})
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps({**old, "schema_version": 4}) + "\n")
    [loaded] = read_episodes(path)
    assert loaded.schema_version == 4 and loaded.influence == {}
    assert loaded.model_dump(exclude={"schema_version"}) == episode.model_dump(exclude={"schema_version"})


def test_version_5_records_read_with_no_tools_and_version_6_keeps_them(tmp_path):
    from tsmg.lap import LAP, ActionFormat, LAPConfig
    from tsmg.lm import Completion, ToolCall

    class Caller:  # a stand-in model that always calls make_move with "right"
        name = "caller"

        def generate(self, requests, sampling):
            return [Completion(text="", tool_calls=[ToolCall("make_move", '{"move": "right"}')]) for _ in requests]

    lap = LAP(Caller(), LAPConfig(action_format=ActionFormat(kind="tool")))
    [episode] = rollout("FrozenLake-v0", lap, seeds=[0])
    [schema] = episode.steps[0].tools or []
    assert schema["function"]["parameters"]["properties"]["move"]["enum"] == ["left", "down", "right", "up"]
    assert Episode.from_json(episode.to_json()) == episode
    old = episode.model_dump(mode="json", exclude={"steps": {"__all__": {"tools"}}})
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps({**old, "schema_version": 5}) + "\n")
    [loaded] = read_episodes(path)
    assert loaded.schema_version == 5 and all(step.tools is None for step in loaded.steps)
    assert loaded.steps[0].prompt == episode.steps[0].prompt


def test_a_newer_schema_version_is_refused_naming_the_versions_read(tmp_path):
    [episode] = rollout("FrozenLake-v0", RandomPolicy(), seeds=[0])
    newer = {**episode.model_dump(mode="json"), "schema_version": SCHEMA_VERSION + 1, "a_field_from_the_future": 1}
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(newer) + "\n")
    with pytest.raises(
        EpisodeSchemaError,
        match=rf"episodes.jsonl:1: .*schema version {SCHEMA_VERSION + 1}.*reads versions 1 to {SCHEMA_VERSION}",
    ):
        list(read_episodes(path))


def test_token_ids_can_be_left_out_of_a_file(tmp_path):
    from tsmg.lm import Completion

    class Echo:
        name = "echo"

        def generate(self, requests, sampling):
            return [
                Completion(text="right", token_ids=[1, 2], logprobs=[-0.1, -0.2], prompt_token_ids=[5])
                for _ in requests
            ]

    from tsmg.lap import LAP, ActionFormat, LAPConfig

    [episode] = rollout("FrozenLake-v0", LAP(Echo(), LAPConfig(action_format=ActionFormat(kind="choice"))), seeds=[0])
    step = episode.steps[0]
    assert (step.token_ids, step.logprobs, step.prompt_token_ids) == ([1, 2], [-0.1, -0.2], [5])
    assert step.choices == ["left", "down", "right", "up"]
    write_episodes(tmp_path / "full.jsonl", [episode])
    write_episodes(tmp_path / "lean.jsonl", [episode], token_ids=False)
    [lean] = read_episodes(tmp_path / "lean.jsonl")
    assert lean.steps[0].token_ids is None and lean.steps[0].prompt_token_ids is None and lean.steps[0].choices
    assert (tmp_path / "lean.jsonl").stat().st_size < (tmp_path / "full.jsonl").stat().st_size


def test_an_eval_folder_of_a_newer_version_is_refused_in_one_sentence(tmp_path):
    import subprocess
    import sys

    command = [sys.executable, "-m", "tsmg.apps.cli", "eval", "--game", "FrozenLake-v0", "--model", "random"]
    command += ["--episodes", "2", "--out", str(tmp_path / "run"), "--no-progress"]
    assert subprocess.run(command, capture_output=True, text=True, timeout=120).returncode == 0
    path = tmp_path / "run" / "episodes.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**record, "schema_version": 9}) + "\n" for record in records[:1]))
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 2 and "Traceback" not in rerun.stderr
    assert f"schema version 9; this tsmg reads versions 1 to {SCHEMA_VERSION}" in rerun.stderr
