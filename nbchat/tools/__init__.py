"""Tools the model may call: schemas from signatures, the workspace context, and the JSON
fallback that recognises a call written as text. (The registry, built-ins and executor follow.)"""

from __future__ import annotations

__all__: list[str] = []
