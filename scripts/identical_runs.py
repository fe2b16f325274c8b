"""Write the fixed-seed runs that tests/test_identical_runs.py compares byte for byte, and their digests.

Two runs, each on one thread in fp32 from a model built on the spot:

* ``demo``: the embedded demo's configuration (:func:`training.demo.demo_config`, seed 0) for 5
  updates, every update's episodes kept (``run.episodes_every: 1``), one validation evaluation;
* ``eval``: ``tsmg eval`` of that run's final model on Frozen Lake, 16 episodes from seed 7 (one at
  a time, at temperature 1, constrained to the four moves).

Their ``episodes.jsonl`` and ``metrics.jsonl`` are normalised (:func:`normalise`: wall times,
dates and paths dropped, the episode schema version and the fields schema 4 added left out) and
hashed. The reference was written by schema 3 (main at bb20da2); schemas 4 and 5 only added fields
(:data:`ADDED_IN_SCHEMA_4`, :data:`ADDED_IN_SCHEMA_5`), so every field schema 3 wrote must be byte for
byte the same, and the test checks the added ones on their own. ``python
scripts/identical_runs.py --write`` stores the digests and a short excerpt in
``tests/data/identical-runs.json``; the test reruns the runs and compares.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "identical-runs.json"
#: Fields whose values are wall times, not what was computed (of the episode and of each step).
VOLATILE_EPISODE_FIELDS = frozenset({"latency_s"})
VOLATILE_METRIC_PREFIXES = ("time/",)
#: Left out of the comparison: the version, and the fields schemas 4 and 5 added (episode, step).
ADDED_IN_SCHEMA_4 = (frozenset({"model_seats"}), frozenset({"temperature", "exact_logprobs", "trains"}))
ADDED_IN_SCHEMA_5 = frozenset({"influence"})
VERSION_FIELDS = frozenset({"schema_version"})


def _episode_content(row: dict[str, Any]) -> dict[str, Any]:
    left_out = VOLATILE_EPISODE_FIELDS | VERSION_FIELDS | ADDED_IN_SCHEMA_4[0] | ADDED_IN_SCHEMA_5
    content = {key: value for key, value in row.items() if key not in left_out}
    step_left_out = VOLATILE_EPISODE_FIELDS | ADDED_IN_SCHEMA_4[1]
    content["steps"] = [
        {key: value for key, value in step.items() if key not in step_left_out} for step in row.get("steps", [])
    ]
    return content


def normalise(name: str, text: str, root: Path) -> str:
    """One run file's content without wall times, paths and the schema version, as sorted-key JSON lines.

    The scratch folder the runs were written in (``root``, part of the evaluated model's spec and
    so of episode ids and policy names) reads ``$RUNS``.
    """
    lines = []
    for line in text.replace(str(root), "$RUNS").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if name == "metrics.jsonl":
            row = {key: value for key, value in row.items() if not key.startswith(VOLATILE_METRIC_PREFIXES)}
        else:
            row = _episode_content(row)
        lines.append(json.dumps(row, sort_keys=True, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def run_demo(folder: Path) -> Path:
    """Five updates of the demo's configuration in ``folder``; returns the run folder."""
    import games  # noqa: F401  (registers the catalog)
    from training.config import TrainConfig
    from training.demo import demo_config
    from training.trainer import train

    config = demo_config(out_dir=folder / "demo", seed=0, updates=5, eval_every=5, eval_episodes=8)
    document = config.model_dump(mode="json")
    document["run"].update(episodes_every=1, checkpoint_every=0, max_seconds=None, tensorboard=False)
    train(TrainConfig.model_validate(document))
    return folder / "demo"


def run_eval(folder: Path, model: Path) -> Path:
    """``tsmg eval`` of ``model`` on Frozen Lake (16 episodes from seed 7, one at a time) in ``folder``."""
    from tsmg.cli import main

    out = folder / "eval"
    arguments = ["eval", "--game", "FrozenLake-v0", "--model", f"hf:{model}", "--episodes", "16", "--seed", "7"]
    arguments += ["--concurrency", "1", "--action-format", "choice", "--no-progress", "--out", str(out)]
    with contextlib.redirect_stdout(sys.stderr):  # its table names the scratch folder: keep stdout the digests
        code = main(arguments)
    if code != 0:
        raise SystemExit(f"tsmg eval failed with exit code {code}")
    return out


def run_both(folder: Path) -> dict[str, Path]:
    """Both runs in ``folder``: their run folders by name."""
    demo = run_demo(folder)
    return {"demo": demo, "eval": run_eval(folder, demo / "final")}


def digests(folder: Path, runs: dict[str, Path] | None = None) -> dict[str, dict[str, Any]]:
    """Per run and file: the sha256 of the normalised content, its line count and its first line."""
    found: dict[str, dict[str, Any]] = {}
    for run, path in (runs or run_both(folder)).items():
        for name in ("episodes.jsonl", "metrics.jsonl"):
            if not (path / name).exists():
                continue
            text = normalise(name, (path / name).read_text(encoding="utf-8"), folder)
            found[f"{run}/{name}"] = {
                "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "lines": text.count("\n"),
                "first_line": text.splitlines()[0][:2000],
            }
    return found


def main() -> int:
    """Print the digests; ``--write`` stores them as the reference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the digests in {REFERENCE}")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as scratch:
        found = digests(Path(scratch))
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if args.write:
        REFERENCE.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
