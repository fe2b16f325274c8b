"""The report's configuration tab: every run's settings side by side, the ones that differ first.

Two overlaid training runs, or two evaluations merged into one table, are told apart by what
they were run with: each run folder's ``config.json`` / ``config.yaml`` is flattened to dotted keys
(``rollout.group_size``) and shown as one table with a column per run, the keys whose values
differ between the runs above the rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tsmg.apps.view.page import escape
from tsmg.apps.view.runs import RunFolder

#: A key a run's configuration does not have, in the table.
ABSENT = "—"


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``config`` as dotted keys and JSON values (a list is one value; an empty mapping is ``{}``).

    Example:
        >>> flat_config({"rollout": {"group_size": 8, "lap": {"temperature": 1.0}}, "games": ["a", "b"], "o": {}})
        {'rollout.group_size': '8', 'rollout.lap.temperature': '1.0', 'games': '["a", "b"]', 'o': '{}'}
    """
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flat_config(value, name + "."))
        else:
            flat[name] = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return flat


def differing_keys(flats: Sequence[Mapping[str, str]]) -> list[str]:
    """The keys whose value (or presence) is not the same in every one of ``flats``, sorted."""
    keys = sorted(set().union(*flats)) if flats else []
    return [key for key in keys if len({flat.get(key, ABSENT) for flat in flats}) > 1]


def config_section(runs: Sequence[RunFolder]) -> str:
    """The configuration tab's HTML (escaped), or "" when no run has a configuration file."""
    configured = [run for run in runs if isinstance(run.config, dict) and run.config]
    if not configured:
        return ""
    flats = [flat_config(run.config or {}) for run in configured]
    keys = sorted(set().union(*flats))
    differing = differing_keys(flats) if len(flats) > 1 else []
    parts = ['<section id="config"><h2>Configuration</h2>']
    if len(flats) > 1:
        parts.append(
            f"<p>{len(keys)} settings across {len(flats)} runs; {len(differing)} differ between them"
            + (" (first below)." if differing else ".")
            + "</p>"
        )
    else:
        parts.append(f"<p>{len(keys)} settings of {escape(configured[0].name)}.</p>")
    header = "".join(f"<th>{escape(run.name)}</th>" for run in configured)
    parts.append(f'<table class="config"><thead><tr><th>setting</th>{header}</tr></thead><tbody>')
    for key in differing:
        parts.append(_row(key, flats, 'class="differs"'))
    parts.append("</tbody></table>")
    same = [key for key in keys if key not in differing]
    parts.append(
        f"<details{' open' if not differing else ''}><summary>{'The other' if differing else 'All'} "
        f"{len(same)} settings{' (the same in every run)' if differing else ''}</summary>"
        f'<table class="config"><thead><tr><th>setting</th>{header}</tr></thead><tbody>'
    )
    parts.extend(_row(key, flats, "") for key in same)
    parts.append("</tbody></table></details></section>")
    return "\n".join(parts)


def _row(key: str, flats: Sequence[Mapping[str, str]], attributes: str) -> str:
    cells = "".join(f"<td><code>{escape(flat.get(key, ABSENT))}</code></td>" for flat in flats)
    return f"<tr{' ' + attributes if attributes else ''}><td>{escape(key)}</td>{cells}</tr>"
