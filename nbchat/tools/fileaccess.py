"""Opening workspace files so that the file opened is the file checked.

Checking a path and then opening it are two steps, and another process can swap a file or a
folder for a symbolic link in between. So nothing here opens a path string: every component is
opened relative to its parent folder's descriptor with `O_NOFOLLOW`, starting from the workspace
root. A symbolic link met on the way is read (`readlink`) and followed by hand only when its
target, taken literally, stays inside the workspace; the walk then starts again from the root,
again without following anything. Whatever a link is swapped to, the kernel never resolves one
for us, so no descriptor returned here can point outside the workspace.

Files are opened non-blocking and kept only when they are regular files (a named pipe would
block `open()` forever; a device is not a file to read); writers open without truncating and
truncate after that check.

Must not: read or write file contents, or know about tools and their messages beyond
`ToolError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from nbchat.errors import ToolError

__all__ = [
    "MAX_LINK_HOPS",
    "OpenedFile",
    "exists_inside",
    "open_entry",
    "open_folder",
    "open_regular",
    "refused",
    "split_inside",
]

MAX_LINK_HOPS = 40  # as the kernel's own limit for one lookup
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_LINK = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)  # what O_NOFOLLOW on a link raises

OpenedFile = tuple[int, os.stat_result]


def refused(path: str, workspace: Path) -> ToolError:
    return ToolError(
        f"Refused: {path!r} is outside the workspace {workspace}. Use a path inside it."
    )


def split_inside(workspace: Path, path: str) -> tuple[str, ...]:
    """`path`'s components below `workspace`, worked out on the text alone (`a/../b` is `b`).

    Raises `refused` when the text leaves the workspace. Links are not looked at here: the
    walk deals with them, one component at a time.
    """
    given = Path(path).expanduser()
    if given.is_absolute():
        parts = _below(workspace, PurePosixPath(os.path.normpath(given)))
        if parts is None:  # e.g. /tmp/ws when the workspace is the resolved /private/tmp/ws
            parts = _below(workspace, PurePosixPath(os.path.realpath(given)))
    else:
        parts = _below(workspace, PurePosixPath(os.path.normpath(workspace / given)))
    if parts is None:
        raise refused(path, workspace)
    return parts


def _below(workspace: Path, candidate: PurePosixPath) -> tuple[str, ...] | None:
    try:
        return PurePosixPath(candidate).relative_to(PurePosixPath(workspace)).parts
    except ValueError:
        return None


@contextmanager
def open_folder(workspace: Path, path: str) -> Iterator[int]:
    """A descriptor of the workspace folder `path` (links inside the workspace followed)."""
    fd = _walk(workspace, path, split_inside(workspace, path), final=_FOLDER)
    try:
        yield fd
    finally:
        os.close(fd)


def open_regular(
    workspace: Path, path: str, *, write: bool = False, make_parents: bool = False
) -> OpenedFile:
    """A descriptor of the regular file `path` and its `fstat`; the caller closes it.

    For `write`, the file is created when missing (parent folders too, with `make_parents`) and
    emptied once it is known to be a regular file inside the workspace.
    """
    parts = split_inside(workspace, path)
    if not parts:
        raise ToolError(f"{path!r} is the workspace folder; give a file path.")
    flags = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY
    fd = _walk(workspace, path, parts, final=flags, make_parents=make_parents)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            if stat.S_ISDIR(status.st_mode):
                raise ToolError(f"{path!r} is a folder; use list_files to see what is in it.")
            raise ToolError(
                f"{path!r} is not a regular file (a pipe, socket or device); tools read and "
                "write regular files only."
            )
        os.set_blocking(fd, True)
        if write:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def exists_inside(workspace: Path, path: str) -> bool:
    """Whether `path` names a folder or a regular file the file tools can reach inside
    `workspace` (opened as they open it: a link out of the workspace names nothing)."""
    try:
        with open_folder(workspace, path):
            return True
    except (OSError, ToolError, ValueError):  # not a folder; or a NUL in the path
        pass
    try:
        fd, _status = open_regular(workspace, path)
    except (OSError, ToolError, ValueError):
        return False
    os.close(fd)
    return True


def open_entry(folder_fd: int, name: str) -> OpenedFile | None:
    """The regular file `name` in an open folder, or None when it is anything else (a link,
    a pipe, a device) or cannot be opened: the walk of `search_files` skips those."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd
        )
    except OSError:
        return None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return fd, status


def _walk(
    workspace: Path, path: str, parts: tuple[str, ...], *, final: int, make_parents: bool = False
) -> int:
    """Open `parts` from the workspace root, one component at a time, never following a link."""
    hops = 0
    while True:
        root = os.open(workspace, _FOLDER & ~os.O_NOFOLLOW)
        try:
            return _descend(root, parts, final=final, make_parents=make_parents)
        except _Link as link:
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise ToolError(
                    f"{path!r} goes through more than {MAX_LINK_HOPS} symbolic links; "
                    "give the path of the file itself."
                ) from None
            parts = _follow(workspace, path, link)
        finally:
            os.close(root)


class _Link(Exception):
    """A symbolic link at `parts[:index + 1]` pointing at `target`; the rest is `remaining`."""

    def __init__(self, where: tuple[str, ...], target: str, remaining: tuple[str, ...]) -> None:
        super().__init__(target)
        self.where, self.target, self.remaining = where, target, remaining


def _descend(root: int, parts: tuple[str, ...], *, final: int, make_parents: bool) -> int:
    """The descriptor of `parts` below `root` (which stays the caller's to close)."""
    current = root
    try:
        for index, name in enumerate(parts):
            last = index == len(parts) - 1
            flags = final if last else _FOLDER
            try:
                opened = os.open(name, flags, 0o666, dir_fd=current)
            except FileNotFoundError:
                if last or not make_parents:
                    raise
                _make_folder(name, current)
                opened = os.open(name, flags, dir_fd=current)
            except OSError as error:
                if error.errno not in _NO_LINK:
                    raise
                target = _link_target(name, current, error)
                raise _Link(parts[:index], target, parts[index + 1 :]) from None
            if current != root:
                os.close(current)
            current = opened
        return current if parts else os.dup(root)
    except BaseException:
        if current != root:
            os.close(current)
        raise


def _make_folder(name: str, parent: int) -> None:
    # Made meanwhile (or a link put there): the O_NOFOLLOW open that follows decides.
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)


def _link_target(name: str, parent: int, error: OSError) -> str:
    try:
        return os.readlink(name, dir_fd=parent)
    except OSError:
        raise error from None  # not a link after all (e.g. a file where a folder was expected)


def _follow(workspace: Path, path: str, link: _Link) -> tuple[str, ...]:
    """Where the link leads, as components below the workspace, or `refused`."""
    target = PurePosixPath(link.target)
    if target.is_absolute():
        resolved = _below(workspace, PurePosixPath(os.path.normpath(target)))
    else:
        base = PurePosixPath(workspace, *link.where, target)
        resolved = _below(workspace, PurePosixPath(os.path.normpath(base)))
    if resolved is None:
        raise refused(path, workspace)
    return resolved + link.remaining
