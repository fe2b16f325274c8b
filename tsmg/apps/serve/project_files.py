"""The text files of an exported OpenEnv project (:mod:`tsmg.apps.serve.project` writes them).

They follow OpenEnv 0.10's ``openenv init`` template file for file (``openenv.yaml``, the
``pyproject.toml`` with its ``server`` script, ``server/app.py`` with ``main()``, the
multi-stage ``server/Dockerfile`` on ``openenv-base``), so OpenEnv's and verifiers' tooling find
what they look for; what differs is said where it does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def render(
    name: str,
    game_id: str,
    description: str,
    extras: list[str],
    module: str | None,
    config: Mapping[str, Any],
    port: int,
    returns: tuple[float, float],
) -> dict[str, str]:
    """Every text file of the project of ``game_id``, by its path in the project.

    ``returns``: the reward range ``openenv.yaml`` declares (:func:`tsmg.apps.serve.project.observed_returns`).
    """
    title = "".join(part.capitalize() for part in name.split("_"))
    return {
        "openenv.yaml": _openenv_yaml(name, game_id, port, returns),
        "pyproject.toml": _pyproject(name, game_id, extras),
        "README.md": _readme(name, title, game_id, description, module, config, port),
        "__init__.py": f'"""{game_id} (tsmg) as an OpenEnv environment."""\n\n'
        f"from .client import {title}Env\nfrom .models import GameAction, GameObservation, GameState\n\n"
        f'__all__ = ["GameAction", "GameObservation", "GameState", "{title}Env"]\n',
        "models.py": f'"""The action, observation and state of {game_id}: tsmg\'s served-game models."""\n\n'
        "from tsmg.apps.serve.models import GameAction, GameObservation, GameState\n\n"
        '__all__ = ["GameAction", "GameObservation", "GameState"]\n',
        "client.py": _client(title, game_id, port),
        "server/__init__.py": f'"""The server of {game_id}."""\n',
        "server/app.py": _app(game_id),
        "server/Dockerfile": _dockerfile(port),
    }


def _openenv_yaml(name: str, game_id: str, port: int, returns: tuple[float, float]) -> str:
    # The validation block is what `openenv validate` reads (its static grader requires a reward range).
    low, high = returns
    return (
        f"spec_version: 1\nname: {name}\nversion: 0.1.0\ntype: space\nruntime: fastapi\n"
        f"app: server.app:app\nport: {port}\n"
        f"description: {json.dumps(f'{game_id} (tsmg), one text game per WebSocket session')}\n"
        "validation:\n"
        "  # The episode return's range: a tsmg game declares none, so this is the lowest and highest\n"
        "  # return (0 included) of 8 seeded random episodes at export; a better policy may leave it.\n"
        f"  reward:\n    range: [{low!r}, {high!r}]\n    oracle_tolerance: 0.0\n    floor_margin: 0.1\n"
        "  resources:\n    cpu: 1.0\n    memory_mb: 2048\n    disk_mb: 2048\n"
        "    episode_timeout_s: 600.0\n  capabilities:\n    verifier:\n      kind: reward_channel\n"
        "  types:\n    tags: [tsmg, text-game]\n"
    )


def _pyproject(name: str, game_id: str, extras: list[str]) -> str:
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "openenv-{name}"
version = "0.1.0"
description = {json.dumps(f"{game_id} (tsmg) as an OpenEnv environment")}
requires-python = ">=3.11"
dependencies = ["tsmg[{",".join(extras)}]", "openenv>=0.10,<0.11"]

[project.scripts]
# The server without Docker: uv run --project . server (or python -m server.app)
server = "{name}.server.app:main"

# tsmg comes from the copy under vendor/ (the version that exported this project).
[tool.uv.sources]
tsmg = {{ path = "vendor/tsmg" }}

[tool.setuptools]
include-package-data = true
packages = ["{name}", "{name}.server"]
package-dir = {{ "{name}" = ".", "{name}.server" = "server" }}

[tool.setuptools.package-data]
"{name}.server" = ["tsmg_serve.json"]
"""


def _app(game_id: str) -> str:
    return f'''"""The server of {game_id}: the game at the root as ``tsmg serve`` serves it, by the operator's rules.

Usage:
    python -m server.app --port 8000          # from this folder, loopback only (the documented local start)
    uvicorn server.app:app --host 0.0.0.0 --port 8000   # as the image runs it
"""

from pathlib import Path

from tsmg.apps.serve.app import create_app
from tsmg.apps.serve.project import read_project, serve_main

project = read_project(Path(__file__).with_name("tsmg_serve.json"))
# create_app(game, options, settings): verifiers' vf-build reads this call to tell a gym server from an MCP one.
app = create_app(project.game_id, project.game_options, project.settings)


def main() -> None:
    """Serve on --host/--port (default 127.0.0.1:8000) until interrupted."""
    serve_main(app, project)


if __name__ == "__main__":
    main()
'''


def _client(title: str, game_id: str, port: int) -> str:
    return f'''"""The client of {game_id}: OpenEnv's EnvClient typed with tsmg's models (one session per client)."""

from tsmg.apps.serve.client import GameEnvClient


class {title}Env(GameEnvClient):
    """Play {game_id} on a running server.

    Example:
        >>> with {title}Env(base_url="http://127.0.0.1:{port}").sync() as env:  # doctest: +SKIP
        ...     result = env.reset(seed=0)
        ...     print(result.observation.text, result.observation.legal_actions)
    """
'''


def _dockerfile(port: int) -> str:
    # OpenEnv's template, less what this project does not need (git, the in-repo build mode).
    return f"""# The image OpenEnv's tooling builds (openenv build, vf-build): openenv-base, uv sync, uvicorn.
ARG BASE_IMAGE=ghcr.io/huggingface/openenv-base:latest
FROM ${{BASE_IMAGE}} AS builder

COPY . /app/env
WORKDIR /app/env

RUN if ! command -v uv >/dev/null 2>&1; then \\
        curl -LsSf https://astral.sh/uv/install.sh | sh && \\
        mv /root/.local/bin/uv /usr/local/bin/uv; \\
    fi

# tsmg comes from vendor/tsmg (pyproject's [tool.uv.sources]); no lock file: resolved at build time.
RUN --mount=type=cache,target=/root/.cache/uv \\
    if [ -f uv.lock ]; then uv sync --frozen --no-editable; else uv sync --no-editable; fi

RUN mv /app/env/.venv /app/.venv

FROM ${{BASE_IMAGE}}

WORKDIR /app
COPY --from=builder /app/.venv /app/.venv
COPY --from=builder /app/env /app/env
RUN ln -s /app/.venv /app/env/.venv

ENV PATH="/app/.venv/bin:$PATH"
ENV PYTHONPATH="/app/env:$PYTHONPATH"

HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \\
    CMD curl -f http://localhost:{port}/health || exit 1

CMD ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port {port}"]
"""


def _readme(
    name: str, title: str, game_id: str, description: str, module: str | None, config: Mapping[str, Any], port: int
) -> str:
    models = ", ".join(config["opponent_models"]) or "none"
    allowed = config["client_options"]
    options = "all" if allowed is None else (", ".join(allowed) or "none")
    limits = ", ".join(f"{key}={value:g}" for key, value in config["option_limits"].items()) or "none"
    token = (
        "required: the server starts only with `TSMG_SERVE_TOKEN` set, and clients send `Authorization: Bearer TOKEN`"
        if config["token_required"]
        else "none: anyone who reaches the port may play (export with `--token` to require one)"
    )
    carried = f"\nThe game's own module, `{module}`, is carried in this folder.\n" if module else ""
    return f"""---
title: {game_id} (tsmg)
sdk: docker
pinned: false
app_port: {port}
tags:
  - openenv
  - tsmg
---

# {game_id} as an OpenEnv environment

{description or game_id}, a tsmg text game, served by OpenEnv's server at
the root of this one: the WebSocket `/ws` (one session per connection), `/reset`, `/step`,
`/state`, `/schema`, `/health`, `/metadata`, and tsmg's `/info`. Exported with
`tsmg serve --game {game_id} --export-project DIR`.
{carried}
## Start it

Without Docker, in an environment with tsmg's serve extra (`pip install './vendor/tsmg[serve]'`):

```bash
python -m server.app --port {port}     # from this folder; loopback only unless --host is given
```

With Docker: `openenv build .` (or `docker build -t {name} -f server/Dockerfile .`), then
`docker run -p {port}:{port} {name}`.

## Play it

```python
from openenv.core.generic_client import GenericEnvClient

with GenericEnvClient(base_url="http://127.0.0.1:{port}").sync() as env:
    result = env.reset(seed=0)
    print(result.observation["text"], result.observation["legal_actions"])
```

`client.py` has the typed client, `{title}Env`. verifiers' `OpenEnvEnv` takes this folder as its
`openenv_project` (after `vf-build`), TRL's OpenEnv route and `AutoEnv` connect to the server.

## What clients may ask for (the operator's settings, server/tsmg_serve.json)

- opponents of one-seat sessions: random, oracle, fixed:TEXT and the models {models} (default: {config["opponent"]})
- game options clients may set: {options}; limits: {limits}
- sessions at once: {config["max_sessions"]}; longest answer: {config["max_answer_chars"]} characters
- token: {token}
"""
