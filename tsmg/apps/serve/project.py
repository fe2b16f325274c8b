"""A registered game as a standard OpenEnv environment project: ``tsmg serve --game ID --export-project DIR``.

The project has the layout of OpenEnv's own ``openenv init`` template, which its tooling reads
(``openenv validate``, ``openenv build``, ``openenv push``; ``AutoEnv`` and TRL's OpenEnv route
connect to what it serves), and which verifiers' ``vf-build`` turns into the image its
``OpenEnvEnv`` runs in Prime's sandboxes::

    DIR/openenv.yaml             name, app (server.app:app), port, validation block
    DIR/pyproject.toml           depends on tsmg[serve] (vendored below); [project.scripts] server
    DIR/README.md                how to start it, with and without Docker; what it offers clients
    DIR/__init__.py, client.py, models.py   the typed client (tsmg's GameEnvClient) and models
    DIR/server/app.py            ``app = create_app(...)``: the game at the root, as tsmg serve serves it
    DIR/server/Dockerfile        OpenEnv's base image, ``uv sync``, uvicorn on port 8000
    DIR/server/tsmg_serve.json   the operator's settings (below), read when the server starts
    DIR/vendor/tsmg/             the tsmg that exported it (its packages and a pyproject from its metadata)
    DIR/<module>.py              the game's own module, when it is not part of an installed package

**What the operator allowed travels with it.** ``tsmg_serve.json`` holds the game (its id, entry
point and registered options), the opponents a session may name (``--opponent``,
``--opponent-model``), which options a client may set and how large (``--client-options``,
``--option-limit``), the session and size limits, and whether a token is required (the token
itself is never written: the server reads ``TSMG_SERVE_TOKEN`` when it starts, and refuses to
start without one when the export was made with a token). The server checks every request
against these, as ``tsmg serve`` does.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from tsmg import loading, registry
from tsmg.apps.serve.auth import TOKEN_ENV_VAR
from tsmg.apps.serve.environment import ServeSettings
from tsmg.apps.serve.limits import OptionRules
from tsmg.model_spec import parse_model_spec

SETTINGS_FILE = "tsmg_serve.json"
#: The port the project's server listens on in its image (OpenEnv's convention).
PORT = 8000
#: The packages of the tsmg distribution, vendored into the project.
TSMG_PACKAGES = ("tsmg", "backends", "games", "training")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")
#: The extra a game needs, by the module of a tsmg adapter its class is built on (catalog games need none).
ADAPTER_EXTRAS = {
    "tsmg.adapters.openspiel": "openspiel",
    "tsmg.adapters.openspiel_bots": "openspiel",
    "tsmg.adapters.textarena": "textarena",
    # PettingZoo itself is a dependency of tsmg; the games the adapter plays are its classic ones, which import pygame.
    "tsmg.adapters.pettingzoo": "classic",
}
#: The extra an opponent needs, by its kind of model spec (:mod:`tsmg.model_spec`); other scripted kinds need none.
OPPONENT_EXTRAS = {
    "openspiel-mcts": "openspiel",
    "openspiel-br": "openspiel",
    "openspiel-cfr": "openspiel",
    "hf": "hf",
    "smollm2": "hf",
    "tiny": "hf",
    "vllm": "vllm",
    "openai": "openai",
}


@dataclass(frozen=True)
class Project:
    """What an exported project serves, read back from its settings file.

    Attributes:
        game_id: The registered id it serves.
        game_options: Options to make the game with (beyond its registered ones).
        settings: The operator's limits, opponents and token.
    """

    game_id: str
    game_options: dict[str, Any]
    settings: ServeSettings


def project_name(game_id: str) -> str:
    """A Python-package-safe name for the project of ``game_id`` (``TicTacToe-v0`` -> ``tictactoe_v0``).

    Example:
        >>> project_name("my/GuessNumber-v0")
        'my_guessnumber_v0'
    """
    return re.sub(r"[^0-9a-z]+", "_", game_id.lower()).strip("_") or "game"


def export_project(
    directory: str | os.PathLike[str],
    game_id: str,
    settings: ServeSettings,
    *,
    game_options: Mapping[str, Any] | None = None,
    require_token: bool = False,
) -> Path:
    """Write the OpenEnv project of ``game_id`` into ``directory`` (new, or empty) and return its path.

    Raises:
        ValueError: The directory is not empty, the game is served elsewhere (a URL), or its
            entry point or options cannot travel (a function defined inside another, a script
            run as ``__main__``, options that are not JSON).
        UnknownGameError: No such game.
    """
    root = Path(directory)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ValueError(f"{root} is not an empty directory: give --export-project a new or empty one")
    if registry.is_remote(game_id):
        raise ValueError(f"{game_id} is served elsewhere already: export the game by its registered id")
    spec = registry.spec(game_id)
    entry_point, module = _entry_point(spec)
    options = {**spec.kwargs, **dict(game_options or {})}
    try:
        json.dumps(options, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError(
            f"the options of {spec.id} are not all JSON values, so the project cannot carry them"
        ) from None
    name = project_name(spec.id)
    root.mkdir(parents=True, exist_ok=True)
    (root / "server").mkdir()
    carried = _carry_module(module, root) if module is not None else None
    extras = _extras(spec, settings)
    config = {
        "game_id": spec.id,
        "entry_point": entry_point,
        "description": spec.description,
        "game_options": options,
        "module": carried,
        "opponent": settings.opponent,
        "opponent_models": list(settings.opponent_models),
        "client_options": None if settings.option_rules.allowed is None else sorted(settings.option_rules.allowed),
        "option_limits": dict(settings.option_rules.limits),
        "max_answer_chars": settings.max_answer_chars,
        "max_sessions": settings.max_sessions,
        "idle_timeout_s": settings.idle_timeout_s,
        "max_request_bytes": settings.max_request_bytes,
        "token_required": require_token,
    }
    (root / "server" / SETTINGS_FILE).write_text(json.dumps(config, indent=2) + "\n")
    _vendor_tsmg(root / "vendor" / "tsmg")
    files = _templates(name, spec.id, spec.description, extras, carried, config, observed_returns(spec.id, options))
    for relative, text in files.items():
        (root / relative).write_text(text)
    return root


def read_project(path: str | os.PathLike[str]) -> Project:
    """Read an exported project's settings file, register its game, and return what to serve.

    The game's own module (carried beside the settings) is imported first, so that the game
    registers as it did where it was exported; the registration is then made from the file's
    entry point and options, which are what was exported.

    Raises:
        ValueError: A token is required and ``TSMG_SERVE_TOKEN`` is not set.
    """
    path = Path(path)
    config = json.loads(path.read_text())
    if config.get("module"):
        project_root = str(path.resolve().parents[1])
        if project_root not in sys.path:
            sys.path.insert(0, project_root)
        loading.import_module(config["module"])
    registered = next((spec for spec in registry.specs() if spec.id == config["game_id"]), None)
    if registered is None or registered.kwargs != config["game_options"]:
        registry.register(
            config["game_id"],
            config["entry_point"],
            description=config.get("description", ""),
            **config["game_options"],
        )
    token = os.environ.get(TOKEN_ENV_VAR) or None
    if config.get("token_required") and token is None:
        raise ValueError(
            f"this project was exported to require a token: set {TOKEN_ENV_VAR}=TOKEN where the server runs "
            "(clients send 'Authorization: Bearer TOKEN')"
        )
    allowed = config.get("client_options")
    limits = {str(name): float(limit) for name, limit in (config.get("option_limits") or {}).items()}
    settings = ServeSettings(
        opponent=config["opponent"],
        opponent_models=tuple(config.get("opponent_models") or ()),
        option_rules=OptionRules(allowed=None if allowed is None else frozenset(allowed), limits=limits),
        max_answer_chars=int(config["max_answer_chars"]),
        max_sessions=int(config["max_sessions"]),
        idle_timeout_s=config.get("idle_timeout_s"),
        max_request_bytes=int(config["max_request_bytes"]),
        token=token,
    )
    return Project(config["game_id"], {}, settings)


def _entry_point(spec: registry.GameSpec) -> tuple[str, ModuleType | None]:
    """The spec's entry point as ``module:qualname``, and its module when the project must carry it."""
    if isinstance(spec.entry_point, str):
        reference = spec.entry_point
    else:
        qualname = getattr(spec.entry_point, "__qualname__", "")
        reference = f"{spec.entry_point.__module__}:{qualname}"
        if "<locals>" in qualname or not qualname:
            raise ValueError(
                f"{spec.id} is made by {qualname or spec.entry_point!r}, defined inside a function: "
                "define it at the top level of a module to export the game"
            )
    module_name = reference.partition(":")[0]
    if module_name == "__main__":
        raise ValueError(
            f"{spec.id} is defined in the script being run: register it in a module and "
            "export with tsmg --import MODULE serve --game ... --export-project DIR"
        )
    module = sys.modules.get(module_name) or loading.import_module(module_name)
    top = module_name.split(".")[0]
    if top in TSMG_PACKAGES or _installed_distribution(top) is not None:
        return reference, None
    return reference, module


def _installed_distribution(top: str) -> str | None:
    """The installed distribution that provides the top-level package ``top`` (None: none does)."""
    names = metadata.packages_distributions().get(top) or []
    return names[0] if names else None


def _carry_module(module: ModuleType, root: Path) -> str:
    """Copy the game's own module (a file, or its top-level package) into the project; its import name."""
    top = module.__name__.split(".")[0]
    source = Path(getattr(sys.modules.get(top, module), "__file__", "") or "")
    if not source.is_file():
        raise ValueError(f"cannot find the file of {module.__name__} to carry it into the project")
    if source.name == "__init__.py":
        shutil.copytree(source.parent, root / top, ignore=_SKIP)
    else:
        shutil.copyfile(source, root / f"{top}.py")
    return module.__name__


def _vendor_tsmg(target: Path) -> None:
    """The tsmg that runs here, as a buildable source tree: its packages and a pyproject from its metadata."""
    target.mkdir(parents=True)
    for package in TSMG_PACKAGES:
        source = Path(loading.import_module(package).__file__ or "").parent
        shutil.copytree(source, target / package, ignore=_SKIP)
    distribution = metadata.distribution("tsmg")
    base: list[str] = []
    extras: dict[str, list[str]] = {}
    for requirement in distribution.requires or []:
        text, _, marker = requirement.partition(";")
        found = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if found:
            extras.setdefault(found.group(1), []).append(text.strip())
        else:
            base.append(text.strip())
    listing = {name: sorted(requirements) for name, requirements in sorted(extras.items())}
    (target / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "tsmg"\nversion = "{distribution.version}"\nrequires-python = ">=3.11"\n'
        f"dependencies = {json.dumps(base)}\n\n[project.optional-dependencies]\n"
        + "".join(f"{name} = {json.dumps(requirements)}\n" for name, requirements in listing.items())
        + f"\n[tool.setuptools]\npackages = {{find = {{include = {json.dumps([f'{p}*' for p in TSMG_PACKAGES])}}}}}\n"
        '\n[tool.setuptools.package-data]\n"*" = ["py.typed", "*.txt", "*.json", "static/*"]\n'
    )


def _extras(spec: registry.GameSpec, settings: ServeSettings) -> list[str]:
    """Tsmg's extras the project installs: ``serve``, the adapter's the game is built on, and the opponents'.

    The game's come from its class (each class of its method resolution order, by module, in
    :data:`ADAPTER_EXTRAS`: a TextArena game needs ``textarena``, a user's subclass of an adapter's
    game too); the opponents' from their kind of model spec (:data:`OPPONENT_EXTRAS`: OpenSpiel's
    MCTS needs ``openspiel``, not the language-model stack).
    """
    made_by = loading.load(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    modules = {cls.__module__ for cls in inspect.getmro(made_by)} if isinstance(made_by, type) else {made_by.__module__}
    extras = {"serve"} | {ADAPTER_EXTRAS[module] for module in modules if module in ADAPTER_EXTRAS}
    for opponent in (settings.opponent, *settings.opponent_models):
        kind = parse_model_spec(opponent).kind
        if kind in OPPONENT_EXTRAS:
            extras.add(OPPONENT_EXTRAS[kind])
    return sorted(extras)


def observed_returns(game_id: str, options: Mapping[str, Any], episodes: int = 8) -> tuple[float, float]:
    """The lowest and highest return of any seat in a few seeded random episodes (0 included; widened to a range).

    A tsmg game declares no bounds on its returns; ``openenv.yaml`` must state a reward range,
    and says this is how it was found.
    """
    from tsmg.policies import RandomPolicy
    from tsmg.rollout import rollout

    played = rollout(game_id, RandomPolicy(seed=0), seeds=list(range(episodes)), game_options=dict(options))
    values = [0.0] + [float(value) for episode in played for value in episode.returns.values()]
    low, high = min(values), max(values)
    return low, high if high > low else low + 1.0


def _templates(
    name: str,
    game_id: str,
    description: str,
    extras: list[str],
    module: str | None,
    config: Mapping[str, Any],
    returns: tuple[float, float],
) -> dict[str, str]:
    """The project's text files, by path."""
    from tsmg.apps.serve import project_files

    return project_files.render(name, game_id, description, extras, module, config, PORT, returns)


def serve_main(app: Any, project: Project, argv: list[str] | None = None) -> None:
    """The ``main()`` of an exported project's ``server/app.py``: bind ``--host``/``--port``, say where, serve."""
    import argparse

    from tsmg.apps.serve.server import bind, run_app

    parser = argparse.ArgumentParser(description=f"Serve {project.game_id} (an exported tsmg project).")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=PORT, help=f"port (default {PORT}; 0 picks a free one)")
    parser.add_argument("--log-level", default="info", help="uvicorn's log level")
    args = parser.parse_args(argv)
    try:
        sock = bind(args.host, args.port)
    except OSError as error:
        raise SystemExit(f"error: {error}") from None
    host, port = sock.getsockname()[:2]
    print(
        f"tsmg serve: {project.game_id} on http://{host}:{port} (OpenEnv HTTP and WebSocket; Ctrl-C stops)", flush=True
    )
    run_app(app, sock=sock, log_level=args.log_level)
