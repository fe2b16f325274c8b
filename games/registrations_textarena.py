"""Registrations of TextArena's environments as ``TextArena/<EnvId>`` (registration only; needs ``tsmg[textarena]``).

One id per environment TextArena 0.7.4 registers (its ``-train`` and ``-raw`` variants are the
same games under other wrappers, and tsmg renders its own prompts) that starts offline and passes
:func:`tsmg.checker.check_game`, played through :class:`tsmg.adapters.textarena.TextArenaGame`
with the player count in :data:`TEXTARENA_GAMES` (``textarena:<EnvId>`` makes any of them, or an
environment registered in TextArena later). Left out, with the reason:

* the environments :mod:`tsmg.adapters.textarena_refusals` refuses (hosted judges and numpy's
  global generator everywhere; NLTK's data, Python 3.12 syntax, modules or files the installed
  TextArena lacks where they are missing), refused by ``textarena:<EnvId>`` too and listed apart
  by ``tsmg games --refused`` and the catalog page (``textarena:<EnvId>`` plays one where what it
  needs is installed);
* :data:`CHECKER_FAILURES`: environments that start but fail the checker.

Found by ``scripts/textarena_survey.py`` (every environment started offline, with a timeout
each, then checked); ``tests/test_adapters_textarena.py`` keeps the lists complete and from
growing. Nothing is registered when TextArena is not installed (``pip install 'tsmg[textarena]'``).
"""

import importlib.util

from tsmg.registry import register, register_refusals

_TIMEOUT = "starting an episode took over 120 s (its puzzle generator retries until it finds a solvable one)"
#: Environments that start offline but fail tsmg's checker, with the reason (kept from growing by a test).
CHECKER_FAILURES: dict[str, str] = {
    "Countdown-v0": (
        "TextArena's Countdown passes add_observation's arguments out of order (the sender's place gets the "
        "message type), so a seat's messages cannot be read"
    ),
    "Set-v0": (
        "each answer is tried on a copy of the environment, and copying Set's takes 0.2 s (it keeps all 1,080 Sets "
        "of the deck): the checker's few hundred answers took over 2 minutes"
    ),
    "Sokoban-v0-medium": _TIMEOUT,
    "Sudoku-v0-hard": _TIMEOUT,
}

#: ``(TextArena id, players)`` of every registered environment.
TEXTARENA_GAMES: tuple[tuple[str, int], ...] = (
    ("2048-v0-ultra-easy", 1),
    ("2048-v0-mega-easy", 1),
    ("2048-v0-super-easy", 1),
    ("2048-v0-very-easy", 1),
    ("2048-v0-easy", 1),
    ("2048-v0", 1),
    ("2048-v0-hard", 1),
    ("2048-v0-very-hard", 1),
    ("2048-v0-extreme", 1),
    ("2048-v0-3x3", 1),
    ("2048-v0-5x5", 1),
    ("2048-v0-6x6", 1),
    ("2048-v0-8x8", 1),
    ("2048-v0-10x10", 1),
    ("Bandit-v0", 1),
    ("Bandit-v0-hard", 1),
    ("Blackjack-v0", 1),
    ("Blackjack-v0-long", 1),
    ("Crosswords-v0", 1),
    ("Crosswords-v0-hardcore", 1),
    ("Cryptarithm-v0", 1),
    ("FifteenPuzzle-v0", 1),
    ("FrozenLake-v0", 1),
    ("FrozenLake-v0-random", 1),
    ("FrozenLake-v0-hardcore", 1),
    ("GuessTheNumber-v0", 1),
    ("GuessTheNumber-v0-hardcore", 1),
    ("LightsOut-v0", 1),
    ("LogicPuzzle-v0", 1),
    ("LogicPuzzle-v0-hard", 1),
    ("Mastermind-v0", 1),
    ("Mastermind-v0-hard", 1),
    ("Mastermind-v0-extreme", 1),
    ("Minesweeper-v0", 1),
    ("Minesweeper-v0-small", 1),
    ("Minesweeper-v0-medium", 1),
    ("Minesweeper-v0-hard", 1),
    ("PegJump-v0", 1),
    ("RushHour-v0", 1),
    ("Secretary-v0", 1),
    ("Secretary-v0-long", 1),
    ("Slitherlink-v0", 1),
    ("Sokoban-v0", 1),
    ("Sudoku-v0-very-easy", 1),
    ("Sudoku-v0-easy", 1),
    ("Sudoku-v0", 1),
    ("Sudoku-v0-medium", 1),
    ("ThreeCardMonte-v0", 1),
    ("TowerOfHanoi-v0", 1),
    ("TowerOfHanoi-v0-medium", 1),
    ("TowerOfHanoi-v0-hard", 1),
    ("TowerOfHanoi-v0-hardcore", 1),
    ("TowerOfHanoi-v0-extreme", 1),
    ("Alquerque-v0", 2),
    ("Battleship-v0", 2),
    ("Battleship-v0-standard", 2),
    ("Battleship-v0-large", 2),
    ("Battleship-v0-extreme", 2),
    ("Breakthrough-v0-tiny", 2),
    ("Breakthrough-v0-small", 2),
    ("Breakthrough-v0", 2),
    ("Breakthrough-v0-large", 2),
    ("Breakthrough-v0-blind", 2),
    ("Breakthrough-v0-long", 2),
    ("Briscola-v0", 2),
    ("Chopsticks-v0", 2),
    ("Chopsticks-v0-medium", 2),
    ("Chopsticks-v0-long", 2),
    ("ColonelBlotto-v0-small", 2),
    ("ColonelBlotto-v0", 2),
    ("ColonelBlotto-v0-large", 2),
    ("ColonelBlotto-v0-extreme", 2),
    ("ConnectFour-v0", 2),
    ("ConnectFour-v0-blind", 2),
    ("ConnectFour-v0-large", 2),
    ("Crusade-v0", 2),
    ("GameOfPureStrategy-v0", 2),
    ("GermanWhist-v0", 2),
    ("Golf-v0", 2),
    ("Golf-v0-medium", 2),
    ("HighSociety-v0", 2),
    ("IndianPoker-v0-short", 2),
    ("IndianPoker-v0", 2),
    ("IndianPoker-v0-medium", 2),
    ("IndianPoker-v0-long", 2),
    ("IndianPoker-v0-extreme", 2),
    ("IteratedMatchingPennies-v0", 2),
    ("IteratedPrisonersDilemma-v0", 2),
    ("IteratedRockPaperScissors-v0", 2),
    ("IteratedTwoThirdsAverage-v0", 2),
    ("KuhnPoker-v0", 2),
    ("KuhnPoker-v0-short", 2),
    ("KuhnPoker-v0-medium", 2),
    ("KuhnPoker-v0-long", 2),
    ("KuhnPoker-v0-extreme", 2),
    ("LinesOfAction-v0", 2),
    ("MemoryGame-v0", 2),
    ("MemoryGame-v0-medium", 2),
    ("MemoryGame-v0-hard", 2),
    ("Nim-v0", 2),
    ("Nim-v0-medium", 2),
    ("Nim-v0-large", 2),
    ("Othello-v0-tiny", 2),
    ("Othello-v0-small", 2),
    ("Othello-v0", 2),
    ("Othello-v0-big", 2),
    ("Othello-v0-huge", 2),
    ("Othello-v0-hard", 2),
    ("PigDice-v0", 2),
    ("PigDice-v0-short", 2),
    ("PigDice-v0-long", 2),
    ("PigDice-v0-50", 2),
    ("PigDice-v0-100", 2),
    ("PigDice-v0-150", 2),
    ("PigDice-v0-200", 2),
    ("PigDice-v0-250", 2),
    ("PigDice-v0-300", 2),
    ("PigDice-v0-350", 2),
    ("PigDice-v0-400", 2),
    ("PigDice-v0-450", 2),
    ("PigDice-v0-500", 2),
    ("QuantumTicTacToe-v0", 2),
    ("SimpleBlindAuction-v0-quick", 2),
    ("SimpleBlindAuction-v0", 2),
    ("SimpleBlindAuction-v0-rich", 2),
    ("SimpleNegotiation-v0-short", 2),
    ("SimpleNegotiation-v0", 2),
    ("SimpleNegotiation-v0-long", 2),
    ("SimpleTak-v0", 2),
    ("SimpleTak-v0-medium", 2),
    ("SimpleTak-v0-large", 2),
    ("SimpleTak-v0-extreme", 2),
    ("SpiteAndMalice-v0", 2),
    ("Stratego-v0", 2),
    ("Tak-v0", 2),
    ("Tak-v0-medium", 2),
    ("Tak-v0-hard", 2),
    ("TicTacToe-v0", 2),
    ("TruthAndDeception-v0", 2),
    ("TruthAndDeception-v0-long", 2),
    ("TruthAndDeception-v0-extreme", 2),
    ("TwoDollar-v0", 2),
    ("UltimateTicTacToe-v0", 2),
    ("IteratedUltimatumGame-v0", 2),
    ("IteratedUltimatumGame-v0-alternate", 2),
    ("WildTicTacToe-v0", 2),
    ("Snake-v0", 2),
    ("Snake-v0-standard", 2),
    ("Snake-v0-large", 2),
    ("Surround-v0", 2),
    ("Surround-v0-standard", 2),
    ("Surround-v0-large", 2),
    ("Taboo-v0", 4),
    ("Taboo-v0-animals", 4),
    ("Taboo-v0-cars", 4),
    ("Taboo-v0-city/country", 4),
    ("Taboo-v0-food", 4),
    ("Taboo-v0-literature", 4),
    ("Taboo-v0-people", 4),
    ("Taboo-v0-tv", 4),
    ("Taboo-v0-long", 4),
    ("Taboo-v0-full", 4),
    ("LiarsDice-v0-small", 2),
    ("LiarsDice-v0", 2),
    ("LiarsDice-v0-large", 2),
    ("Poker-v0-small", 2),
    ("Poker-v0", 2),
    ("Poker-v0-long", 2),
    ("Poker-v0-extreme", 2),
    ("PublicGoodsGame-v0", 2),
    ("MarketEntryGame-v0", 2),
    ("ThreePlayerTicTacToe-v0", 3),
    ("ThreePlayerGOPS-v0", 3),
    ("ThreePlayerIPD-v0", 3),
    ("SettlersOfCatan-v0", 4),
    ("SecretMafia-v0", 6),
    ("SantoriniBaseFixed-v0", 2),
    ("NewRecruit-v0", 2),
)


def tsmg_id(env_id: str) -> str:
    """The tsmg id of TextArena's ``env_id``: ``TextArena/<EnvId>``, a ``/`` read as ``-`` (Taboo-v0-city/country)."""
    return f"TextArena/{env_id.replace('/', '-')}"


if importlib.util.find_spec("textarena") is not None:
    for _name, _players in TEXTARENA_GAMES:
        register(
            tsmg_id(_name),
            "tsmg.adapters.textarena:TextArenaGame",
            description=f"TextArena's {_name} [{_players} player{'s' if _players > 1 else ''}].",
            env=_name,
            num_players=_players,
        )
    register_refusals("tsmg.adapters.textarena:refused_games")  # listed apart by `tsmg games`, with the reason
