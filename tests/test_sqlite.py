"""The store's file at its edge: a file that may not be written opens read-only (listed, shown,
exported, never written), a file that is not a database or stays locked is refused with one
message saying what to do and is left untouched, SQLite errors are told apart by their result
code, and `Store()` opens the settings' database, the one the CLI lists.
"""

from __future__ import annotations

import ctypes
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from factories import assistant, user

from nbchat.cli.command import main
from nbchat.config import Settings
from nbchat.errors import StoreError
from nbchat.store.store import Store

# Runs in a child that may not write the database: everything a user does with such a file.
READER = r"""
import contextlib, io, json, sys
from nbchat.conversation.loop import Conversation
from nbchat.cli.command import main
from nbchat.config import Settings
from nbchat.errors import StoreError
from nbchat.store.store import Store

path, session_id, home, workspace = sys.argv[1:5]
store = Store(path)
settings = Settings(home=home, workspace=workspace, base_url="http://127.0.0.1:9/v1")
chat = Conversation(settings, store, session_id)
last = list(chat.send("hello?"))[-1]
try:
    store.create_session("new")
    created = "created"
except StoreError as exc:
    created = str(exc)
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    cli = [main(["sessions"]), main(["export", session_id, "--format", "md"])]
print(json.dumps({
    "read_only": store.read_only,
    "sessions": [(s.title, s.active_rows) for s in store.list_sessions()],
    "history": [row.content for row in chat.history.rows],
    "chat_read_only": chat.read_only,
    "reason": chat.session.read_only_reason,
    "send": [type(last).__name__, last.message, last.unsent_text],
    "create": created,
    "cli": cli,
    "cli_shows": ["kept" in printed.getvalue(), "the answer" in printed.getvalue()],
    "export": [r["content"] for r in json.loads(store.export_json(session_id))["rows"]],
}))
"""


def read_only_message(path: Path, action: str, why: str) -> str:
    return (
        f"Could not {action}: the session database {path} is read-only here ({why}). Sessions "
        "can be listed, shown and exported, not changed. Make it writable, or copy it somewhere "
        "writable and set NBCHAT_DB_PATH to the copy."
    )


def state(path: Path) -> tuple[bytes, int, list[str]]:
    """The file's bytes and mtime, and what lies beside it."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))


@pytest.fixture
def saved_session(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A database in its own folder with one session, every connection closed."""
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "nbchat.db"
    store = Store(path)
    session_id = store.create_session("kept")
    store.append_rows(session_id, [user("the question"), assistant("the answer")])
    store.close()
    yield path, session_id
    folder.chmod(0o755)
    path.chmod(0o644)


# Linux capabilities (<linux/capability.h>) that let root ignore file modes, and the prctl that
# takes one out of the bounding set, so a program root execs never has it.
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3
PR_CAPBSET_DROP = 24


def without_file_override() -> None:
    """`preexec_fn` for a child started by root: it keeps uid 0, but loses the capabilities that
    skip permission checks, so file modes hold for it as for any user (and `os.access` says
    so). Needs CAP_SETPCAP, which a container's root has (Docker grants it by default); no user
    namespace, mount or other user is needed."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"cannot drop capability {capability}: {os.strerror(error)}")


def without_write_access(target: Path) -> tuple[Callable[[], None] | None, str]:
    """`target` made read-only by its mode, a `preexec_fn` that makes the mode hold for the
    child (None unless this runs as root, whom modes do not bind), and the reason the store
    will give."""
    target.chmod(0o555 if target.is_dir() else 0o444)
    why = "its folder is read-only" if target.is_dir() else "the file is read-only"
    return (without_file_override if os.geteuid() == 0 else None), why


@pytest.mark.timeout(60)
@pytest.mark.parametrize("part", ["folder", "file"])
def test_a_database_that_cannot_be_written_opens_read_only(
    saved_session: tuple[Path, str], tmp_path: Path, part: str
) -> None:
    path, session_id = saved_session
    before = state(path)
    preexec, why = without_write_access(path.parent if part == "folder" else path)
    environment = {**os.environ, "NBCHAT_DB_PATH": str(path)}
    command = [sys.executable, "-c", READER, str(path), session_id, str(tmp_path), str(tmp_path)]
    child = subprocess.run(
        command, capture_output=True, text=True, env=environment, timeout=50, preexec_fn=preexec
    )
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout)
    assert seen == {
        "read_only": True,
        "sessions": [["kept", 2]],
        "history": ["the question", "the answer"],
        "chat_read_only": True,
        "reason": read_only_message(path, "save", why),
        "send": ["Failed", read_only_message(path, "save", why), "hello?"],
        "create": read_only_message(path, "create a session", why),
        "cli": [0, 0],
        "cli_shows": [True, True],
        "export": ["the question", "the answer"],
    }
    after = state(path)
    assert after[:2] == before[:2]  # the database itself: same bytes, same mtime
    if part == "folder":
        assert after == before  # and nothing created beside it
    else:  # SQLite reads WAL through an -shm file, which it may create in a writable folder
        assert after[2] == sorted([*before[2], "nbchat.db-shm", "nbchat.db-wal"])


# Files that are refused, untouched


def not_a_database(path: Path) -> str:
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    return "file is not a database"


def damaged_database(path: Path) -> str:
    store = Store(path)
    store.create_session("soon damaged")
    store.close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page, past the 100-byte header
    path.write_bytes(bytes(data))
    return "database disk image is malformed"


def someone_elses_file_message(path: Path, sqlite_says: str) -> str:
    # Not "move it aside and nbchat starts a new one there": it is the user's own file.
    return (
        f"Could not open the session database: {path} is not a SQLite database, so it is not "
        "nbchat's; it was left as it is. Point NBCHAT_DB_PATH at nbchat's database or at a "
        "file that does not exist yet (nbchat creates it)."
    )


def damaged_database_message(path: Path, sqlite_says: str) -> str:
    return (
        f"Could not open the session database: {path} is a damaged SQLite database "
        f"({sqlite_says}); it was left as it is. Move it aside (`mv {path} {path}.broken`) and "
        "nbchat starts a new one there, or point NBCHAT_DB_PATH at another file."
    )


@pytest.mark.parametrize(
    ("damage", "message"),
    [(not_a_database, someone_elses_file_message), (damaged_database, damaged_database_message)],
)
def test_a_file_that_is_not_a_readable_database_is_refused_once_and_left_alone(
    tmp_path: Path, damage: Callable[[Path], str], message: Callable[[Path, str], str]
) -> None:
    path = tmp_path / "notes.txt"
    sqlite_says = damage(path)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = state(path)
    store = Store(path)
    for _ in range(2):  # every use says the same, and nothing is left open or written
        with pytest.raises(StoreError) as caught:
            store.list_sessions()
        assert str(caught.value) == message(path, sqlite_says)
    store.close()
    assert state(path) == before


def test_a_folder_as_the_database_is_refused_saying_to_name_a_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as caught:
        Store(tmp_path).list_sessions()
    assert str(caught.value) == (
        f"Could not open the session database: {tmp_path} is a folder. Point NBCHAT_DB_PATH at "
        f"a file, such as {tmp_path / 'nbchat.db'}."
    )
    assert os.listdir(tmp_path) == []


OPENER = r"""
import sys
from nbchat.errors import StoreError
from nbchat.store.store import Store
try:
    Store(sys.argv[1]).list_sessions()
except StoreError as error:
    print(error)
"""


@pytest.mark.timeout(60)
def test_a_database_that_cannot_be_created_says_its_folder_is_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    path = folder / "nbchat.db"
    preexec, _ = without_write_access(folder)
    try:
        child = subprocess.run(
            [sys.executable, "-c", OPENER, str(path)],
            capture_output=True,
            text=True,
            timeout=50,
            preexec_fn=preexec,
        )
    finally:
        folder.chmod(0o755)
    assert child.stdout == (
        f"Could not open the session database: {path} does not exist and cannot be created: "
        f"its folder {folder} is read-only here. Point NBCHAT_DB_PATH (or NBCHAT_HOME) at a "
        "folder you can write.\n"
    ), child.stderr
    assert os.listdir(folder) == []


@pytest.mark.timeout(60)
def test_doctor_fails_a_database_the_chat_cannot_write_in_the_chats_words(
    saved_session: tuple[Path, str], tmp_path: Path
) -> None:
    path, _ = saved_session
    preexec, why = without_write_access(path.parent)
    environment = {
        **os.environ,
        "NBCHAT_DB_PATH": str(path),
        "NBCHAT_BASE_URL": "http://127.0.0.1:9/v1",
    }
    doctor = "import sys; from nbchat.cli.command import main; sys.exit(main(['doctor']))"
    child = subprocess.run(
        [sys.executable, "-c", doctor],
        capture_output=True,
        text=True,
        env=environment,
        timeout=50,
        preexec_fn=preexec,
    )
    lines = [line for line in child.stdout.splitlines() if "Session database" in line]
    assert lines == [f"✗ Session database: {read_only_message(path, 'save a chat', why)}"]
    assert child.returncode == 1


@pytest.mark.timeout(30)
def test_a_database_locked_when_opened_is_refused_with_what_to_do_and_left_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nbchat.db"
    Store(path).close()
    blocker = sqlite3.connect(path)
    blocker.execute("PRAGMA locking_mode=EXCLUSIVE")  # not even readers get in
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        before = state(path)
        with pytest.raises(StoreError) as caught:
            Store(path, busy_timeout=0.2).list_sessions()
        after = state(path)
    finally:
        blocker.rollback()
        blocker.close()
    assert str(caught.value) == (
        f"Could not open the session database: the session database {path} stayed locked by "
        "another process for more than 0.2s. Close other kernels or programs using it and try "
        "again; nothing was written."
    )
    assert after == before


def test_sqlite_errors_are_told_apart_by_their_code_not_their_wording(store: Store) -> None:
    with pytest.raises(StoreError) as caught, store.transaction("read the rows") as db:
        db.execute("SELECT * FROM locked_or_full")  # "locked", "full": only in the words
    assert str(caught.value) == (
        f"Could not read the rows in {store.path}: no such table: locked_or_full. Check that "
        "the file and its folder can be read and written, or point NBCHAT_DB_PATH at another "
        "file."
    )


@pytest.mark.parametrize(
    ("sqlite_says", "start"),
    [
        ("database is locked", "Could not save: the session database {path} stayed locked"),
        ("database or disk is full", "Could not save: the disk holding {path} is full."),
        ("file is not a database", "Could not save: {path} is a damaged SQLite database"),
        ("no such table: locked_or_full", "Could not save in {path}: no such table"),
    ],
)
def test_an_error_without_a_code_is_classified_only_by_sqlite_s_whole_text(
    store: Store, sqlite_says: str, start: str
) -> None:
    # As Python 3.10 raises them: no `sqlite_errorcode`, only SQLite's text for the code.
    store.list_sessions()  # the file exists, as nbchat's database
    with pytest.raises(StoreError) as caught, store.connections.errors("save"):
        raise sqlite3.OperationalError(sqlite_says)
    assert str(caught.value).startswith(start.format(path=store.path))


# Store() is the settings' database


def test_a_store_without_a_path_is_the_database_the_cli_lists(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store()
    assert store.path == Settings.load().database_path == home / "nbchat.db"
    session_id = store.create_session("From the README")
    store.close()
    assert main(["sessions", "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)] == [session_id]


def test_a_store_without_a_path_follows_nbchat_db_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBCHAT_DB_PATH", str(tmp_path / "elsewhere.db"))
    assert Store().path == tmp_path / "elsewhere.db"
