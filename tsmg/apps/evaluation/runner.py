"""Run an evaluation plan into a folder, resumably.

The folder holds ``config.json`` (what the run is), ``episodes.jsonl`` (append-only, one
finished episode per line, flushed as each finishes), ``failures.jsonl`` (episodes that could not
finish, with their error), ``summary.json``, ``report.md`` and plots. A game whose own code raises
stops the run (:class:`~tsmg.core.GameCodeError`): the failure, with its traceback, is appended to
``game_errors.jsonl``, the episodes finished before it stay in ``episodes.jsonl``, and rerunning
once the game is fixed plays the rest. Rerunning the same command
plays only the planned episodes missing from ``episodes.jsonl``; after a ``kill -9`` a torn last
line is cut off first, so nothing is lost or duplicated.

A run may have a budget (:class:`Budget`: USD, tokens, or both, counted over the whole folder).
Once it is spent no model request is started; the episodes cut short are not counted (they are
neither in ``episodes.jsonl`` nor failures), the summary says the run stopped at its budget, and
rerunning with a larger budget plays on from there.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import IO, Any

import numpy as np

from tsmg.apps.evaluation.config import EvalConfig
from tsmg.apps.evaluation.metrics import summarize_eval
from tsmg.apps.evaluation.plan import PlannedEpisode, plan_evaluation, seat_spec
from tsmg.core import Game, GameCodeError, Invalid
from tsmg.episode import Episode, read_episodes
from tsmg.lap import LAPConfig
from tsmg.model_spec import parse_model_spec
from tsmg.policies import Decision, DecisionRequest, OraclePolicy, Policy, policy_from_spec
from tsmg.registry import make
from tsmg.rollout import EpisodePlan, record_game_error, rollout
from tsmg.run_folder import CONFIG_FILE, EPISODES_FILE, FAILURES_FILE, SUMMARY_FILE, training_run_of
from tsmg.run_folder import repair_jsonl as repair_jsonl  # importable from here as before

logger = logging.getLogger(__name__)

PolicyFactory = Callable[[str, EvalConfig], Policy]


@dataclass
class EvalResult:
    """What a run achieved.

    Attributes:
        out_dir: The run folder.
        planned: Episodes in the plan.
        completed: Episodes in ``episodes.jsonl`` after the run.
        failures: Episodes that still failed after the retries (with their errors).
        summary: The content of ``summary.json``.
        stopped: Why the run stopped before its plan was played (its budget was spent), or None.
    """

    out_dir: Path
    planned: int
    completed: int
    failures: list[Episode] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        """Whether every planned episode completed."""
        return self.completed == self.planned


def build_policy(spec: str, config: EvalConfig) -> Policy:
    """The policy of a model spec under the run's settings (see :func:`trained_policy`)."""
    return trained_policy(spec, config.lap, seed=config.seed, model_options=config.model_options.get(spec))


def trained_policy(
    spec: str, lap: LAPConfig, *, seed: int = 0, model_options: Mapping[str, Any] | None = None
) -> Policy:
    """The policy of a model spec (see :func:`tsmg.policies.policy_from_spec`), prompted as it was trained.

    A model a training run wrote (``hf:RUN/checkpoints/step-N``, ``hf:RUN/final``) plays with the
    prompt it was trained with: the run's template, action format and observation lines (from
    ``RUN/config.yaml``); temperature, token budget, re-prompts and seed stay ``lap``'s. (The
    game's own options, such as a compact ``view``, are the game's: :func:`trained_game_options`.)
    """
    trained = training_prompt(spec)
    lap = lap if trained is None else trained.lap(lap)
    policy = policy_from_spec(spec, seed=seed, lap=lap, model_options=model_options)
    if trained is not None and trained.observation_lines is not None:
        from tsmg.policies import CompactView  # the trainer's own view of observations

        return CompactView(policy, trained.observation_lines)
    return policy


@dataclass(frozen=True)
class TrainingPrompt:
    """How a training run prompted its model (``rollout.lap`` and ``rollout.observation_lines`` of its config).

    Attributes:
        run_dir: The training run's folder.
        template: The prompt template (``PromptTemplate`` fields).
        action_format: The action format (``ActionFormat`` fields).
        observation_lines: The lines of each observation the model was shown (None: all of it).
        game_id: The game it was trained on (``rollout.game_id``).
        game_options: That game's options in training (``rollout.game_options``, e.g. ``view: compact``).
    """

    run_dir: Path
    template: dict[str, Any]
    action_format: dict[str, Any]
    observation_lines: str | None
    game_id: str | None = None
    game_options: dict[str, Any] = field(default_factory=dict)

    def lap(self, base: Any) -> Any:
        """``base`` (the evaluation's LAP settings) with this run's template and action format."""
        from tsmg.lap import ActionFormat, PromptTemplate

        return base.model_copy(
            update={
                "template": PromptTemplate.model_validate(self.template),
                "action_format": ActionFormat.model_validate(self.action_format),
            }
        )


def training_prompt(spec: str) -> TrainingPrompt | None:
    """The prompt of the training run that wrote the model ``spec`` names (None: not a training run's model).

    Recognised: ``hf:RUN/checkpoints/step-N`` and ``hf:RUN/final`` where ``RUN/config.yaml`` is a
    training configuration.
    """
    import yaml

    parsed = parse_model_spec(spec)
    if parsed.kind != "hf":
        return None
    run_dir = training_run_of(parsed.target)
    if run_dir is None:
        return None
    try:
        document = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
        rollout = document["rollout"]
        lap = rollout.get("lap") or {}
        return TrainingPrompt(
            run_dir,
            dict(lap.get("template") or {}),
            dict(lap.get("action_format") or {}),
            rollout.get("observation_lines"),
            rollout.get("game_id"),
            dict(rollout.get("game_options") or {}),
        )
    except (OSError, TypeError, KeyError, AttributeError, yaml.YAMLError):
        return None


def trained_game_options(specs: Sequence[str], game_id: str, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options of ``game_id`` for an evaluation of ``specs``: those their training runs had, then ``given``.

    An evaluation of a trained model plays the game as the model saw it in training (a compact
    ``view``, say); options given on the command line win. Models that are not a training run's,
    or whose run played another game, add nothing.

    Raises:
        ValueError: Two of the runs trained on ``game_id`` with options that differ where ``given`` is silent.
    """
    given = dict(given or {})
    found: dict[str, dict[str, Any]] = {}
    for spec in specs:
        trained = training_prompt(spec)
        if trained is not None and trained.game_id == game_id:
            found[spec] = {key: value for key, value in trained.game_options.items() if key not in given}
    if len({json.dumps(options, sort_keys=True) for options in found.values()}) > 1:
        listed = "; ".join(f"{spec}: {options}" for spec, options in found.items())
        raise ValueError(
            f"the models were trained on {game_id} with different game options ({listed}); "
            "choose the ones to play with --option KEY=VALUE"
        )
    return next(iter(found.values()), {}) | given


def run_eval(
    config: EvalConfig,
    out_dir: str | Path,
    *,
    concurrency: int = 64,
    retries: int = 1,
    progress: bool = False,
    policy_factory: PolicyFactory = build_policy,
    write_report: bool = True,
    budget: Budget | None = None,
    token_ids: bool = True,
    on_start: Callable[[int, int], None] | None = None,
) -> EvalResult:
    """Play the missing episodes of the plan and write the summary and report.

    Args:
        config: What to evaluate.
        out_dir: The run folder (created; resumed if it holds the same configuration).
        concurrency: Most episodes live at once per game and matchup.
        retries: Extra attempts for episodes that fail (errors are recorded either way).
        progress: Show a progress bar with ETA and live success rate on stderr.
        policy_factory: Builds the policy of a model spec (built once per spec and run).
        write_report: Also write ``report.md`` and the plots.
        budget: Spending limits over the whole run folder (what earlier runs of it spent counts).
        token_ids: Keep the token ids and logprobs in ``episodes.jsonl`` (False: a smaller file
            that training cannot use).
        on_start: Called with (planned episodes already in the folder, planned episodes) once
            every check has passed, before anything is played (the CLI says it is resuming).

    Raises:
        ConfigMismatchError: the folder holds a run with another configuration.
        ValueError: a cost budget with a model that has no price, the oracle on a game without one, or the
            random policy on a game that lists no moves.
        backends.BackendError: a model's server cannot be reached.
        GameCodeError: a game's own code raised (written to ``game_errors.jsonl`` first).
    """
    folder = Path(out_dir)
    # Bad input fails before any file is written and before any progress bar: the plan makes every
    # game (an unknown id or a bad option), every model is built (a bad spec, a missing API key) and
    # its server reached, and the oracle policy meets a game that has an oracle.
    if budget is not None:
        budget.check_prices(config)
    plan = plan_evaluation(config)
    config.check_folder(folder, write=False)
    episodes_path = folder / EPISODES_FILE
    previous = list(read_episodes(episodes_path)) if episodes_path.exists() else []
    done = {episode.episode_id for episode in previous}
    todo = [planned for planned in plan if planned.episode_id not in done]
    policies: dict[str, Policy] = {}
    for spec in dict.fromkeys(spec for p in todo for _, spec in p.seats):
        policy = policy_factory(seat_spec(spec), config)
        _check_reachable(policy)
        policies[spec] = policy if budget is None else BudgetedPolicy(policy, spec, budget, config)
    _check_scripts(config, todo)
    if budget is not None:
        for episode in previous:
            budget.charge_episode(episode, config.prices)
    config.check_folder(folder)
    if repair_jsonl(episodes_path):
        logger.warning("cut a torn last line off %s (an interrupted run)", episodes_path)
    if on_start is not None:
        on_start(len(plan) - len(todo), len(plan))
    failures: list[Episode] = []
    try:
        bound = _decisions_bound(config, todo) if progress else None
        with open(episodes_path, "a", encoding="utf-8") as sink, _progress(progress, len(todo), bound) as shown:
            advance, policies = shown.advance, {spec: shown.wrap(policy) for spec, policy in policies.items()}
            for _attempt in range(retries + 1):
                failures = []
                for (game_id, seats), group in groupby(todo, key=lambda p: (p.game_id, p.seats)):
                    if budget is not None and budget.spent:
                        break  # nothing more is started; what was cut short is played by a rerun
                    _play(
                        config, game_id, seats, list(group), policies, concurrency, sink, failures, advance, token_ids
                    )
                if not failures or (budget is not None and budget.spent):
                    break
                failed_ids = {episode.episode_id for episode in failures}
                todo = [planned for planned in todo if planned.episode_id in failed_ids]
    except GameCodeError as error:  # a bug of the game: no retry helps; the traceback goes to the file
        record_game_error(folder, error)
        raise
    if failures:
        with open(folder / FAILURES_FILE, "a", encoding="utf-8") as handle:
            for episode in failures:
                handle.write(episode.to_json() + "\n")
    completed = _completed_in_plan_order(episodes_path, plan)
    by_game: dict[str, list[Episode]] = {}
    for episode in completed:
        by_game.setdefault(episode.game_id, []).append(episode)
    summary = summarize_eval(config, by_game)
    summary["planned"], summary["completed"], summary["failed"] = len(plan), len(completed), len(failures)
    stopped = budget.stop_message() if budget is not None and budget.spent and len(completed) < len(plan) else None
    if stopped is not None:
        summary["stopped"] = stopped
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    if write_report:
        from tsmg.apps.evaluation.report import write_report as write_markdown_and_plots

        write_markdown_and_plots(summary, folder)
    return EvalResult(folder, len(plan), len(completed), failures, summary, stopped)


def _check_reachable(policy: Policy) -> None:
    """Refuse a model whose server nobody answers at (a backend that talks to one offers ``check_reachable``)."""
    check = getattr(getattr(policy, "model", None), "check_reachable", None)
    if check is not None:
        check()


def _check_scripts(config: EvalConfig, todo: Sequence[PlannedEpisode]) -> None:
    """Refuse, on the first seed each plays, the oracle where a game has none and random where it lists no moves."""
    checked = set()
    for planned in todo:
        kinds = {parse_model_spec(seat_spec(spec)).kind for _, spec in planned.seats} & {"oracle", "random"}
        if planned.game_id in checked or not kinds:
            continue
        checked.add(planned.game_id)
        game = make(planned.game_id, **config.game_options.get(planned.game_id, {}))
        try:
            if "oracle" in kinds:
                OraclePolicy.check_game(game, planned.seed)
            if "random" in kinds:
                _check_random(game, planned.seed)
        finally:
            game.close()


#: Rounds of random play in which :func:`_check_random` looks for a turn without listed moves.
RANDOM_CHECK_ROUNDS = 30


def _check_random(game: Game, seed: int) -> None:
    """Refuse the random policy where a seat has no listed moves to pick from in the first rounds of ``seed``.

    Raises:
        ValueError: A seat to move lists no moves (the message names the game and what to do).
    """
    game.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for round_index in range(RANDOM_CHECK_ROUNDS):
        if game.done:
            return
        actions = {}
        for agent in game.active_agents:
            legal = game.legal_actions(agent)
            if not legal:
                when = "at the start of an episode" if round_index == 0 else f"after {round_index} rounds"
                raise ValueError(
                    f"the random policy picks one of the moves a game lists, and {game.game_id} lists none for "
                    f"{agent} {when} (seed {seed}; its moves are open text): play it with a language model or "
                    "fixed:TEXT"
                )
            actions[agent] = legal[int(rng.integers(len(legal)))]
        game.step(actions)


def _play(
    config: EvalConfig,
    game_id: str,
    seats: tuple[tuple[str, str], ...],
    group: list[PlannedEpisode],
    policies: dict[str, Policy],
    concurrency: int,
    sink: IO[str],
    failures: list[Episode],
    advance: Callable[[Episode], None],
    token_ids: bool = True,
) -> None:
    by_agent = {agent: policies[spec] for agent, spec in seats}
    names = {agent: spec for agent, spec in seats}

    def on_episode(episode: Episode) -> None:
        # Name seats by model spec so summaries group by what the user asked for.
        episode.policies = dict(names)
        if episode.error is not None and episode.error.startswith(BUDGET_STOP):
            pass  # cut short by the budget: not finished, not failed; a rerun with more budget plays it
        elif episode.error is not None:
            failures.append(episode)
        else:
            sink.write(episode.to_json(token_ids=token_ids) + "\n")
            sink.flush()
        advance(episode)

    plans = [EpisodePlan(seed=p.seed, episode_id=p.episode_id) for p in group]
    rollout(
        game_id,
        by_agent,
        plans=plans,
        game_options=config.game_options.get(game_id, {}),
        max_concurrent=concurrency,
        on_episode=on_episode,
    )


def _completed_in_plan_order(path: Path, plan: list[PlannedEpisode]) -> list[Episode]:
    if not path.exists():
        return []
    latest = {episode.episode_id: episode for episode in read_episodes(path)}
    return [latest[planned.episode_id] for planned in plan if planned.episode_id in latest]


def _decisions_bound(config: EvalConfig, todo: Sequence[PlannedEpisode]) -> float | None:
    """Most decisions a planned episode can take, averaged over ``todo`` (None: a game has no step limit)."""
    from tsmg.apps.evaluation.progress import decisions_bound

    bounds: dict[str, int | None] = {}
    for game_id in dict.fromkeys(planned.game_id for planned in todo):
        game = make(game_id, **config.game_options.get(game_id, {}))
        try:
            bounds[game_id] = decisions_bound(game)
        finally:
            game.close()
    if not todo or any(bound is None for bound in bounds.values()):
        return None
    return sum(bounds[planned.game_id] or 0 for planned in todo) / len(todo)


@dataclass
class _Shown:
    """What the progress display needs from the run: finished episodes, and the policies whose decisions it counts."""

    advance: Callable[[Episode], None]
    wrap: Callable[[Policy], Policy]


@contextmanager
def _progress(enabled: bool, total: int, bound: float | None = None) -> Iterator[_Shown]:
    """A rich progress bar of episodes, with decisions, an ETA from their throughput and the live success rate.

    A no-op when disabled. See :mod:`tsmg.apps.evaluation.progress` for why decisions are counted.
    """
    if not enabled or total == 0:
        yield _Shown(lambda episode: None, lambda policy: policy)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from tsmg.apps.evaluation.progress import CountingPolicy, EvalProgress

    tracker = EvalProgress(total, bound)

    class Figures(ProgressColumn):
        """Decisions, their rate, the ETA, success and failures, redrawn with the clock."""

        def render(self, task: Any) -> Text:
            return Text(tracker.text())

    # A short bar: the figures after it are what a narrow terminal must still show.
    columns = (TextColumn("[bold]eval"), BarColumn(bar_width=12), MofNCompleteColumn(), TimeElapsedColumn(), Figures())
    with Progress(*columns, console=Console(file=sys.stderr)) as bar:
        task = bar.add_task("", total=total)

        def advance(episode: Episode) -> None:
            success = any(value for value in episode.success.values())
            tracker.finished(len(episode.steps), episode.error is not None, success)
            bar.update(task, advance=1)

        def wrap(policy: Policy) -> Policy:
            return CountingPolicy(policy, tracker)

        yield _Shown(advance, wrap)


BUDGET_STOP = "stopped: the run's budget is spent"
"""How the error of an episode cut short by its run's budget begins."""


class Budget:
    """A run's spending limits, in USD and in tokens (prompt plus completion, thinking included).

    Thread-safe: episodes against a server run on worker threads and charge it concurrently.
    Requests already in flight when it is spent still finish, so a run may overshoot by them.

    Args:
        max_cost_usd: Stop once this much is spent (needs a price for every model: ``EvalConfig.prices``).
        max_tokens: Stop once this many tokens are spent.
    """

    def __init__(self, max_cost_usd: float | None = None, max_tokens: int | None = None) -> None:
        if max_cost_usd is not None and max_cost_usd <= 0:
            raise ValueError(f"--max-cost must be > 0 USD, got {max_cost_usd}")
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError(f"--max-tokens-total must be > 0, got {max_tokens}")
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self.cost_usd = 0.0
        self.tokens = 0
        self._lock = threading.Lock()

    @property
    def spent(self) -> bool:
        """Whether a limit has been reached."""
        with self._lock:
            over_cost = self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd
            return over_cost or (self.max_tokens is not None and self.tokens >= self.max_tokens)

    def check_prices(self, config: EvalConfig) -> None:
        """Refuse a cost budget when a model of the run has no price (its spending could not be counted).

        Raises:
            ValueError: naming the models without a price and the option that gives one.
        """
        if self.max_cost_usd is None:
            return
        missing = [spec for spec in config.models if is_language_model(spec) and spec not in config.prices]
        if missing:
            prices = " ".join(f"--price {spec}=IN,OUT" for spec in missing)
            raise ValueError(f"--max-cost needs the price of every model (USD per million tokens): add {prices}")

    def charge(self, prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> None:
        """Count one model call (or several) of a model with ``price`` (USD per million in and out)."""
        price_in, price_out = price or (0.0, 0.0)
        with self._lock:
            self.tokens += prompt_tokens + completion_tokens
            self.cost_usd += (prompt_tokens * price_in + completion_tokens * price_out) / 1e6

    def charge_episode(self, episode: Episode, prices: Mapping[str, tuple[float, float]]) -> None:
        """Count what a finished episode spent, seat by seat (each seat at its model's price)."""
        for step in episode.steps:
            spec = episode.policies.get(step.agent, "")
            self.charge(step.prompt_tokens or 0, step.completion_tokens or 0, prices.get(seat_spec(spec)))

    def stop_message(self) -> str:
        """What the summary says when the run stopped at its budget."""
        with self._lock:
            parts = []
            if self.max_cost_usd is not None:
                parts.append(f"${self.cost_usd:.4f} of --max-cost {self.max_cost_usd:g}")
            if self.max_tokens is not None:
                parts.append(f"{self.tokens:,} of --max-tokens-total {self.max_tokens:,} tokens")
        return (
            f"the run stopped at its budget (spent {' and '.join(parts)}); episodes cut short are not counted: "
            "rerun the same command with a larger budget to play the rest"
        )


class BudgetedPolicy:
    """A policy that charges its decisions to a :class:`Budget` and makes none once it is spent.

    A refused decision carries ``error`` (starting with :data:`BUDGET_STOP`), so the rollout
    engine ends that episode without playing it further.
    """

    def __init__(self, policy: Policy, spec: str, budget: Budget, config: EvalConfig) -> None:
        """Wrap ``policy`` (the model spec ``spec``), charging at its price in ``config.prices``."""
        self.policy = policy
        self.name = policy.name
        self.budget = budget
        self.price = config.prices.get(seat_spec(spec))
        self.prefers_independent_episodes = bool(getattr(policy, "prefers_independent_episodes", False))

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """The wrapped policy's decisions while the budget lasts; refusals after."""
        if self.budget.spent:
            return [Decision(action=Invalid(BUDGET_STOP), error=BUDGET_STOP) for _ in requests]
        decisions = self.policy.act(requests)
        prompt = sum(decision.prompt_tokens or 0 for decision in decisions)
        written = sum(decision.completion_tokens or 0 for decision in decisions)
        self.budget.charge(prompt, written, self.price)
        return decisions


def is_language_model(spec: str) -> bool:
    """Whether a model spec (or the opponent's seat name) names a language model (not a scripted policy)."""
    return not parse_model_spec(seat_spec(spec)).scripted


def is_hosted(spec: str) -> bool:
    """Whether a model spec names a hosted model: a language model whose weights are elsewhere (billed per token)."""
    parsed = parse_model_spec(seat_spec(spec))
    return not parsed.scripted and not parsed.local_weights
