"""``tsmg --import tests/register_failing_games.py ...``: registers the games of :mod:`tests.failing_games`.

Only the command-line tests import it (in a subprocess), so that ``tsmg check --all`` in the test
process never meets these broken games.
"""

import tsmg
from tests.failing_games import NoOracleLake, OldSignatureLake

tsmg.register("test/OldSignatureLake-v0", OldSignatureLake, description="old parse_action signature", max_steps=20)
tsmg.register("test/NoOracleLake-v0", NoOracleLake, description="no oracle", max_steps=20)
