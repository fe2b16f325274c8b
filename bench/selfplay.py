"""Self-play on zero-sum games: what plain self-play, the role-conditioned baseline and a fixed opponent teach.

Games and arms (``docs/selfplay.md``). Each seed builds one tiny model (0.15M parameters, Llama
shape, built from scratch) and every arm of that seed trains a copy of it (paired: the same
initial weights, the same run seed):

* ``self-play``: the model plays every seat; plain per-seat group normalisation (``ms-grpo``);
* ``self-play+rae``: the same with SPIRAL's role-conditioned baseline (``rae``, alpha 0.95);
* ``fixed-opponent``: the model against the random policy, its seat rotating from group to
  group (``seating: rotate``), ``ms-grpo``;
* (on request, ``--arms``) ``self-play+marshal`` (MARSHAL's per-seat normalisation),
  ``pool`` (against snapshots of itself every 10 updates, seats rotating) and, for tic-tac-toe
  only, ``vs-noisy-minimax`` (the single-agent ``TicTacToe-vsMinimax-v0``: minimax that plays a
  uniformly random legal move half the time, the model's seat drawn from each group's seed).

Everything else is shared: constrained choice over the legal moves; a compact prompt, the
games' compact view (game option ``view: compact``: the board and whose turn it is in
tic-tac-toe, the seat, the card and the betting in Kuhn poker; with the full observation and
the default system prompt an update of tic-tac-toe took 5 times as long); 8 groups of 8
episodes per update in tic-tac-toe and 16 groups of 8 in Kuhn poker (a group shares its deal);
AAW sampling, lr 1e-3 (``--lr``), full fine-tuning, one CPU thread.

``--warm-start`` (tic-tac-toe): before any arm, each seed's model is fine-tuned on the moves of
the catalog's minimax (5,000 games tsmg plays itself, ``TicTacToe-vsMinimax-v0`` with the oracle
in the learner's seat: 3,000 against random play, 2,000 against a minimax that plays at random
half the time; ``tsmg sft`` with the bench's own prompts, 4 epochs); "before" is then that model,
and every arm trains from it.

Before and after training each model plays, on held-out seeds, both seats (``--eval-episodes``
per seat) against the random policy and against the catalog's strong opponent (perfect minimax
in tic-tac-toe, the Nash strategy in Kuhn poker), greedy and sampled at temperature 1; in Kuhn
poker its exact exploitability is computed too (``games.kuhn_poker_exploitability``), in
tic-tac-toe the share of the opponent's lines of two that the model blocked when it had no win
of its own (against random play, greedy: every missed block loses to an opponent that sees it). Printed:
per game and arm, the mean over seeds (and the spread), the seeds where an arm beat plain
self-play, the paired Wilcoxon p (with scipy; five seeds cannot go below 0.0625), the CPU time
used; the last line is one JSON object.

    python bench/selfplay.py --seeds 5 --jobs 2 --out runs/selfplay-bench     # about 1.5 CPU-hours
    python bench/selfplay.py --seeds 5 --summarise runs/selfplay-bench       # the tables again
    python bench/selfplay.py --seeds 1 --updates tictactoe=5,kuhn=5 --eval-episodes 10   # a smoke run
    python bench/selfplay.py --games tictactoe --warm-start --lr 1e-4 --seeds 5 --out runs/selfplay-warm
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

GAMES = {"tictactoe": "TicTacToe-v0", "kuhn": "KuhnPoker-v0"}
DEFAULT_UPDATES = {"tictactoe": 150, "kuhn": 60}
GROUPS = {"tictactoe": 8, "kuhn": 16}
#: What the model is shown: each game's compact view (what a player needs; the rules text is left out).
VIEW = {"view": "compact"}
#: The prompt: the compact observation alone (no system message, no format instructions: the choice is constrained).
LAP = {"template": {"system": None, "user": "{observation}"}, "action_format": {"kind": "choice"}}
ARMS: dict[str, dict[str, Any]] = {
    "self-play": {"rollout": {"self_play": True}, "credit": {"name": "ms-grpo"}},
    "self-play+rae": {"rollout": {"self_play": True}, "credit": {"name": "rae", "params": {"alpha": 0.95}}},
    "fixed-opponent": {"rollout": {"opponent": "random", "seating": "rotate"}, "credit": {"name": "ms-grpo"}},
    "self-play+marshal": {"rollout": {"self_play": True}, "credit": {"name": "marshal"}},
    "pool": {
        "rollout": {"opponent_pool": {"snapshot_every": 10, "latest": 5}, "seating": "rotate"},
        "credit": {"name": "ms-grpo"},
    },
}
DEFAULT_ARMS = ["self-play", "self-play+rae", "fixed-opponent"]
ARMS["vs-noisy-minimax"] = {
    "rollout": {"game_id": "TicTacToe-vsMinimax-v0", "game_options": {"opponent_epsilon": 0.5}},
    "credit": {"name": "ms-grpo"},
}
#: Arms whose opponent is one game's own (a single-agent variant of it): arm -> the game it runs on.
ONE_GAME_ARMS = {"vs-noisy-minimax": "tictactoe"}
EVAL_SEED_START = 1_000_000
TEMPERATURES = {"greedy": 0.0, "sampled": 1.0}


def train_config(
    game: str, arm: str, seed: int, model: str | None, out_dir: Path, updates: int, lr: float = 1e-3
) -> Any:
    """The training configuration of one (game, arm, seed); ``model`` None: the tiny model built from ``seed``."""
    from training.config import TrainConfig

    data: dict[str, Any] = {
        "rollout": {
            "game_id": GAMES[game],
            "group_size": 8,
            "groups_per_update": GROUPS[game],
            "lap": LAP,
            "game_options": dict(VIEW),
        },
        "model": {"spec": "tiny" if model is None else f"hf:{model}", "finetune": "full", "dtype": "float32"},
        "optim": {"lr": lr, "micro_batch_size": 64, "grad_accumulation": 1},
        "run": {"out_dir": str(out_dir), "seed": seed, "updates": updates, "threads": 1, "tensorboard": False},
    }
    for section, values in ARMS[arm].items():
        data.setdefault(section, {}).update(values)
    data["rollout"]["game_options"] = {**VIEW, **data["rollout"]["game_options"]}  # an arm's own game keeps the view
    return TrainConfig.model_validate(data)


def play_against(game: str, model: Any, opponent: Any, episodes: int) -> dict[str, float]:
    """``model`` in each seat against ``opponent`` on the held-out seeds: win/draw/loss rates and mean return."""
    from tsmg.rollout import plan_episodes, rollout

    seats = ("player_0", "player_1")
    wins = draws = losses = 0
    total = 0.0
    threats = [0, 0]  # tic-tac-toe: (opponent's lines the model had to block, blocked)
    for seat in seats:
        other = seats[1 - seats.index(seat)]
        seeds = list(range(EVAL_SEED_START, EVAL_SEED_START + episodes))
        plans = plan_episodes(GAMES[game], seeds, id_prefix=f"eval-{seat}")
        for episode in rollout(GAMES[game], {seat: model, other: opponent}, plans=plans, game_options=VIEW):
            if episode.error is not None:
                raise RuntimeError(episode.error)
            mine, theirs = episode.returns[seat], episode.returns[other]
            wins += mine > theirs
            draws += mine == theirs
            losses += mine < theirs
            total += mine
            if game == "tictactoe":
                threats = [a + b for a, b in zip(threats, blocks(episode, seat), strict=True)]
    count = 2 * episodes
    figures = {"win": wins / count, "draw": draws / count, "loss": losses / count, "return": total / count}
    if game == "tictactoe":
        figures["threats_blocked"] = threats[1] / threats[0] if threats[0] else None
    return figures


def blocks(episode: Any, seat: str) -> tuple[int, int]:
    """Tic-tac-toe: ``seat``'s moves facing an opponent's line of two with no win of its own, and how many blocked it.

    Missing such a block loses to any opponent that sees the line, so the rate is a clean
    measure of defence (an immediate win is left out: taking it is as good as blocking).
    """
    from games.tictactoe_rules import completing_cells, mark_to_move

    needed = blocked = 0
    for step in episode.steps:
        if step.agent != seat or step.state_key is None or step.parsed_action is None:
            continue
        board = tuple(json.loads(step.state_key))  # TicTacToe-v0's state key is its board
        mark = mark_to_move(board)
        threat = completing_cells(board, 3 - mark)  # CROSS 1 and NOUGHT 2: the other mark
        if threat and not completing_cells(board, mark):
            needed += 1
            blocked += int(step.parsed_action) - 1 in threat  # cells are numbered 1-9 in the prompt
    return needed, blocked


def evaluate(game: str, model_dir: str, episodes: int) -> dict[str, Any]:
    """Win/draw/loss against random play and the strong opponent, greedy and sampled; Kuhn exploitability."""
    from backends.hf import HFBackend
    from tsmg.lap import LAP as LanguageAgent
    from tsmg.lap import LAPConfig
    from tsmg.policies import OraclePolicy, RandomPolicy

    backend = HFBackend(model_dir, threads=1)
    figures: dict[str, Any] = {}
    for label, temperature in TEMPERATURES.items():
        lap = LanguageAgent(backend, LAPConfig.model_validate({**LAP, "temperature": temperature}))
        figures[label] = {
            "random": play_against(game, lap, RandomPolicy(seed=7), episodes),
            "strong": play_against(game, lap, OraclePolicy(), episodes),
        }
        if game == "kuhn":
            from games.kuhn_poker_exploitability import kuhn_exploitability

            figures[label]["exploitability"] = kuhn_exploitability(lap, game_options=VIEW).exploitability
    return figures


def run_seed(job: dict[str, Any]) -> list[dict[str, Any]]:
    """One (game, seed): build the model, evaluate it, train and evaluate every arm; kept per arm in ``result.json``."""
    import games  # noqa: F401  (registers the catalog)
    from training.trainer import base_model_source, train

    os.nice(10)
    game, seed, folder = job["game"], job["seed"], Path(job["out"]) / job["game"] / f"seed-{job['seed']}"
    folder.mkdir(parents=True, exist_ok=True)
    config = train_config(game, "self-play", seed, None, folder, 1)
    model = base_model_source(config.model, folder, seed=config.run.seed)
    if job["warm_start"] is not None:  # every arm starts from the warm-started weights instead
        model = warm_start(seed, model, folder / "warm-start", Path(job["warm_start"]))
    before_file = folder / "before.json"
    if not before_file.exists():
        before_file.write_text(json.dumps(evaluate(game, model, job["eval_episodes"])))
    before = json.loads(before_file.read_text())
    results = []
    for arm in job["arms"]:
        result_file = folder / arm / "result.json"
        if not result_file.exists():
            started, cpu = time.perf_counter(), time.process_time()
            run_dir = folder / arm / "run"
            config = train_config(game, arm, seed, model, run_dir, job["updates"], job["lr"])
            trained = train(config, resume=(run_dir / "config.yaml").exists())
            after = evaluate(game, str(trained.final_model), job["eval_episodes"])
            record = {
                "game": game,
                "arm": arm,
                "seed": seed,
                "updates": trained.steps,
                "episodes": trained.metrics[-1].get("rollout/episodes_total"),
                "train_seconds": round(time.perf_counter() - started, 1),
                "cpu_seconds": round(time.process_time() - cpu, 1),
                "before": before,
                "after": after,
            }
            result_file.write_text(json.dumps(record))
        results.append(json.loads(result_file.read_text()))
    return results


# --------------------------------------------------------------------------- the oracle warm start
#: Tic-tac-toe transcripts of the warm start: (minimax's epsilon, episodes); its games against random play
#: show the model varied positions, those against a half-random minimax the positions strong play leads to.
ORACLE_GAMES = ((1.0, 3000), (0.5, 2000))
ORACLE_SEED_START = 5_000_000  # apart from the training (below 1,000,000) and the held-out seeds


def oracle_transcripts(folder: Path) -> Path:
    """Games of the catalog's minimax (``tsmg rollout --game TicTacToe-vsMinimax-v0 --model oracle``), written once."""
    import games  # noqa: F401  (registers the catalog)
    from tsmg.episode import write_episodes
    from tsmg.policies import OraclePolicy
    from tsmg.rollout import plan_episodes, rollout

    path = folder / "episodes-compact.jsonl"  # the compact view's text (games.views)
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    start = ORACLE_SEED_START
    for epsilon, episodes in ORACLE_GAMES:
        plans = plan_episodes("TicTacToe-vsMinimax-v0", list(range(start, start + episodes)), id_prefix=f"e{epsilon}")
        options = {"opponent_epsilon": epsilon, **VIEW}
        write_episodes(temporary, rollout("TicTacToe-vsMinimax-v0", OraclePolicy(), plans=plans, game_options=options))
        start += episodes
    temporary.rename(path)
    return path


def warm_start(seed: int, model: str, out_dir: Path, transcripts: Path) -> str:
    """``model`` fine-tuned on the oracle's moves (``tsmg sft``: the bench's own prompts, full weights); its folder."""
    from training.checkpoint import FINAL_DIR
    from training.sft import SFTConfig, run_sft

    if not (out_dir / FINAL_DIR).exists():
        config = SFTConfig.model_validate(
            {
                "data": {"episodes": [str(transcripts)]},
                "model": {"spec": f"hf:{model}", "finetune": "full", "dtype": "float32"},
                "lap": LAP,
                "optim": {"lr": 1e-3, "epochs": 4, "batch_size": 32, "schedule": "linear"},
                "run": {"out_dir": str(out_dir), "seed": seed, "threads": 1, "logging_steps": 100},
            }
        )
        run_sft(config)
    return str(out_dir / FINAL_DIR)


# --------------------------------------------------------------------------- the tables
def headline(game: str) -> dict[str, tuple[str, str, str, bool]]:
    """Figures of the table: name -> (temperature, opponent, statistic, higher is better)."""
    figures = {
        "non-loss vs random": ("greedy", "random", "non-loss", True),
        "non-loss vs random (T=1)": ("sampled", "random", "non-loss", True),
        "draw vs minimax": ("greedy", "strong", "draw", True),
        "draw vs minimax (T=1)": ("sampled", "strong", "draw", True),
        "threats blocked vs random": ("greedy", "random", "threats_blocked", True),
    }
    if game == "kuhn":
        figures = {
            "chips vs random": ("greedy", "random", "return", True),
            "chips vs random (T=1)": ("sampled", "random", "return", True),
            "chips vs Nash": ("greedy", "strong", "return", True),
            "chips vs Nash (T=1)": ("sampled", "strong", "return", True),
            "exploitability": ("greedy", "", "exploitability", False),
            "exploitability (T=1)": ("sampled", "", "exploitability", False),
        }
    return figures


def figure(evaluation: dict[str, Any], spec: tuple[str, str, str, bool]) -> float | None:
    """One figure of one evaluation (None: not measured, e.g. no threat to block, or a run kept from before)."""
    temperature, opponent, statistic, _ = spec
    if statistic == "exploitability":
        return float(evaluation[temperature]["exploitability"])
    outcome = evaluation[temperature][opponent]
    if statistic == "non-loss":
        return float(outcome["win"] + outcome["draw"])
    value = outcome.get(statistic)
    return None if value is None else float(value)


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per game, figure and arm: mean and spread over seeds before and after, and the paired test against self-play."""
    summary: dict[str, Any] = {}
    for game in dict.fromkeys(result["game"] for result in results):
        rows = [result for result in results if result["game"] == game]
        arms = list(dict.fromkeys(result["arm"] for result in rows))
        summary[game] = {}
        for name, spec in headline(game).items():
            entry: dict[str, Any] = {}
            before = measured({result["seed"]: figure(result["before"], spec) for result in rows})
            entry["before"] = _spread(list(before.values()))
            after_by_arm = {
                arm: measured(
                    {result["seed"]: figure(result["after"], spec) for result in rows if result["arm"] == arm}
                )
                for arm in arms
            }
            for arm, values in after_by_arm.items():
                entry[arm] = _spread(list(values.values()))
                shared = set(values) & set(after_by_arm.get("self-play", {}))
                if arm != "self-play" and shared:
                    entry[arm]["vs_self_play"] = _paired(after_by_arm["self-play"], values, higher_is_better=spec[3])
            summary[game][name] = entry
    return summary


def measured(values: dict[int, float | None]) -> dict[int, float]:
    """The seeds where a figure was measured."""
    return {seed: value for seed, value in values.items() if value is not None}


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "mean": statistics.fmean(values) if values else None,
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values, default=None),
        "max": max(values, default=None),
        "seeds": len(values),
    }


def _paired(reference: dict[int, float], other: dict[int, float], *, higher_is_better: bool) -> dict[str, Any]:
    seeds = sorted(set(reference) & set(other))
    differences = [other[seed] - reference[seed] for seed in seeds]
    better = sum((d > 0) if higher_is_better else (d < 0) for d in differences)
    worse = sum((d < 0) if higher_is_better else (d > 0) for d in differences)
    p_value = None
    if any(differences):
        try:
            from scipy.stats import wilcoxon

            p_value = float(wilcoxon(differences).pvalue)
        except ImportError:
            p_value = None
    return {"better": better, "worse": worse, "mean_difference": statistics.fmean(differences), "wilcoxon_p": p_value}


def _cell(entry: dict[str, Any], percent: bool) -> str:
    scale, unit = (100.0, "%") if percent else (1.0, "")
    if entry["mean"] is None:
        return "-"
    text = (
        f"{scale * entry['mean']:.1f}{unit} ± {scale * entry['sd']:.1f}"
        if percent
        else (f"{entry['mean']:+.3f} ± {entry['sd']:.3f}")
    )
    test = entry.get("vs_self_play")
    if test:
        p_text = "n/a" if test["wilcoxon_p"] is None else f"{test['wilcoxon_p']:.2g}"
        text += f" ({test['better']}↑ {test['worse']}↓, p {p_text})"
    return text


def report(summary: dict[str, Any], results: list[dict[str, Any]], arms: list[str], began: float) -> dict[str, Any]:
    """Print the tables; returns the headline figures."""
    for game, figures in summary.items():
        print(f"\n{GAMES[game]}: mean ± sd over seeds (after training: seeds better/worse than self-play, Wilcoxon p)")
        present = [arm for arm in arms if any(arm in entry for entry in figures.values())]
        print("| figure | before | " + " | ".join(present) + " |")
        print("|---|---|" + "---|" * len(present))
        for name, entry in figures.items():
            percent = not name.startswith(("chips", "exploitability"))
            cells = [_cell(entry[arm], percent) if arm in entry else "-" for arm in present]
            print(f"| {name} | {_cell(entry['before'], percent)} | " + " | ".join(cells) + " |")
    cpu = sum(result.get("cpu_seconds", 0.0) for result in results)
    print(f"\nCPU time of training and evaluation: {cpu / 3600:.2f} h over {len(results)} runs (the evaluations")
    print(f"before training not counted); this session's wall time {time.time() - began:.0f} s")
    return {
        game: {name: {arm: entry[arm]["mean"] for arm in entry} for name, entry in figures.items()}
        for game, figures in summary.items()
    } | {"cpu_hours": round(cpu / 3600, 3), "runs": len(results)}


def _updates(text: str) -> dict[str, int]:
    updates = dict(DEFAULT_UPDATES)
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in GAMES or not value.isdigit():
            raise SystemExit(f"--updates takes GAME=N pairs with GAME in {sorted(GAMES)}, got {part!r}")
        updates[name] = int(value)
    return updates


def main(argv: list[str] | None = None) -> int:
    """Run (or summarise) the benchmark; the last line printed is one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default="tictactoe,kuhn", help=f"comma-separated, among {sorted(GAMES)}")
    parser.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, among {sorted(ARMS)}")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--updates", default="", help="GAME=N,... (default tictactoe=150,kuhn=60)")
    parser.add_argument("--eval-episodes", type=int, default=100, help="held-out episodes per seat and opponent")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate of every arm")
    parser.add_argument(
        "--warm-start",
        action="store_true",
        help="tic-tac-toe: first fine-tune each seed's model on minimax's moves (tsmg's own transcripts); "
        "'before' is then the warm-started model, and every arm trains from it",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/selfplay-bench"))
    parser.add_argument("--summarise", type=Path, help="report the runs kept in this folder; train nothing")
    args = parser.parse_args(argv)
    games = [name for name in args.games.split(",") if name]
    arms = [name for name in args.arms.split(",") if name]
    unknown = sorted(set(games) - set(GAMES)) + sorted(set(arms) - set(ARMS))
    if unknown:
        parser.error(f"unknown games or arms {unknown}; games: {sorted(GAMES)}, arms: {sorted(ARMS)}")
    if args.warm_start and games != ["tictactoe"]:
        parser.error("--warm-start learns from tic-tac-toe's minimax: use it with --games tictactoe")
    began = time.time()
    if args.summarise is not None:
        results = [
            json.loads(path.read_text())
            for path in sorted(args.summarise.glob("*/seed-*/*/result.json"))
            if path.parts[-4] in games and path.parts[-2] in arms and int(path.parts[-3][5:]) < args.seeds
        ]
    else:
        updates = _updates(args.updates)
        transcripts = oracle_transcripts(args.out / "tictactoe" / "oracle") if args.warm_start else None
        jobs = [
            {
                "game": game,
                "seed": seed,
                "arms": [arm for arm in arms if ONE_GAME_ARMS.get(arm, game) == game],
                "updates": updates[game],
                "eval_episodes": args.eval_episodes,
                "out": str(args.out),
                "lr": args.lr,
                "warm_start": None if transcripts is None else str(transcripts),
            }
            for seed in range(args.seeds)
            for game in games
            if any(ONE_GAME_ARMS.get(arm, game) == game for arm in arms)
        ]
        results = []
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
            for finished in pool.map(run_seed, jobs):
                results.extend(finished)
                print(f"done: {finished[0]['game']} seed {finished[0]['seed']}", file=sys.stderr, flush=True)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(f"CPU time of this session's workers: {(usage.ru_utime + usage.ru_stime) / 3600:.2f} h", file=sys.stderr)
    if not results:
        print(f"no results in {args.summarise}", file=sys.stderr)
        return 1
    figures = report(summarise(results), results, arms, began)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
