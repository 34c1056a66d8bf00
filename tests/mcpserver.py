"""A real MCP server for the tests, written with the official SDK (`MCPServer`, once `FastMCP`).

    python tests/mcpserver.py               stdio (what an `mcp_servers` command runs)
    python tests/mcpserver.py --http        streamable HTTP on 127.0.0.1, a free port; prints
                                            its URL first; with MCP_TEST_TOKEN set, a request
                                            without `Authorization: Bearer <token>` gets 401
    python tests/mcpserver.py --garbage     stdio, by hand: a correct handshake and listing, then
                                            a tool result that is not one
    python tests/mcpserver.py --linger      stdio, and once its input ends it stays until
                                            SIGTERM (as a server that ignores EOF would)

Its tools: `add`, `shout`, `huge` (a text of `size` characters), `picture` (an image and a text),
`crash` (the process exits mid-call), `hang` (never answers; with MCP_TEST_SIGNAL naming a FIFO
it first writes a line there, so a test knows the call is running), `variable` (an environment
variable, to see what the process was given), `pick` (an argument with a pattern) and `pid`.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import threading
from typing import Annotated, Any

from pydantic import Field

NAME = "testserver"


def build_app() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ImageContent, TextContent

    app = MCPServer(NAME)

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @app.tool()
    def shout(text: str) -> str:
        """Say a text in capitals."""
        return text.upper()

    @app.tool()
    def huge(size: int) -> str:
        """A text of `size` characters."""
        return ("0123456789" * (size // 10 + 1))[:size]

    @app.tool()
    def picture() -> list[Any]:
        """A small image and a caption."""
        png = base64.b64encode(b"\x89PNG" + b"\0" * 1996).decode()
        return [ImageContent(data=png, mime_type="image/png"), TextContent(text="a black square")]

    @app.tool()
    def crash() -> str:
        """Exit the server's process at once."""
        print("about to crash", file=sys.stderr, flush=True)
        os._exit(3)

    @app.tool()
    def hang() -> str:
        """Never answer."""
        signal_path = os.environ.get("MCP_TEST_SIGNAL")
        if signal_path:
            with open(signal_path, "w") as fifo:
                fifo.write("hanging\n")
        threading.Event().wait()
        return "never"

    @app.tool()
    def variable(name: str) -> str:
        """The value of an environment variable in the server's process ("unset" if none)."""
        return os.environ.get(name, "unset")

    @app.tool()
    def pick(code: Annotated[str, Field(pattern=r"^(a+)+$")]) -> str:
        """Echo a code made of a's."""
        return code

    @app.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    return app


def serve_http(app: Any) -> None:
    import uvicorn
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import Response

    token = os.environ.get("MCP_TEST_TOKEN", "")

    async def check_token(request: Any, call_next: Any) -> Any:
        if token and request.headers.get("authorization") != f"Bearer {token}":
            return Response("unauthorized", status_code=401)
        return await call_next(request)

    web = app.streamable_http_app()
    web.add_middleware(BaseHTTPMiddleware, dispatch=check_token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(web, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def serve_garbage() -> None:
    """A hand-written stdio server: it lists one tool, then answers its call with a result
    whose content is not a list of content blocks."""
    tool = {"name": "broken", "description": "Answers garbage.", "inputSchema": {"type": "object"}}
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbage", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [tool]}
        else:
            result = {"content": "this is not a list of content blocks", "isError": 7}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    if "--garbage" in sys.argv:
        serve_garbage()
    elif "--http" in sys.argv:
        serve_http(build_app())
    else:
        build_app().run()
        if "--linger" in sys.argv:
            threading.Event().wait()
