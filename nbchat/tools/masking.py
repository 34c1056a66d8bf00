"""Masking secrets in text a tool hands to the model: what looks like a secret, and why.

Owns two decisions and nothing else: whether a name looks like it holds a secret
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

What it cannot catch, and the README says so: a secret under an ordinary name in no recognisable
format (`x = "hunter2"`), one split or encoded (base64 of a key), or one in a format not listed.

Must not: read variables, environment or files; it only rewrites text.
"""

from __future__ import annotations

import functools
import re

__all__ = ["is_secret_name", "mask_secrets"]

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
