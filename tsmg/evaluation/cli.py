"""``tsmg eval`` and ``tsmg report``: the evaluation harness on the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tsmg.evaluation.config import DEFAULT_MODEL, EvalConfig
from tsmg.evaluation.plan import plan_evaluation
from tsmg.lap import ActionFormat, LAPConfig, PromptTemplate
from tsmg.registry import make


def add_commands(commands: Any) -> None:
    """Register the ``eval`` and ``report`` sub-commands on an argparse sub-parser set."""
    run = commands.add_parser("eval", help="evaluate models on games (resumable)")
    run.add_argument("--game", action="append", required=True, help="game id (repeatable)")
    run.add_argument("--model", action="append", help=f"model spec (repeatable; default {DEFAULT_MODEL})")
    run.add_argument("--episodes", type=int, default=100, help="episodes per game and matchup")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", type=Path, help="run folder (default runs/eval-SEED)")
    run.add_argument("--concurrency", type=int, default=64, help="episodes live at once")
    run.add_argument("--retries", type=int, default=1, help="extra attempts for failed episodes")
    run.add_argument("--dry-run", action="store_true", help="print the plan and estimated tokens, play nothing")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="game option (all games)")
    run.add_argument("--model-option", action="append", default=[], metavar="MODEL:KEY=VALUE")
    run.add_argument("--price", action="append", default=[], metavar="MODEL=IN,OUT", help="USD per 1M tokens")
    run.add_argument(
        "--no-token-ids",
        action="store_true",
        help="leave token ids and logprobs out of episodes.jsonl (smaller; not usable for training)",
    )
    lap = run.add_argument_group("language-agent policy")
    lap.add_argument("--system", help="system prompt text")
    lap.add_argument("--history", choices=["none", "last_k", "full"], default="none")
    lap.add_argument("--history-k", type=int, default=2)
    lap.add_argument("--action-format", choices=["tag", "regex", "choice", "raw"], default="tag")
    lap.add_argument("--action-tag", default="action")
    lap.add_argument("--action-regex")
    lap.add_argument("--reprompt", type=int, default=0, help="retries for an invalid answer")
    lap.add_argument("--temperature", type=float, default=1.0)
    lap.add_argument("--top-p", type=float, default=1.0)
    lap.add_argument("--max-tokens", type=int, default=64)
    run.set_defaults(handler=cmd_eval)

    report = commands.add_parser("report", help="merge run folders into one comparison table and plot")
    report.add_argument("runs", nargs="+", type=Path)
    report.add_argument("--out", type=Path, help="folder for comparison.md and plots")
    report.add_argument("--json", action="store_true", help="print the merged rows as JSON")
    report.set_defaults(handler=cmd_report)


def _pairs(values: list[str], what: str) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for value in values:
        key, separator, raw = value.partition("=")
        if not separator or not key:
            raise ValueError(f"{what} must be KEY=VALUE, got {value!r}")
        parsed[key.strip()] = yaml.safe_load(raw)
    return parsed


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """Build (and validate) the run configuration from command-line arguments."""
    game_options = _pairs(args.option, "--option")
    model_options: dict[str, dict[str, Any]] = {}
    for value in args.model_option:
        # MODEL may hold colons (openai:NAME) and VALUE too (a URL): split at the first "=" first.
        target, equals, raw = value.partition("=")
        model, colon, key = target.rpartition(":")
        if not (equals and colon and model and key):
            raise ValueError(f"--model-option must be MODEL:KEY=VALUE, got {value!r}")
        model_options.setdefault(model, {})[key.strip()] = yaml.safe_load(raw)
    prices = {}
    for value in args.price:
        model, _, pair = value.rpartition("=")
        price_in, _, price_out = pair.partition(",")
        prices[model] = (float(price_in), float(price_out))
    template = PromptTemplate(history=args.history, history_k=args.history_k)
    if args.system is not None:
        template = template.model_copy(update={"system": args.system})
    lap = LAPConfig(
        template=template,
        action_format=ActionFormat(kind=args.action_format, tag=args.action_tag, pattern=args.action_regex),
        reprompt=args.reprompt,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    return EvalConfig(
        games=args.game,
        models=args.model or [DEFAULT_MODEL],
        episodes=args.episodes,
        seed=args.seed,
        game_options={game: dict(game_options) for game in args.game} if game_options else {},
        lap=lap,
        model_options=model_options,
        prices=prices,
    )


def cmd_eval(args: argparse.Namespace) -> int:
    """Run (or resume) an evaluation; exit 0 only if every planned episode completed."""
    config = config_from_args(args)
    if args.dry_run:
        print(dry_run_text(config))
        return 0
    from tsmg.evaluation.runner import run_eval

    out = args.out or Path("runs") / f"eval-{config.seed}"
    result = run_eval(
        config,
        out,
        concurrency=args.concurrency,
        retries=args.retries,
        progress=not args.no_progress,
        token_ids=not args.no_token_ids,
    )
    from tsmg.evaluation.report import comparison_rows, markdown_table

    print(markdown_table(comparison_rows([(out.name, result.summary)])))
    print(f"\n{result.completed}/{result.planned} episodes completed; report: {out / 'report.md'}")
    for failure in result.failures[:5]:
        print(f"failed: {failure.episode_id}: {failure.error}", file=sys.stderr)
    return 0 if result.ok else 1


def dry_run_text(config: EvalConfig) -> str:
    """The plan: games, matchups, seeds, episode count and an upper estimate of tokens."""
    plan = plan_evaluation(config)
    lines = [f"{len(plan)} episodes planned (seed {config.seed}):"]
    total_in = total_out = 0
    for game_id in config.games:
        game_plan = [p for p in plan if p.game_id == game_id]
        game = make(game_id, **config.game_options.get(game_id, {}))
        observations, _ = game.reset(seed=game_plan[0].seed)
        rounds = getattr(getattr(game, "config", None), "max_steps", None) or 20
        prompt_tokens = (len(next(iter(observations.values()))) + len(config.lap.template.system or "")) // 4 + 30
        model_turns = sum(1 for p in game_plan for _, model in p.seats if _is_language_model(model))
        total_in += model_turns * rounds * prompt_tokens
        total_out += model_turns * rounds * config.lap.max_tokens
        seeds = sorted({p.seed for p in game_plan})
        matchups = sorted({p.matchup for p in game_plan})
        lines.append(f"  {game_id}: {len(game_plan)} episodes, {len(matchups)} matchup(s): {'; '.join(matchups)}")
        lines.append(f"    seeds ({len(seeds)}): {', '.join(map(str, seeds[:5]))}{', ...' if len(seeds) > 5 else ''}")
    lines.append(f"estimated tokens at most: {total_in:,} in, {total_out:,} out (model-played seats only)")
    return "\n".join(lines)


def _is_language_model(spec: str) -> bool:
    return spec not in ("random", "oracle") and not spec.startswith("fixed:")


def cmd_report(args: argparse.Namespace) -> int:
    """Merge several run folders into one comparison table (and plots with --out)."""
    from tsmg.evaluation.report import comparison_rows, markdown_table, plot_rows

    summaries = []
    for folder in args.runs:
        path = folder / "summary.json"
        if not path.exists():
            raise ValueError(f"{folder} has no summary.json: is it a `tsmg eval` run folder?")
        summaries.append((folder.name, json.loads(path.read_text())))
    rows = comparison_rows(summaries)
    if args.json:
        print(json.dumps([{k: v for k, v in row.items() if k != "returns"} for row in rows], indent=2))
        return 0
    table = markdown_table(rows, with_run=True)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        plots = plot_rows(rows, args.out, prefix="comparison-")
        images = "\n".join(f"![{p.stem}]({p.name})" for p in plots)
        (args.out / "comparison.md").write_text(f"# Comparison\n\n{table}\n\n{images}\n")
    return 0
