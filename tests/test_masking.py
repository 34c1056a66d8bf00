"""nbchat.tools.preview: what looks like a secret is masked, with the reason, in linear time."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from nbchat.tools.preview import is_secret_name, mask_secrets

# Made up, in the shapes real ones have (built from parts so no scanner flags this file).
OPENAI = "sk-" + "proj-Zr8Qx2Lm5Np7Ks3Vb6Tc9Wd1Yf4Hg0Jk2"
PEM = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq83kd\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    "name",
    ["api_key", "OPENAI_API_KEY", "apiKey", "APIKey", "hf_token", "db_password", "MYSQL_PWD"]
    + ["Authorization", "X-Api-Key", "AWS_SECRET_ACCESS_KEY", "client_secret", "basic_auth"]
    + ["credentials", "token2", "passwd"],
)
def test_secret_looking_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["max_tokens", "n_tokens", "author", "tokenizer", "total", "df", "headers", "x" * 300]
)
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (f'api_key = "{OPENAI}"', 'api_key = "[masked: secret-looking name]"'),
        (
            f'OpenAI(api_key="{OPENAI[:12]}", timeout=5)',
            'OpenAI(api_key="[masked: secret-looking name]", timeout=5)',
        ),
        ("password: str = 'hunter2'", "password: str = '[masked: secret-looking name]'"),
        (
            "os.environ['GITHUB_TOKEN'] = 'abc'",
            "os.environ['GITHUB_TOKEN'] = '[masked: secret-looking name]'",
        ),
        (
            "run_line_magic('env', 'HF_TOKEN=abc123')",
            "run_line_magic('env', 'HF_TOKEN=[masked: secret-looking name]')",
        ),
        ("export DB_PASSWORD=hunter2", "export DB_PASSWORD=[masked: secret-looking name]"),
        ("{'token': 'it\\'s'}", "{'token': '[masked: secret-looking name]'}"),
        (f"the key {OPENAI}.", "the key [masked: looks like an API key]."),
        ("id AKIA" + "IOSFODNN7EXAMPLE", "id [masked: looks like an AWS access key]"),
        ("ghp_" + "a" * 36, "[masked: looks like a GitHub token]"),
        ("hf_" + "b" * 34, "[masked: looks like an API key]"),
        (
            "-H 'Authorization: Bearer abc.def-123'",
            "-H 'Authorization: Bearer [masked: looks like a bearer token]'",
        ),
        ("eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSM", "[masked: looks like a JWT]"),
        ("redis://:s3cret@host:6379", "redis://:s3cret@host:6379"),  # no user: left alone
        ("postgresql://bob:s3cret@db/x", "postgresql://bob:[masked: password in a URL]@db/x"),
        (f"key:\n{PEM}\nafter", "key:\n[masked: private key]\nafter"),
        (PEM[:40], "[masked: private key]"),  # a block cut before its end
    ],
)
def test_secrets_are_masked_with_the_reason(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=512, api_key=os.environ['X'], token=get_token()",
        "sort_key = lambda row: row[0]",
        "print('the author is Bob')",
        "f(api_key, x)",
    ],
)
def test_code_that_holds_no_secret_is_left_as_it_is(text: str) -> None:
    assert mask_secrets(text) == text


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "one long name": lambda size: "a" * size,
    "names and quotes": lambda size: "key='x' " * (size // 8),
    "unclosed quotes": lambda size: 'key="' * (size // 5),
    "quoted names and commas": lambda size: '"key",' * (size // 6),
    "key prefixes": lambda size: "sk-" * (size // 3),
    "JWT starts": lambda size: "eyJ" * (size // 3),
    "bearer words": lambda size: "bearer " * (size // 7),
    "bearer then spaces": lambda size: "bearer" + " " * size,
    "URL starts": lambda size: "://a:" * (size // 5),
    "PEM starts": lambda size: "-----BEGIN " * (size // 11),
    "annotation then spaces": lambda size: "key: str" + " " * size,
    "backslashes": lambda size: "api_key = '" + "\\" * size,
}


def seconds_for(text: str) -> float:
    started = time.perf_counter()
    mask_secrets(text)
    return time.perf_counter() - started


@pytest.mark.slow
@pytest.mark.parametrize("make", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_masking_takes_linear_time_on_adversarial_text(make: Callable[[int], str]) -> None:
    """10 MB of adversarial text against 1 MB of the same, in this process: linear time makes
    the ratio about 10, a pattern that backtracks over its input about 100."""
    baseline = min(seconds_for(make(1 << 20)) for _ in range(3))
    assert seconds_for(make(10 << 20)) < 30 * baseline + 0.05
