"""A real ipykernel driven over jupyter_client, and a notebook page that answers the chat's
document widget over the same wire a browser's would.

`KernelSession` starts a kernel (its own environment, working directory and IPython dir), runs
code in it the way a front end runs a cell (an `execute_request`, with the cell's id in the
metadata, as JupyterLab sends it) and collects what each execution sent back. A reader thread
takes every IOPub message as it comes, so the page can answer the kernel while the test waits.

`FakePage` is the page: a list of cells (id, kind, source, execution count, the metadata of
each output), which says `hello` to the kernel's `NotebookDocument` widget when it opens, sends
its cells, and carries out the widget's requests (insert, set_source, delete, set_outputs) as
`nbchat.ui.acting`'s front-end code does, refusing a write to a cell whose source is not
what the kernel expected. It also clicks buttons (`click`), as a person clicking in the page.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

START_SECONDS = 120.0
TESTS = Path(__file__).resolve().parent
KEY = "nbchat_transcript"


@dataclass
class Executed:
    """What one execution sent back."""

    msg_id: str
    done: threading.Event = field(default_factory=threading.Event)
    stdout: str = ""
    stderr: str = ""
    results: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    displays: list[dict[str, Any]] = field(default_factory=list)  # {"data", "metadata"}
    count: int | None = None

    @property
    def text(self) -> str:
        return self.stdout + "".join(self.results)


class KernelSession:
    """One kernel with a reader thread on IOPub and a `FakePage` listening."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=dict(env), cwd=str(cwd))
        self.client = self.manager.blocking_client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=START_SECONDS)
        self._send_lock = threading.Lock()
        self._executions: dict[str, Executed] = {}
        self._closing = threading.Event()
        self.page = FakePage(self)
        self._reader = threading.Thread(target=self._read, name="kernel-iopub", daemon=True)
        self._reader.start()

    def close(self) -> None:
        self._closing.set()
        self._reader.join(10)
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
        self.manager.cleanup_resources()
        _close_thread_loop()  # the sync client made one for this thread

    def send_shell(self, msg_type: str, content: dict[str, Any], metadata: Any = None) -> str:
        message = self.client.session.msg(msg_type, content, metadata=metadata or {})
        with self._send_lock:
            self.client.shell_channel.send(message)
        return str(message["header"]["msg_id"])

    def start(self, code: str, *, cell_id: str | None = None) -> Executed:
        """Send `code` to run, as a cell (with its id) when `cell_id` is given."""
        content = {"code": code, "silent": False, "store_history": True, "allow_stdin": False}
        metadata = {"cellId": cell_id} if cell_id else {}
        message = self.client.session.msg("execute_request", content, metadata=metadata)
        executed = Executed(str(message["header"]["msg_id"]))
        self._executions[executed.msg_id] = executed
        with self._send_lock:
            self.client.shell_channel.send(message)
        return executed

    def run(self, code: str, *, cell_id: str | None = None, timeout: float = 120) -> Executed:
        """Run `code` and wait until the kernel is idle again; a failure fails the test."""
        executed = self.start(code, cell_id=cell_id)
        assert executed.done.wait(timeout), f"no answer within {timeout} s to:\n{code}"
        assert not executed.errors, "\n".join(executed.errors)
        return executed

    def _read(self) -> None:
        try:
            while not self._closing.is_set():
                try:
                    message = self.client.get_iopub_msg(timeout=0.2)
                except queue.Empty:
                    continue
                self._take(message)
        finally:
            _close_thread_loop()

    def _take(self, message: dict[str, Any]) -> None:
        kind = message["header"]["msg_type"]
        content = message["content"]
        if kind in ("comm_open", "comm_msg"):
            self.page.on_comm(kind, content)
            return
        executed = self._executions.get(message["parent_header"].get("msg_id", ""))
        if executed is None:
            return
        if kind == "stream":
            name = "stdout" if content["name"] == "stdout" else "stderr"
            setattr(executed, name, getattr(executed, name) + content["text"])
        elif kind == "execute_result":
            executed.results.append(content["data"].get("text/plain", ""))
        elif kind == "display_data":
            executed.displays.append({"data": content["data"], "metadata": content["metadata"]})
        elif kind == "error":
            executed.errors.append("\n".join(content["traceback"]))
        elif kind == "execute_input":
            executed.count = content["execution_count"]
        elif kind == "status" and content["execution_state"] == "idle":
            executed.done.set()


@dataclass
class PageCell:
    id: str
    kind: str
    source: str
    number: int | None = None
    output_metadata: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "source": self.source, "number": self.number}


class FakePage:
    """The notebook's page (see the module's docstring)."""

    def __init__(self, kernel: KernelSession) -> None:
        self.kernel = kernel
        self.cells: list[PageCell] = []
        self.client = "page-1"
        self.document_comm = ""
        self.key = ""
        self.buttons: dict[str, str] = {}  # a button's description → its comm id
        self.requests: list[dict[str, Any]] = []
        self._answered = threading.Condition()
        self._ids = itertools.count(1)
        self.lock = threading.RLock()

    def add(self, source: str, kind: str = "code") -> PageCell:
        cell = PageCell(f"cell-{next(self._ids)}", kind, source)
        with self.lock:
            self.cells.append(cell)
        return cell

    def find(self, cell_id: str) -> PageCell:
        with self.lock:
            return next(cell for cell in self.cells if cell.id == cell_id)

    def run(self, cell: PageCell, timeout: float = 120) -> Executed:
        """Run the cell as the page runs it: its source, under its id; its count then shows."""
        executed = self.kernel.run(cell.source, cell_id=cell.id, timeout=timeout)
        with self.lock:
            cell.number = executed.count
            cell.output_metadata = [d["metadata"] for d in executed.displays]
        self.send_cells()
        return executed

    def edit_by_hand(self, cell_id: str, source: str) -> None:
        with self.lock:
            self.find(cell_id).source = source
        self.send_cells()

    def click(self, description: str) -> None:
        """Click the button labelled `description`, as a person does in the page."""
        comm_id = self.buttons[description]
        data = {"method": "custom", "content": {"event": "click"}}
        self.kernel.send_shell("comm_msg", {"comm_id": comm_id, "data": data})

    def wait_answered(self, count: int, timeout: float = 60) -> bool:
        """Until the page has answered `count` of the widget's requests."""
        with self._answered:
            return self._answered.wait_for(lambda: len(self.requests) >= count, timeout)

    def on_comm(self, kind: str, content: dict[str, Any]) -> None:
        if kind == "comm_open":
            self._opened(content)
            return
        data = content.get("data") or {}
        if content.get("comm_id") != self.document_comm or data.get("method") != "custom":
            return
        message = data.get("content") or {}
        if message.get("kind") == "resend":
            self.send_cells()
        elif message.get("kind") == "request" and message.get("client") == self.client:
            reply = self.apply(message)
            self._send({"kind": "done", "client": self.client, "id": message["id"], **reply})
            with self._answered:
                self.requests.append(message)
                self._answered.notify_all()
            self.send_cells()

    def _opened(self, content: dict[str, Any]) -> None:
        state = (content.get("data") or {}).get("state") or {}
        if state.get("_model_name") == "ButtonModel":
            self.buttons[str(state.get("description"))] = content["comm_id"]
        elif "set_outputs" in str(state.get("_esm", "")) and "key" in state:
            self.document_comm, self.key = content["comm_id"], state["key"]
            self._send({"kind": "hello", "client": self.client, "document": True})
            self.send_cells()

    def send_cells(self) -> None:
        if not self.document_comm:
            return
        with self.lock:
            cells = [cell.describe() for cell in self.cells]
            order = [cell.id for cell in self.cells]
            own = next((c.id for c in self.cells if _shows_key(c, self.key)), "")
        message = {"kind": "cells", "client": self.client, "order": order, "changed": cells}
        self._send({**message, "own": own})

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return apply_request(self.cells, request)

    def _send(self, content: dict[str, Any]) -> None:
        data = {"method": "custom", "content": content}
        self.kernel.send_shell("comm_msg", {"comm_id": self.document_comm, "data": data})


def apply_request(cells: list[PageCell], request: dict[str, Any]) -> dict[str, Any]:
    """A request carried out on `cells` as the page's code (`nbchat.ui.acting.ESM`) does."""
    if request["op"] == "insert":
        made = request["cell"]
        cell = PageCell(made["id"], made["cell_type"], made["source"])
        cells.insert(max(0, min(int(request["index"]), len(cells))), cell)
        return {"ok": True, "cell": cell.describe()}
    found = [c for c in cells if c.id == request["cell_id"]]
    if not found:
        return {"ok": False, "conflict": True, "error": "the cell is no longer in the notebook"}
    cell = found[0]
    if "expected" in request and cell.source != request["expected"]:
        return {"ok": False, "conflict": True, "error": "the cell was edited meanwhile"}
    if request["op"] == "set_source":
        cell.source = request["source"]
    elif request["op"] == "delete":
        cells.remove(cell)
    elif request["op"] == "set_outputs":
        cell.outputs = list(request["outputs"])
        cell.number = request["execution_count"]
    else:
        return {"ok": False, "error": f"unknown request {request['op']}"}
    return {"ok": True}


def _close_thread_loop() -> None:
    """Close the event loop jupyter_client's sync calls made for this thread (it never does)."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    if not loop.is_running():
        loop.close()


def _shows_key(cell: PageCell, key: str) -> bool:
    return any(metadata.get(KEY) == key for metadata in cell.output_metadata)


def kernel_environment(home: Path, scratch: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The kernel's environment: no NBCHAT_* of the developer's, a fresh home and IPython dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBCHAT_")}
    (scratch / "ipython").mkdir(parents=True, exist_ok=True)
    env.update(
        NBCHAT_HOME=str(home),
        IPYTHONDIR=str(scratch / "ipython"),
        JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
        JUPYTER_PLATFORM_DIRS="1",
        PYTHONPATH=os.pathsep.join([str(TESTS.parent), str(TESTS)]),
    )
    env.update(extra)
    return env
