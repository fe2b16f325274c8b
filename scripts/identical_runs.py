"""Write the fixed-seed runs that tests/test_identical_runs.py compares record for record, and their reference.

Two runs, each on one thread in fp32 from a model built on the spot:

* ``demo``: the embedded demo's configuration (:func:`training.presets.demo_config`, seed 0) for 5
  updates, every update's episodes kept (``run.episodes_every: 1``), one validation evaluation;
* ``eval``: ``tsmg eval`` of that run's final model on Frozen Lake, 16 episodes from seed 7 (one at
  a time, at temperature 1, constrained to the four moves).

Their ``episodes.jsonl`` and ``metrics.jsonl`` are normalised (:func:`normalise`: wall times,
dates and paths dropped, the episode schema version and the fields schemas 4 to 7 added left out)
and compared row for row with the reference (:func:`differences`): every text, token, action and
count exactly, every float to a relative 1e-5. On one machine the runs are byte for byte the same;
between CPUs float32 kernels round differently in the 7th digit (a CPU with AMX against one
without), which is all the tolerance allows. The reference holds the records schema 3 wrote (the
code of main at bb20da2); schemas 4 to 7 only added fields (:data:`ADDED_IN_SCHEMA_4`,
:data:`ADDED_IN_SCHEMA_5`, :data:`ADDED_IN_SCHEMA_6`, :data:`ADDED_IN_SCHEMA_7`), so every field
schema 3 wrote must be the same, and the test checks the added ones on their own. ``python
scripts/identical_runs.py --write`` stores the normalised records in
``tests/data/identical-runs.json.gz``; the test reruns the runs and compares.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "identical-runs.json.gz"
#: How far a float may move between CPUs (their float32 kernels round differently).
RELATIVE_TOLERANCE, ABSOLUTE_TOLERANCE = 1e-5, 1e-7
#: Fields whose values are wall times, not what was computed (of the episode and of each step).
VOLATILE_EPISODE_FIELDS = frozenset({"latency_s"})
VOLATILE_METRIC_PREFIXES = ("time/",)
#: Left out of the comparison: metrics added since the reference (the test checks their values on their own).
ADDED_METRICS = frozenset({"optim/padding_share"})
#: Left out of the comparison: the version, and the fields schemas 4 to 7 added (episode, step).
ADDED_IN_SCHEMA_4 = (frozenset({"model_seats"}), frozenset({"temperature", "exact_logprobs", "trains"}))
ADDED_IN_SCHEMA_5 = frozenset({"influence"})
ADDED_IN_SCHEMA_6 = frozenset({"tools"})  # of each step
ADDED_IN_SCHEMA_7 = frozenset({"votes"})  # of each step
VERSION_FIELDS = frozenset({"schema_version"})


def _episode_content(row: dict[str, Any]) -> dict[str, Any]:
    left_out = VOLATILE_EPISODE_FIELDS | VERSION_FIELDS | ADDED_IN_SCHEMA_4[0] | ADDED_IN_SCHEMA_5
    content = {key: value for key, value in row.items() if key not in left_out}
    step_left_out = VOLATILE_EPISODE_FIELDS | ADDED_IN_SCHEMA_4[1] | ADDED_IN_SCHEMA_6 | ADDED_IN_SCHEMA_7
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
            row = {
                key: value
                for key, value in row.items()
                if not key.startswith(VOLATILE_METRIC_PREFIXES) and key not in ADDED_METRICS
            }
        else:
            row = _episode_content(row)
        lines.append(json.dumps(row, sort_keys=True, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def run_demo(folder: Path) -> Path:
    """Five updates of the demo's configuration in ``folder``; returns the run folder."""
    import games  # noqa: F401  (registers the catalog)
    from training.config import TrainConfig
    from training.presets import demo_config
    from training.trainer import train

    config = demo_config(out_dir=folder / "demo", seed=0, updates=5, eval_every=5, eval_episodes=8)
    document = config.model_dump(mode="json")
    document["run"].update(episodes_every=1, checkpoint_every=0, max_seconds=None, tensorboard=False)
    train(TrainConfig.model_validate(document))
    return folder / "demo"


def run_eval(folder: Path, model: Path) -> Path:
    """``tsmg eval`` of ``model`` on Frozen Lake (16 episodes from seed 7, one at a time) in ``folder``."""
    from tsmg.apps.cli import main

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


def records(folder: Path, runs: dict[str, Path] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Per run and file (``demo/episodes.jsonl``, ...): its normalised rows."""
    found: dict[str, list[dict[str, Any]]] = {}
    for run, path in (runs or run_both(folder)).items():
        for name in ("episodes.jsonl", "metrics.jsonl"):
            if (path / name).exists():
                text = normalise(name, (path / name).read_text(encoding="utf-8"), folder)
                found[f"{run}/{name}"] = [json.loads(line) for line in text.splitlines()]
    return found


def read_reference(path: Path = REFERENCE) -> dict[str, list[dict[str, Any]]]:
    """The stored records (:func:`records` of the reference code's runs)."""
    with gzip.open(path, "rt", encoding="utf-8") as stored:
        reference: dict[str, list[dict[str, Any]]] = json.load(stored)
    return reference


def differences(found: Any, expected: Any, where: str = "") -> list[str]:
    """Where ``found`` differs from ``expected``: floats beyond the tolerance, anything else at all.

    Returns one line per difference (``demo/episodes.jsonl[3].steps[0].logprobs[0]: ...``), empty
    when the records agree.
    """
    if isinstance(expected, dict) and isinstance(found, dict):
        if found.keys() != expected.keys():
            return [f"{where or 'the records'}: keys {sorted(found)} instead of {sorted(expected)}"]
        inside = [(found[key], expected[key], f"{where}.{key}" if where else key) for key in expected]
        return [line for item, wanted, at in inside for line in differences(item, wanted, at)]
    if isinstance(expected, list) and isinstance(found, list):
        if len(found) != len(expected):
            return [f"{where}: {len(found)} items instead of {len(expected)}"]
        pairs = enumerate(zip(found, expected, strict=True))
        return [line for i, (item, wanted) in pairs for line in differences(item, wanted, f"{where}[{i}]")]
    floats = isinstance(expected, float) and isinstance(found, float)
    if floats and math.isclose(found, expected, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE):
        return []
    if not floats and type(found) is type(expected) and found == expected:
        return []
    return [f"{where}: {found!r} instead of {expected!r}"]


def main() -> int:
    """Compare the runs with the reference and print the differences; ``--write`` stores them as the reference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the records as the reference, {REFERENCE}")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TSMG_AUTO_DTYPE", "float32")  # as the test suite: fp32 on a CPU with AMX too
    with tempfile.TemporaryDirectory() as scratch:
        found = records(Path(scratch))
    if args.write:
        text = json.dumps(found, sort_keys=True, separators=(",", ":"))
        REFERENCE.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))  # mtime 0: the same records, the same bytes
        print(f"wrote {REFERENCE}: " + ", ".join(f"{name} {len(rows)} rows" for name, rows in found.items()))
        return 0
    lines = [line for name in sorted(found) for line in differences(found[name], read_reference().get(name), name)]
    print("\n".join(lines[:20]) if lines else "the runs write the reference's records")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
