"""`Controls`: a chat's buttons and bars, built and wired once. The header (session picker, New,
context meter, Compact, where the model runs), the input row (message box, Send, Stop) and the
one-line status; which of them a busy turn or a broken database disables; the meter's reading
of the conversation's budget.

No SQL, HTTP or prompt text; what a click does is the `ChatUI`'s (the callbacks it passes in).
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from nbchat.conversation.loop import Conversation
from nbchat.ui.input import ChatInput
from nbchat.ui.picker import SessionPicker
from nbchat.ui.view import ContextMeter

__all__ = ["Controls"]

METER_NOTES = {"": "", "preparing": "preparing…", "ready": "checkpoint ready"}
Click = Callable[[widgets.Button], None]


class Controls:
    """The widgets around the message list; each button calls its `on_*` callback."""

    def __init__(
        self,
        picker: SessionPicker,
        *,
        badge: str,
        on_new: Click,
        on_compact: Click,
        on_send: Click,
        on_stop: Click,
    ) -> None:
        self.picker = picker
        self.new_button = _button(on_new, description="New", tooltip="Start a new session")
        self.meter = ContextMeter()
        self.compact_button = _button(
            on_compact, description="Compact", tooltip="Compact the history now"
        )
        self.header = widgets.HBox(
            [picker.widget, self.new_button, self.meter, self.compact_button]
            + [widgets.HTML(value=badge)]
        )
        self.input = ChatInput(layout=widgets.Layout(flex="1"))
        self.send_button = _button(on_send, description="Send", button_style="primary")
        self.stop_button = _button(on_stop, description="Stop", disabled=True)
        buttons = widgets.VBox([self.send_button, self.stop_button])
        self.input_row = widgets.HBox([self.input, buttons], layout=widgets.Layout(width="100%"))
        self.status_line = widgets.HTML(value="")

    def set_busy(self, busy: bool) -> None:
        """While a turn runs: Send and Compact off, Stop on (and red)."""
        self.send_button.disabled = busy
        self.compact_button.disabled = busy
        self.stop_button.disabled = not busy
        self.stop_button.button_style = "danger" if busy else ""

    def disable(self) -> None:
        """Nothing can be used (the session database cannot be opened)."""
        for control in (self.input, self.send_button, self.compact_button, self.new_button):
            control.disabled = True
        self.picker.widget.disabled = True

    def show_budget(self, conversation: Conversation) -> None:
        """The meter: the next request's tokens against the budget and the trigger."""
        threshold = conversation.budget.threshold_if_known()
        trigger = int(threshold * conversation.settings.trigger_factor)
        tokens = conversation.context_tokens()
        self.meter.show(
            tokens,
            threshold,
            trigger,
            reported=conversation.history.reported_tokens is not None,
            note=METER_NOTES[conversation.preparer.state(conversation.session_id)],
        )


def _button(on_click: Click, **traits: object) -> widgets.Button:
    button = widgets.Button(**traits)
    button.on_click(on_click)
    return button
