"""Tools the model may call: the table of contents.

    Tool, ToolRegistry, tool   a function with its name, description and JSON schema; a set of
                               them by name; the decorator that makes one (nbchat.tools.registry)
    ToolExecutor, ToolOutcome  one call run under the approval policy, time limit, Stop and
                               output cap, always answered with text (nbchat.tools.executor)
    ApprovalRequest            what an approver (a widget card, a script's callback) is asked
    ToolContext                what a tool that asks for it learns: workspace, limits, Stop
                               (nbchat.tools.context)
    default_registry()         a fresh registry holding the built-in tools (nbchat.tools.builtins)

The modules behind them:

    context     `ToolContext`: what a running tool may know (workspace, limits, Stop), the
                environment a tool's child process gets, and how long output is cut
    schema      JSON schemas and argument checks from signatures (pydantic, docstring-parser)
    builtins    the file and shell tools; fileaccess opens paths without following links out
                of the workspace, lines streams bounded reads and regex searches with a time
                limit, listing walks folders and globs inside the workspace
    shell       one command under reaper (a child subreaper: nothing it starts outlives it)
    notebook    read-only tools over the live kernel's variables, cells and last error;
                preview makes their text (summaries, bounded reprs, tracebacks) and hides
                what looks like a secret (is_secret_name, mask_secrets), isolation runs
                each call into user code in a forked child under a deadline
    acting      the tools that act on the notebook (list, insert, edit and run cells, run code):
                cells says what a cell's state is against what the kernel ran (KernelState,
                from IPython's events), kernelrun runs code through its KernelQueue (the
                kernel's main thread, between executions; interrupts), execution captures
                its output
    offer       what a small model's first step is shown to choose from (the tools in one
                line each, examples, the workspace, what the message names); choice which
                tools each round of a turn may use, how the first step is weighed, and the
                tool a misaimed first call is turned to; asking what the user's message asks
                for (not to run things, how to, a change, a follow-on), one bounded pattern each
    overview    the workspace's top-level names and the names its source files define;
                filewords which listed files hold a message's rarer words; filedigests reads
                the listed files' first bytes for both, again only when a file changed
    arithmetic  the expressions in a message worked out exactly, for a small model to state;
                units the quantity it asks to have in another unit, pyexpr the Python
                expression it asks about (a restricted interpreter), extremes a table's largest
                and smallest values, jupyterhelp the installed Jupyter's own shortcuts and
                magics that answer it
    frames      what code over a user's DataFrame needs (its columns, kinds, a few values),
                read without running user code, and a compared literal spelt as the data is
    mcp         tools from the user's MCP servers (the optional `mcp` SDK): mcplink holds one
                server's session on its own event loop, mcpcall checks a call's arguments
                against the server's schema and turns its result into text

A call written as plain JSON text is recognised by nbchat.llm.textcalls.
Importing this package does no work: the built-in tools are described when a registry is made.
"""

from __future__ import annotations

from nbchat.tools.builtins import builtin_tools
from nbchat.tools.context import ToolContext
from nbchat.tools.executor import ApprovalRequest, ToolExecutor, ToolOutcome
from nbchat.tools.registry import Tool, ToolRegistry, tool

__all__ = [
    "ApprovalRequest",
    "Tool",
    "ToolContext",
    "ToolExecutor",
    "ToolOutcome",
    "ToolRegistry",
    "default_registry",
    "tool",
]


def default_registry() -> ToolRegistry:
    """A new registry with the built-in tools: read_file, write_file, edit_file, list_files,
    search_files and run_shell (the writers and the shell are dangerous)."""
    return ToolRegistry(builtin_tools())
