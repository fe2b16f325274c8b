"""Which of TextArena's environments tsmg refuses here, and why: found by what this machine lacks, when asked.

A few refusals hold whatever is installed (:data:`ALWAYS`): a hosted language model judges the
outcome, so no seed replays an episode; the game draws from numpy's global generator, which an
episode cannot own (every other game draws from Python's ``random``, which the adapter gives each
episode); TextArena's own reset raises. Every other refusal is a probe of this machine, run when
the environment is made or the refusals are listed, and its reason says how to provide what is
missing:

* **NLTK's data** (:data:`NLTK_DATA`): the word games read NLTK corpora (and a part-of-speech
  tagger), which TextArena tries to download when their module is imported; offline they are
  missing, and the reason names the ``python -m nltk.downloader`` line that installs them. Where
  they are installed (``NLTK_DATA`` or NLTK's usual folders) the game is played.
* **The environment's module**: compiled by this Python before anything is imported (TextArena
  writes some games in Python 3.12 syntax), then imported, so that a module TextArena does not
  ship or a package it needs (``chess``, ``gym``) is named.
* **Starting it**: an environment whose reset reads a file the installed TextArena lacks is
  refused with the file's path (any environment, not only those listed here).

:data:`PROBED` lists the environments known to need one of these (found by
``scripts/textarena_survey.py``), so that ``tsmg games --refused`` can say which are refused on
this machine without starting all of TextArena's games.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import random
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tsmg import loading

__all__ = ["ALWAYS", "NLTK_DATA", "PROBED", "UnplayableGameError", "quietly", "refusal", "start_refusal"]

T = TypeVar("T")

#: The lock under which tsmg swaps Python's ``random`` state for TextArena's calls (shared with the adapter).
RANDOM_LOCK = threading.RLock()


class UnplayableGameError(ValueError):
    """A TextArena environment that cannot be played as a tsmg game here; the message says why.

    Attributes:
        reason: Why, and how to provide what is missing (the message without the environment's name).
    """

    def __init__(self, env_id: str, reason: str) -> None:
        """Name the environment and the reason."""
        super().__init__(f"TextArena's {env_id} cannot be played as a tsmg game: {reason}")
        self.env_id, self.reason = env_id, reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """Pickle by the environment and the reason (a worker process's error reaches its parent)."""
        return type(self), (self.env_id, self.reason)


_JUDGED = (
    "its outcome is judged by hosted language models (OpenRouter): it needs the network and a key, and no seed "
    "replays an episode"
)
_NUMPY_GLOBAL = (
    "it draws from numpy's global random generator, which tsmg cannot give each episode (the same seed would not "
    "replay the same episode)"
)
_BROKEN_RESET = "TextArena 0.7.4's reset raises for it (add_observation called without its observation_type)"

#: Environments refused on every machine, with the reason (TextArena's ``Name-v0`` ids).
ALWAYS: dict[str, str] = {
    **dict.fromkeys(["GuessWho-v0", "TwentyQuestions-v0", "TwentyQuestions-v0-hardcore"], _JUDGED),
    **dict.fromkeys(["Debate-v0", "Debate-v0-medium", "Debate-v0-long", "ScenarioPlanning-v0"], _JUDGED),
    **dict.fromkeys(["IteratedStagHunt-v0", "IteratedStagHunt-v0-randomized"], _NUMPY_GLOBAL),
    **dict.fromkeys(["SpellingBee-v0-small", "SpellingBee-v0", "SpellingBee-v0-large"], _NUMPY_GLOBAL),
    **dict.fromkeys(
        ["CharacterConclave-v0", "CharacterConclave-v0-long", "CharacterConclave-v0-extreme"], _BROKEN_RESET
    ),
}

_TAGGER = "averaged_perceptron_tagger_eng"
#: NLTK resources each word game reads (by family, the id up to its version), and where NLTK keeps them.
NLTK_DATA: dict[str, tuple[str, ...]] = {
    "Hangman": ("words",),
    "WordLadder": ("words",),
    "Wordle": ("words", _TAGGER),
    "WordSearch": ("words",),
    "DontSayIt": ("words", _TAGGER),
    "LetterAuction": ("words",),
    "WordChains": ("words",),
    "Codenames": ("words", _TAGGER),
}
_NLTK_PATHS = {"words": "corpora/words", _TAGGER: f"taggers/{_TAGGER}"}

#: Environments known to fail one of the probes somewhere (the survey's finds): what ``tsmg games --refused`` probes.
PROBED: tuple[str, ...] = (
    "Hangman-v0", "Hangman-v0-hardcore", "WordLadder-v0", "WordLadder-v0-medium", "WordLadder-v0-hard",
    "Wordle-v0", "Wordle-v0-hardcore", "Wordle-v0-long", "Wordle-v0-long-hardcore", "WordSearch-v0",
    "WordSearch-v0-hardcore", "DontSayIt-v0", "DontSayIt-v0-hardcore", "DontSayIt-v0-unlimited", "LetterAuction-v0",
    "LetterAuction-v0-medium", "LetterAuction-v0-hard", "WordChains-v0", "Codenames-v0", "Codenames-v0-hardcore",
    "Klondike-v0", "Checkers-v0", "Checkers-v0-long", "Chess-v0", "Chess-v0-long", "Chess-v0-blind",
    "ReverseTicTacToe-v0", "UltimateTexasHoldem-v0", "BabyAiText-v0", "UsedCar-v0-balanced",
    "UsedCarNegotiation-v0", "UsedCarNegotiation-v0-strong-buyer", "UsedCarNegotiation-v0-strong-seller",
    "ScorableGames-v0", "ScorableGames-v0-conservative", "ScorableGames-v0-game1", "ScorableGames-v0-game2",
    "ScorableGames-v0-game3", "ScorableGames-v0-7players", "ScorableGames-v0-medicalethics",
    "ScorableGames-v0-vendorretailer",
)  # fmt: skip
_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
#: Where a missing module's package has another name on PyPI.
_PACKAGES = {"chess": "chess", "gym": "gym", "babyai": "babyai", "babyai_text": "babyai-text"}


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """Run TextArena's code with the caller's ``random`` state restored after and its printing swallowed.

    TextArena's import changes Python's ``random`` state (a library it imports draws from it), its
    word games print NLTK's download errors, and some environments print their boards.
    """
    with RANDOM_LOCK:
        saved = random.getstate()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            random.setstate(saved)


def registry() -> dict[str, Any]:
    """TextArena's registry of environments (TextArena imported, the first time, under :func:`quietly`)."""
    with quietly():
        from textarena.envs.registration import ENV_REGISTRY

    return ENV_REGISTRY


def family(env_id: str) -> str:
    """The environment's family: its id up to the version (``KuhnPoker`` of ``KuhnPoker-v0-long``)."""
    return re.sub(r"-v\d+.*$", "", env_id)


def refusal(env_id: str) -> str | None:
    """Why TextArena's ``env_id`` cannot be played here (what is missing and how to provide it), or None.

    Checks, in order: :data:`ALWAYS`; NLTK's data for the word games; that this Python compiles
    the environment's module and that the module and the packages it imports are installed. (A file
    the environment reads is found missing when it starts: :func:`start_refusal`.)
    """
    if env_id in ALWAYS:
        return ALWAYS[env_id]
    missing = [name for name in NLTK_DATA.get(family(env_id), ()) if not _nltk_has(name)]
    if missing:
        return (
            f"it reads NLTK's {' and '.join(missing)} data, which is not installed (TextArena downloads it, which "
            f"needs the network): install it with `python -m nltk.downloader {' '.join(missing)}`, or point NLTK_DATA "
            "at a folder that holds it"
        )
    spec = registry().get(env_id)
    entry = getattr(spec, "entry_point", None)
    return _module_refusal(entry.partition(":")[0]) if isinstance(entry, str) else None


def start_refusal(error: BaseException) -> str | None:
    """The refusal an exception of an environment's first start stands for (a file it reads is missing), or None."""
    if isinstance(error, FileNotFoundError):
        # The path from TextArena's package folder on: the same reason on every machine (the catalog page lists it).
        missing = re.sub(r"\S*/(textarena/\S*)", r"\1", str(error.filename or " ".join(str(error).split())))
        return (
            f"the installed TextArena lacks a file it reads ({missing}): it is played where a TextArena "
            "installation has that file"
        )
    return None


def load_entry(entry: Callable[..., Any] | str) -> Callable[..., Any]:
    """The environment class an entry point names, imported under :func:`quietly`."""
    if not isinstance(entry, str):
        return entry
    with quietly():
        loaded: Callable[..., Any] = loading.load(entry)
    return loaded


def _nltk_has(resource: str) -> bool:
    try:
        import nltk  # type: ignore[import-untyped]
    except ImportError:
        return False
    try:
        nltk.data.find(_NLTK_PATHS.get(resource, resource))
    except LookupError:
        return False
    return True


def _module_files(module: str) -> list[Path] | None:
    """The source files importing ``module`` runs (its packages' ``__init__`` and its own), found without importing."""
    root, *parts = module.split(".")
    spec = importlib.util.find_spec(root)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = [folder / "__init__.py"]
    for part in parts[:-1]:  # a folder without __init__.py is a namespace package: nothing of its own runs
        folder = folder / part
        files.append(folder / "__init__.py")
    last = folder / parts[-1] if parts else folder
    own = last / "__init__.py" if last.is_dir() else last.with_suffix(".py")
    if not own.is_file():
        return None
    return [path for path in files if path.is_file()] + [own]


@functools.cache
def _module_refusal(module: str) -> str | None:
    """Why ``module`` cannot be imported here (this Python's syntax, a module not shipped, a package missing)."""
    files = _module_files(module)
    if files is None:
        return f"TextArena registers it, but the installed TextArena does not ship its module ({module})"
    for path in files:  # compiled before anything runs: a package's __init__ may import the module
        try:
            compile(path.read_bytes(), str(path), "exec")
        except SyntaxError as error:
            where = f"{error.msg}, {path.name} line {error.lineno}"
            if error.msg.startswith("f-string") and sys.version_info < (3, 12):  # PEP 701's f-strings (3.12)
                return (
                    f"TextArena's code for it is Python 3.12 syntax ({where}), and this is Python "
                    f"{_PYTHON}: run tsmg on Python 3.12 or later"
                )
            return f"TextArena's code for it does not compile on Python {_PYTHON} ({where})"
    try:
        with quietly():
            loading.import_module(module)
    except ModuleNotFoundError as error:
        name = (error.name or "").split(".")[0]
        package = _PACKAGES.get(name)
        how = f"pip install {package}" if package else f"install the package that provides the module {name}"
        return f"it needs the Python module {name}, which is not installed: {how}"
    return None
