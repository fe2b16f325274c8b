"""``tsmg train`` on a served game: the same updates as in-process, from the same seeds."""

import pytest

pytest.importorskip("torch")

from tests.small_lake import make_config  # noqa: E402
from training.config import TrainConfig  # noqa: E402
from training.run_log import METRICS_FILE, read_metrics  # noqa: E402
from training.trainer import base_model_source, train  # noqa: E402


def test_training_on_a_served_game_matches_in_process_training(served, tmp_path):
    tiny = {"spec": "tiny", "tiny": {"tokenizer_corpus": "prose"}}
    config = TrainConfig(rollout={"game_id": "FrozenLake-v0"}, model=tiny)
    model = base_model_source(config.model, tmp_path / "model", seed=config.run.seed)
    for name, game_id in (("remote", served.url("FrozenLake-v0")), ("local", "FrozenLake-v0")):
        train(make_config(tmp_path / name, model, rollout={"game_id": game_id}, run={"updates": 2}))

    def figures(folder):
        rows = read_metrics(folder / METRICS_FILE)
        return [{key: value for key, value in row.items() if not key.startswith("time/")} for row in rows]

    remote, local = figures(tmp_path / "remote"), figures(tmp_path / "local")
    assert len(remote) == 2 and remote == local
    assert served.sessions("FrozenLake-v0") == 0  # every episode's session was closed
