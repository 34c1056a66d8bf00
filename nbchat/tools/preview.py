"""The text a notebook tool hands the model about a value: its bounded preview, with what looks like
a secret masked.

Masking owns two decisions: whether a name looks like it holds a secret
(`is_secret_name`: `api_key`, `GITHUB_TOKEN`, `db_password`, `Authorization`, …) and
`mask_secrets`, which replaces, in any text (a value's repr, a cell's source, a traceback), what
looks like a secret with a marker that says why (`[masked: looks like an API key]`), so the model
can tell the user what it was not shown:
- string values given to a secret-looking name: `api_key = "…"`, `api_key="…"` (a keyword
  argument), `'api_key': '…'` (a dict), `os.environ["API_KEY"] = "…"`, `API_KEY=…` (a shell or
  `%env` line, when the value is not a plain identifier);
- values that look like secrets whatever their name: `sk-…` keys, GitHub, GitLab, Slack,
  Hugging Face, Google and Stripe tokens, AWS access key ids, JWTs, `Bearer …` tokens, the
  password in `scheme://user:password@host`, and PEM private key blocks.

Every decision runs in time linear in the text: the patterns are anchored at a run's start (a
look-behind), their repeated classes are followed by a character outside the class, and each scan
moves on past what it read, so no input makes them backtrack over it again.

What it cannot catch, and docs/security.md says so: a secret under an ordinary name in no
recognisable format (`x = "hunter2"`), one split or encoded (base64 of a key), or one in a
format not listed.

The text of a preview: one value's one-line summary, its bounded repr, an array's statistics,
a DataFrame's head, an exception's traceback and its one-line headline; each cut to a size,
none copying a big value.

These run inside a bounded call (nbchat.tools.isolation), which bounds the user code they reach
(a `repr`, pandas' formatting, `str()` of an exception). They still reach as little as they can:
a value's type is read with `type()` and `issubclass`, never `isinstance` (which asks the value
for its `__class__`, a property a class can override); builtins get their own base methods
(`int.__repr__`, not a subclass's `__str__`); numpy and pandas values are recognised by their
real classes, taken from `sys.modules`, not by the module a type claims; a big `bytes`, string,
dict or array is sliced or sampled, never copied whole or sorted.

Values under secret-looking names (the variable's, or a dict key's) are replaced by a marker;
the caller masks what looks like a secret in the finished text (`mask_secrets`, above).

Must not: read variables, environment or files (masking only rewrites text), import numpy or
pandas (a value of theirs means they are imported already), or know about tools and namespaces.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import re
import reprlib
import sys
import traceback
import types
from typing import Any

__all__ = [
    "cut",
    "error_headline",
    "format_error",
    "is_secret_name",
    "mask_secrets",
    "preview_value",
    "summarise_value",
]


NAME_LIMIT = 200
NAME_MARK = "[masked: secret-looking name]"
KEY_MARK = "[masked: private key]"
# Anywhere in a name's lowercased words: these mean a secret wherever they stand.
SECRET_PARTS = ("password", "passwd", "passphrase", "secret", "credential")
# A name's last word is, or ends with, one of these: `api_key`, `hf_token`, `accessToken`,
# `basic_auth`, `MYSQL_PWD` (a `sort_key` is masked too: safe side, and /attach shows it).
# Not "tokens": `max_tokens` and `n_tokens` are counts in every notebook that calls a model.
SECRET_ENDINGS = ("key", "keys", "token", "pwd", "auth", "authorization", "cookie", "creds")
# The words of a name: runs of capitals not followed by a lowercase letter ("API" in "APIKey"),
# a word with an optional capital, digits.
WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A name right before `=`, `:` or `,`, perhaps closing a quote or a subscript (`"api_key":`,
# `environ["API_KEY"] =`). The look-behind makes a match start only where a name starts.
# The look-ahead skips names with none of the words `is_secret_name` looks for (most of them),
# so only a few names reach Python code.
NAMED = re.compile(
    r"(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*?(?i:key|token|pass|secret|pwd|auth|cookie|cred))"
    r"([A-Za-z_][A-Za-z0-9_-]*)(['\"]?\]?)[ \t]*([=:,])[ \t]*"
)
STRING_PREFIX = re.compile(r"[rRbBuUfF]{0,2}(?=['\"])")
BARE_VALUE = re.compile(r"[^\s'\"`,;(){}\[\]]+")
ANNOTATED = re.compile(r"[ \t]*=(?!=)[ \t]*")  # the `=` after `name: type`
PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
PEM_END = "-----END"
# What a secret looks like, and its marker. Every alternative starts with a literal (so the
# scan jumps from one occurrence to the next) followed by a look-behind saying the literal starts
# a run: each run is then tried once, from its start.
SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (f"[masked: {why}]", re.compile(pattern))
    for why, pattern in (
        (
            "looks like an API key",
            r"sk-(?<![\w-]sk-)[\w-]{20,}|AIza(?<![\w-]AIza)[\w-]{35}|hf_(?<![\w-]hf_)[A-Za-z0-9]{30,}"
            r"|sk_(?<![\w-]sk_)(?:live|test)_[A-Za-z0-9]{16,}"
            r"|rk_(?<![\w-]rk_)(?:live|test)_[A-Za-z0-9]{16,}"
            r"|glpat-(?<![\w-]glpat-)[\w-]{20,}|xox(?<![\w-]xox)[abpors]-[A-Za-z0-9-]{10,}",
        ),
        (
            "looks like a GitHub token",
            r"gh(?<!\wgh)[pousr]_[A-Za-z0-9]{20,}|github_pat_(?<!\wgithub_pat_)\w{20,}",
        ),
        ("looks like an AWS access key", r"A(?<![A-Z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Z0-9])"),
        ("looks like a JWT", r"eyJ(?<![\w-]eyJ)[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}"),
    )
)
# Two shapes keep their context and mask only a part (the named group).
PARTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "[masked: looks like a bearer token]",
        re.compile(r"(?i:b)(?<![A-Za-z0-9][Bb])(?i:earer)[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    ),
    ("[masked: password in a URL]", re.compile(r"://[^\s/:@]+:(?P<secret>[^\s/@]+)@")),
)


def is_secret_name(name: str) -> bool:
    """Whether a variable, key or environment name looks like it holds a secret (a name
    longer than `NAME_LIMIT` characters is not a variable anyone typed: it is not judged)."""
    return len(name) <= NAME_LIMIT and _is_secret_name(name)


@functools.lru_cache(maxsize=4096)  # code repeats its names; a cache keeps masking cheap
def _is_secret_name(name: str) -> bool:
    words: list[str] = [word.lower() for word in WORD.findall(name) if not word.isdigit()]
    if not words:
        return False
    if any(part in word for word in words for part in SECRET_PARTS):
        return True
    return words[-1].endswith(SECRET_ENDINGS)


def mask_secrets(text: str) -> str:
    """`text` with every secret it recognises replaced by a `[masked: why]` marker."""
    if not text:
        return text
    return _mask_shapes(_mask_named(_mask_private_keys(text)))


def _mask_private_keys(text: str) -> str:
    """PEM private key blocks, from BEGIN to END (or to the end of a cut text)."""
    parts: list[str] = []
    position = 0
    while (found := PEM_BEGIN.search(text, position)) is not None:
        end = text.find(PEM_END, found.end())
        end = len(text) if end < 0 else text.find("-----", end + len(PEM_END))
        end = len(text) if end < 0 else end + 5
        parts += [text[position : found.start()], KEY_MARK]
        position = end
    return "".join(parts) + text[position:] if parts else text


def _mask_named(text: str) -> str:
    """Values given to secret-looking names, in code, reprs, headers and shell lines."""
    parts: list[str] = []
    kept = searched = 0  # text[:kept] is in parts; the next name is looked for from `searched`
    while (found := NAMED.search(text, searched)) is not None:
        searched = value = found.end()
        if not is_secret_name(found[1]):
            continue
        if found[3] == ":":  # `name: type = value` (an annotation) or `'name': value`
            typed = BARE_VALUE.match(text, value)
            after = typed and ANNOTATED.match(text, typed.end())
            value = after.end() if after else value
        start, end = _value_span(text, value, quoted_name=bool(found[2]), separator=found[3])
        if end > start:
            parts += [text[kept:start], NAME_MARK]
            kept = searched = end
    return "".join(parts) + text[kept:] if parts else text


def _value_span(text: str, start: int, *, quoted_name: bool, separator: str) -> tuple[int, int]:
    """Where the secret given to a name starts and ends: a string literal's contents, or a
    bare value that is not an identifier or a call; (start, start) when there is none."""
    prefix = STRING_PREFIX.match(text, start)
    if prefix is not None:
        opening = prefix.end()
        quote = text[opening] * (3 if text.startswith(text[opening] * 3, opening) else 1)
        body = opening + len(quote)
        return body, _closing_quote(text, body, quote)
    if separator == "," and not quoted_name:  # `f(api_key, x)`: an argument list, no value
        return start, start
    bare = BARE_VALUE.match(text, start)
    if bare is None or text[bare.end() : bare.end() + 1] in ("(", "["):
        return start, start  # a call or a subscript: code, not a value
    word = bare[0]
    if word.replace(".", "").replace("_", "").isalpha() or word.replace(".", "", 1).isdigit():
        return start, start  # a variable, an attribute or a number, not a secret
    return bare.start(), bare.end()


def _closing_quote(text: str, body: int, quote: str) -> int:
    """Where a string literal that starts at `body` ends (before its closing quote); at the
    end of the line (or text) when it is not closed there. Escaped quotes are skipped. Each
    search starts past what the last one read, so a text is read about once whatever it holds."""
    position = body
    while True:
        end = text.find(quote, position)
        stop = len(text) if end < 0 else end
        line_end = -1 if len(quote) == 3 else text.find("\n", position, stop)
        if line_end >= 0 or end < 0:
            return stop if line_end < 0 else line_end
        before = text[position:end]
        if (len(before) - len(before.rstrip("\\"))) % 2 == 0:
            return end
        position = end + 1


def _mask_shapes(text: str) -> str:
    for mark, pattern in SHAPES:
        text = pattern.sub(mark, text)
    for mark, pattern in PARTS:
        text = pattern.sub(functools.partial(_replace_part, mark), text)
    return text


def _replace_part(mark: str, found: re.Match[str]) -> str:
    """The match with only its `secret` group replaced by `mark`."""
    whole, start = found[0], found.start("secret") - found.start()
    return whole[:start] + mark + whole[found.end("secret") - found.start() :]


TEXT_LIMIT = 4000  # characters of one repr or message
ITEMS = 30  # items of a list, dict or set shown
SAMPLE_LIMIT = 100_000  # array elements the statistics are computed over at most
BIG_INT_BITS = 14_000  # ints above this (about 4,200 digits) are described, not converted
MARGIN = 256  # characters read past a cut, so a secret across it is still recognised whole
FRAMES = 30  # traceback frames kept from the end of each exception in a chain
CHAIN = 100  # exceptions followed through __cause__ and __context__
BUDGET = 2 * TEXT_LIMIT  # characters one repr makes before the rest is shown as "..."
CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
SIZED = (list, tuple, dict, set, frozenset, str, bytes, bytearray)
NUMBERS = (bool, int, float, complex)
CODE = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def type_name(kind: type) -> str:
    """A type's own `__name__` (not a metaclass property's idea of it)."""
    name = type.__dict__["__name__"].__get__(kind)
    return name if type(name) is str else "?"


def summarise_value(value: Any, *, secret: bool = False) -> str:
    """One cheap line: the type, and a length, shape, dtype, columns or (unless `secret`) the
    number, where the type is known."""
    kind = type(value)
    name = type_name(kind)
    if kind in SIZED:  # the exact builtin: a subclass's __len__ is user code
        return f"{name}, length {len(value):,}"
    if value is None or issubclass(kind, NUMBERS):
        return f"{name} = {NAME_MARK if secret else _number(value)}"
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if numpy is not None and issubclass(kind, numpy.ndarray):
        shape = numpy.ndarray.shape.__get__(value)
        dtype = numpy.ndarray.dtype.__get__(value)
        return f"{name}, shape {_shape(shape)}, dtype {cut(str(dtype), 60)}"
    if pandas is not None and issubclass(kind, pandas.DataFrame | pandas.Series):
        parts = [name, f"shape {_shape(value.shape)}{_rows_and_columns(value.shape)}"]
        if issubclass(kind, pandas.DataFrame):
            labels = [_label(label) for label in itertools.islice(value.columns, 8)]
            more = len(value.columns) - len(labels)
            parts.append(f"columns {', '.join(labels)}" + (f" (+{more:,} more)" if more else ""))
        else:
            parts.append(f"dtype {value.dtype}")
        return ", ".join(parts)
    return name


def preview_value(value: Any, *, secret: bool = False) -> str:
    """A bounded look inside a value: a DataFrame's dtypes and head(), an array's statistics,
    anything else's repr, cut; only a marker under a secret-looking name."""
    kind = type(value)
    if secret and not issubclass(kind, CODE):
        return NAME_MARK
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if pandas is not None and issubclass(kind, pandas.DataFrame | pandas.Series):
        head = value.head(5).to_string(max_cols=20, max_colwidth=40)
        dtypes = value.dtypes.head(30).to_string() if issubclass(kind, pandas.DataFrame) else ""
        return (f"dtypes:\n{dtypes}\n" if dtypes else "") + f"head():\n{head}"
    if numpy is not None and issubclass(kind, numpy.ndarray):
        return _array_statistics(value)
    return _BoundedRepr().repr(value)


def format_error(error: BaseException, limit: int, *, messages: bool = True) -> str:
    """The traceback of `error` and its causes, as Python prints it, in at most `limit`
    characters: each message and source line is cut before it is joined, so a 100 MB message
    is never copied, and the end (the error itself) is kept over the start. Without
    `messages`, only each exception's type is named (`str()` of an exception is user code)."""
    parts: list[str] = []
    for current, after in _chain(error):
        frames = traceback.extract_tb(current.__traceback__, limit=-FRAMES)
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts += [cut(line, 400) + "\n" for line in traceback.format_list(frames)]
        line = _error_line(current) if messages else _qualified_name(type(current))
        parts += [line, "\n", after]
    return cut_middle(mask_secrets("".join(parts)), limit)


# A notebook cell's code as Python names its file: IPython's `<ipython-input-5-…>`, or
# ipykernel's `…/ipykernel_<pid>/<hash>.py`.
CELL_FILE = re.compile(r"<ipython-input-\d+-|[/\\]ipykernel_\d+[/\\]")
HEADLINE_LIMIT = 300  # characters of the message, and of the cell's line, in a headline


def error_headline(error: BaseException, *, messages: bool = True) -> str:
    """One line for before `error`'s traceback: the error (`KeyError: 'discount'`) and the line
    of a notebook cell that raised it, when a cell's frame is among its last frames. Under a
    long traceback of a library's frames, a 1.5B model asked what went wrong in the last cell
    answered about a file instead. Without `messages`, the error's type alone."""
    frames = traceback.extract_tb(error.__traceback__, limit=-FRAMES)
    cells = [frame for frame in frames if CELL_FILE.search(frame.filename or "")]
    said = _error_line(error) if messages else _qualified_name(type(error))
    headline = f"The error: {cut(said, HEADLINE_LIMIT)}"
    if cells and (code := (cells[-1].line or "").strip()):
        headline += f", raised by this line of a notebook cell: {cut(code, HEADLINE_LIMIT)}"
    return headline + "\n\n"


def cut(text: str, limit: int) -> str:
    """`text`, or its start and a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    marker = f" [... {len(text) - limit:,} characters cut]"
    return text[: max(0, limit - len(marker))] + marker


def cut_middle(text: str, limit: int) -> str:
    """`text`, or a quarter of `limit` from its start and the rest from its end: the end of a
    traceback names the error and where it was raised."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit:,} characters cut ...]\n"
    head = limit // 4
    return f"{text[:head]}{marker}{text[-(limit - head - len(marker)) :]}"


def _number(value: Any) -> str:
    """A number's text by its base type's repr (a subclass's __str__ is user code)."""
    kind = type(value)
    if value is None or kind is bool:
        return builtins.repr(value)
    if issubclass(kind, int):
        bits = int.bit_length(value)
        return f"<an int of {bits:,} bits>" if bits > BIG_INT_BITS else cut(int.__repr__(value), 80)
    base = float if issubclass(kind, float) else complex
    return cut(base.__repr__(value), 80)


def _shape(shape: Any) -> str:
    return "×".join(f"{n:,}" if type(n) is int else "?" for n in tuple(shape)[:8])


def _rows_and_columns(shape: Any) -> str:
    """ " (4 rows, 2 columns)" for a table's shape: "4×2" alone left a 1.5B model saying a
    DataFrame's shape without saying which number counts what."""
    sizes = tuple(shape)[:3]
    if len(sizes) != 2 or not all(type(n) is int for n in sizes):
        return ""
    rows, columns = sizes
    return f" ({rows:,} row{'s' * (rows != 1)}, {columns:,} column{'s' * (columns != 1)})"


def _label(label: Any) -> str:
    """A column label as text when it is a plain string or number, else its type."""
    if type(label) is str:
        return cut(label, 40)
    if type(label) in NUMBERS:
        return _number(label)
    return f"<{type_name(type(label))}>"


def _array_statistics(array: Any) -> str:
    """min, max and mean over at most SAMPLE_LIMIT elements taken at a stride through the
    array's flat iterator: a sample is copied, never the array (ravel() copies a transposed
    one whole)."""
    flat = array.flat
    size = int(array.size)
    if size == 0 or array.dtype.kind not in "biuf":
        return f"first elements: {_BoundedRepr().repr(flat[:10].tolist())}"
    step = max(1, size // SAMPLE_LIMIT)
    sample = flat[::step]
    scope = "all" if step == 1 else f"every {step:,}th of the {size:,}"
    return (
        f"statistics over {scope} elements: min {sample.min()}, max {sample.max()}, "
        f"mean {sample.mean():.6g}\nfirst elements: {reprlib.repr(flat[:10].tolist())}"
    )


def _chain(error: BaseException) -> list[tuple[BaseException, str]]:
    """The exceptions Python prints for `error`, its first cause first, each with the sentence
    printed after it (the link to the next)."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    after = ""
    while current is not None and id(current) not in seen and len(chain) < CHAIN:
        seen.add(id(current))
        chain.append((current, after))
        if current.__cause__ is not None:
            current, after = current.__cause__, CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, after = current.__context__, CONTEXT
        else:
            current = None
    return chain[::-1]


def _error_line(error: BaseException) -> str:
    """`module.Type: message`, the message cut (and masked) before it is joined."""
    qualified = _qualified_name(type(error))
    message = str(error)
    shown = mask_secrets(message[: TEXT_LIMIT + MARGIN])[:TEXT_LIMIT]
    if len(message) > TEXT_LIMIT:
        shown += f" [... {len(message) - TEXT_LIMIT:,} characters of the message cut]"
    return f"{qualified}: {shown}" if message else qualified


def _qualified_name(kind: type) -> str:
    """`module.Type` as a traceback names an exception's type (builtins' without module)."""
    module = type.__dict__["__module__"].__get__(kind)
    name = type_name(kind)
    return name if module in ("builtins", "__main__") else f"{module}.{name}"


class _BoundedRepr(reprlib.Repr):
    """reprlib's bounded repr, with what it lacks: bytes are sliced (not copied and quadrupled),
    dicts and sets are not sorted (a copy of every key), huge ints are described, a `repr`
    that raises is reported (not disguised as `<X instance at 0x…>`), and a dict entry under a
    secret-looking key shows a marker."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = TEXT_LIMIT
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = ITEMS
        self.spent = 0

    def repr1(self, x: Any, level: int) -> str:
        if self.spent > BUDGET:  # a wide, deep or shared structure: enough has been shown
            return "..."
        shown = super().repr1(x, level)
        self.spent += len(shown)
        return shown

    def repr_str(self, x: str, level: int) -> str:
        shown = mask_secrets(x[: self.maxstring + MARGIN])[: self.maxstring]
        return builtins.repr(shown) + _rest(len(x), "characters")

    def repr_bytes(self, x: bytes, level: int) -> str:
        return builtins.repr(x[: self.maxstring]) + _rest(len(x), "bytes")

    def repr_bytearray(self, x: bytearray, level: int) -> str:
        return builtins.repr(x[: self.maxstring]) + _rest(len(x), "bytes")

    def repr_int(self, x: int, level: int) -> str:
        return _number(x)

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        entries = []
        for key, value in itertools.islice(x.items(), self.maxdict):
            secret = type(key) is str and is_secret_name(key)
            shown = f"'{NAME_MARK}'" if secret else self.repr1(value, level - 1)
            entries.append(f"{self.repr1(key, level - 1)}: {shown}")
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(entries) + more + "}"

    def repr_set(self, x: set[Any], level: int) -> str:
        return self._unsorted(x, level, "{", "}") if x else "set()"

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        return self._unsorted(x, level, "frozenset({", "})") if x else "frozenset()"

    def _unsorted(self, x: set[Any] | frozenset[Any], level: int, left: str, right: str) -> str:
        if level <= 0:
            return left + "..." + right
        items = [self.repr1(item, level - 1) for item in itertools.islice(x, self.maxset)]
        return left + ", ".join(items) + (", ..." if len(x) > self.maxset else "") + right

    def repr_instance(self, x: Any, level: int) -> str:
        return cut(builtins.repr(x), self.maxother)


def _rest(size: int, unit: str) -> str:
    """How much of a long string or bytes value the preview leaves out."""
    return f" [... {size - TEXT_LIMIT:,} more {unit}]" if size > TEXT_LIMIT else ""
