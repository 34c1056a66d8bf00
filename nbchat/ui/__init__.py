"""The notebook widget (`ChatUI`) and its parts; the only package that imports ipywidgets.

chatui.py     `ChatUI`: layout, clicks, the worker, and its public surface (press_send, approve…)
controls.py   its buttons and bars: header, input row, status line, the context meter's reading
picker.py     the header's session list (switching session)
startup.py    the link to the model server: connect, check the model, "Start local model"
approval.py   a tool call waiting on the user: the card shown, the turn paused until decided
timeline.py   the message list rebuilt from the store (widget factories, request links)
view.py       `EventView`: the conversation's events -> widget updates (one `match`)
cards.py      one widget per row; `ApprovalCard`, which pauses a turn until the user decides
messages.py   the message list and the throttled streaming text
render.py     untrusted text -> safe HTML (markdown, code, cards, notices)
transcript.py the static HTML transcript shown beside the widget where no kernel runs
savedcopy.py  its copy written into the notebook a front end saves (JupyterLab, Notebook 7)
icons.py      the cards' icons as CSS-painted shapes (no emoji font needed)
mathspans.py  where the math is, in one linear pass (set aside for MathJax)
visible.py    text shown exactly: invisible and bidi characters as escapes
commands.py   slash commands: what exists and how they parse
actions.py    what Enter does, and carrying the commands out (on a `CommandTarget` protocol)
attach.py     /attach: cells, outputs, errors and variables sent with a message
input.py      `ChatInput`: the message box (Enter sends, Shift+Enter newline)
failures.py   failed turns collected so `wait()` returns False and the cell prints them
worker.py     the one worker thread every turn runs on
background.py the idle work after a turn (preparing a compaction), cancelled by any user action
compactflow.py  compaction you steer: preview → accept/edit/discard, undo (with a confirmation)
compactcard.py  its cards: the preview card, the compaction card (what it replaced, Undo)
inspector.py  the "request" link under each reply: the request exactly as it was sent
acting.py     acting on the notebook, put together: the tools, the Stop button off the main thread
document.py   the open notebook the page holds (JupyterLab, Notebook 7), for the acting tools
review.py     an edit's diff and a run's code on the approval card; the acting tools' results
rewinding.py  "rewind to here", /rewind and ui.rewind: the chat and the notebook go back together
"""

from __future__ import annotations

from nbchat.ui.chatui import ChatUI

__all__ = ["ChatUI"]
