"""Shared test settings.

``collect_ignore``: modules that register deliberately broken games when imported, for ``tsmg
--import`` in the tests' subprocesses and servers. ``--doctest-modules`` would otherwise import
them while collecting, and every catalog-wide test (the checker over every registered game, fork,
``tsmg check --all``) would then meet those games.
"""

collect_ignore = ["register_failing_games.py", "serve/dice_race.py"]
