"""Measure a suite's reference returns: random play (score 0) and the reference bot (score 1) on its plan.

Plays the suite with ``random`` and its reference bot (``openspiel-mcts`` at the suite's
simulation count), each against the suite's opponent in every seat, on the suite's own seeds:
the same run as ``tsmg eval --suite NAME --model random --model openspiel-mcts --model-option
openspiel-mcts:simulations=100``. Prints each game's two mean returns; with ``--write`` stores
them, with the suite's fingerprint, the command, the date and the commit, in
``tsmg/apps/evaluation/suite_references.json``, where ``tsmg eval --suite`` reads them. The last line
is a JSON object with the figures.

    python bench/suite_reference.py --suite openspiel-small-v1 --write
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import time
from pathlib import Path

from tsmg.apps.evaluation.runner import run_eval
from tsmg.apps.evaluation.suites import REFERENCES_FILE, get_suite, measured_references, reference_config

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="openspiel-small-v1", help="suite name (default: openspiel-small-v1)")
    parser.add_argument("--out", type=Path, help="run folder (default: runs/reference-SUITE)")
    parser.add_argument(
        "--write", action="store_true", help="store the figures in tsmg/apps/evaluation/" + REFERENCES_FILE
    )
    args = parser.parse_args()
    suite = get_suite(args.suite)
    out = args.out or Path("runs") / f"reference-{suite.name}"
    start = time.perf_counter()
    result = run_eval(reference_config(suite), out, progress=False, write_report=False)
    seconds = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"{result.planned - result.completed} episodes of the reference run failed; see {out}")
    found = measured_references(suite, result.summary)
    print(f"{suite.name}: mean return of each model against {suite.opponent} in every seat ({seconds:.0f} s)")
    print(f"| game | random | {suite.reference_label} |")
    print("|---|---|---|")
    for game in suite.games:
        print(f"| {game} | {found['random'][game]:+.3f} | {found['reference'][game]:+.3f} |")
    if args.write:
        path = HERE / "tsmg" / "apps" / "evaluation" / REFERENCES_FILE
        stored = json.loads(path.read_text(encoding="utf-8"))
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
        stored[suite.name] = {
            "fingerprint": suite.fingerprint(),
            "command": f"python bench/suite_reference.py --suite {suite.name} --write",
            "date": datetime.date.today().isoformat(),
            "commit": commit.stdout.strip() or "unknown",
            **found,
        }
        path.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"stored in {path}")
    print(json.dumps({"suite": suite.name, "seconds": round(seconds, 1), **found}))


if __name__ == "__main__":
    main()
