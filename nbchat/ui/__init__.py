"""The notebook widget (`ChatUI`) and its parts; the only package that imports ipywidgets."""

from __future__ import annotations

from nbchat.ui.chatui import ChatUI

__all__ = ["ChatUI"]
