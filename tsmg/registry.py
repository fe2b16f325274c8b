"""Registry of games by versioned id (``Name-vN``), imported lazily from ``"module:Class"``.

Like Gymnasium's registry, registering a game costs nothing: its module is imported the first
time the game is made. Packages that ship games (the built-in ``games`` catalog among them)
expose an entry point in the ``tsmg.games`` group; loading it registers their games. So
``import tsmg`` stays light and depends on no catalog. Games registered in a script or module
of your own reach the command line with ``--import MODULE`` (or ``TSMG_IMPORT=MODULE``).
Families of ids no list could hold (``openspiel:NAME(PARAMS)``, ``textarena:ENV_ID``, a served
game's URL) are namespaces (:func:`register_namespace`), declared the same way in the
``tsmg.namespaces`` group by the layers above, which the registry never names.

Every game made from the registry ends: a game whose options set no step limit gets
:data:`DEFAULT_MAX_STEPS`.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tsmg import loading
from tsmg.core import Game

logger = logging.getLogger(__name__)

#: Step limit of a registered game whose options set none, so that every episode ends (Blackjack's
#: hands end by themselves, but not when its answers are invalid and forfeits are switched off).
DEFAULT_MAX_STEPS = 1000
#: Environment variable naming modules (comma-separated) that register games, imported first.
IMPORT_ENV_VAR = "TSMG_IMPORT"
_ID_PATTERN = re.compile(r"^(?:(?P<namespace>[\w.-]+)/)?(?P<name>[\w.:-]+?)(?:-v(?P<version>\d+))?$")
ENTRY_POINT_GROUP = "tsmg.games"
#: Ids with this prefix name an OpenSpiel game with OpenSpiel's parameter syntax (made lazily).
OPENSPIEL_PREFIX = "openspiel:"
#: Ids with this prefix name a TextArena environment by its TextArena id (made lazily).
TEXTARENA_PREFIX = "textarena:"
#: Entry-point group of the namespaces of game ids: an entry ``NAME`` holds the ids ``NAME:...``
#: (``openspiel:kuhn_poker``; a URL's scheme is one: ``http://HOST/GAME``), its value the
#: ``"module:function"`` building an id's :class:`GameSpec`. The layers above fill it
#: (pyproject.toml); the registry names none of them.
NAMESPACE_GROUP = "tsmg.namespaces"


class UnknownGameError(KeyError):
    """Raised by :func:`make` and :func:`spec` for an id nobody registered."""

    def __str__(self) -> str:
        """Keep the message readable (KeyError would quote it)."""
        return str(self.args[0])


class GameOptionsError(ValueError):
    """Raised when the options given to :func:`make` do not validate; says which and why."""


class GameModuleError(ImportError):
    """A module named to register games (``--import``, ``$TSMG_IMPORT``) cannot be imported."""


@dataclass(frozen=True)
class GameSpec:
    """How to build one registered game.

    Attributes:
        id: Versioned id, e.g. ``"FrozenLake-NoSlip-v0"``.
        entry_point: ``"module:Class"`` string or a callable returning a :class:`Game`.
        kwargs: Default options passed to the entry point (overridable in :func:`make`).
        description: One line saying what the game is.
    """

    id: str
    entry_point: str | Callable[..., Game]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def name(self) -> str:
        """The id without its version suffix."""
        match = _ID_PATTERN.match(self.id)
        return match.group("name") if match else self.id

    @property
    def version(self) -> int | None:
        """The id's version number, if it has one."""
        match = _ID_PATTERN.match(self.id)
        return int(match.group("version")) if match and match.group("version") else None

    def load(self) -> Callable[..., Game]:
        """Import and return the entry point."""
        if callable(self.entry_point):
            return self.entry_point
        if ":" not in self.entry_point:
            raise ValueError(f"entry point {self.entry_point!r} of {self.id} must be 'module:Class'")
        factory: Callable[..., Game] = loading.load(self.entry_point)
        return factory

    def make(self, **overrides: Any) -> Game:
        """Build the game with the spec's defaults updated by ``overrides``.

        A game whose options set no step limit (and whose config has one) gets
        :data:`DEFAULT_MAX_STEPS`; pass ``max_steps=None`` to mean no limit.
        """
        options = {**self.kwargs, **overrides}
        factory = self.load()
        config = getattr(factory, "Config", None)
        fields = getattr(config, "model_fields", {})
        if "max_steps" not in options and "max_steps" in fields and fields["max_steps"].default is None:
            options["max_steps"] = DEFAULT_MAX_STEPS
        try:
            game = factory(**options)
        except ValidationError as error:
            config = getattr(factory, "Config", None)
            known = sorted(config.model_fields) if config is not None else []
            raise GameOptionsError(_explain_validation(self.id, error, known)) from None
        game.game_id = self.id
        game.factory = functools.partial(self.make, **overrides)  # what a replay fork builds its twin with
        return game


_registry: dict[str, GameSpec] = {}
_plugins_loaded = False
_plugins_loading = False  # set while the entry points are imported (a plugin may make games meanwhile)
_plugins_lock = threading.RLock()


def register(
    id: str,
    entry_point: str | Callable[..., Game],
    *,
    description: str = "",
    **kwargs: Any,
) -> GameSpec:
    """Register a game under a versioned id.

    Args:
        id: ``Name-vN`` (``namespace/Name-vN`` for third-party games).
        entry_point: ``"module:Class"`` (imported lazily) or a callable returning a game.
        description: One line shown by ``tsmg games``.
        **kwargs: Default options for the game (e.g. ``max_steps=8``).

    Returns:
        The new :class:`GameSpec`.

    Example:
        >>> import tsmg
        >>> spec = tsmg.register("doc/Demo-v0", "games.frozen_lake:FrozenLake", max_steps=4)
        >>> spec.version
        0
        >>> tsmg.registry.unregister("doc/Demo-v0")
    """
    if not _ID_PATTERN.match(id):
        raise ValueError(f"invalid game id {id!r}: use 'Name-vN' or 'namespace/Name-vN'")
    if id in _registry:
        logger.warning("overriding registered game %s", id)
    game_spec = GameSpec(id=id, entry_point=entry_point, kwargs=dict(kwargs), description=description)
    _registry[id] = game_spec
    return game_spec


def unregister(id: str) -> None:
    """Remove a registered game (mostly for tests)."""
    _registry.pop(id, None)


_refusal_sources: list[str] = []


def register_refusals(reference: str) -> None:
    """Name the games a library offers that tsmg refuses to play, so that listings show them apart with the reason.

    Args:
        reference: ``"module:attribute"`` of a mapping, or of a function returning one, from what a
            user would type (``openspiel:crossword``) to why it is refused; imported only when a
            listing asks (:func:`refusals`), so registering stays free.
    """
    if reference not in _refusal_sources:
        _refusal_sources.append(reference)


def refusals() -> dict[str, str]:
    """Every refused game of the registered libraries, by the name a user would type, with the reason, sorted.

    A library that is not installed refuses nothing (its module cannot be imported, so it offers no game).
    """
    load_plugins()
    found: dict[str, str] = {}
    for reference in _refusal_sources:
        try:
            value = loading.load(reference)
        except ImportError:
            continue
        found.update(value() if callable(value) else value)
    return dict(sorted(found.items()))


def load_plugins() -> None:
    """Import every package that declares games in the ``tsmg.games`` entry-point group.

    Thread-safe: a thread that asks while another is loading waits for the whole catalog (64
    threads making games at once must never see a half-filled registry). A plugin that makes a game
    while it is being imported gets the registry as it stands, as before.
    """
    global _plugins_loaded, _plugins_loading
    if _plugins_loaded:
        return
    with _plugins_lock:
        if _plugins_loaded or _plugins_loading:
            return
        _plugins_loading = True
        try:
            found = loading.plugin_references(ENTRY_POINT_GROUP)
            for reference in found:
                try:
                    loading.load(reference)
                except Exception:  # a broken plugin must not break the others
                    logger.exception("could not load game plugin %s", reference)
        finally:
            _plugins_loaded = True
            _plugins_loading = False


def spec(id: str) -> GameSpec:
    """The spec registered under ``id``; an unversioned id resolves to its latest version.

    Raises:
        UnknownGameError: with the closest registered ids.
    """
    prefix = namespace_of(id)
    if prefix is not None:
        return _namespace_spec(prefix, id)
    load_plugins()
    if id in _registry:
        return _registry[id]
    versions = [s for s in _registry.values() if s.name == id and s.version is not None]
    if versions and not re.search(r"-v\d+$", id):
        return max(versions, key=lambda s: s.version or 0)
    raise UnknownGameError(
        f"no game registered as {id!r}.{_close_ids_hint(id)} `tsmg games` lists them all. A game registered in "
        f"your own module is found once that module is imported: `--import MODULE` on the command line (or "
        f"{IMPORT_ENV_VAR}=MODULE), or a 'tsmg.games' entry point in its package (docs/define-a-game.md)."
    )


def _close_ids_hint(id: str) -> str:
    """`` Did you mean: ...?`` with the registered ids close to ``id`` (only close ones), or nothing."""
    by_lower = {game_id.lower(): game_id for game_id in _registry}
    close = difflib.get_close_matches(id.lower(), list(by_lower), n=5, cutoff=0.8)
    return f" Did you mean: {', '.join(by_lower[match] for match in close)}?" if close else ""


def import_game_modules(modules: Iterable[str] = ()) -> list[str]:
    """Import modules that register games: ``modules`` plus those named in ``$TSMG_IMPORT``.

    A name is a module (``my_games`` or ``pkg.games``, found from the current directory too) or
    a path to a ``.py`` file. Returns the names imported.

    Raises:
        GameModuleError: A module cannot be found or fails to import (the message says which).
    """
    names = [name for name in modules if name]
    names += [name.strip() for name in os.environ.get(IMPORT_ENV_VAR, "").split(",") if name.strip()]
    if names and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does, so a module beside the user is found
    for name in names:
        try:
            if name.endswith(".py"):
                if not os.path.exists(name):
                    raise GameModuleError(f"cannot import games from {name!r}: no such file")
                loading.import_file(name)
            else:
                loading.import_module(name)
        except GameModuleError:
            raise
        except ModuleNotFoundError as error:
            raise GameModuleError(f"cannot import games from {name!r}: {error}") from None
        except Exception as error:
            raise GameModuleError(f"importing {name!r} failed: {type(error).__name__}: {error}") from None
    return names


def make(id: str, **overrides: Any) -> Game:
    """Build the game registered as ``id`` with its default options updated by ``overrides``.

    An id of a registered namespace (:func:`register_namespace`) is made by its loader: a URL
    (``http://HOST:PORT/GAME_ID``, also ``https``, ``ws``, ``wss``) plays the game served there by
    ``tsmg serve``; ``openspiel:NAME(PARAMS)`` is OpenSpiel's game of that name and parameters (the
    ``tsmg[openspiel]`` extra); ``textarena:ENV_ID`` TextArena's environment of that id
    (``tsmg[textarena]``).

    Raises:
        UnknownGameError: ``id`` is not registered (the message lists the closest ids).
        GameOptionsError: an option is unknown or of the wrong type (names the field).
    """
    return spec(id).make(**overrides)


def is_openspiel(id: str) -> bool:
    """Whether ``id`` names an OpenSpiel game in OpenSpiel's own syntax (``openspiel:goofspiel(num_cards=4)``)."""
    return id.startswith(OPENSPIEL_PREFIX)


_namespaces: dict[str, str | Callable[[str], GameSpec]] = {}
_namespace_entries_read = False


def register_namespace(prefix: str, loader: str | Callable[[str], GameSpec]) -> None:
    """Make every id starting with ``prefix`` by ``loader(id)``, a :class:`GameSpec` built on demand.

    How a layer above the kernel (or a plugin) adds a family of ids no list could hold: OpenSpiel's
    ``openspiel:NAME(PARAMS)``, TextArena's ``textarena:ENV_ID``, a served game's URL. Installed
    packages declare theirs in the ``tsmg.namespaces`` entry-point group (:data:`NAMESPACE_GROUP`:
    the entry ``NAME`` is the prefix ``NAME:``), read the first time an id is looked up; the
    loader is imported only when an id of its namespace is made.

    Args:
        prefix: What the ids start with (``"openspiel:"``, ``"https:"``).
        loader: ``"module:function"`` (imported lazily) or a function from an id to its spec.
    """
    _namespaces[prefix] = loader


def namespace_of(id: str) -> str | None:
    """The registered namespace prefix ``id`` starts with (the longest), or None for a plain id."""
    global _namespace_entries_read
    if not _namespace_entries_read:
        with _plugins_lock:  # no thread may see the flag set before the table is filled
            if not _namespace_entries_read:
                for entry in loading.plugin_entries(NAMESPACE_GROUP):
                    _namespaces.setdefault(f"{entry.name}:", entry.reference)
                _namespace_entries_read = True
    matches = [prefix for prefix in _namespaces if id.startswith(prefix)]
    return max(matches, key=len) if matches else None


def _namespace_spec(prefix: str, id: str) -> GameSpec:
    """The spec of ``id`` in the namespace ``prefix``, by its loader (imported only now: it may load a library)."""
    loader = _namespaces[prefix]
    try:
        build: Callable[[str], GameSpec] = loading.load(loader) if isinstance(loader, str) else loader
        return build(id)  # a loader may import its library only now
    except ModuleNotFoundError as error:
        own = loader.partition(":")[0] if isinstance(loader, str) else ""
        if error.name is None or own == error.name or own.startswith(error.name + "."):
            raise  # the loader's own module is missing: a broken registration, not a missing library
        raise GameModuleError(
            f"{id!r} is a game of the {prefix} namespace, which needs {error.name}, and it is not installed"
            + loading.install_hint(prefix.rstrip(":"))
        ) from None


def is_remote(id: str) -> bool:
    """Whether ``id`` is the URL of a served game rather than a registered id."""
    return id.startswith(("http://", "https://", "ws://", "wss://"))


def specs() -> Iterator[GameSpec]:
    """Every registered spec, sorted by id."""
    load_plugins()
    return iter(sorted(_registry.values(), key=lambda s: s.id))


def _explain_validation(game_id: str, error: ValidationError, known: list[str]) -> str:
    lines = [f"invalid options for {game_id}:"]
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"]) or "(options)"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = f"unknown option (options: {', '.join(known)})"
        allowed = problem.get("ctx", {}).get("expected")
        if allowed and str(allowed) not in message:
            message += f" (allowed: {allowed})"
        lines.append(f"  {location}: {message}")
    return "\n".join(lines)
