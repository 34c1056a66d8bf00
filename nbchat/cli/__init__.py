"""The `nbchat` command.

command  the entry point: serve the embedded model, list and export sessions, doctor
doctor   `nbchat doctor`: one checked line per part of the setup, saying what to fix
"""
