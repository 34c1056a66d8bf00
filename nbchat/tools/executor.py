"""`ToolExecutor`: carry out one tool call and always come back with text the model can read.

Owns the path from a `ToolCall` to a `ToolOutcome`: find the tool, parse and validate the
arguments, apply the approval policy to dangerous tools (`allow` runs them, `deny` refuses,
`ask` asks the approver; `ask` without an approver refuses), run the tool in a worker thread
under a time limit and the Stop event, and cap the output (head and tail kept, the whole within
`output_limit`, which the conversation sets to a share of its budget). Every problem
(an unknown tool, bad arguments, a refusal, an exception, a timeout, Stop) becomes the outcome's
`content` with `ok=False`; `execute` never raises for a tool problem. A call refused before it
ran (declined, or not allowed by the policy) also carries what to tell the user, in their terms
(`ToolOutcome.refused`): the chat ends its turn with those words (`nbchat.conversation.turn`).

Must not: know about rows, the chat loop or widgets (the approver is just a callable).
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nbchat.config import Settings
from nbchat.errors import ConfigError, ToolError
from nbchat.history import ToolCall
from nbchat.stopping import StopSignal
from nbchat.tools.context import ToolContext, cap_output, safe_environment
from nbchat.tools.registry import Review, Tool, ToolRegistry
from nbchat.tools.shell import KILL_GRACE

__all__ = [
    "FAILURE_PREFIXES",
    "ApprovalRequest",
    "Approver",
    "ToolExecutor",
    "ToolOutcome",
    "is_failed_result",
]

POLICIES = ("ask", "allow", "deny")
# How a tool result that did not run, or failed, starts: the refusals and errors made here and
# the acting tools' own. Stored rows carry no flag, so this is how they are read back.
FAILURE_PREFIXES = ("Error", "Refused", "Denied", "Not run", "Unknown tool", "Timed out")
# The other failures made here (a tool that raised, overran its time or was stopped; arguments
# that are not what it takes) and the acting tools' "Not inserted:", "Not edited:", "Not done:".
# Read as results, they had the answer to a failed insert state the value its code would have
# computed. Anchored, one bounded name: linear.
FAILURE_FORMS = re.compile(
    r"'[\w.-]{1,64}' (?:failed: |did not finish within |was stopped by the user)"
    r"|(?:The arguments for|Invalid arguments for) '"
    r"|Not (?:inserted|edited|done|changed|written|saved): "
)
POLL_SECONDS = 0.1  # how often a plain Event is checked while waiting; a StopSignal wakes at once
# A tool that cleans up after itself (run_shell kills its process group) gets this long past
# its time limit, or past Stop, to report before the executor stops waiting for it.
WAIT_GRACE = KILL_GRACE + 1.0
TRACEBACK_FRAMES = 4
HEADLINE_CHARS = 200
APPROVAL_REASON = "{name} can change files or run commands, and the tool policy is 'ask'."
# A tool from elsewhere (an MCP server): nbchat cannot tell what it does.
ORIGIN_REASON = (
    "{name} is a tool of {origin}, which can do anything that server can, and the tool policy "
    "is 'ask' (mcp_allow names the servers and tools that may run without asking)."
)
# The built-in tools fit their results to the limit with advice of their own; this is for the
# rest (notebook tools, the user's functions), whose way to ask for less only they know.
CUT_ADVICE = "one tool result holds at most {limit:,} characters; call it again asking for less"


def is_failed_result(content: str) -> bool:
    """Whether a stored tool result says the call did not run or failed."""
    return content.startswith(FAILURE_PREFIXES) or FAILURE_FORMS.match(content) is not None


@dataclass(frozen=True)
class ApprovalRequest:
    """What the approver is asked: may this call of a dangerous tool run?

    `reason` says why it needs approval; `description` is the tool's own description;
    `review` what the tool shows besides the arguments (a cell's diff, the code that runs).
    """

    name: str
    arguments: Mapping[str, Any]
    call_id: str = ""
    reason: str = ""
    description: str = ""
    review: Review | None = None

    def summary(self) -> str:
        """One line for a prompt: `run_shell(command='ls -la')`, long values shortened."""
        shown = ", ".join(f"{key}={_short(value)}" for key, value in self.arguments.items())
        return f"{self.name}({shown})"


Approver = Callable[[ApprovalRequest], bool]


@dataclass(frozen=True)
class ToolOutcome:
    """The tool result the model reads (`content`); `error` is its headline when `ok` is False;
    `refused`, when the call was refused before it ran, what the user is told of it (one
    sentence or two, in their terms: "Not done: you declined run_shell.", whose card shows the
    call)."""

    content: str
    ok: bool
    error: str | None = None
    duration: float = 0.0
    refused: str | None = None


class _Failed(Exception):
    """A tool problem on its way to becoming the outcome's content."""


class _Refused(_Failed):
    """A call refused before it ran: the result for the model, and `for_user`, what the user is
    told of it."""

    def __init__(self, for_model: str, for_user: str) -> None:
        super().__init__(for_model)
        self.for_user = for_user


@dataclass
class _Worker:
    """A function running in a daemon thread; `wake` is set when it ends (or Stop is pressed)."""

    wake: threading.Event = field(default_factory=threading.Event)
    forget_stop: Callable[[], None] = lambda: None
    done: bool = False
    value: Any = None
    error: BaseException | None = None


class ToolExecutor:
    """Runs tool calls from `registry` in `workspace` under the approval `policy`.

    `wait_grace` is how long past its time limit (or past Stop) a tool may take to report; it
    lets run_shell finish killing its process group and say so.
    """

    wait_grace: float = WAIT_GRACE

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        workspace: Path | str,
        policy: Literal["ask", "allow", "deny"] = "ask",
        approver: Approver | None = None,
        timeout: float = 60.0,
        output_limit: int = 20_000,
        env_allow: Sequence[str] = (),
    ) -> None:
        if policy not in POLICIES:
            raise ConfigError(f"Tool policy must be one of ask, allow, deny; got {policy!r}.")
        self.registry = registry
        self.workspace = Path(workspace).expanduser().resolve()
        self.policy = policy
        self.approver = approver
        self.timeout = timeout
        self.output_limit = output_limit
        self.env_allow = tuple(env_allow)

    @classmethod
    def from_settings(
        cls, settings: Settings, registry: ToolRegistry, *, approver: Approver | None = None
    ) -> ToolExecutor:
        """An executor with the workspace, policy, limits and allowed variables of `settings`."""
        return cls(
            registry,
            workspace=settings.workspace,
            policy=settings.tool_policy,
            approver=approver,
            timeout=settings.tool_timeout,
            output_limit=settings.tool_output_limit,
            env_allow=settings.tool_env_allow,
        )

    def execute(self, call: ToolCall, *, stop: threading.Event | None = None) -> ToolOutcome:
        """Run one call; every problem is reported in the outcome, never raised."""
        started = time.monotonic()
        refused = None
        try:
            content, ok = self._run(call, stop), True
        except _Refused as refusal:
            content, ok, refused = str(refusal), False, refusal.for_user
        except _Failed as failure:
            content, ok = str(failure), False
        advice = CUT_ADVICE.format(limit=self.output_limit)
        content = cap_output(content, self.output_limit, advice=advice)
        headline = None if ok else (content.splitlines() or [""])[0][:HEADLINE_CHARS]
        return ToolOutcome(content, ok, headline, time.monotonic() - started, refused)

    def _run(self, call: ToolCall, stop: threading.Event | None) -> str:
        tool = self.registry.get(call.name)
        if tool is None:
            known = ", ".join(self.registry.names()) or "none"
            raise _Failed(f"Unknown tool {call.name!r}. Known tools: {known}. Call one of these.")
        arguments = _checked_arguments(tool, call.arguments)
        self._approve(tool, call.id, arguments, stop)
        context = ToolContext(
            self.workspace,
            timeout=self.timeout,
            output_limit=self.output_limit,
            env=safe_environment(allow=self.env_allow),
            stop=stop,
            deadline=time.monotonic() + self.timeout,  # built-in tools give up by then
            call_id=call.id,
        )
        worker = _start(lambda: tool.invoke(arguments, context), stop)
        state = _wait(worker, stop, self.timeout + self.wait_grace, grace=self.wait_grace)
        if state == "timed out":
            raise _Failed(
                f"{tool.name!r} did not finish within {self.timeout:g} s and was abandoned (it "
                "may still be running). Ask for less at once, or raise NBCHAT_TOOL_TIMEOUT."
            )
        if state == "stopped":
            raise _Failed(f"{tool.name!r} was stopped by the user before it finished.")
        if worker.error is not None:
            raise _Failed(_describe_exception(tool.name, worker.error))
        return _as_text(worker.value)

    def _approve(
        self, tool: Tool, call_id: str, arguments: dict[str, Any], stop: threading.Event | None
    ) -> None:
        if not tool.dangerous or self.policy == "allow":
            return
        if self.policy == "deny":
            what = (
                f"a tool of {tool.origin}" if tool.origin else "it changes files or runs commands"
            )
            allow = (
                "To allow it, set NBCHAT_TOOL_POLICY=allow, or NBCHAT_TOOL_POLICY=ask to approve "
                "each call in the widget."
            )
            raise _Refused(
                f"Refused: the user's tool policy denies {tool.name!r} ({what}). {allow}",
                f"Not done: your tool policy denies {tool.name} ({what}). {allow}",
            )
        if self.approver is None:
            needs = (
                "needs approval and nothing here can ask for it (policy 'ask' without an "
                "approver). Set NBCHAT_TOOL_POLICY=allow to let it run."
            )
            raise _Refused(f"Refused: {tool.name!r} {needs}", f"Not done: {tool.name} {needs}")
        approver = self.approver
        request = ApprovalRequest(
            tool.name,
            arguments,
            call_id=call_id,
            reason=_approval_reason(tool),
            description=tool.description,
            review=_review(tool, call_id, arguments),
        )
        worker = _start(lambda: approver(request), stop)
        state = _wait(worker, stop, None, grace=0.0)
        # Stop also resolves the widget's card as denied, and that answer may arrive first.
        if state == "stopped" or (stop is not None and stop.is_set()):
            raise _Failed(f"Refused: Stop was pressed while {tool.name!r} waited for approval.")
        if worker.error is not None:
            error = f"{type(worker.error).__name__}: {worker.error}"
            raise _Refused(
                f"Refused: asking for approval of {tool.name!r} failed ({error}).",
                f"Not done: asking for approval of {tool.name} failed ({error}).",
            )
        if worker.value is not True:
            raise _Refused(
                f"Refused: the user did not approve {tool.name!r}. Ask the user how to proceed "
                "or do without it.",
                f"Not done: you declined {tool.name}. Say what to do instead.",
            )


def _review(tool: Tool, call_id: str, arguments: dict[str, Any]) -> Review | None:
    """What the tool shows for review; a review that fails refuses the call, saying why (a
    cell that is not there cannot be shown, nor changed)."""
    if tool.review is None:
        return None
    try:
        return tool.review(call_id, arguments)
    except ToolError as exc:
        raise _Failed(str(exc)) from exc


def _approval_reason(tool: Tool) -> str:
    if tool.origin:
        return ORIGIN_REASON.format(name=tool.name, origin=tool.origin)
    return APPROVAL_REASON.format(name=tool.name)


def _checked_arguments(tool: Tool, raw: str) -> dict[str, Any]:
    expected = _expected(tool)
    try:
        value = json.loads(raw.strip() or "{}")
    except ValueError as exc:
        raise _Failed(
            f"The arguments for {tool.name!r} are not valid JSON ({exc}). {expected}"
        ) from exc
    if not isinstance(value, dict):
        kind = type(value).__name__ if value is not None else "null"
        raise _Failed(
            f"The arguments for {tool.name!r} must be a JSON object, got {kind}. {expected}"
        )
    problems = tool.problems(value)
    if problems:
        raise _Failed(f"Invalid arguments for {tool.name!r}: {'; '.join(problems)}. {expected}")
    return value


def _expected(tool: Tool) -> str:
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    if not properties:
        return "It takes no arguments: send {}."
    required = set(tool.parameters.get("required", ()))
    described = []
    for name, schema in properties.items():
        kinds = schema.get("type", "any")
        kind = " or ".join(kinds) if isinstance(kinds, list) else kinds
        described.append(f"{name} ({kind}{', required' if name in required else ''})")
    return f"Parameters: {', '.join(described)}."


def _start(function: Callable[[], Any], stop: threading.Event | None) -> _Worker:
    worker = _Worker()

    def run() -> None:
        try:
            worker.value = function()
        except BaseException as exc:  # reported to the model (even SystemExit from a tool)
            worker.error = exc
        finally:
            worker.done = True
            worker.wake.set()

    if isinstance(stop, StopSignal):
        worker.forget_stop = stop.add_callback(worker.wake.set)
    threading.Thread(target=run, name="nbchat-tool", daemon=True).start()
    return worker


def _wait(
    worker: _Worker,
    stop: threading.Event | None,
    timeout: float | None,
    *,
    grace: float,
) -> Literal["done", "timed out", "stopped"]:
    """Until the worker is done, the time is up, or Stop (then `grace` more to finish)."""
    try:
        return _wait_for(worker, stop, timeout, grace)
    finally:
        worker.forget_stop()


def _wait_for(
    worker: _Worker, stop: threading.Event | None, timeout: float | None, grace: float
) -> Literal["done", "timed out", "stopped"]:
    deadline = None if timeout is None else time.monotonic() + timeout
    while not worker.done:
        if stop is not None and stop.is_set():
            worker.wake.clear()
            return "done" if worker.done or worker.wake.wait(grace) else "stopped"
        remaining = POLL_SECONDS if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            return "timed out"
        worker.wake.wait(min(remaining, POLL_SECONDS))
    return "done"


def _describe_exception(name: str, error: BaseException) -> str:
    if isinstance(error, ToolError):
        return str(error)  # written for the model already
    frames = traceback.extract_tb(error.__traceback__)[-TRACEBACK_FRAMES:]
    where = "\n".join(
        f"  {Path(frame.filename).name}:{frame.lineno} in {frame.name}: {frame.line or ''}".rstrip()
        for frame in frames
    )
    return f"{name!r} failed: {type(error).__name__}: {error}\nTraceback (last lines):\n{where}"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
