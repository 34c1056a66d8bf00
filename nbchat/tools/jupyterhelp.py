"""What this Jupyter says of itself, for an answer about Jupyter: the keyboard shortcuts in the
installed JupyterLab's settings schemas and what IPython's own magics do (their docstrings),
the entries sharing most words with the user's message (`jupyter_reference`).

Asked for the shortcut that runs a cell and adds one below, a 1.5B model answered Ctrl+Enter
(it runs the cell only); asked which magic times a line, it named `%time` for `%timeit`'s job
and offered `time.time()` for timing a cell. The installed Jupyter knows its own bindings and
magics: they are read from it, not recalled, as the arithmetic in a message is worked out by
code (`nbchat.tools.arithmetic`), and told to a small model before it answers in words.

Read once per process and kept (`_entries`): at most `SCHEMA_FILES` schema files of at most
`SCHEMA_BYTES` each, of JupyterLab's own extensions (`@jupyterlab`), found under this Python's
`share/jupyter/lab/schemas` or in the `jupyterlab` package; the magics of IPython's own magic
classes (`IPython.core.magics`), never a user's. A message is matched by its words: one pass
over its first `MESSAGE_SCAN` characters. Nothing is told unless the message speaks of Jupyter
or of what it reads here (`JUPYTER_WORDS`) and asks about keys or magics, or how to do
something (`nbchat.tools.asking.asks_for_knowledge`).

Must not: start anything, or read outside those folders.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from nbchat.tools.asking import asks_for_knowledge

__all__ = ["jupyter_reference"]

MESSAGE_SCAN = 1_000
SCHEMA_FILES = 300
SCHEMA_BYTES = 1_000_000
ENTRIES_TOLD = 4
# A message that speaks of Jupyter, its notebooks, cells, magics or keys.
JUPYTER_WORDS = frozenset(
    {"jupyter", "jupyterlab", "ipython", "notebook", "notebooks", "cell", "cells", "magic",
     "magics", "shortcut", "shortcuts", "hotkey", "hotkeys", "keyboard", "keybinding", "kernel"}
)  # fmt: skip
# Words that say nothing of which entry is meant, and words that say little (every shortcut is
# of a notebook's cells): a shared word counts 1, a weak one `WEAK_WEIGHT`, these 0.
_UNTELLING = """
the a an to of in and or for how what which is do doe i my it one new jupyter jupyterlab
notebook lab shortcut key keyboard command magic there that with can you me on at this by code
way use get ipython hotkey keybinding press type tell show just some any from python mean
difference between work happen want need make thing without not about general into out up down
when where why
"""
UNTELLING = frozenset(_UNTELLING.split())
WEAK = frozenset({"cell", "run", "line"})
WEAK_WEIGHT = 0.5
# Which kind of entry a message asks for, when it says.
ASKS_SHORTCUT = frozenset({"shortcut", "hotkey", "keyboard", "key", "keybinding", "press"})
ASKS_MAGIC = frozenset({"magic"})
WORD = re.compile(r"[a-z]+")
# Key names as JupyterLab writes them, as a person says them on Linux and Windows (`Accel`) and
# on a Mac.
KEY_NAMES = {"Accel": "Ctrl"}
MAC_KEY_NAMES = {"Accel": "Cmd"}
# The commands whose keys a user asks about: a notebook's, its kernel's, editing and files.
COMMAND_PREFIXES = (
    "notebook:", "console:", "docmanager:", "kernelmenu:", "runmenu:", "editmenu:", "filemenu:",
    "codemirror:", "documentsearch:", "application:", "completer:",
)  # fmt: skip


@dataclass(frozen=True)
class _Entry:
    text: str  # as told: "Alt+Enter: run cell and insert below (notebook)"
    words: frozenset[str]  # what a message shares with it, stemmed
    kind: str  # "shortcut" or "magic"


def jupyter_reference(message: str) -> str:
    """The entries of this Jupyter's shortcuts and magics that share most with `message`
    (weighed by `_weight`), one per line, when it speaks of Jupyter; "" otherwise or when
    none shares a word that tells."""
    words = _stems(message[:MESSAGE_SCAN])
    if not words & JUPYTER_WORDS:
        return ""
    # Only for a question about keys or magics, or how to do something: "why did my last
    # cell fail" asks about the notebook, and a magic sharing its words is no answer to it.
    if not words & (ASKS_SHORTCUT | ASKS_MAGIC) and not asks_for_knowledge(message):
        return ""
    kinds = {"shortcut"} if words & ASKS_SHORTCUT else {"magic"} if words & ASKS_MAGIC else None
    telling = {word for word in words if _weight(word) == 1}
    scored = []
    for order, entry in enumerate(_entries()):
        if kinds is not None and entry.kind not in kinds:
            continue
        shared = entry.words & words
        score = sum(_weight(word) for word in shared)
        # At least one of the message's telling words, if it has any: shared "line" and
        # "cell" alone are no answer to how to comment lines out.
        if score >= 1 and (not telling or shared & telling):
            extra = sum(_weight(word) > 0 for word in entry.words - words)
            scored.append((-score, extra, order, entry.text))
    if not scored:
        return ""
    best = min(scored)[0]
    chosen = sorted(item for item in scored if item[0] == best)[:ENTRIES_TOLD]
    return "\n".join(text for *_, text in chosen)


def _weight(word: str) -> float:
    if word in UNTELLING:
        return 0.0
    return WEAK_WEIGHT if word in WEAK else 1.0


def _stems(text: str) -> set[str]:
    """The words of `text`, lower-cased, a plural's or a verb's ending taken off ("times" →
    "time", "running" → "run", "inserts" → "insert")."""
    return {_stem(word) for word in WORD.findall(text.lower())}


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    for ending in ("ing", "ed"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            word = word[: -len(ending)]
            if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "ls":
                word = word[:-1]  # "runn" → "run"
            return word
    return word


@functools.lru_cache(maxsize=1)
def _entries() -> tuple[_Entry, ...]:
    return (*_shortcuts(), *_magics())


def _shortcuts() -> list[_Entry]:
    """JupyterLab's keyboard shortcuts, each command once, with its keys."""
    folder = _schemas_folder()
    if folder is None:
        return []
    seen: dict[str, dict[str, bool]] = {}  # command → keys as said → pressed editing too
    for path in sorted(folder.glob("*/*.json"))[:SCHEMA_FILES]:
        try:
            if path.stat().st_size > SCHEMA_BYTES:
                continue
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        shortcuts = schema.get("jupyter.lab.shortcuts") if isinstance(schema, dict) else None
        for shortcut in shortcuts if isinstance(shortcuts, list) else []:
            command, pressed = _shortcut(shortcut)
            if command and pressed:
                editing = seen.setdefault(command, {}).get(pressed, False)
                seen[command][pressed] = editing or not _command_mode_only(shortcut)
    entries = []
    for command, bindings in seen.items():
        area, _, action = command.partition(":")
        said = action.replace("-", " ")
        keys = " or ".join(
            pressed if editing else f"{pressed} (in command mode: Esc first)"
            for pressed, editing in bindings.items()
        )
        text = f"{keys}: {said} ({area.replace('menu', ' menu')})"
        entries.append(_Entry(text, frozenset(_stems(said)), "shortcut"))
    return entries


def _shortcut(shortcut: object) -> tuple[str, str]:
    """A schema's shortcut as (command, keys as said: "Shift+Enter"); ("", "") when it is
    not one of the commands a user asks about or has no keys."""
    if not isinstance(shortcut, dict):
        return "", ""
    command, keys = shortcut.get("command"), shortcut.get("keys")
    if not isinstance(command, str) or not command.startswith(COMMAND_PREFIXES):
        return "", ""
    if not isinstance(keys, list) or not keys or not all(isinstance(key, str) for key in keys):
        return "", ""
    pressed = [key for key in keys if key]
    said = ", then ".join(
        "+".join(KEY_NAMES.get(part, part) for part in key.split()) for key in pressed
    )
    if any("Accel" in key for key in pressed):
        on_mac = ", then ".join(
            "+".join(MAC_KEY_NAMES.get(part, part) for part in key.split()) for key in pressed
        )
        said += f" ({on_mac} on a Mac)"
    return command, said


def _command_mode_only(shortcut: dict[str, object]) -> bool:
    """Whether a shortcut works only outside a cell's editor (its selector says so): B inserts
    a cell below in command mode, and types a "B" in the editor."""
    selector = str(shortcut.get("selector", ""))
    return "jp-mod-commandMode" in selector or ":not(:read-write)" in selector


def _schemas_folder() -> Path | None:
    """Where JupyterLab's own extensions keep their settings schemas, if it is installed."""
    candidates = [Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"]
    spec = importlib.util.find_spec("jupyterlab")
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / "schemas")
    for folder in candidates:
        if (folder / "@jupyterlab").is_dir():
            return folder / "@jupyterlab"
    return None


def _magics() -> list[_Entry]:
    """What each of IPython's own magics does: its docstring's first sentence of prose."""
    try:
        import IPython.core.magics as builtin_magics
    except ImportError:
        return []
    entries = []
    for _name, kind in inspect.getmembers(builtin_magics, inspect.isclass):
        table = getattr(kind, "magics", None)
        if not isinstance(table, dict) or not kind.__module__.startswith("IPython."):
            continue
        for mode, prefix in (("line", "%"), ("cell", "%%")):
            for magic, method in sorted((table.get(mode) or {}).items()):
                does = _first_sentence(inspect.getdoc(getattr(kind, str(method), None)) or "")
                if does:
                    text = f"{prefix}{magic} ({mode} magic): {does}"
                    words = _stems(f"{magic} {mode} {does}")
                    entries.append(_Entry(text, frozenset(words), "magic"))
    return entries


def _first_sentence(doc: str) -> str:
    """The first sentence of a docstring's prose, past its usage lines ("::", "%time …")."""
    for paragraph in doc.split("\n\n"):
        text = paragraph.strip()
        if not text or text.startswith(("::", "%", "-", "Usage", "Options")):
            continue
        if paragraph.startswith((" ", "\t")):
            continue
        sentence = " ".join(text.split()).split(". ", 1)[0].rstrip(".:")
        return sentence[:160]
    return ""
