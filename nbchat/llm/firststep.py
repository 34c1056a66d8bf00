"""A small model's first step, asked in one token: answer in words, or look with a tool.

A 0.5B or 1.5B model offered tool schemas calls one for "17 × 23" and invents `add`, and a
keyword rule over the user's words misses every paraphrase ("peek at the readme") and can be
turned against the user (issue 19). So on a llama.cpp server the model itself is asked, with
output it cannot get wrong: the request is the chat's own request (same messages, so the
server's cached prefix serves it) plus the start of an assistant reply, `{"tool": "`, which
the system prompt describes as the reply's first step, and a llama.cpp grammar that lets the
model write only `none` or the name of a tool it may use. One token decides: the share of the
probability that token gives to `none` (`FirstStep.answer_share`), against all the names the
grammar allows, is what the caller weighs; the name the grammar completed greedily is
`FirstStep.chosen`.

Once it chose a tool, the call's arguments are asked on the same messages, the answer bound by
a JSON schema to `{"tool": <that tool>, "arguments": {...}}` (`ask_arguments`): there the
prompt's examples show how a message becomes arguments, which the chat's own prompt does not.

Owns the requests' shape (`first_step_body`, `arguments_body`) and reading their answers
(`read_first_step`, `read_arguments`).
Must not: decide what to do with the figures (the conversation does), or know about rows.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai

from nbchat.config import public_url
from nbchat.errors import ServerError
from nbchat.llm.servererrors import translate_error
from nbchat.llm.transport import IDENTITY, Release, RequestCancelledError, releasing
from nbchat.stopping import StopSignal

__all__ = [
    "FIRST_STEP_OPENING",
    "NO_TOOL",
    "FirstStep",
    "arguments_body",
    "ask_arguments",
    "ask_first_step",
    "first_step_body",
    "read_arguments",
    "read_first_step",
]

NO_TOOL = "none"
# The reply the model is asked to continue; the system prompt says what the object means.
FIRST_STEP_OPENING = '{"tool": "'
# Enough tokens for the longest tool name and its closing quote; the first one decides.
STEP_TOKENS = 12
# A call's arguments are short (a path, a pattern, a command); a runaway one stops here.
ARGUMENT_TOKENS = 256
# How many alternatives of the first token the server reports: enough to hold every tool's
# first token and `none` for any registry a chat has, far fewer than the vocabulary.
TOP_ALTERNATIVES = 20


@dataclass(frozen=True)
class FirstStep:
    """What the model chose: `NO_TOOL` or a tool's name, and the share of the first token's
    probability (among the allowed names) that went to answering without a tool."""

    chosen: str
    answer_share: float


def first_step_body(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    names: Sequence[str],
    answering: bool = True,
) -> dict[str, Any]:
    """The request: the chat's messages, the opened reply, a grammar allowing only
    `none` (unless `answering` is off: a tool must be chosen) or one of `names`, greedy, with
    the first token's alternatives reported."""
    allowed = (NO_TOOL, *names) if answering else tuple(names)
    choices = " | ".join(json.dumps(name) for name in allowed)
    return {
        "model": model,
        "messages": [*messages, {"role": "assistant", "content": FIRST_STEP_OPENING}],
        "max_tokens": STEP_TOKENS,
        "temperature": 0.0,
        "grammar": f'root ::= ({choices}) "\\""',
        "logprobs": True,
        "top_logprobs": TOP_ALTERNATIVES,
    }


def read_first_step(answer: Mapping[str, Any], names: Sequence[str]) -> FirstStep:
    """The step in a llama.cpp answer to `first_step_body` (raises `ServerError` when the
    answer is not one)."""
    try:
        choice = answer["choices"][0]
        text = str(choice["message"]["content"] or "")
    except (KeyError, IndexError, TypeError) as exc:
        raise ServerError(f"The model server sent no first step ({exc!r}).") from exc
    chosen = _chosen_name(text, names)
    share = _answer_share(choice.get("logprobs"), names)
    return FirstStep(chosen, share if share is not None else float(chosen == NO_TOOL))


def arguments_body(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    name: str,
    parameters: Mapping[str, Any],
) -> dict[str, Any]:
    """The request for the arguments of the tool `name` the first step chose, asked on the
    same messages: its answer can only be `{"tool": name, "arguments": {...}}` with arguments
    its schema allows (a JSON schema, which llama.cpp turns into a grammar)."""
    step = {
        "type": "object",
        "properties": {"tool": {"const": name}, "arguments": dict(parameters)},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }
    return {
        "model": model,
        "messages": list(messages),
        "max_tokens": ARGUMENT_TOKENS,
        "temperature": 0.0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "step", "schema": step}},
    }


def read_arguments(answer: Mapping[str, Any]) -> dict[str, Any] | None:
    """The arguments in an answer to `arguments_body`; None when it holds no such object (a
    server that ignored the schema, a reply cut at `ARGUMENT_TOKENS`)."""
    try:
        text = str(answer["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        return None
    text = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        step = json.loads(text)
    except ValueError:
        return None
    arguments = step.get("arguments") if isinstance(step, dict) else None
    return arguments if isinstance(arguments, dict) else None


def ask_first_step(
    client: openai.OpenAI,
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    names: Sequence[str],
    stop: threading.Event | None = None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
    answering: bool = True,
) -> FirstStep | None:
    """Ask the model for its first step (`answering` off: which tool, answering in words not
    allowed); None when Stop came first."""
    body = first_step_body(messages, model=model, names=names, answering=answering)
    answer = _post(client, body, stop=stop, on_request=on_request)
    return None if answer is None else read_first_step(answer, names)


def ask_arguments(
    client: openai.OpenAI,
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    name: str,
    parameters: Mapping[str, Any],
    stop: threading.Event | None = None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any] | None:
    """The arguments of the call the first step chose, written on its own messages (its
    examples show how a message becomes arguments); None after Stop or when the answer holds
    none."""
    body = arguments_body(messages, model=model, name=name, parameters=parameters)
    answer = _post(client, body, stop=stop, on_request=on_request)
    return None if answer is None else read_arguments(answer)


def _post(
    client: openai.OpenAI,
    body: dict[str, Any],
    *,
    stop: threading.Event | None,
    on_request: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any] | None:
    """One request, not streamed (a few tokens); None after Stop, which closes it in any
    phase (`nbchat.llm.transport`)."""
    if on_request is not None:
        on_request(body)
    release = Release()
    remove = stop.add_callback(release.release) if isinstance(stop, StopSignal) else None
    try:
        with releasing(release):
            answer = client.post(
                "/chat/completions",
                body=body,
                cast_to=object,
                options={"headers": dict(IDENTITY)},
            )
    except RequestCancelledError:
        return None
    except openai.OpenAIError as exc:
        raise translate_error(exc, base_url=public_url(str(client.base_url))) from exc
    finally:
        release.close()
        if remove is not None:
            remove()
    if stop is not None and stop.is_set():
        return None
    if not isinstance(answer, dict):
        raise ServerError("The model server's first step was not a JSON object.")
    return answer


def _chosen_name(text: str, names: Sequence[str]) -> str:
    """The name the grammar let the model complete (the text holds the opening only when the
    server echoes it)."""
    name = text.removeprefix(FIRST_STEP_OPENING).split('"', 1)[0]
    if name == NO_TOOL or name in names:
        return name
    raise ServerError(
        f"The model server ignored the first step's grammar (it wrote {text[:40]!r}); "
        "it needs llama.cpp's `grammar` parameter."
    )


def _answer_share(logprobs: object, names: Sequence[str]) -> float | None:
    """`none`'s share of the first token's probability among tokens that can begin an allowed
    name; a token that begins `none` and a tool's name at once counts half to each. None when
    the server reported no alternatives."""
    try:
        alternatives = logprobs["content"][0]["top_logprobs"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return None
    answer = tools = 0.0
    for alternative in alternatives if isinstance(alternatives, list) else ():
        token, probability = _token_probability(alternative)
        if not token:
            continue
        starts_none = NO_TOOL.startswith(token) or token.startswith(NO_TOOL)
        starts_tool = any(name.startswith(token) for name in names)
        if starts_none and starts_tool:
            answer, tools = answer + probability / 2, tools + probability / 2
        elif starts_none:
            answer += probability
        elif starts_tool:
            tools += probability
    return answer / (answer + tools) if answer + tools > 0 else None


def _token_probability(alternative: object) -> tuple[str, float]:
    if not isinstance(alternative, dict):
        return "", 0.0
    token, logprob = alternative.get("token"), alternative.get("logprob")
    if not isinstance(token, str) or not isinstance(logprob, int | float):
        return "", 0.0
    try:
        return token, math.exp(logprob)
    except OverflowError:
        return token, 0.0
