"""`make test` states how long its set-up and its checks took (issue 25's budget: 20 min on 2 cores)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_LINE = re.compile(
    r"^\[time\] (?P<label>[^:]+): (?P<wall>\d+) s wall; CPU \(user system\) (?P<user>\d+m[\d.]+s) \d+m[\d.]+s; "
    r"load average \d",
    re.MULTILINE,
)


def _make(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _seconds(minutes_seconds: str) -> float:
    minutes, seconds = minutes_seconds.rstrip("s").split("m")
    return 60 * int(minutes) + float(seconds)


def test_make_test_times_the_set_up_and_the_checks_apart():
    # -n still runs the lines that call $(MAKE), so the timing lines print; nothing is installed or run.
    dry = _make("-n", "test")
    assert dry.returncode == 0, dry.stderr
    lines = list(TIME_LINE.finditer(dry.stdout))
    assert [line["label"] for line in lines] == [
        "set-up (venv and vLLM env and Chromium)",
        "checks (ruff and mypy and pytest)",
    ]
    setup_at, checks_at = (line.start() for line in lines)
    assert dry.stdout.index("setup_vllm_cpu_env.sh") < setup_at < dry.stdout.index("ruff check") < checks_at
    assert "TSMG_REQUIRE_VLLM=1 .venv/bin/pytest -n 2 --dist loadscope --durations=30" in dry.stdout


def test_the_timing_line_reports_wall_and_cpu_time_and_keeps_the_exit_status():
    burn = f"sleep 1; {sys.executable} -c 'sum(range(20_000_000))'"
    probe = _make("--eval", f"probe: ; @$(call timed,probe,{burn})", "probe")
    assert probe.returncode == 0, probe.stderr
    (line,) = TIME_LINE.finditer(probe.stdout)
    assert line["label"] == "probe" and int(line["wall"]) >= 1
    assert _seconds(line["user"]) > 0.05  # the CPU time of the command's own processes
    failing = _make("--eval", "fail: ; @$(call timed,failing,sh -c 'exit 3')", "fail")
    assert failing.returncode != 0 and "[time] failing: 0 s wall" in failing.stdout
