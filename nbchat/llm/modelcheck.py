"""Is the configured model name one the server serves? The names a server lists, and the verdict.

`served_models(client)` reads `GET /v1/models` (None when the server has no such list);
`check_model(settings, served, base_url=...)` compares the `model` setting with it. llama.cpp
(and so the embedded server) answers with its one loaded model whatever name a request gives, so
a wrong name there still works but would be recorded in every session: the verdict then names
the model really served, which the chat records instead (silently when the name was nbchat's
default, which only guesses what the embedded server runs). Any other server refuses a name it does
not list, so that is a problem to fix. Messages say what to change where the value was set.

Must not: change settings, or fail a connection because the list could not be read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openai

from nbchat.config import DEFAULT_MODEL, Settings

__all__ = [
    "ModelCheck",
    "Served",
    "check_model",
    "how_to_set",
    "sentence",
    "served_from",
    "served_models",
]

LIST_TIMEOUT = 5.0
SHOWN_NAMES = 8
LLAMA_CPP_OWNER = "llamacpp"  # what llama.cpp's server puts in each model's `owned_by`


@dataclass(frozen=True)
class Served:
    """The model ids a server lists, and whether it answers under any name (llama.cpp)."""

    names: tuple[str, ...]
    any_name: bool


@dataclass(frozen=True)
class ModelCheck:
    """`model`: the name to record (the served one on llama.cpp); `ok`: the configured name
    is served (or nothing is known); `message`: what to tell the user, "" when all is well."""

    model: str
    ok: bool
    message: str = ""


def served_models(client: openai.OpenAI, *, embedded: bool = False) -> Served | None:
    """The server's model list, or None when it cannot be read (not every server has one)."""
    try:
        # One request at connect time: no idle keep-alive connection is left behind for it.
        quick = client.with_options(timeout=LIST_TIMEOUT, max_retries=0)
        page = quick.models.list(extra_headers={"Connection": "close"})
    except openai.OpenAIError:
        return None
    return served_from(page.data, embedded=embedded)


def served_from(models: Sequence[Any], *, embedded: bool) -> Served:
    """`Served` from the entries of a `/v1/models` answer."""
    names = tuple(str(model.id) for model in models)
    owners = {getattr(model, "owned_by", "") for model in models}
    return Served(names, any_name=embedded or LLAMA_CPP_OWNER in owners)


def check_model(settings: Settings, served: Served | None, *, base_url: str) -> ModelCheck:
    """The verdict on `settings.model` against what the server at `base_url` lists."""
    model, base_url = settings.model, base_url.rstrip("/")
    if served is None or not served.names or model in served.names:
        return ModelCheck(model, ok=True)
    where = f"model {model!r} (from {settings.source_of('model')})"
    if served.any_name:
        real = served.names[0]
        if model == DEFAULT_MODEL and settings.source_of("model") == "default":
            # nbchat's guess at what the embedded server runs, not the user's choice: a smaller
            # machine's model, or another kernel's server, answers under its own name, which
            # the chat then records.
            return ModelCheck(real, ok=True)
        return ModelCheck(
            real,
            ok=False,
            message=(
                f"The server at {base_url} serves {real!r}, not {where}. llama.cpp answers "
                f"with its one model whatever the name, so sessions record {real!r}. "
                f"{sentence(how_to_set(settings, 'model', real))}."
            ),
        )
    listed = ", ".join(served.names[:SHOWN_NAMES]) + (
        ", …" if len(served.names) > SHOWN_NAMES else ""
    )
    return ModelCheck(
        model,
        ok=False,
        message=(
            f"The server at {base_url} does not serve {where}; it serves {listed}. "
            f"{sentence(how_to_set(settings, 'model', 'one of them'))}."
        ),
    )


def how_to_set(settings: Settings, name: str, value: str) -> str:
    """Advice to change setting `name` where its value comes from now ("set NBCHAT_X to …")."""
    source = settings.source_of(name)
    if source == "argument":
        return f"give {name} as {value} instead"
    if source == "default":
        return f"set NBCHAT_{name.upper()} to {value}"
    if source.startswith("environment variable"):
        return f"change NBCHAT_{name.upper()} to {value}"
    return f"change {name} in {source} to {value}"


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
