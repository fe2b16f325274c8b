"""Registrations of the catalog games played through the Gymnasium and PettingZoo adapters.

Registration only: the game module (:mod:`games.gym_ports`) is imported when a game is made.
"""

from tsmg.registry import register

register(
    "Taxi-v0",
    "games.gym_ports:Taxi",
    description="Gymnasium's Taxi: fetch the passenger and drop them at their stand on a 5x5 map; 50-step limit.",
    max_steps=50,
)
register(
    "CliffWalking-v0",
    "games.gym_ports:CliffWalking",
    description="Gymnasium's Cliff Walking: cross a 4x12 grid along a cliff (-100 and back to start); 50 steps.",
    max_steps=50,
)
register(
    "Blackjack-v0",
    "games.gym_ports:Blackjack",
    description="Gymnasium's Blackjack (Sutton & Barto rules): hit or stick against a dealer who draws to 17.",
)
register(
    "TicTacToe-PZ-v0",
    "games.gym_ports:TicTacToePZ",
    description="PettingZoo's classic Tic-Tac-Toe for two players, cells numbered 1-9; 20-round limit.",
    max_steps=20,
)
