"""The evaluation harness: identical starts for every model, resumable runs, honest statistics.

``run_eval(config, out_dir)`` plays every (game, matchup, seed) of the plan that is not yet in
``out_dir/episodes.jsonl``, then writes ``summary.json``, ``report.md`` and PNG plots. Heavy
statistics and plotting libraries are imported only when a report is written. A
:class:`Budget` (USD, tokens) stops a run cleanly; a rerun with a larger one plays the rest.
"""

from tsmg.apps.evaluation.config import ConfigMismatchError, EvalConfig
from tsmg.apps.evaluation.plan import PlannedEpisode, episode_seeds, plan_evaluation
from tsmg.apps.evaluation.runner import Budget, EvalResult, run_eval

__all__ = [
    "Budget",
    "ConfigMismatchError",
    "EvalConfig",
    "EvalResult",
    "PlannedEpisode",
    "episode_seeds",
    "plan_evaluation",
    "run_eval",
]
