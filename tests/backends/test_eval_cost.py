"""What a run costs, as `tsmg eval` tells it: "unknown" for a hosted model without a price, never 0.0000.

A real run against a loopback OpenAI-compatible server (which reports token usage): without
`--price` its summary holds no cost and the report, the printed table and the viewer say
"unknown"; with a price, the cost is the tokens times it. A dry run without `--price` says
"n/a (no --price)". Local and scripted players are not billed per token: their cost is 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_server import FaultServer

from tsmg.apps.cli import main
from tsmg.apps.evaluation.metrics import price_of
from tsmg.apps.evaluation.report import markdown_table


def eval_args(base_url: str, out: Path, *extra: str) -> list[str]:
    spec = "openai:priceless"
    return [
        "eval", "--game", "FrozenLake-v0", "--model", spec, "--model", "random", "--episodes", "2",
        "--action-format", "choice", "--max-tokens", "8", "--no-progress", "--out", str(out),
        "--model-option", f"{spec}:base_url={base_url}", "--model-option", f"{spec}:api_key=sk-test", *extra,
    ]  # fmt: skip


def rows_of(out: Path) -> dict[str, dict]:
    summary = json.loads((out / "summary.json").read_text())
    return {row["model"]: row for row in summary["games"][0]["rows"]}


def test_a_hosted_model_without_a_price_costs_unknown_everywhere(tmp_path: Path, capsys) -> None:
    with FaultServer(reply=lambda body: "down") as server:
        assert main(eval_args(server.base_url, tmp_path / "unpriced")) == 0
        printed = capsys.readouterr().out
        assert main(eval_args(server.base_url, tmp_path / "priced", "--price", "openai:priceless=2,10")) == 0
    rows = rows_of(tmp_path / "unpriced")
    hosted, scripted = rows["openai:priceless"], rows["random"]
    assert hosted["tokens_in_per_episode"] > 0 and hosted["cost_usd"] is None
    assert scripted["cost_usd"] == 0.0  # random play spends no tokens
    model_line = next(line for line in printed.splitlines() if line.startswith("| FrozenLake-v0 | openai:priceless"))
    assert model_line.endswith("| unknown |") and "0.0000" not in model_line
    assert "| unknown |" in (tmp_path / "unpriced" / "report.md").read_text()

    priced = rows_of(tmp_path / "priced")["openai:priceless"]
    expected = 2 * (2 * priced["tokens_in_per_episode"] + 10 * priced["tokens_out_per_episode"]) / 1e6
    assert priced["cost_usd"] == pytest.approx(expected) and priced["cost_usd"] > 0

    # The viewer's table says the same.
    assert main(["view", str(tmp_path / "unpriced"), "--no-plots"]) == 0
    page = (tmp_path / "unpriced" / "view" / "index.html").read_text()
    assert "<td>unknown</td>" in page


def test_the_cost_cell_and_the_price_rule() -> None:
    assert price_of("openai:gpt-4o-mini", {}, 1200) is None
    assert price_of("openai:gpt-4o-mini", {"openai:gpt-4o-mini": (0.15, 0.6)}, 1200) == (0.15, 0.6)
    assert price_of("smollm2", {}, 900) == (0.0, 0.0) and price_of("hf:runs/x/final", {}, 9) == (0.0, 0.0)
    assert price_of("random", {}, 0) == (0.0, 0.0)
    row = {
        "game": "G", "model": "openai:m", "episodes": 1, "outcome": "goal", "success_rate": 0.0,
        "success_ci95": [0.0, 0.8], "mean_return": 0.0, "return_stderr": 0.0, "invalid_rate": 0.0, "mean_turns": 1.0,
        "tokens_in_per_episode": 10.0, "tokens_out_per_episode": 2.0, "cost_usd": None, "reasoning_cost_usd": None,
    }  # fmt: skip
    assert markdown_table([row]).splitlines()[-1].endswith("| 10/2 | unknown |")


def test_dry_run_cost_without_a_price_is_na(capsys) -> None:
    base = ["eval", "--game", "FrozenLake-v0", "--model", "openai:gpt-4o-mini", "--episodes", "5", "--dry-run"]
    assert main(base) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("estimated cost: n/a (no --price;") and "$" not in last
    assert main([*base, "--price", "openai:gpt-4o-mini=0.15,0.6"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("estimated cost at most: $")
    assert main([*base[:4], "smollm2", *base[5:]]) == 0  # a local model: no bill per token
    assert capsys.readouterr().out.splitlines()[-1].startswith("estimated cost: none (no hosted model")


def test_price_help_promises_no_price_list(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "known price list" not in help_text and "tsmg ships no price list" in help_text
