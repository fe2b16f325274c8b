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


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_mistyped_key_gets_the_key_it_was_probably_meant_to_be(command, files, capsys):
    what = "training configuration" if command == "train" else "SFT configuration"
    stop = "--print-config" if command == "train" else "--dry-run"  # neither loads a model
    assert cli_main([command, "--config", str(files[command]), "--set", "optim.lrr=0.1", stop]) == 2
    err = capsys.readouterr().err
    assert err == f"error: invalid {what}: unknown key 'lrr' in section optim; did you mean 'lr'?\n"


def test_a_mistyped_key_in_the_file_or_a_set_is_named_with_its_section(files, capsys):
    typo = files["tmp"] / "typo.yaml"
    typo.write_text(
        yaml.safe_dump({"rollout": {"game_id": "FrozenLake-v0", "group_sise": 4}, "model": {"spec": "tiny"}})
    )
    assert cli_main(["train", "--config", str(typo), "--print-config"]) == 2
    assert capsys.readouterr().err == (
        "error: invalid training configuration: unknown key 'group_sise' in section rollout; "
        "did you mean 'group_size'?\n"
    )
    base = ["train", "--config", str(files["train"]), "--print-config"]
    assert cli_main([*base, "--set", "rolout.group_size=4"]) == 2
    assert "unknown section 'rolout'; did you mean 'rollout'?" in capsys.readouterr().err
    assert cli_main([*base, "--set", "rollout.tree.root=3"]) == 2  # a section within a section
    assert "unknown key 'root' in section rollout.tree; did you mean 'roots'?" in capsys.readouterr().err
    assert cli_main([*base, "--set", "optim.zzz=3"]) == 2  # nothing close: the section's keys
    assert "unknown key 'zzz' in section optim; its keys are: lr, weight_decay," in capsys.readouterr().err
