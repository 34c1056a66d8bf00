"""Acting on the notebook from the widget: the open notebook the page holds (JupyterLab, Notebook
7), the acting tools over it, the Stop button off the main thread.

`NotebookDocument`: the notebook the front end holds, as the acting tools see it (the
`nbchat.tools.cells.Document` seam), through a model-only anywidget.

The route is the saved transcript's (`nbchat.ui.transcript`): in JupyterLab 4 and Notebook 7 the
widget manager carries the notebook's document context (`widget_manager.context.model`), so the
widget's front-end code, which runs once per page that loads the kernel's widgets, can read and
change the open notebook's cells; a change made there shows at once and is saved with the
notebook. Where there is no such document (VS Code's renderer, Voilà, nbclient and other
clients that run no widget code, a script), `why_absent` says so in one sentence.

The protocol:

- the page says `hello` with a client id and whether it holds a document; the newest page that
  holds one is the one written to (two open pages would otherwise each insert the cell);
- that page sends the cells (`cells`: the order of ids, and each cell whose kind, source or
  execution count changed since it last sent it; the chat's own cell is the one whose output
  carries the transcript's key) after the hello and whenever the notebook changes, so reading
  a cell (a listing, an edit's diff) never waits on the page;
- a change is a `request` to that page (insert, set_source, delete, set_outputs) answered by
  `done`: an edit or a delete names the source the kernel last saw, and the page refuses it when
  the cell holds something else (the user edited it), so no edit lands on a cell the user changed.

Replies are handled on the kernel's main thread (as every widget message is), so a change waits
while a cell executes; a page that does not answer within the call's time is reported, not
retried.

`NotebookActing`: what lets one chat act on its notebook, put together. In a kernel (a real IPython
shell), a chat gets the acting tools (`nbchat.tools.acting`) over: the open notebook
(`NotebookDocument`, through the widget manager's document context), the kernel's main thread
(`KernelQueue`: the model's code runs between executions, or while a cell waits on the chat in
`ui.wait()`) and what the kernel actually ran (`KernelState`). Each insert and edit is kept in the
store under the session and the tool call (for the rewind); a run that has to wait for the user's
own cell says so in the chat; and the user's messages carry a "rewind to here" button
(`rewind_button`), which takes the chat and the notebook back together on the chat's worker (the
page's answers arrive on the kernel's main thread, which must stay free meanwhile). The Stop
button's clicks are handled on a subshell (`route_off_main_thread`), so Stop reaches the model's
code while it runs on the main thread.

Must not: decide what to change (the tools do) or keep any state the page does not send. No SQL,
HTTP or prompt text here.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from nbchat.conversation.loop import Conversation
from nbchat.conversation.session import Rewound
from nbchat.errors import CellChangedError, NbchatError, ToolError
from nbchat.store.store import Store
from nbchat.tools.acting import CellChange, acting_tools
from nbchat.tools.cells import Cell, kernel_state
from nbchat.tools.kernelrun import KernelQueue, KernelRunner

__all__ = [
    "ESM",
    "NotebookActing",
    "NotebookDocument",
    "can_act",
    "rewind_button",
    "route_off_main_thread",
]


NO_FRONT_END = (
    "no page holding this notebook is connected to the kernel (it runs under nbclient, "
    "papermill or a script, or the notebook's page has not loaded the chat yet)."
)
NO_DOCUMENT = (
    "this front end (VS Code, Voilà or another renderer) gives the chat no notebook document "
    "it can change."
)

ESM = """
const KEY = "nbchat_transcript";
const FLUSH_MS = 250;
const CHECK_MS = 2000;

function documentOf(model) {
  const manager = model.widget_manager;
  const context = manager && manager.context;
  const notebook = context && context.model;
  const ok = notebook && notebook.cells && typeof notebook.cells.get === "function"
    && notebook.sharedModel && typeof notebook.sharedModel.insertCell === "function";
  return ok ? notebook : null;
}

function describe(cell) {
  const count = cell.type === "code" ? cell.executionCount : null;
  return {
    id: cell.id,
    kind: cell.type,
    source: cell.sharedModel.getSource(),
    number: typeof count === "number" ? count : null,
  };
}

function ownCell(notebook, key) {
  for (let i = 0; i < notebook.cells.length; i++) {
    const cell = notebook.cells.get(i);
    const outputs = cell.outputs;
    if (!outputs || typeof outputs.get !== "function") continue;
    for (let j = 0; j < outputs.length; j++) {
      const metadata = outputs.get(j).metadata || {};
      if (metadata[KEY] === key) return cell.id;
    }
  }
  return "";
}

function find(notebook, id) {
  for (let i = 0; i < notebook.cells.length; i++) {
    if (notebook.cells.get(i).id === id) return i;
  }
  return -1;
}

export function apply(notebook, request) {
  const shared = notebook.sharedModel;
  if (request.op === "insert") {
    const index = Math.max(0, Math.min(request.index, notebook.cells.length));
    shared.insertCell(index, {
      id: request.cell.id,
      cell_type: request.cell.cell_type,
      source: request.cell.source,
      metadata: {},
    });
    return { ok: true, cell: describe(notebook.cells.get(index)) };
  }
  const index = find(notebook, request.cell_id);
  if (index < 0) {
    return { ok: false, conflict: true, error: "the cell is no longer in the notebook" };
  }
  const cell = notebook.cells.get(index);
  if (request.expected !== undefined && cell.sharedModel.getSource() !== request.expected) {
    return { ok: false, conflict: true, error: "the cell was edited meanwhile" };
  }
  if (request.op === "set_source") {
    cell.sharedModel.setSource(request.source);
  } else if (request.op === "delete") {
    shared.deleteCell(index);
  } else if (request.op === "set_outputs") {
    cell.outputs.clear();
    for (const output of request.outputs) cell.outputs.add(output);
    cell.executionCount = request.execution_count;
  } else {
    return { ok: false, error: "unknown request " + request.op };
  }
  return { ok: true };
}

function initialize({ model }) {
  const notebook = documentOf(model);
  const client = Math.random().toString(36).slice(2) + Date.now().toString(36);
  model.send({ kind: "hello", client, document: notebook !== null });
  if (!notebook) return;
  let sent = new Map();
  let order = "";
  let timer = null;
  const flush = () => {
    timer = null;
    const ids = [];
    const changed = [];
    const now = new Map();
    for (let i = 0; i < notebook.cells.length; i++) {
      const cell = describe(notebook.cells.get(i));
      const text = JSON.stringify(cell);
      ids.push(cell.id);
      now.set(cell.id, text);
      if (sent.get(cell.id) !== text) changed.push(cell);
    }
    const own = ownCell(notebook, model.get("key"));
    const shape = JSON.stringify([ids, own]);
    if (!changed.length && shape === order) return;
    sent = now;
    order = shape;
    model.send({ kind: "cells", client, order: ids, changed, own });
  };
  const schedule = () => { if (timer === null) timer = setTimeout(flush, FLUSH_MS); };
  notebook.contentChanged.connect(schedule);
  setInterval(flush, CHECK_MS);
  flush();
  model.on("msg:custom", (message) => {
    if (message.kind === "resend") { sent = new Map(); order = ""; flush(); return; }
    if (message.kind !== "request" || message.client !== client) return;
    let reply;
    try {
      reply = apply(notebook, message);
    } catch (error) {
      reply = { ok: false, error: String(error) };
    }
    model.send({ kind: "done", client, id: message.id, ...reply });
    flush();
  });
}

export default { initialize };
"""


@dataclass
class _Waiting:
    """A request on its way to the page: `answered` is set with its `reply`."""

    answered: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] = field(default_factory=dict)


class NotebookDocument(anywidget.AnyWidget):
    """The open notebook for the chat whose transcript output carries `key`."""

    _esm = ESM
    key = traitlets.Unicode("").tag(sync=True)

    def __init__(self, key: str) -> None:
        super().__init__(key=key)
        self._lock = threading.Lock()
        self._client = ""  # the page written to: the newest that holds a document
        self._without = False  # a page without a document said hello
        self._cells: dict[str, Cell] = {}
        self._order: list[str] = []
        self._own = ""
        self._waiting: dict[str, _Waiting] = {}
        self.on_msg(self._on_page_message)

    # The Document seam (nbchat.tools.cells)

    def why_absent(self) -> str:
        with self._lock:
            if self._client:
                return ""
            return NO_DOCUMENT if self._without else NO_FRONT_END

    def cells(self) -> tuple[Cell, ...]:
        with self._lock:
            return tuple(self._cells[i] for i in self._order if i in self._cells)

    def own_cell(self) -> str:
        with self._lock:
            return self._own

    def insert(self, index: int, kind: str, source: str, *, timeout: float) -> Cell:
        cell = {"id": str(uuid.uuid4()), "cell_type": kind, "source": source}
        reply = self._request({"op": "insert", "index": index, "cell": cell}, timeout)
        made = _cell(reply.get("cell"))
        with self._lock:
            self._cells[made.id] = made
            if made.id not in self._order:
                self._order.insert(min(index, len(self._order)), made.id)
        return made

    def set_source(self, cell_id: str, source: str, *, expected: str, timeout: float) -> None:
        request = {"op": "set_source", "cell_id": cell_id, "source": source, "expected": expected}
        self._request(request, timeout)
        with self._lock:
            if cell_id in self._cells:
                old = self._cells[cell_id]
                self._cells[cell_id] = Cell(old.id, old.kind, source, old.number)

    def delete(self, cell_id: str, *, expected: str, timeout: float) -> None:
        self._request({"op": "delete", "cell_id": cell_id, "expected": expected}, timeout)
        with self._lock:
            self._cells.pop(cell_id, None)
            self._order = [i for i in self._order if i != cell_id]

    def set_outputs(
        self, cell_id: str, outputs: list[dict[str, Any]], *, number: int, timeout: float
    ) -> None:
        """Put a run's outputs and execution count into the cell (as running it would)."""
        request = {
            "op": "set_outputs",
            "cell_id": cell_id,
            "outputs": outputs,
            "execution_count": number,
        }
        self._request(request, timeout)

    # The page's side

    def _request(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        why = self.why_absent()
        if why:
            raise ToolError(f"No notebook document: {why}")
        waiting = _Waiting()
        request_id = uuid.uuid4().hex
        with self._lock:
            self._waiting[request_id] = waiting
            client = self._client
        try:
            self.send({**request, "kind": "request", "client": client, "id": request_id})
            if not waiting.answered.wait(timeout):
                raise ToolError(
                    f"The notebook's page did not answer within {timeout:g} s (closed, or the "
                    "kernel was busy running a cell); the change may still appear there."
                )
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        reply = waiting.reply
        if reply.get("ok") is True:
            return reply
        error = str(reply.get("error") or "the page refused it")
        if reply.get("conflict"):
            raise CellChangedError(f"Nothing was written: {error}.")
        raise ToolError(f"The notebook's page could not make the change: {error}.")

    def _on_page_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("kind")
        if kind == "hello":
            self._hello(content)
            return
        with self._lock:
            if content.get("client") != self._client:
                return  # an older page: not the one written to
            if kind == "cells":
                self._take_cells(content)
            elif kind == "done":
                waiting = self._waiting.get(str(content.get("id")))
                if waiting is not None:
                    waiting.reply = content
                    waiting.answered.set()

    def _hello(self, content: dict[str, Any]) -> None:
        with self._lock:
            if content.get("document") is not True:
                self._without = True
                return
            self._client = str(content.get("client") or "")
            self._cells, self._order, self._own = {}, [], ""

    def _take_cells(self, content: dict[str, Any]) -> None:
        """Merge the page's cells (under the lock); ask for all again when one is missing."""
        for item in content.get("changed") or ():
            cell = _cell(item)
            self._cells[cell.id] = cell
        order = [str(i) for i in content.get("order") or ()]
        self._order = order
        self._own = str(content.get("own") or "")
        kept = set(order)
        self._cells = {i: c for i, c in self._cells.items() if i in kept}
        if len(self._cells) != len(kept):
            self.send({"kind": "resend"})


def _cell(item: Any) -> Cell:
    if not isinstance(item, dict):
        raise ToolError("The notebook's page answered without the cell; nothing is known of it.")
    number = item.get("number")
    return Cell(
        id=str(item.get("id") or ""),
        kind=str(item.get("kind") or "code"),
        source=str(item.get("source") or ""),
        number=number if isinstance(number, int) else None,
    )


SUBSHELL_SECONDS = 5.0  # how long making the Stop button's subshell may take

QUEUED = (
    "The assistant's code ({subject}) waits for your running cell to finish; it runs as soon "
    "as that cell ends."
)


def can_act(shell: Any) -> bool:
    """Whether `shell` is IPython's (its events tell what ran; a stand-in has none)."""
    return shell is not None and getattr(shell, "events", None) is not None


class NotebookActing:
    """The acting tools of the chat whose transcript output carries `key`, registered in
    `conversation`'s tools; `notice` shows a line in the chat."""

    def __init__(
        self,
        shell: Any,
        *,
        key: str,
        conversation: Conversation,
        store: Store,
        notice: Callable[[str], None],
    ) -> None:
        self.conversation = conversation
        self.store = store
        self.document = NotebookDocument(key)
        self.state = kernel_state(shell)
        self.queue = KernelQueue(self.state, kernel=getattr(shell, "kernel", None))
        self.runner = KernelRunner(
            shell,
            self.state,
            self.queue,
            on_queued=lambda subject: notice(QUEUED.format(subject=subject)),
        )
        for tool in acting_tools(self.document, self.runner, journal=self._journal):
            conversation.tools.register(tool)

    def _journal(self, change: CellChange) -> None:
        session_id = self.conversation.session_id
        try:
            if session_id is None:
                raise NbchatError("the chat has no session yet")
            self.store.record_notebook_change(
                session_id,
                call_id=change.call_id,
                kind=change.kind,
                cell_id=change.cell_id,
                cell_kind=change.cell_kind,
                before=change.before,
                after=change.after,
            )
        except NbchatError as exc:
            raise ToolError(
                f"The cell was changed in the notebook, but the change could not be recorded, so "
                f"a rewind will not take it back ({exc})."
            ) from exc

    def rewind(self, row_id: int) -> Rewound:
        """Take the chat and the notebook back to before the user's message `row_id`."""
        return self.conversation.rewind(row_id, self.document)

    def close(self) -> None:
        self.queue.close()
        self.document.close()


def route_off_main_thread(widget: widgets.Widget, kernel: Any) -> bool:
    """Have `widget`'s messages from the page handled on a subshell of its own (ipykernel 7's
    subshells: a thread with its own loop), not on the kernel's main thread; True when done.

    The Stop button needs it: while the model's code runs on the main thread, a click handled
    there would wait for that code to end, so Stop could not interrupt it. ipykernel routes a
    comm's messages to the subshell its `_reply_subshell_for` names. Where there are no
    subshells (ipykernel 6, another kernel), nothing changes: Kernel > Interrupt still raises
    KeyboardInterrupt in the model's code (`nbchat.tools.kernelrun`).
    """
    thread = getattr(kernel, "shell_channel_thread", None)
    manager = getattr(thread, "manager", None)
    loop = getattr(thread, "io_loop", None)
    comm = getattr(widget, "comm", None)
    if manager is None or loop is None or comm is None or not hasattr(manager, "_create_subshell"):
        return False
    made: list[str] = []
    ready = threading.Event()

    def create() -> None:  # the manager makes subshells on the shell channel's thread only
        try:
            made.append(manager._create_subshell())
        finally:
            ready.set()

    loop.add_callback(create)
    if not ready.wait(SUBSHELL_SECONDS) or not made:
        return False
    subshell = made[0]
    comm._reply_subshell_for = lambda _data, _default: subshell
    return True


def rewind_button(bubble: widgets.Widget, on_rewind: Callable[[], None]) -> widgets.Widget:
    """A user's message with its "rewind to here" button below it."""
    button = widgets.Button(description="↶ rewind to here", layout=widgets.Layout(width="auto"))
    button.add_class("nbchat-request-link")
    button.tooltip = (
        "Take the chat and the notebook back to before this message: cells the assistant "
        "inserted or edited since are restored (not ones you edited by hand)."
    )
    button.on_click(lambda _button: on_rewind())
    return widgets.VBox([bubble, button])
