"""The notebook widget (`ChatUI`) and its renderer; the only package that imports ipywidgets."""
