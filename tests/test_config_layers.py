"""One layering rule for ``tsmg train`` and ``tsmg sft``: file, then flags, then ``--out``, then ``--set``."""

import pytest
import yaml

from tsmg.apps.cli import _build_parser
from tsmg.apps.cli import main as cli_main
from tsmg.apps.train.cli import config_from_args
from tsmg.apps.train.sft_cli import sft_config_from_args

PARSER = _build_parser()


@pytest.fixture
def files(tmp_path):
    train = tmp_path / "train.yaml"
    train.write_text(
        yaml.safe_dump({"rollout": {"game_id": "FrozenLake-v0"}, "model": {"spec": "tiny"}, "optim": {"lr": 0.1}})
    )
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text("")
    sft = tmp_path / "sft.yaml"
    sft.write_text(
        yaml.safe_dump({"data": {"episodes": [str(episodes)]}, "model": {"spec": "smollm2"}, "optim": {"lr": 0.1}})
    )
    return {"train": train, "sft": sft, "tmp": tmp_path}


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_flag_beats_the_file_and_set_beats_the_flag(command, files):
    build = config_from_args if command == "train" else sft_config_from_args
    base = [command, "--config", str(files[command])]
    assert build(PARSER.parse_args(base)).optim.lr == 0.1
    assert build(PARSER.parse_args([*base, "--lr", "0.2"])).optim.lr == 0.2
    assert build(PARSER.parse_args([*base, "--lr", "0.2", "--set", "optim.lr=0.3"])).optim.lr == 0.3
    out = files["tmp"] / f"{command}-run"
    assert build(PARSER.parse_args([*base, "--out", str(out)])).run.out_dir == str(out)
    config = build(PARSER.parse_args([*base, "--out", str(out), "--set", "run.out_dir=elsewhere"]))
    assert config.run.out_dir == "elsewhere"


@pytest.mark.parametrize("command", ["train", "sft"])
def test_resume_reads_the_run_folders_own_config(command, files):
    build = config_from_args if command == "train" else sft_config_from_args
    out = files["tmp"] / "run"
    out.mkdir()
    (out / "config.yaml").write_text(files[command].read_text())
    assert build(PARSER.parse_args([command, "--resume", "--out", str(out)])).optim.lr == 0.1


@pytest.mark.parametrize("command", ["train", "sft"])
def test_bad_input_is_one_sentence_on_both_commands(command, files, capsys):
    base = [command, "--config", str(files[command])]
    assert cli_main([*base, "--set", "optim.lr=[0.1"]) == 2  # not YAML
    assert "'optim.lr=[0.1': the value is not readable" in capsys.readouterr().err
    assert cli_main([*base, "--set", "optim.lr=-1"]) == 2
    what = "training configuration" if command == "train" else "SFT configuration"
    assert capsys.readouterr().err.startswith(f"error: invalid {what}: optim.lr")
    listed = files["tmp"] / "list.yaml"
    listed.write_text("- a\n- b\n")
    assert cli_main([command, "--config", str(listed)]) == 2
    assert "is a YAML mapping of sections" in capsys.readouterr().err
