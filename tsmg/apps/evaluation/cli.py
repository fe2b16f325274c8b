"""``tsmg eval`` and ``tsmg report``: the evaluation harness on the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tsmg.apps.cli_parser import UsageError, at_least_one, examples
from tsmg.apps.evaluation.config import EvalConfig
from tsmg.apps.evaluation.plan import plan_evaluation, seat_spec
from tsmg.apps.evaluation.suites import SUITES, Suite, get_suite
from tsmg.apps.lap_options import add_lap_arguments, lap_config_from_args, legal_moves_options
from tsmg.apps.model_flags import model_options_from_flags, prices_from_flags
from tsmg.apps.next_steps import interrupted_text, view_text
from tsmg.assignments import parse_assignments
from tsmg.lap import ActionFormat, LAPConfig
from tsmg.model_spec import DEFAULT_MODEL, parse_model_spec
from tsmg.run_folder import REPORT_FILE, SUMMARY_FILE

if TYPE_CHECKING:  # the estimate imports the runner: only when a dry run asks for it
    from tsmg.apps.evaluation.estimate import SeatBound


def add_commands(commands: Any) -> None:
    """Register the ``eval``, ``exploitability`` and ``report`` sub-commands on an argparse sub-parser set."""
    run = commands.add_parser(
        "eval",
        help="evaluate models on games (resumable)",
        description=(
            "Play every game against every model (and matchup) on seeded episodes, write the run folder "
            "(episodes.jsonl, summary, comparison table) and resume it when run again. --dry-run prints the plan, "
            "tokens and cost without playing. Exit 0 only if every planned episode completed."
        ),
        epilog=examples(
            "tsmg eval --game FrozenLake-v0 --model random --model oracle --episodes 20 --out runs/eval-fl",
            "tsmg eval --game KuhnPoker-v0 --model openai:gpt-4o-mini --episodes 50 --dry-run",
            "# a local model on a CPU is slow (100 episodes of smollm2 take over an hour): start small",
            "tsmg eval --game FrozenLake-v0 --model smollm2 --episodes 10 --temperature 0 --out runs/eval-smollm2",
            "# a suite: its games, episodes, seeds and opponent are fixed; each model gets one score",
            "tsmg eval --suite openspiel-small-v1 --model random --model openspiel-mcts --out runs/suite",
            "tsmg eval --suite openspiel-small-v1 --model openai:gpt-4o-mini --price openai:gpt-4o-mini=0.15,0.6 "
            "--dry-run",
        ),
    )
    run.add_argument(
        "--game", action="append", metavar="ID", help="game id (repeatable; default: none, then --suite is required)"
    )
    run.add_argument(
        "--suite",
        metavar="NAME",
        help=f"play a named, versioned suite and score each model on it ({', '.join(SUITES)}; default: none)",
    )
    run.add_argument(
        "--model", action="append", metavar="SPEC", help=f"model spec (repeatable; default: {DEFAULT_MODEL})"
    )
    run.add_argument(
        "--episodes", type=at_least_one, help="episodes per game and matchup (default: 100; a suite fixes its own)"
    )
    run.add_argument("--seed", type=int, help="base seed of the episode seeds (default: 0; a suite fixes its own)")
    run.add_argument("--out", type=Path, help="run folder (default: runs/eval-SEED)")
    run.add_argument("--concurrency", type=int, default=64, help="episodes live at once")
    run.add_argument("--retries", type=int, default=1, help="extra attempts for failed episodes")
    run.add_argument("--dry-run", action="store_true", help="print the plan, estimated tokens and cost; play nothing")
    run.add_argument(
        "--sample",
        type=int,
        default=0,
        metavar="N",
        help="with --dry-run: play N episodes per game and model (not saved) to estimate tokens, thinking and cost",
    )
    run.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop cleanly once the run has spent this much (default: no limit)",
    )
    run.add_argument(
        "--max-tokens-total",
        type=int,
        metavar="N",
        help="stop cleanly once the run has spent N tokens (default: no limit)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    run.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="game option, for all games (repeatable)",
    )
    run.add_argument(
        "--model-option",
        action="append",
        default=[],
        metavar="MODEL:KEY=VALUE",
        help="backend option of one model, e.g. smollm2:threads=2 (repeatable)",
    )
    run.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="MODEL=IN,OUT",
        help="USD per 1M input and output tokens of a model, e.g. openai:gpt-4o-mini=0.15,0.6 (repeatable; default: "
        "none: tsmg ships no price list, so a hosted model's cost shows as unknown)",
    )
    run.add_argument(
        "--no-token-ids",
        action="store_true",
        help="leave token ids and logprobs out of episodes.jsonl (smaller; not usable for training)",
    )
    add_lap_arguments(run)
    run.set_defaults(handler=cmd_eval)

    exploit = commands.add_parser(
        "exploitability",
        help="exact exploitability of models in a game that measures it (Kuhn poker, small OpenSpiel games)",
        description=(
            "How much a best response wins against each model, per game, in a game that measures exploitability "
            "(its game has an exploitability(policy) method: Kuhn poker, small two-player zero-sum OpenSpiel "
            "games): 0 at a Nash equilibrium, 0.458 for random play in Kuhn poker. The model answers under "
            "constrained choice with the default prompt (as "
            "`tsmg eval --action-format choice` plays it), or, a model a training run wrote (hf:RUN/final, "
            "hf:RUN/checkpoints/step-N), with the prompt it was trained with, on the game with the options it was "
            "trained with (a compact view, say); its exact move probabilities at --temperature are read from the "
            "model, or its greedy moves at 0."
        ),
        epilog=examples(
            "tsmg exploitability --model random",
            "tsmg exploitability --game KuhnPoker-v0 --model hf:runs/kuhn/final --temperature 0 --json",
            "tsmg exploitability --model hf:runs/kuhn/checkpoints/step-{40,50,60} --average --temperature 0",
        ),
    )
    exploit.add_argument(
        "--model",
        action="extend",
        nargs="+",
        required=True,
        metavar="SPEC",
        help="model spec, or random (several after one flag, or the flag repeated)",
    )
    exploit.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0: greedy)")
    exploit.add_argument(
        "--game",
        default="KuhnPoker-v0",
        metavar="ID",
        help="a game that measures exploitability: KuhnPoker-v0, a small two-player zero-sum OpenSpiel game "
        "(openspiel:NAME), or a game of your own with an exploitability(policy) method",
    )
    exploit.add_argument(
        "--model-option",
        action="append",
        default=[],
        metavar="MODEL:KEY=VALUE",
        help="backend option of one model, e.g. tiny:threads=1 (repeatable)",
    )
    exploit.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="game option, e.g. view=compact (repeatable; a trained model's run gives its own, these win)",
    )
    exploit.add_argument(
        "--average",
        action="store_true",
        help="one more row: the average policy of the models (one of them drawn per game), e.g. a run's checkpoints "
        "(games with an average_exploitability method: Kuhn poker)",
    )
    exploit.add_argument("--json", action="store_true", help="print a JSON list (strategies included)")
    exploit.set_defaults(handler=cmd_exploitability)

    report = commands.add_parser(
        "report",
        help="merge run folders into one comparison table and plot",
        description=(
            "Merge the summaries of eval run folders into one comparison table (and plots with --out), and rate "
            "every player of the several-seat games on one Bradley-Terry scale pooled across games."
        ),
        epilog=examples(
            "tsmg report runs/eval-fl runs/eval-smollm2",
            "tsmg report runs/eval-* --out runs/comparison --json",
        ),
    )
    report.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="eval run folders")
    report.add_argument("--out", type=Path, help="folder for comparison.md and plots (default: print the table only)")
    report.add_argument(
        "--json",
        action="store_true",
        help='print {"rows": [...], "pooled_rating": [...]} as JSON (the merged rows and the pooled rating)',
    )
    report.set_defaults(handler=cmd_report)


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """Build (and validate) the run configuration from command-line arguments."""
    models = args.model or [DEFAULT_MODEL]
    for model in models:
        parse_model_spec(model)  # a bad spec is one clear line, before anything else happens
    suite = _suite_of(args)
    games = list(suite.games) if suite is not None else args.game
    seed = suite.seed if suite is not None else (0 if args.seed is None else args.seed)
    game_options = parse_assignments(args.option, "--option")
    in_run = [*models, *([suite.opponent] if suite is not None else [])]
    model_options = model_options_from_flags(args.model_option, in_run)  # each names a model of the run
    prices = prices_from_flags(args.price, in_run)
    lap = lap_config_from_args(args, seed)
    options = _game_options(models, games, game_options, suite)
    legal_moves_options(games, lap, options)
    return EvalConfig(
        games=games,
        models=models,
        episodes=suite.episodes if suite is not None else (100 if args.episodes is None else args.episodes),
        seed=seed,
        game_options=options,
        lap=lap,
        model_options=model_options,
        prices=prices,
        opponent=suite.opponent if suite is not None else None,
        suite=suite.name if suite is not None else None,
    )


def _suite_of(args: argparse.Namespace) -> Suite | None:
    """The suite ``--suite`` names (None without it); refuses what would change a suite's plan, and no game at all."""
    if args.suite is None:
        if not args.game:
            raise UsageError("tsmg eval needs --game ID (repeatable) or --suite NAME (see: tsmg eval --help)")
        return None
    suite = get_suite(args.suite)
    given = {"--game": args.game, "--episodes": args.episodes, "--seed": args.seed, "--option": args.option}
    fixed = [flag for flag, value in given.items() if value not in (None, [])]
    if fixed:
        raise UsageError(
            f"--suite {suite.name} fixes its games, episodes, seeds and game options: drop {', '.join(fixed)} "
            "(a changed suite is a new suite version)"
        )
    return suite


def _game_options(
    models: list[str], game_ids: list[str], given: dict[str, Any], suite: Suite | None = None
) -> dict[str, dict[str, Any]]:
    """Per game, the options it had when the trained models among ``models`` learned it, then ``--option``'s.

    A suite fixes its games' options (their ``view``) over both.
    """
    from tsmg.apps.evaluation.runner import trained_game_options

    options = {game: trained_game_options(models, game, given) for game in game_ids}
    if suite is not None:
        options = {game: {**values, **suite.game_options().get(game, {})} for game, values in options.items()}
    return {game: values for game, values in options.items() if values}


def cmd_eval(args: argparse.Namespace) -> int:
    """Run (or resume) an evaluation; exit 0 only if every planned episode completed."""
    config = config_from_args(args)
    from tsmg.apps.evaluation.runner import Budget, run_eval

    budget = None
    if args.max_cost is not None or args.max_tokens_total is not None:
        budget = Budget(max_cost_usd=args.max_cost, max_tokens=args.max_tokens_total)
        budget.check_prices(config)
    if args.dry_run:
        print(dry_run_text(config))
        if args.sample:
            from tsmg.apps.evaluation.estimate import estimate_from_samples

            print(estimate_from_samples(config, args.sample).text(args.concurrency))
        return 0

    out = args.out or Path("runs") / (config.suite or f"eval-{config.seed}")

    def announce(present: int, planned: int) -> None:
        if present:
            missing = f"playing the {planned - present} missing" if present < planned else "nothing left to play"
            print(f"resuming: {present} of {planned} episodes present in {out}; {missing}", flush=True)

    try:
        result = run_eval(
            config,
            out,
            concurrency=args.concurrency,
            retries=args.retries,
            progress=not args.no_progress,
            budget=budget,
            token_ids=not args.no_token_ids,
            on_start=announce,
        )
    except KeyboardInterrupt:  # every finished episode is already in episodes.jsonl: a rerun plays the rest
        print(f"\n{interrupted_text(args, out)}", file=sys.stderr, flush=True)
        return 130
    from tsmg.apps.evaluation.report import comparison_rows, markdown_table, suite_rows

    runs = [(out.name, result.summary)]
    print(markdown_table(comparison_rows(runs), totals=suite_rows(runs)))
    print(f"\n{result.completed}/{result.planned} episodes completed; report: {out / REPORT_FILE}")
    print(view_text(out))
    errors = Counter(failure.error or "unknown error" for failure in result.failures)
    for error, count in errors.most_common(5):  # the same server message once, with its count
        print(f"failed: {count} episode{'s' if count > 1 else ''}: {error}", file=sys.stderr)
    if result.stopped:
        print(result.stopped, file=sys.stderr)
        return 3
    return 0 if result.ok else 1


def dry_run_text(config: EvalConfig) -> str:
    """The plan: games, matchups, seeds, episode count, and upper estimates of tokens and cost, with their parts."""
    from tsmg.apps.evaluation.estimate import calls_per_turn, seat_bounds

    plan = plan_evaluation(config)
    lines = [f"{len(plan)} episodes planned (seed {config.seed}):"]
    for game_id in config.games:
        game_plan = [p for p in plan if p.game_id == game_id]
        seeds = sorted({p.seed for p in game_plan})
        matchups = sorted({p.matchup for p in game_plan})
        lines.append(f"  {game_id}: {len(game_plan)} episodes, {len(matchups)} matchup(s): {'; '.join(matchups)}")
        lines.append(f"    seeds ({len(seeds)}): {', '.join(map(str, seeds[:5]))}{', ...' if len(seeds) > 5 else ''}")
    bounds = seat_bounds(config)
    total_in = sum(bound.tokens_in for bound in bounds)
    total_out = sum(bound.tokens_out for bound in bounds)
    turns = sum(bound.seats * bound.turns for bound in bounds)
    if config.suite is not None:  # a suite's games take the turns its reference run took, not their step limit
        measured = "as many turns a seat as random play and MCTS took on the suite's episodes"
        lines.append(f"model turns: about {turns:,} ({measured}); --sample N measures the time a turn takes")
        lines.append(
            f"estimated tokens: {total_in:,} in, {total_out:,} out (every turn writing its whole token budget, "
            "model-played seats only)"
        )
    else:
        lines.append(f"estimated tokens at most: {total_in:,} in, {total_out:,} out (model-played seats only)")
        lines.append(f"model turns at most: {turns:,}; --sample N measures the time a turn takes")
    limit = "the suite's reference turns" if config.suite is not None else "the step limit"
    lines += [line for bound in bounds for line in _bound_parts(bound, limit)]
    lap = config.lap
    lines.append(
        f"a model turn writes at most {calls_per_turn(config)} answer(s): {lap.votes} vote(s) x (1 + {lap.reprompt} "
        f"re-prompt(s)), each of up to {lap.max_tokens:,} tokens (a model's max_completion_tokens option wins)"
    )
    totals = {(bound.game, bound.model): (bound.tokens_in, bound.tokens_out) for bound in bounds}
    lines.append(_dry_run_cost(config, totals))
    return "\n".join(lines)


def _bound_parts(bound: SeatBound, limit: str) -> list[str]:
    """What one (game, model) bound is made of, in two lines: decisions, a prompt's tokens, answers; how counted."""
    prompts, lap = bound.prompts, bound.lap
    history = {"none": "", "last_k": f" (the last {lap.template.history_k})", "full": " (all)"}[lap.template.history]
    grows = f" + {prompts.history_turn + bound.budget:,} an earlier turn shown{history}" if history else ""
    reprompt = f" + {prompts.reprompt + bound.budget:,} a re-prompt" if lap.reprompt else ""
    every = ", every earlier answer taken at the whole budget and invalid" if grows or reprompt else ""
    return [
        f"  {bound.game} {bound.model}: {bound.tokens_in:,} in, {bound.tokens_out:,} out = {bound.seats:,} seat(s) "
        f"x {bound.turns:,} decisions ({limit}), each a prompt of {prompts.decision:,} tokens{grows}{reprompt}, "
        f"answers of up to {bound.budget:,}",
        f"    prompts: the LAP's messages at {prompts.decisions} decisions of {prompts.episodes} random-play "
        f"episode(s), the longest, counted with {prompts.how}; it assumes no observation longer than those{every}",
    ]


def _dry_run_cost(config: EvalConfig, bounds: dict[tuple[str, str], tuple[int, int]]) -> str:
    """The dry run's cost line: the priced models' bound in USD; ``n/a (no --price)`` for a hosted model without one.

    Local models (weights on this machine) and scripted players are not billed per token.
    """
    from tsmg.apps.evaluation.runner import is_hosted

    priced = [model for model in config.models if model in config.prices]
    unpriced = [model for model in config.models if model not in config.prices and is_hosted(model)]
    if not priced and not unpriced:
        return "estimated cost: none (no hosted model: local and scripted players are not billed per token)"
    if not priced:
        return f"estimated cost: n/a (no --price; give one with --price {unpriced[0]}=IN,OUT, USD per 1M tokens)"
    cost = 0.0
    for (_, model), (tokens_in, tokens_out) in bounds.items():
        price_in, price_out = config.prices.get(seat_spec(model), (0.0, 0.0))
        cost += (tokens_in * price_in + tokens_out * price_out) / 1e6
    missing = f"; n/a for {', '.join(unpriced)}: no --price" if unpriced else ""
    return (
        f"estimated cost{'' if config.suite else ' at most'}{' of the priced models' if unpriced else ''}: "
        f"${cost:,.4f} (every turn using its whole token budget, thinking included; priced: {', '.join(priced)}"
        f"{missing}); --sample N measures it instead"
    )


def cmd_exploitability(args: argparse.Namespace) -> int:
    """Print each model's exact exploitability in a game that measures it (and its best responses' value per seat)."""
    from tsmg.apps.evaluation.runner import trained_game_options, trained_policy
    from tsmg.exploitability import HasAverageExploitability, HasExploitability
    from tsmg.registry import make

    options = model_options_from_flags(args.model_option, args.model)
    lap = LAPConfig(action_format=ActionFormat(kind="choice"), temperature=args.temperature)
    given = parse_assignments(args.option, "--option")
    game = make(args.game, **given)  # the game is asked for the capability before any model loads
    if not isinstance(game, HasExploitability):
        raise ValueError(
            f"{args.game} does not measure exploitability (its game has no exploitability(policy) method, "
            f"tsmg.exploitability.HasExploitability): use {_games_with_exploitability()}"
        )
    if args.average and not isinstance(game, HasAverageExploitability):
        raise ValueError(
            f"{args.game} cannot measure an average policy (its game has no average_exploitability method): "
            "leave --average out"
        )
    reports = []
    for spec in args.model:
        parse_model_spec(spec)
        # a training run's model answers with its training prompt, on the game as it was trained on it
        policy = trained_policy(spec, lap, model_options=options.get(spec))
        # the game as the model plays it: its training run's options (its view), then --option
        played: Any = make(args.game, **trained_game_options([spec], args.game, given))
        reports.append((spec, played.exploitability(policy)))
    if args.average:  # the average of the rows above, at the temperature of the last (all share --temperature)
        measured = [report for _, report in reports]
        reports.append((f"average of {len(measured)}", game.average_exploitability(measured)))  # type: ignore[attr-defined]
    if args.json:
        print(json.dumps([{"model": spec, **report.as_dict()} for spec, report in reports], indent=2))
        return 0
    print("| model | temperature | exploitability | best response as player_0 | as player_1 |")
    print("|---|---|---|---|---|")
    for spec, report in reports:
        first, second = report.best_response
        print(f"| {spec} | {report.temperature:g} | {report.exploitability:.4f} | {first:+.4f} | {second:+.4f} |")
    return 0


def _games_with_exploitability() -> str:
    """The games that measure exploitability, for a refusal: the registered ones, and where namespaced ones are.

    Registered ids of one family (``OpenSpiel/NAME-v0``, over a hundred) are counted, not listed; a
    namespace's ids cannot be listed at all (``openspiel:NAME`` names any of OpenSpiel's games), so
    they are pointed at, not checked: the command asks the game itself once it is made.
    """
    from tsmg.exploitability import games_with_exploitability

    families: dict[str, list[str]] = {}
    for game_id in games_with_exploitability():
        families.setdefault(game_id.rpartition("/")[0], []).append(game_id)
    named = list(families.pop("", []))
    for family, ids in sorted(families.items()):
        named += ids if len(ids) <= 3 else [f"the {len(ids)} {family}/NAME-v0 games"]
    listed = ", ".join(named) or "no registered game"
    return f"{listed} (one that cannot be solved says why), or openspiel:NAME"


def cmd_report(args: argparse.Namespace) -> int:
    """Merge several run folders into one comparison table (and plots with --out)."""
    from tsmg.apps.evaluation.report import (
        check_one_view_per_game,
        comparison_rows,
        current_summary,
        markdown_table,
        plot_rows,
        pooled_rating_of_folders,
        pooled_rating_table,
        suite_rows,
    )

    check_one_view_per_game(args.runs)
    summaries = []
    for folder in args.runs:
        path = folder / SUMMARY_FILE
        if not path.exists():
            raise ValueError(f"{folder} has no summary.json: is it a `tsmg eval` run folder?")
        summaries.append((folder.name, current_summary(json.loads(path.read_text()), folder)))
    rows = comparison_rows(summaries)
    totals = suite_rows(summaries)
    pooled, refusal = pooled_rating_of_folders(
        [(name, summary, folder) for (name, summary), folder in zip(summaries, args.runs, strict=True)]
    )
    if args.json:
        merged: dict[str, Any] = {
            "rows": [{k: v for k, v in row.items() if k != "returns"} for row in totals + rows],
            "pooled_rating": pooled,
        }
        if refusal is not None:
            merged["pooled_rating_refused"] = refusal
        print(json.dumps(merged, indent=2))
        return 0
    table = markdown_table(rows, with_run=True, totals=totals)
    pooled_text = pooled_rating_table(pooled, refusal)
    if pooled_text:
        table += "\n\n## One rating across games\n\n" + pooled_text
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        plots = plot_rows(rows, args.out, prefix="comparison-")
        images = "\n".join(f"![{p.stem}]({p.name})" for p in plots)
        (args.out / "comparison.md").write_text(f"# Comparison\n\n{table}\n\n{images}\n")
    return 0
