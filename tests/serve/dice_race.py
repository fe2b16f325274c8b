"""``tsmg serve --import tests.serve.dice_race``: registers the races of :mod:`tests.serve.race_games`.

Only servers started by the tests import it (pyproject's pytest options keep the doctest collector
from importing it), so the catalog-wide tests never meet these deliberately wrong games.
"""

import tsmg
from tests.serve.race_games import DiceRace, FixedStartRace

tsmg.register("test/DiceRace-v0", DiceRace, description="a dice race that forgets to declare its random start")
tsmg.register("test/FixedStartRace-v0", FixedStartRace, description="a fixed start declared random")
