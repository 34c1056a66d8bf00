"""The public surface: what `nbchat` exports is what its `__all__` says, each name is the object
defined where the table of contents says, the README's imports from `nbchat` all resolve, and
the error tree drawn in `nbchat.errors` is the one the classes form.

(`import nbchat` doing no work is tests/test_imports.py's.)
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import nbchat
import nbchat.errors

REPO = Path(__file__).resolve().parent.parent
# `from nbchat import A, B` and `from nbchat.tools import c`, on one line or in parentheses.
FROM_IMPORT = re.compile(r"from\s+(nbchat(?:\.\w+)*)\s+import\s+(\([^)]*\)|[\w ,]+)")
# `nbchat.Conversation(...)` in prose: a capitalised name used through the package.
QUALIFIED = re.compile(r"\bnbchat\.([A-Z]\w*)")


def documents() -> list[Path]:
    """The README and the guides beside it (docs/*.md, where sections of it may move)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def readme_imports() -> list[tuple[str, str, str]]:
    """(document, module, name) for every name the documents import or use from nbchat."""
    found = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        for module, names in FROM_IMPORT.findall(text):
            for name in names.strip("()").split(","):
                if name.split(" as ")[0].strip():
                    found.append((path.name, module, name.split(" as ")[0].strip()))
        found += [(path.name, "nbchat", name) for name in QUALIFIED.findall(text)]
    return found


def test_the_exports_are_exactly_all_and_each_is_the_object_its_module_defines() -> None:
    exports = nbchat._EXPORTS
    assert sorted(nbchat.__all__) == sorted(exports) == list(nbchat.__all__)
    for name, module in exports.items():
        value = getattr(nbchat, name)
        assert value is getattr(importlib.import_module(module), name), name
        if inspect.isclass(value) or inspect.isfunction(value):  # a package's own, or its module's
            assert f"{value.__module__}.".startswith(f"{module}."), f"{name}: {value.__module__}"
    assert set(nbchat.__all__) <= set(dir(nbchat))


def test_an_unknown_name_is_an_attribute_error_that_names_it() -> None:
    with pytest.raises(AttributeError, match="module 'nbchat' has no attribute 'Chat'"):
        nbchat.Chat  # noqa: B018


def test_scripts_can_import_every_event_a_conversation_yields() -> None:
    from nbchat.conversation import events

    kinds = {name for name in events.__all__}
    assert kinds <= set(nbchat.__all__)


def test_the_readme_imports_from_nbchat_only_names_that_exist() -> None:
    imports = readme_imports()
    assert ("README.md", "nbchat", "ChatUI") in imports  # the parser sees the README's imports
    missing = []
    for document, module, name in imports:
        if not hasattr(importlib.import_module(module), name):
            missing.append(f"{document}: from {module} import {name}")
    assert missing == []


def test_a_model_server_failure_of_any_kind_is_caught_as_one() -> None:
    for error in (
        nbchat.ServerUnavailableError("no server"),
        nbchat.ContextOverflowError("too long", prompt_tokens=9, context_size=4),
        nbchat.ServerError("500", status=500),
    ):
        with pytest.raises(nbchat.ModelServerError):
            raise error
        assert isinstance(error, nbchat.NbchatError)
    assert not issubclass(nbchat.CompactionError, nbchat.ModelServerError)


def drawn_tree(docstring: str) -> dict[str, str]:
    """Each class drawn in the docstring's tree → the class drawn above it (its parent)."""
    lines = docstring.split("```")[1].strip().splitlines()
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in lines:
        name = re.search(r"[A-Z]\w*Error", line)
        assert name is not None, line
        depth = name.start()
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name.group()] = stack[-1][1] if stack else ""
        stack.append((depth, name.group()))
    return parents


def test_the_errors_docstring_draws_every_error_under_its_real_parent() -> None:
    classes = {
        name: value
        for name, value in vars(nbchat.errors).items()
        if inspect.isclass(value) and issubclass(value, nbchat.errors.NbchatError)
    }
    parents = {name: value.__base__.__name__ for name, value in classes.items()}
    parents["NbchatError"] = ""
    assert drawn_tree(nbchat.errors.__doc__ or "") == parents
    assert sorted(classes) == sorted(nbchat.errors.__all__)
