"""`NotebookActing`: what lets one chat act on its notebook, put together.

In a kernel (a real IPython shell), a chat gets the acting tools (`nbchat.tools.acting`) over:
the open notebook (`NotebookDocument`, through the widget manager's document context), the
kernel's main thread (`KernelQueue`: the model's code runs between executions, or while a cell
waits on the chat in `ui.wait()`) and what the kernel actually ran (`KernelState`). Each insert
and edit is kept in the store under the session and the tool call (for the rewind); a run that
has to wait for the user's own cell says so in the chat; and the user's messages carry a
"rewind to here" button (`rewind_button`), which takes the chat and the notebook back together
on the chat's worker (the page's answers arrive on the kernel's main thread, which must stay
free meanwhile). The Stop button's clicks are handled on a subshell (`route_off_main_thread`),
so Stop reaches the model's code while it runs on the main thread.

No SQL, HTTP or prompt text here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from nbchat.conversation.loop import Conversation
from nbchat.conversation.rewind import Rewound
from nbchat.errors import NbchatError, ToolError
from nbchat.store.store import Store
from nbchat.tools.acting import CellChange, acting_tools
from nbchat.tools.cells import kernel_state
from nbchat.tools.kernelrun import KernelQueue, KernelRunner
from nbchat.ui.document import NotebookDocument

__all__ = ["NotebookActing", "can_act", "rewind_button", "route_off_main_thread"]

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
