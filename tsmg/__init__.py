"""tsmg: Text-Mediated Stochastic Games and the language-model policies that play them.

Importing ``tsmg`` is light: it loads neither torch nor transformers nor any game module.
It installs the finder that keeps the import paths of moved modules working (:mod:`tsmg._moved`).
"""

from tsmg import _moved
from tsmg.core import AgentID, Game, GameCodeError, GameConfig, GameError, Invalid, RulesGame, StepResult
from tsmg.registry import GameOptionsError, GameSpec, UnknownGameError, make, register, spec, specs

__all__ = [
    "AgentID",
    "Game",
    "GameCodeError",
    "GameConfig",
    "GameError",
    "GameOptionsError",
    "GameSpec",
    "Invalid",
    "RulesGame",
    "StepResult",
    "UnknownGameError",
    "make",
    "register",
    "spec",
    "specs",
]
__version__ = "0.1.0"

_moved.install()
