"""Fixed small Sokoban levels in the standard text notation (XSB).

``#`` wall, space floor, ``.`` goal, ``$`` box, ``*`` box on a goal, ``@`` player, ``+`` player
on a goal. Floor that the player cannot reach (outside the outer wall) counts as wall.

The ``microban-*`` levels are the first levels of David Skinner's *Microban* collection (freely
distributable with credit to the author), transcribed by hand; the tests check that each one
is solvable and record the optimal number of moves.
"""

from __future__ import annotations

CLASSIC_LEVELS: dict[str, tuple[str, ...]] = {
    "microban-1": (
        "####",
        "# .#",
        "#  ###",
        "#*@  #",
        "#  $ #",
        "#  ###",
        "####",
    ),
    "microban-2": (
        "######",
        "#    #",
        "# #@ #",
        "# $* #",
        "# .* #",
        "#    #",
        "######",
    ),
    "microban-3": (
        "  ####",
        "###  ####",
        "#     $ #",
        "# #  #$ #",
        "# . .#@ #",
        "#########",
    ),
    "microban-4": (
        "########",
        "#      #",
        "# .**$@#",
        "#      #",
        "#####  #",
        "    ####",
    ),
    "microban-5": (
        " #######",
        " #     #",
        " # .$. #",
        "## $@$ #",
        "#  .$. #",
        "#      #",
        "########",
    ),
}
