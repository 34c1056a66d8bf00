"""The notebook widget (`ChatUI`) and its parts; the only package that imports ipywidgets.

chatui.py      `ChatUI`: layout, clicks, the worker, and its public surface (press_send, approve…)
controls.py    its buttons and bars: header, session picker, the message box (`ChatInput`: Enter
               sends, Shift+Enter newline), input row, status line, the context meter's
               reading; the link to the model server: connect, check the model, "Start local
               model"
view.py        `EventView`: the conversation's events -> widget updates (one `match`), and a tool
               call waiting on the user: the approval card shown, the turn paused until decided
cards.py       one widget per row; `ApprovalCard`; an edit's diff and a run's code on it (the
               acting tools' results); the message list rebuilt from the store; the "request"
               link under each reply: the request exactly as it was sent
messages.py    the message list and the throttled streaming text
render.py      untrusted text -> safe HTML (markdown, code, cards, notices); the icons as
               CSS-painted shapes (no emoji font needed)
transcript.py  the static HTML transcript shown beside the widget where no kernel runs, and its
               copy written into the notebook a front end saves (JupyterLab, Notebook 7)
visible.py     text shown exactly: invisible and bidi characters as escapes; where the math is,
               in one linear pass (set aside for MathJax)
actions.py     what Enter does: slash commands (what exists, how they parse) carried out on a
               `CommandTarget` protocol; "rewind to here", /rewind and ui.rewind: the chat and
               the notebook go back together
attach.py      /attach: cells, outputs, errors and variables the kernel holds, as capped text
               sent along with the next message
worker.py      the one worker thread every turn runs on; failed turns collected so `wait()`
               returns False and the cell prints them; the idle-time work after a turn
               (preparing a compaction), cancelled by any user action
compactflow.py compaction you steer: preview → accept/edit/discard, undo (with a confirmation),
               and its cards: the preview card, the compaction card (what it replaced, Undo)
acting.py      acting on the notebook, put together: the open notebook the page holds (JupyterLab,
               Notebook 7), the tools over it, the Stop button off the main thread
"""

from __future__ import annotations

from nbchat.ui.chatui import ChatUI

__all__ = ["ChatUI"]
