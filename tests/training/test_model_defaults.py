"""The tiny model's defaults (training/model_defaults.py) and the no-signal warning (training/signal_watch.py).

``tsmg train --game FrozenLake-v0 --model tiny ...`` (the first example of ``tsmg train --help``)
must train as ``configs/frozen_lake_tiny.yaml`` does; the settings that differ are listed in
:data:`EXAMPLE_VS_SHIPPED` with why. How far it learns in 30 updates is measured by the command in
docs/training.md ("The tiny model from flags"), not here (about 30 s).

Mutations that fail these tests: dropping a key from ``MODEL_DEFAULTS["tiny"]`` (the config diff
grows); applying the defaults above the flags (``--set optim.lr`` / ``--finetune lora`` lost);
matching the per-game pattern with ``re.search`` (``MyFrozenLake-v0x`` would take it); counting
invalid answers as signal, resetting the streak on a silent update, or warning every update.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from training.model_defaults import apply_model_defaults
from training.signal_watch import SignalWatch
from tsmg.apps.cli import _build_parser, main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "train --game FrozenLake-v0 --model tiny --finetune full --algo ms-grpo".split()
SHIPPED = ["train", "--config", str(ROOT / "configs/frozen_lake_tiny.yaml")]

#: Where the help's example and the shipped config still differ, and why (none touches the rollouts).
EXAMPLE_VS_SHIPPED = {
    "run.max_seconds": "the demo's wall-time budget (180 s); the example runs its --updates",
    "run.eval_every": "the shipped config evaluates every 10 updates; evaluation is asked for with --eval-every",
    "run.eval_episodes": "100 held-out episodes in the shipped config, the schema's 50 otherwise",
}


def _config(argv: list[str]):
    from tsmg.apps.train.cli import config_from_args

    return config_from_args(_build_parser().parse_args(argv))


def _flat(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def test_the_help_example_is_the_shipped_config_but_for_the_listed_run_settings(tmp_path):
    common = ["--updates", "7", "--out", str(tmp_path)]
    example = _flat(_config(EXAMPLE + common).model_dump(mode="json"))
    shipped = _flat(_config(SHIPPED + common).model_dump(mode="json"))
    differing = {key for key in example.keys() | shipped.keys() if example.get(key) != shipped.get(key)}
    assert differing == set(EXAMPLE_VS_SHIPPED), {key: (example.get(key), shipped.get(key)) for key in differing}


def test_every_layer_the_user_gives_wins_over_the_model_defaults(tmp_path):
    config = _config(EXAMPLE + ["--finetune", "lora", "--set", "optim.lr=5e-4", "--out", str(tmp_path)])
    assert (config.model.finetune, config.optim.lr, config.model.dtype) == ("lora", 5e-4, "float32")
    given = tmp_path / "given.yaml"
    given.write_text("rollout: {game_id: FrozenLake-v0, lap: {action_format: {kind: tag}}}\nmodel: {spec: tiny}\n")
    config = _config(["train", "--config", str(given), "--out", str(tmp_path)])
    assert config.rollout.lap.action_format.kind == "tag"  # the file's
    assert config.rollout.lap.template.system is None  # the tiny default beneath it
    hf = _config(["train", "--game", "FrozenLake-v0", "--model", "hf:some/model", "--out", str(tmp_path)])
    assert (hf.model.finetune, hf.model.dtype, hf.rollout.observation_lines) == ("lora", "auto", None)


def test_per_game_defaults_match_the_whole_game_id():
    own = {"rollout": {"game_id": "MyFrozenLake-v0x"}, "model": {"spec": "tiny"}}
    applied = dict(apply_model_defaults(own))
    assert "rollout.observation_lines" not in applied and applied["model.finetune"] == "full"
    kuhn = {"rollout": {"game_id": "KuhnPoker-v0", "game_options": {"view": "full"}}, "model": {"spec": "tiny"}}
    assert "rollout.game_options.view" not in dict(apply_model_defaults(kuhn))
    assert kuhn["rollout"]["game_options"] == {"view": "full"}


def _rollout_metrics(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k.startswith("rollout/")} for row in rows if row["step"] > 0]


def test_the_help_example_trains_as_the_shipped_config_with_valid_answers(tmp_path, capsys):
    small = ["--set", "rollout.group_size=4", "--set", "rollout.groups_per_update=2", "--set", "run.eval_every=0"]
    small += ["--set", "run.updates=2", "--set", "run.max_seconds=null", "--quiet"]
    assert main(EXAMPLE + ["--updates", "2", "--out", str(tmp_path / "flags")] + small) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("tiny model defaults (the settings it learns under")
    assert "rollout.lap.action_format.kind=choice" in printed and "--set SECTION.KEY=VALUE" in printed
    assert main(SHIPPED + ["--out", str(tmp_path / "shipped")] + small) == 0
    assert "tiny model defaults" not in capsys.readouterr().out  # the file sets every one
    flags, shipped = _rollout_metrics(tmp_path / "flags"), _rollout_metrics(tmp_path / "shipped")
    assert flags == shipped and len(flags) == 2
    assert all(row["rollout/invalid_rate"] == 0.0 for row in flags)


def test_the_watch_warns_once_after_five_updates_without_signal(caplog):
    watch = SignalWatch(action_format="tag")
    silent, learning = {"credit/zero_signal_fraction": 1.0}, {"credit/zero_signal_fraction": 0.5}
    with caplog.at_level(logging.WARNING, logger="training.signal_watch"):
        seen = [watch.observe(step, metrics) for step, metrics in enumerate([silent] * 4 + [learning] + [silent] * 4)]
        assert seen == [None] * 9  # a learning update restarts the count
        message = watch.observe(9, silent)
        assert message is not None and "no group had a learning signal for the last 5 updates" in message
        assert "--group-size" in message and [watch.observe(step, silent) for step in range(10, 30)] == [None] * 20
    assert [record.getMessage() for record in caplog.records] == [message]
    invalid = SignalWatch(action_format="tag")
    warnings = [invalid.observe(step, {"rollout/invalid_rate": 1.0}) for step in range(1, 6)]
    assert warnings[:4] == [None] * 4
    assert "every answer was invalid for the last 5 updates" in warnings[4]
    assert "action format (tag)" in warnings[4] and "--action-format choice" in warnings[4]


def test_a_run_without_signal_says_so_once(tmp_path, caplog):
    # Tag answers from a model built from scratch: every answer invalid, nothing to learn.
    argv = EXAMPLE + ["--action-format", "tag", "--updates", "6", "--out", str(tmp_path / "run"), "--quiet"]
    argv += ["--group-size", "2", "--groups", "1", "--max-tokens", "4"]
    with caplog.at_level(logging.WARNING, logger="training.signal_watch"):
        assert main(argv) == 0
    warned = [record.getMessage() for record in caplog.records if record.name == "training.signal_watch"]
    assert len(warned) == 1 and "every answer was invalid for the last 5 updates (update 5)" in warned[0]


def test_self_play_is_deprecated_with_a_warning(tmp_path, capsys):
    from tsmg.apps.train.cli import SELF_PLAY_DEPRECATED

    argv = ["train", "--game", "KuhnPoker-v0", "--model", "tiny", "--self-play", "--print-config"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == SELF_PLAY_DEPRECATED
    assert "self_play: true" in captured.out  # still asked for: a single-agent game is still refused
