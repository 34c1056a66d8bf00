"""Jupyter's side: the server extension (authenticated REST endpoints under `nbchat/api/`).

serverext  the extension's handlers and its entry points
"""
