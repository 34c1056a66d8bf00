"""What the default-model eval asks about: the case type, its constructors, the scratch workspace
and the notebook the cases are asked in.

The cases themselves live in two split files, written before any tuning against them:

    eval_split_test.py   the test split: never tuned on; its figures are reported first
    eval_split_dev.py    the dev split: the prompts the default path may be tuned on

A case is one user message (with earlier messages of its session in `before`, sent first and not
scored) and what a right turn does:

- `plain(prompt, *facts)`: answered without any tool call; when `facts` are given, the answer
  holds at least one of them (case-insensitive substring);
- `tool(prompt, calls, *facts)`: the turn's first tool call names one of the tools in `calls`
  with the argument values given there (`path`: the workspace entry it names, or `ANY_PATH`
  for any; any other argument: a substring of it); `facts` are then looked for in the final
  answer, which comes after the tool's result.

Every prompt is a user's words: nothing in `nbchat/` may quote one (a test checks).
This module must stay free of the harness (it is imported by the split files and the harness).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "ANY_PATH",
    "FILES",
    "NOTEBOOK_CELLS",
    "HIDDEN_FACTS",
    "Case",
    "plain",
    "tool",
]

# The scratch workspace every case runs in (created fresh for each run). Tools run under policy
# "deny": the reading tools and the notebook tools answer; writing and the shell are refused.
FILES: Mapping[str, str] = {
    "notes.txt": "Project notes\nThe review meeting is on Thursday at 10:00 in room B12.\n",
    "todo.md": "# TODO\n- buy milk\n- renew the domain name\n- write the release notes\n",
    "data.csv": "city,population\nOslo,709000\nBergen,291000\nTrondheim,212000\n",
    "src/app.py": 'def greet(name):\n    return "Hello, " + name\n\n# TODO: add a farewell\n',
    "src/utils.py": (
        "import math\n\n\ndef area(radius):\n    return math.pi * radius ** 2\n\n\n"
        "def slugify(text):\n    return text.lower().replace(' ', '-')\n"
    ),
    "tests/test_app.py": (
        "from src.app import greet\n\n\ndef test_greet():\n"
        '    assert greet("Ada") == "Hello, Ada"\n'
    ),
    "README.md": "# Demo project\nA tiny project for the evaluation.\n",
    "requirements.txt": "pandas==2.1.4\nrequests>=2.31\nflask==3.0.2\n",
    "config.yaml": "server:\n  port: 8042\n  debug: false\ndatabase: sqlite:///inventory.db\n",
    "logs/server.log": (
        "2026-11-20 09:14:02 INFO starting on port 8042\n"
        "2026-11-20 09:14:05 ERROR ConnectionRefusedError: [Errno 111] Connection refused "
        "(database at 10.0.0.7:5432)\n"
        "2026-11-20 09:15:40 INFO retrying\n"
    ),
    "scripts/cleanup.sh": "#!/bin/sh\n# remove build output\nrm -rf build/ dist/ *.egg-info\n",
}

# Cells run in the eval's IPython shell before any case, in order, so the notebook tools
# (list_notebook_variables, describe_variable, read_cell, last_error) have something to show.
# The last one fails: `last_error` reports its KeyError.
NOTEBOOK_CELLS: tuple[str, ...] = (
    "import pandas as pd",
    "sales = pd.DataFrame({'region': ['north', 'south', 'east', 'west'], "
    "'units': [120, 85, 240, 60], 'price': [9.5, 12.0, 7.25, 15.0]})",
    "sales['revenue'] = sales['units'] * sales['price']",
    "threshold = 100\nbig = sales[sales['units'] > threshold]",
    "sales['discount'].mean()",
)

# A `path` a case accepts whatever it is: a search of `logs/` and one of the whole workspace both
# look in the right place for "which ip was the database at". (A folder tool's call with no
# `path` in the case must name the workspace itself.)
ANY_PATH = "<any path>"

# Text that only the workspace or the notebook can tell: an answer that states one of these
# with no tool result in its turn that holds it made it up or guessed it (an ungrounded claim).
HIDDEN_FACTS: tuple[str, ...] = (
    "B12",
    "renew the domain",
    "709000",
    "291000",
    "212000",
    "slugify",
    "2.1.4",
    "3.0.2",
    "8042",
    "Errno 111",
    "10.0.0.7",
    "inventory.db",
    "1740",
    "discount",
)


@dataclass(frozen=True)
class Case:
    """One prompt. `calls`: for a tool case, each acceptable tool with the value each named
    argument must hold (`path`: the entry it names; others: a substring); `fact`: any of these
    (case-insensitive) in the final answer; `before`: earlier messages of the same session."""

    prompt: str
    calls: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    fact: tuple[str, ...] = ()
    before: tuple[str, ...] = ()

    @property
    def needs_tool(self) -> bool:
        return bool(self.calls)


def plain(prompt: str, *fact: str, before: tuple[str, ...] = ()) -> Case:
    """A message answered without any tool call."""
    return Case(prompt, fact=fact, before=before)


def tool(
    prompt: str,
    calls: Mapping[str, Mapping[str, str]],
    *fact: str,
    before: tuple[str, ...] = (),
) -> Case:
    """A message whose turn must start with one of `calls`."""
    return Case(prompt, calls=calls, fact=fact, before=before)
