"""The reference of what a training configuration can set: ``tsmg train --print-config`` and docs/config.md."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, Field

from training.config import TrainConfig
from tsmg.apps.cli import _build_parser as build_parser
from tsmg.apps.cli import main
from tsmg.apps.train.cli import CONFIG_PAGE_COMMAND, config_from_args
from tsmg.config_reference import commented_yaml, describe_fields, markdown_reference

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "config.md"


def _print_config(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["train", *argv, "--print-config"]) == 0
    return capsys.readouterr().out


def test_the_page_is_what_the_command_prints():
    """In a fresh process, as a user regenerates it."""
    printed = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "train", "--print-config", "markdown"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=120,
    ).stdout  # fmt: skip
    assert PAGE.read_text(encoding="utf-8") == printed, (
        f"docs/config.md and the schema disagree: regenerate the page with `{CONFIG_PAGE_COMMAND}`"
    )


def test_every_field_is_on_the_page_once_and_described():
    page = PAGE.read_text(encoding="utf-8")
    fields = describe_fields(TrainConfig)
    assert len(fields) > 100
    for field in fields:
        assert field.description, f"{field.path} has no description: the reference would say nothing of it"
        if "." in field.path:  # a top-level section is a heading, its fields are rows
            assert page.count(f"| `{field.path}` |") == 1, field.path
    assert "| `optim.lr` | float | `1.0e-05` | Peak learning rate (AdamW). |" in page
    assert "| `rollout.game_id` | str | required |" in page


def test_the_printed_config_is_the_config_the_flags_describe(capsys):
    """Loaded back, the YAML is the configuration `tsmg train` would run with the same flags."""
    flags = ("--game", "KuhnPoker-v0", "--model", "tiny", "--lr", "3e-4", "--set", "run.eval_every=5")
    text = _print_config(capsys, *flags)
    assert "# Peak learning rate (AdamW).\n  lr: 0.0003\n" in text
    loaded = TrainConfig.model_validate(yaml.safe_load(text))
    args = build_parser().parse_args(["train", *flags])
    assert loaded == config_from_args(args)
    assert "Required" not in text  # both required fields were given


def test_without_the_required_flags_the_example_values_say_so(capsys, tmp_path):
    text = _print_config(capsys)
    comments = " ".join(text.replace("#", " ").split())  # the comment lines, unwrapped
    assert "(Required; FrozenLake-v0 is an example: set your own.)" in comments
    assert "(Required; tiny is an example: set your own.)" in comments
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    args = build_parser().parse_args(["train", "--config", str(path)])
    config = config_from_args(args)  # the printed file is a valid --config
    # The example model's own defaults (training/model_defaults.py), said so in the comments.
    assert (config.rollout.game_id, config.model.spec, config.optim.lr) == ("FrozenLake-v0", "tiny", 1e-3)
    assert "(The tiny model's default: training/model_defaults.py.)" in comments


def test_a_bad_value_still_gets_one_sentence(capsys):
    assert main(["train", "--print-config", "--set", "optim.lr=-1"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: invalid training configuration: optim.lr") and "Traceback" not in error


class _Inner(BaseModel):
    text: str = Field(default="a\nb: c", description="A string that needs quoting | and a pipe.")
    values: list[int] = Field(default_factory=lambda: [1, 2], description="A list.")


class _Outer(BaseModel):
    name: str = Field(description="Required.")
    inner: _Inner = Field(default_factory=_Inner, description="A section.")
    maybe: _Inner | None = Field(default=None, description="An optional section.")


def test_commented_yaml_round_trips_awkward_values():
    values = _Outer(name="x: y # not a comment").model_dump(mode="json")
    text = commented_yaml(_Outer, values)
    assert yaml.safe_load(text) == values
    assert "# A string that needs quoting | and a pipe.\n  text:" in text


def test_markdown_lists_optional_sections_and_escapes_cells():
    page = markdown_reference(_Outer, "T", "intro")
    assert "| `maybe.text` | str | `\"a\\nb: c\"` | A string that needs quoting \\| and a pipe. |" in page
    assert "| `inner` |" not in page and "## `inner`" in page
    assert "| `inner.values` | list[int] | `[1, 2]` | A list. |" in page

