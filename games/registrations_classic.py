"""Registrations of the classic games: board, card, puzzle and word games (registration only).

Two-player games also come as single-agent variants (``-vs...``) against a fixed opponent, the
game's own oracle, so one language model can be evaluated or trained against it.
"""

from tsmg.registry import register

register(
    "TicTacToe-v0",
    "games.tictactoe:TicTacToe",
    description="Tic-tac-toe for two players (player_0 = X moves first); win +1, loss -1, draw 0.",
    max_steps=20,
)
register(
    "TicTacToe-vsMinimax-v0",
    "games.tictactoe:TicTacToeVsMinimax",
    description="Tic-tac-toe for one agent (seat drawn from the seed) against perfect minimax; a draw is the best.",
    max_steps=12,
)
register(
    "ConnectFour-v0",
    "games.connect_four:ConnectFour",
    description="Connect Four (6x7) for two players (player_0 = X moves first); win +1, loss -1, draw 0.",
    max_steps=60,
)
register(
    "ConnectFour-vsMinimax-v0",
    "games.connect_four:ConnectFourVsMinimax",
    description="Connect Four for one agent (seat drawn from the seed) against depth-5 alpha-beta search.",
    max_steps=35,
)
register(
    "RockPaperScissors-v0",
    "games.rps:RockPaperScissors",
    description="Five rounds of rock-paper-scissors, simultaneous moves; +1/-1 per round won/lost.",
    rounds=5,
    max_steps=10,
)
register(
    "RockPaperScissors-vsCounter-v0",
    "games.rps:RockPaperScissorsVsCounter",
    description="Five rounds of rock-paper-scissors against an exploitable beat-your-most-frequent-move strategy.",
    rounds=5,
    max_steps=10,
)
register(
    "KuhnPoker-v0",
    "games.kuhn_poker:KuhnPoker",
    description="One hand of Kuhn poker (J/Q/K, ante 1, one bet round); reward = net chips won.",
    max_steps=8,
)
register(
    "KuhnPoker-vsNash-v0",
    "games.kuhn_poker:KuhnPokerVsNash",
    description="One hand of Kuhn poker for one agent (seat drawn from the seed) against a Nash-equilibrium strategy.",
    max_steps=6,
)
register(
    "2048-v0",
    "games.game2048:Game2048",
    description="2048 on a 4x4 board; reward = merged value; success = a 256 tile within 200 moves.",
    target=256,
    max_steps=200,
)
register(
    "2048-Short-v0",
    "games.game2048:Game2048",
    description="2048 on a 4x4 board; success = a 64 tile within 50 moves (short episodes for training).",
    target=64,
    max_steps=50,
)
register(
    "2048-Long-v0",
    "games.game2048:Game2048",
    description="2048 on a 4x4 board; success = a 1024 tile within 1000 moves.",
    target=1024,
    max_steps=1000,
)
register(
    "Minesweeper-v0",
    "games.minesweeper:Minesweeper",
    description="Minesweeper 6x6 with 5 mines, safe first reveal; +1 for clearing, -1 for a mine; 36-step limit.",
    width=6,
    height=6,
    mines=5,
    max_steps=36,
)
register(
    "Minesweeper-Beginner-v0",
    "games.minesweeper:Minesweeper",
    description="Minesweeper 9x9 with 10 mines (classic beginner), safe first reveal, flags allowed; 100-step limit.",
    width=9,
    height=9,
    mines=10,
    allow_flags=True,
    max_steps=100,
)
register(
    "Wordle-v0",
    "games.wordle:Wordle",
    description="Find a secret 5-letter word (~1,600 common words) in 6 guesses from G/Y/_ feedback; +1 if solved.",
    max_guesses=6,
    max_steps=12,
)
register(
    "ServiceRefund-v0",
    "games.service:ServiceGame",
    description="Tool-using customer service: find the user's order, check the refund policy, refund or decline "
    "it with the right id and amount (one other order on the account); exact influence graph in the record.",
    task="refund",
    distractors=1,
    max_steps=8,
)
register(
    "ServiceRefund-Easy-v0",
    "games.service:ServiceGame",
    description="ServiceRefund-v0 with a single order on the account (the difficulty for a tiny model's training).",
    task="refund",
    distractors=0,
    max_steps=6,
)
register(
    "ServiceAddress-v0",
    "games.service:ServiceGame",
    description="Tool-using customer service: ask the user's email and new address, look the customer up, update "
    "the address of the right account (one linked household account); exact influence graph in the record.",
    task="address",
    distractors=1,
    max_steps=8,
)
