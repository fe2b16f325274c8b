"""The embedded demo: MS-GRPO teaches a model built from scratch to play Frozen Lake, on a CPU, in minutes.

:func:`run_demo` builds a 0.15M-parameter Llama-shape model on the spot (no download), measures
its success on test seeds, trains it with MS-GRPO (groups of 8 episodes from one seed,
group-normalised episode return, absolute-advantage-weighted sampling, token-level clipped
loss), measures again on the same test seeds, and leaves a learning curve. Progress during
training (and the early stop) uses other, validation seeds, so that no decision looks at the
test seeds. For scale it prints a random policy, a hole-avoiding "right or down" heuristic and
the game's oracle on the test seeds.

Two settings:

* the standard 4x4 map (``FrozenLake-v0``, 16-step limit): one map, so the held-out episodes
  differ only in the sampling noise; success is measured with sampling at temperature 1;
* random 4x4 maps (``FrozenLake-NoSlip-v0``, 8-step limit, the MS-GRPO authors' training
  setting): held-out maps the model never trained on; success is measured greedily.

What makes the tiny model learn (each a plain configuration choice, shown in
:func:`demo_config`): the model sees only the grid lines of the observation
(``rollout.observation_lines``), its tokenizer keeps every grid cell a token of its own
(``model.tiny.tokenizer_corpus: prose``), answers are constrained to the four moves, and each
rollout feeds several optimizer steps (micro-batches of 64 with ``grad_accumulation: 1``, the
later ones off-policy and clipped as in PPO).

Random maps add two things against entropy collapse. Once the policy turns deterministic on a
map, its 8 episodes there end alike, the group carries no signal, and absolute-advantage-weighted
sampling draws none of it; when that holds for every group, nothing updates the policy any more
(runs plateaued anywhere between 55 % and 92 % depending on the seed). So each update plays 16
maps instead of 8 (a signal from one or two maps no longer drives a whole update), and an entropy
bonus covers every step of the rollout (``loss.entropy_scope: rollout``), not only the sampled
ones, so it keeps the choices stochastic even on updates without any signal. The learning rate
decays linearly to a tenth over the planned 300 updates, so that the policy settles.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.config import RolloutConfig, RunConfig
from training.presets import RANDOM_MAPS_GAME, TEST_SEED_START, demo_config, right_or_down
from tsmg.apps.cli_parser import examples
from tsmg.run_folder import CONFIG_FILE


@dataclass
class DemoResult:
    """What the demo measured.

    Attributes:
        game_id: The game trained on.
        before: Success of the untrained model on the test seeds.
        after: Success of the trained model on the test seeds.
        updates: Policy updates done.
        episodes: Training episodes played.
        seconds: Wall time from the model build to the last test (evaluations included).
        run_dir: The run folder (metrics.jsonl, checkpoints, final model).
        learning_curve: The PNG (None without matplotlib).
        baselines: Success of the reference policies on the test seeds.
    """

    game_id: str
    before: float
    after: float
    updates: int
    episodes: int
    seconds: float
    run_dir: Path
    learning_curve: Path | None
    baselines: dict[str, float] = field(default_factory=dict)


def baseline_success(game_id: str, seeds: list[int]) -> dict[str, float]:
    """Success of random play, the :func:`right_or_down` heuristic and the oracle on ``seeds``."""
    from tsmg.policies import CallablePolicy, OraclePolicy, RandomPolicy
    from tsmg.rollout import rollout
    from tsmg.summary import summarize

    policies: dict[str, Any] = {
        "random": RandomPolicy(seed=0),
        "right/down heuristic": CallablePolicy(right_or_down, name="right/down"),
        "oracle": OraclePolicy(),
    }
    return {
        name: summarize(rollout(game_id, policy, seeds=seeds)).success_rate or 0.0 for name, policy in policies.items()
    }


def success_on_seeds(model_dir: str | Path, rollout: RolloutConfig, run: RunConfig, seeds: list[int]) -> float:
    """Success of the model in ``model_dir`` on ``seeds``, played as the demo trains (one episode per seed)."""
    from backends.hf import HFBackend
    from training.rollout.engines import HFRolloutEngine
    from tsmg.rollout import plan_episodes
    from tsmg.summary import summarize

    backend = HFBackend(model_dir, threads=run.threads, max_batch_size=len(seeds))
    engine = HFRolloutEngine(backend, rollout, model_seats=["player"])
    plans = plan_episodes(rollout.game_id, seeds, group_size=1, id_prefix="test")
    batch = engine.play(plans, seed=run.seed + 1, temperature=run.eval_temperature)
    return summarize(batch.episodes).success_rate or 0.0


def run_demo(
    *,
    random_maps: bool = False,
    out_dir: str | Path | None = None,
    seed: int = 0,
    max_seconds: float | None = None,
    updates: int | None = None,
    stop_at: float | None = 0.98,
    test_episodes: int = 200,
    echo: Callable[[str], None] = print,
) -> DemoResult:
    """Train the demo model and report its success on test episodes before and after.

    Two held-out sets keep the figures honest: the periodic evaluation during training (100
    validation seeds) shows progress and decides the early stop; the before/after figures come
    from ``test_episodes`` other seeds that no decision ever looked at.

    Args:
        random_maps: Random maps (FrozenLake-NoSlip-v0, up to 10 minutes) instead of the
            standard map (up to 3 minutes).
        out_dir: The run folder (default ``runs/demo-standard`` or ``runs/demo-random-maps``);
            a previous demo there is replaced.
        seed: Seed of the run.
        max_seconds: Wall-time budget of the training.
        updates: Most updates.
        stop_at: End early once a validation evaluation reaches this success (None: never).
        test_episodes: Test episodes of the before/after figures.
        echo: Where progress lines go (the CLI prints them).

    Returns:
        The figures, also printed through ``echo``.
    """
    import games  # noqa: F401  (registers the catalog)
    from training.trainer import TrainHooks, base_model_source, train

    folder = Path(out_dir or ("runs/demo-random-maps" if random_maps else "runs/demo-standard"))
    if (folder / CONFIG_FILE).is_file():
        shutil.rmtree(folder)  # a previous demo run: the demo always starts from scratch
    config = demo_config(random_maps=random_maps, out_dir=folder, seed=seed, max_seconds=max_seconds, updates=updates)
    run = config.run
    test_seeds = list(range(TEST_SEED_START, TEST_SEED_START + test_episodes))
    how = "greedy" if run.eval_temperature == 0 else "sampled at temperature 1"
    what = "random 4x4 maps, 8-step limit" if random_maps else "the standard 4x4 map, 16-step limit"
    echo(f"tsmg demo: MS-GRPO trains a model built from scratch on {config.rollout.game_id} ({what})")
    echo(
        "  model: Llama shape, 2 layers, width 64 (0.15M parameters), random weights, no download; "
        "answers constrained to left/down/right/up"
    )
    echo(
        f"  success is measured {how}: during training on {run.eval_episodes} validation seeds, "
        f"before and after on {len(test_seeds)} test seeds"
    )
    baselines = baseline_success(config.rollout.game_id, test_seeds)
    echo(
        "  for scale, on the test seeds: "
        + "  ".join(f"{name} {100 * value:.1f}%" for name, value in baselines.items())
    )
    began = time.perf_counter()
    base_model = base_model_source(config.model, folder, seed=config.run.seed)
    before = success_on_seeds(base_model, config.rollout, config.run, test_seeds)
    echo(f"  untrained model on the test seeds: {100 * before:.1f}%")

    def on_update(step: int, metrics: dict[str, float]) -> None:
        validation = metrics.get("eval/success_rate")
        if validation is None:
            return
        training = metrics.get("rollout/success_rate", 0.0)
        episodes = int(metrics.get("rollout/episodes_total", 0))
        echo(
            f"  update {step:4d}  episodes {episodes:6d}  training success {100 * training:5.1f}%  "
            f"validation success {100 * validation:5.1f}%  [{time.perf_counter() - began:5.0f} s]"
        )

    def should_stop(step: int, metrics: dict[str, Any]) -> bool:
        validation = metrics.get("eval/success_rate")
        return stop_at is not None and validation is not None and validation >= stop_at

    result = train(config, hooks=TrainHooks(on_update=on_update, should_stop=should_stop))
    assert result.final_model is not None
    after = success_on_seeds(result.final_model, config.rollout, config.run, test_seeds)
    seconds = time.perf_counter() - began
    episodes = int(max((row.get("rollout/episodes_total") or 0 for row in result.metrics), default=0))
    echo("")
    echo(f"test success before training: {100 * before:5.1f}%")
    echo(
        f"test success after training:  {100 * after:5.1f}%   "
        f"({result.steps} updates, {episodes} training episodes, {seconds:.0f} s)"
    )
    if result.learning_curve is not None:
        echo(f"learning curve: {result.learning_curve}")
    echo(f"trained model: {result.final_model}")
    return DemoResult(
        game_id=config.rollout.game_id,
        before=before,
        after=after,
        updates=result.steps,
        episodes=episodes,
        seconds=seconds,
        run_dir=result.run_dir,
        learning_curve=result.learning_curve,
        baselines=baselines,
    )


def scripted_baselines(game_id: str, episodes: int, seed: int, echo: Callable[[str], None] = print) -> None:
    """``tsmg demo --no-train``: random and oracle play on ``episodes`` seeds from ``seed``, and the ceiling.

    For Frozen Lake it also says how many of the maps have a goal reachable within the step limit
    (the success an oracle should meet).

    Raises:
        ValueError: ``episodes`` is below 1.
    """
    import tsmg
    from games import frozen_lake_rules as rules
    from games.frozen_lake import FrozenLake
    from tsmg.policies import policy_from_spec
    from tsmg.rollout import rollout
    from tsmg.summary import summarize, summary_line

    if episodes < 1:
        raise ValueError(f"--episodes must be at least 1, got {episodes}")
    seeds = range(seed, seed + episodes)
    echo(f"tsmg demo: a random and an oracle policy on {game_id}, seeds {seeds[0]}..{seeds[-1]}\n")
    for policy in ("random", "oracle"):
        played = rollout(game_id, policy_from_spec(policy, seed=seed), seeds=seeds)
        echo(summary_line(game_id, policy, summarize(played)))
    game = tsmg.make(game_id)
    if isinstance(game, FrozenLake):
        max_steps = game.config.max_steps or 10**6
        reachable = 0
        for map_seed in seeds:
            game.reset(seed=map_seed)
            position, desc = game.state.position, game.state.desc
            reachable += rules.success_probability(desc, position, max_steps, game.config.is_slippery) > 0
        echo(f"\nMaps whose goal is reachable within the step limit: {100 * reachable / episodes:.1f}%")


def add_demo_command(commands: Any) -> None:
    """Register ``tsmg demo`` on an argparse sub-parser set (``parser.add_subparsers()``)."""
    demo = commands.add_parser(
        "demo",
        help="MS-GRPO trains a tiny model on Frozen Lake (--no-train: random vs oracle only)",
        description=(
            "Train a tiny model from scratch on Frozen Lake with MS-GRPO on a CPU and compare it with the random "
            "and right/down baselines, within a wall-time budget (--max-seconds: 180 s, --random-maps 600 s). "
            "--no-train plays only the random and oracle policies."
        ),
        epilog=examples("tsmg demo --no-train", "tsmg demo", "tsmg demo --random-maps --out runs/demo-rm --seed 1"),
    )
    demo.add_argument("--no-train", action="store_true", help="only play the random and oracle policies")
    demo.add_argument("--game", default=RANDOM_MAPS_GAME, metavar="ID", help="the game of --no-train")
    demo.add_argument("--episodes", type=int, default=500, help="episodes per policy with --no-train")
    demo.add_argument(
        "--random-maps", action="store_true", help="random 4x4 maps, the MS-GRPO training setting (up to 10 minutes)"
    )
    demo.add_argument("--out", type=Path, help="run folder (default runs/demo-standard or runs/demo-random-maps)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the run (with --no-train: the first map seed)")
    demo.add_argument("--max-seconds", type=float, help="training wall-time budget (default 180, random maps 600)")
    demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: Any) -> int:
    """``tsmg demo``: train (:func:`run_demo`), or with ``--no-train`` only the scripted baselines."""
    if args.no_train:
        scripted_baselines(args.game, args.episodes, args.seed)
        return 0
    from training.run_log import quiet_library_progress

    quiet_library_progress()
    run_demo(random_maps=args.random_maps, out_dir=args.out, seed=args.seed, max_seconds=args.max_seconds)
    return 0
