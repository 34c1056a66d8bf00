"""Running the model's code in the user's namespace, with what it prints, shows and raises caught.

`run_source` runs on the kernel's main thread (a `KernelQueue` job): the source is transformed as
IPython does (magics, `!commands`), its statements run in the user's namespace and its last
expression is evaluated, as a cell's would be; the model's own code (`last_assignment`) that ends
by assigning one name shows that name's value instead, as IPython's `last_expr_or_assign` does (a
1.5B model asked for the total of a column wrote `total = sales['units'].sum()` and read back
nothing). While it runs, `sys.stdout` and `sys.stderr` go to
bounded buffers (head and tail kept, the rest counted; other threads' writes pass through) and
the shell's display publisher to a
capturing one, so nothing it prints or displays lands in some other cell's output; IPython's
`pre_execute` and `post_execute` events fire around it (matplotlib's inline backend shows its
figures at `post_execute`, so they are caught too). It does not enter the user's history (In,
Out, `_`, the execution counter), unless the caller gives it a number (running a cell).

`Ran` holds what came back; `describe` turns it into the text the model reads: how it ended, the
streams, the result's text form, each display named by type and size (`image/png 640×480`), the
traceback without this module's frames. Secrets are masked in all of it.

Must not: decide when or on which thread it runs (`KernelQueue`), or know about documents.
"""

from __future__ import annotations

import ast
import base64
import io
import linecache
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nbchat.tools.preview import mask_secrets

__all__ = ["Ran", "describe", "fenced", "name_display", "run_source", "to_outputs"]

Ending = Literal["ok", "error", "interrupted"]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TEXT_SHOWN = 2000  # characters of one display's text/plain shown
PACKAGE = str(Path(__file__).resolve().parent.parent)  # nbchat's own frames leave tracebacks


class Capture(io.TextIOBase):
    """A write-only text stream that keeps its first and last `limit // 2` characters of what
    the thread that made it writes; other threads' writes (the chat's own, a user's thread) go
    on to `elsewhere`, the stream it stands in for."""

    def __init__(self, limit: int, elsewhere: Any) -> None:
        super().__init__()
        self._owner = threading.get_ident()
        self._elsewhere = elsewhere
        self._half = max(limit // 2, 1)
        self._head: list[str] = []
        self._head_size = 0
        self._tail = ""
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if type(text) is not str:
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if threading.get_ident() != self._owner:
            written: int = self._elsewhere.write(text)
            return written
        size = len(text)
        room = self._half - self._head_size
        if room > 0:
            self._head.append(text[:room])
            self._head_size += min(room, len(text))
            text = text[room:]
        if text:
            tail = self._tail + text
            self.dropped += max(0, len(tail) - self._half)
            self._tail = tail[-self._half :]
        return size

    def text(self) -> str:
        head = "".join(self._head)
        if not self.dropped:
            return head + self._tail
        return f"{head}\n[... {self.dropped:,} characters cut ...]\n{self._tail}"


@dataclass(frozen=True)
class Ran:
    """What one run produced. `displays` are the mime bundles shown, in order; `error` the
    traceback text; `value_data` the result's mime bundle (empty when there was none)."""

    ending: Ending
    duration: float
    stdout: str = ""
    stderr: str = ""
    value_data: Mapping[str, Any] = field(default_factory=dict)
    displays: tuple[Mapping[str, Any], ...] = ()
    error: str = ""
    headline: str = ""  # the error's last line, "ZeroDivisionError: division by zero"
    assigned: str = ""  # the name whose value `value_data` is, when the code ended assigning it


def run_source(
    shell: Any, source: str, *, limit: int, label: str, last_assignment: bool = False
) -> Ran:
    """Run `source` in `shell`'s namespace, here (the main thread). `label` names it in
    tracebacks ("run 3"); `limit` bounds each stream; `last_assignment`: code that ends by
    assigning one name has that name's value as its result."""
    from IPython.core.displaypub import CapturingDisplayPublisher

    out, err = Capture(limit, sys.stdout), Capture(limit, sys.stderr)
    publisher = CapturingDisplayPublisher()  # type: ignore[no-untyped-call]
    # ipykernel's other threads (a subshell handling Stop) set the parent message on whatever
    # publisher the shell holds; this one has nothing to route.
    setattr(publisher, "set_parent", lambda _parent: None)  # noqa: B010 - no such method
    saved = sys.stdout, sys.stderr, shell.display_pub
    started = time.monotonic()
    sys.stdout, sys.stderr, shell.display_pub = out, err, publisher
    value: Mapping[str, Any] = {}
    assigned = ""
    try:
        try:
            shell.events.trigger("pre_execute")
            result, assigned = _execute(shell, source, label, last_assignment=last_assignment)
            value = _formatted(shell, result)
            ending: Ending = "ok"
            error = headline = ""
        except KeyboardInterrupt as exc:
            ending, error, headline = "interrupted", _traceback(exc, label), "KeyboardInterrupt"
        except BaseException as exc:  # the model's code may raise anything, SystemExit too
            ending, error, headline = "error", _traceback(exc, label), _headline(exc)
        finally:
            _post_execute(shell, err)
    finally:
        sys.stdout, sys.stderr, shell.display_pub = saved
    displays = tuple(dict(output.get("data") or {}) for output in publisher.outputs)
    return Ran(
        ending,
        time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
        value_data=value,
        displays=displays,
        error=error,
        headline=headline,
        assigned=assigned if value else "",
    )


_NOTHING = object()


def _execute(shell: Any, source: str, label: str, *, last_assignment: bool) -> tuple[Any, str]:
    """Statements, then the last expression's value (`_NOTHING` when it ends otherwise), or,
    with `last_assignment`, the value of the one name a last assignment bound, with that name."""
    transformed = shell.transform_cell(source)
    filename = f"<{label}>"
    tree = ast.parse(transformed, filename=filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    assigned = (
        _assigned_name(tree.body[-1]) if last is None and last_assignment and tree.body else ""
    )
    linecache.cache[filename] = (len(transformed), None, transformed.splitlines(True), filename)
    flags = getattr(shell.compile, "flags", 0)
    namespace, local = shell.user_global_ns, shell.user_ns
    body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
    exec(body, namespace, local)
    if last is not None:
        value = eval(
            compile(last, filename, "eval", flags=flags, dont_inherit=True), namespace, local
        )
        return value, ""
    if assigned and assigned in local:
        return local[assigned], assigned
    return _NOTHING, ""


def _assigned_name(statement: ast.stmt) -> str:
    """The one name `statement` assigns (`total = …`, `total: int = …`, `total += …`), else
    "" (several targets, an attribute, a subscript, a tuple)."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target: ast.expr | None = statement.targets[0]
    elif isinstance(statement, ast.AugAssign) or (
        isinstance(statement, ast.AnnAssign) and statement.value is not None
    ):
        target = statement.target
    else:
        target = None
    return target.id if isinstance(target, ast.Name) else ""


def _formatted(shell: Any, value: Any) -> Mapping[str, Any]:
    if value is _NOTHING or value is None:
        return {}
    data, _metadata = shell.display_formatter.format(value)
    return dict(data)


def _post_execute(shell: Any, err: Capture) -> None:
    """`post_execute` with the capture still in place; a handler's failure is printed there."""
    try:
        shell.events.trigger("post_execute")
    except BaseException as exc:  # an interrupt or a failing handler: said, not raised
        err.write(f"\n(post_execute: {type(exc).__name__})\n")


def _traceback(error: BaseException, label: str) -> str:
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(PACKAGE)
    ]
    start = next((i for i, f in enumerate(frames) if f.filename == f"<{label}>"), 0)
    lines = traceback.format_list(frames[start:])
    try:
        lines += traceback.format_exception_only(type(error), error)
    except BaseException:  # a __str__ that fails: the type still says something
        lines.append(f"{type(error).__name__}: (its message could not be read)\n")
    return "Traceback (most recent call last):\n" + "".join(lines)


def _headline(error: BaseException) -> str:
    try:
        message = str(error)
    except BaseException:
        message = ""
    message = message.splitlines()[0][:200] if message.strip() else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def name_display(data: Mapping[str, Any]) -> str:
    """A display named by its richest type and size: `image/png 640×480 (12.3 kB)`,
    `text/html (2,301 characters)`, `a widget`; with its text/plain when it has one."""
    if WIDGET_VIEW in data:
        return "a widget (shown to the user in the notebook only)"
    kinds = [kind for kind in data if kind != "text/plain"]
    text = data.get("text/plain")
    named = _name_kind(kinds[0], data[kinds[0]]) if kinds else "text/plain"
    if not isinstance(text, str) or not text.strip() or _is_default_repr(text):
        return named
    return f"{named}: {_short(text)}"


def _is_default_repr(text: str) -> bool:
    """`<IPython.core.display.HTML object>`: a placeholder, not a text form."""
    text = text.strip()
    return text.startswith("<") and text.endswith(" object>") and "\n" not in text


def _name_kind(kind: str, payload: Any) -> str:
    raw = _bytes(payload)
    if (
        kind == "image/png"
        and raw is not None
        and len(raw) >= 24
        and raw[:8] == b"\x89PNG\r\n\x1a\n"
    ):
        width, height = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
        return f"{kind} {width}×{height} ({_kilobytes(len(raw))})"
    if raw is not None:
        return f"{kind} ({_kilobytes(len(raw))})"
    if isinstance(payload, str):
        return f"{kind} ({len(payload):,} characters)"
    return kind


def _bytes(payload: Any) -> bytes | None:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str) and payload and not payload.lstrip().startswith("<"):
        try:
            return base64.b64decode(payload, validate=False)
        except ValueError:
            return None
    return None


def _kilobytes(size: int) -> str:
    return f"{size / 1000:.1f} kB" if size >= 1000 else f"{size} bytes"


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN] + " …"


def fenced(text: str, info: str = "") -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def describe(ran: Ran, heading: str) -> str:
    """The text the model reads: `heading` (how it ended), then each part that has content."""
    parts = [heading]
    if ran.stdout:
        parts.append("stdout:\n" + fenced(ran.stdout))
    if ran.stderr:
        parts.append("stderr:\n" + fenced(ran.stderr))
    text = ran.value_data.get("text/plain")
    if isinstance(text, str):
        label = f"{ran.assigned} (assigned last)" if ran.assigned else "result"
        parts.append(f"{label}:\n" + fenced(_short(text)))
    shown = [name_display(data) for data in ran.displays]
    others = [kind for kind in ran.value_data if kind != "text/plain"]
    if others:
        shown.append(
            "the result also as " + ", ".join(_name_kind(k, ran.value_data[k]) for k in others)
        )
    if shown:
        parts.append("displayed:\n" + "\n".join(f"- {line}" for line in shown))
    if ran.error:
        parts.append(fenced(ran.error))
    if len(parts) == 1:
        parts.append("(no output)")
    return mask_secrets("\n".join(parts))


def to_outputs(ran: Ran, number: int) -> list[dict[str, Any]]:
    """The run as a cell's outputs (nbformat 4 dicts), in the order a cell shows them: the
    streams, the displays, the result, the error."""
    outputs: list[dict[str, Any]] = []
    for name, text in (("stdout", ran.stdout), ("stderr", ran.stderr)):
        if text:
            outputs.append({"output_type": "stream", "name": name, "text": text})
    for data in ran.displays:
        outputs.append({"output_type": "display_data", "data": _json_data(data), "metadata": {}})
    if ran.value_data:
        outputs.append(
            {
                "output_type": "execute_result",
                "execution_count": number,
                "data": _json_data(ran.value_data),
                "metadata": {},
            }
        )
    if ran.error:
        name, _, value = ran.headline.partition(": ")
        lines = ran.error.splitlines()
        outputs.append({"output_type": "error", "ename": name, "evalue": value, "traceback": lines})
    return outputs


def _json_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """A mime bundle as JSON holds it: bytes (an image) in base64."""
    return {
        kind: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for kind, value in data.items()
    }
