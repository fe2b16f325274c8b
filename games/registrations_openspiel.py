"""Registrations of OpenSpiel's games as ``OpenSpiel/<name>-v0`` (registration only; needs ``tsmg[openspiel]``).

One id per game OpenSpiel registers that loads with its default parameters and passes
:func:`tsmg.checker.check_game`, played through :class:`tsmg.adapters.openspiel.OpenSpielGame`
(any other parameters: ``openspiel:NAME(PARAMS)``). The family is derived from OpenSpiel's game
type (:func:`tsmg.adapters.openspiel.family`). Left out, with the reason:

* the games :data:`tsmg.adapters.openspiel.REFUSED` names (no discrete actions, mean-field,
  chance sampled inside OpenSpiel);
* :data:`CHECKER_FAILURES`: games that load but fail the checker;
* games that need parameters to load (``misere``, ``repeated_game``, ``turn_based_simultaneous_game``
  ... wrap another game: ``openspiel:misere(game=tic_tac_toe)``).

The table is kept equal to what OpenSpiel reports by ``tests/adapters/test_openspiel.py``. Nothing
is registered when OpenSpiel is not installed (``pip install 'tsmg[openspiel]'``).
"""

import importlib.util

from tsmg.registry import register, register_refusals

#: Games that load with default parameters, are not refused, and fail tsmg's checker, with the reason: none
#: (a test keeps it so). morpion_solitaire failed it and is refused instead: it reads uninitialised memory.
CHECKER_FAILURES: dict[str, str] = {}

#: ``(OpenSpiel name, family, players)`` of every registered game.
OPENSPIEL_GAMES: tuple[tuple[str, str, int], ...] = (
    ('2048', 'single-player', 1),
    ('amazons', 'board', 2),
    ('antichess', 'board', 2),
    ('backgammon', 'dice', 2),
    ('banqi', 'dice', 2),
    ('bargaining', 'card', 2),
    ('battleship', 'hidden', 2),
    ('blackjack', 'single-player', 1),
    ('blotto', 'simultaneous', 2),
    ('breakthrough', 'board', 2),
    ('bridge', 'card', 4),
    ('capture_the_flag', 'simultaneous', 2),
    ('catch', 'single-player', 1),
    ('checkers', 'board', 2),
    ('chess', 'board', 2),
    ('chinese_checkers', 'board', 2),
    ('cliff_walking', 'single-player', 1),
    ('clobber', 'board', 2),
    ('coin_game', 'card', 2),
    ('colored_trails', 'card', 3),
    ('connect_four', 'board', 2),
    ('coop_box_pushing', 'simultaneous', 2),
    ('coop_to_1p', 'single-player', 1),
    ('coordinated_mp', 'card', 2),
    ('crazy_eights', 'card', 5),
    ('crazyhouse', 'board', 2),
    ('cribbage', 'card', 2),
    ('cursor_go', 'board', 2),
    ('dark_chess', 'hidden', 2),
    ('dark_hex', 'hidden', 2),
    ('dark_hex_ir', 'hidden', 2),
    ('deep_sea', 'single-player', 1),
    ('dots_and_boxes', 'board', 2),
    ('dou_dizhu', 'card', 3),
    ('einstein_wurfelt_nicht', 'dice', 2),
    ('euchre', 'card', 4),
    ('first_sealed_auction', 'card', 2),
    ('gin_rummy', 'card', 2),
    ('go', 'board', 2),
    ('go_fish', 'card', 2),
    ('gomoku', 'board', 2),
    ('goofspiel', 'simultaneous', 2),
    ('hanabi', 'cooperative', 2),
    ('havannah', 'board', 2),
    ('hearts', 'card', 4),
    ('hex', 'board', 2),
    ('hive', 'board', 2),
    ('kriegspiel', 'hidden', 2),
    ('kuhn_poker', 'card', 2),
    ('laser_tag', 'simultaneous', 2),
    ('latent_ttt', 'hidden', 2),
    ('leduc_poker', 'card', 2),
    ('lewis_signaling', 'card', 2),
    ('liars_dice', 'card', 2),
    ('liars_dice_ir', 'card', 2),
    ('lines_of_action', 'board', 2),
    ('maedn', 'dice', 2),
    ('mancala', 'board', 2),
    ('markov_soccer', 'simultaneous', 2),
    ('matching_pennies_3p', 'simultaneous', 3),
    ('matrix_bos', 'simultaneous', 2),
    ('matrix_brps', 'simultaneous', 2),
    ('matrix_cd', 'simultaneous', 2),
    ('matrix_coordination', 'simultaneous', 2),
    ('matrix_mp', 'simultaneous', 2),
    ('matrix_pd', 'simultaneous', 2),
    ('matrix_rps', 'simultaneous', 2),
    ('matrix_rpsw', 'simultaneous', 2),
    ('matrix_sh', 'simultaneous', 2),
    ('matrix_shapleys_game', 'simultaneous', 2),
    ('mnk', 'board', 2),
    ('nim', 'board', 2),
    ('nine_mens_morris', 'board', 2),
    ('oh_hell', 'card', 3),
    ('oshi_zumo', 'simultaneous', 2),
    ('othello', 'board', 2),
    ('oware', 'board', 2),
    ('pathfinding', 'simultaneous', 1),
    ('pentago', 'board', 2),
    ('phantom_go', 'hidden', 2),
    ('phantom_ttt', 'hidden', 2),
    ('phantom_ttt_ir', 'hidden', 2),
    ('pig', 'dice', 2),
    ('quoridor', 'board', 2),
    ('rbc', 'hidden', 2),
    ('repeated_leduc_poker', 'card', 2),
    ('sheriff', 'hidden', 2),
    ('shogi', 'board', 2),
    ('skat', 'card', 3),
    ('snake', 'simultaneous', 2),
    ('social_deduction', 'card', 6),
    ('solitaire', 'single-player', 1),
    ('spades', 'card', 4),
    ('tic_tac_toe', 'board', 2),
    ('tiny_bridge_2p', 'cooperative', 2),
    ('tiny_bridge_4p', 'card', 4),
    ('tiny_hanabi', 'cooperative', 2),
    ('trade_comm', 'card', 2),
    ('twixt', 'board', 2),
    ('ultimate_tic_tac_toe', 'board', 2),
    ('universal_poker', 'card', 2),
    ('xiangqi', 'board', 2),
    ('y', 'board', 2),
    ('yacht', 'dice', 2),
)

if importlib.util.find_spec("pyspiel") is not None:
    register_refusals("tsmg.adapters.openspiel:refused_games")  # listed apart by `tsmg games`, with the reason
    for _name, _family, _players in OPENSPIEL_GAMES:
        register(
            f"OpenSpiel/{_name}-v0",
            "tsmg.adapters.openspiel:OpenSpielGame",
            description=f"OpenSpiel's {_name} [{_family}, {_players} player{'s' if _players > 1 else ''}].",
            game=_name,
        )
