"""Settings: precedence, validation with exact messages, and the API key never shown."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from nbchat.config import (
    API_KEY_PLACEHOLDER,
    MIN_N_CTX,
    Settings,
    UnknownVariableWarning,
    known_variables,
    unknown_variables,
)
from nbchat.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_documented_values(home: Path) -> None:
    settings = Settings.load()
    assert settings.context_token_threshold is None
    assert settings.threshold_for(None) == 10_000
    assert settings.tail_messages == 4
    assert settings.trigger_factor == 0.75
    assert settings.max_tool_turns == 100
    assert settings.summary_model == settings.model
    assert settings.home == home.resolve()
    assert settings.db_path == home.resolve() / "nbchat.db"
    assert settings.workspace == Path.cwd().resolve()
    assert settings.tool_policy == "ask"
    assert settings.is_embedded


def test_arguments_beat_environment_beat_file_beat_defaults(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(home, 'model = "from-file"\ntail_messages = 7\ntrigger_factor = 0.5\n')
    monkeypatch.setenv("NBCHAT_TAIL_MESSAGES", "6")
    monkeypatch.setenv("NBCHAT_MODEL", "from-env")
    settings = Settings.load(model="from-argument")
    assert settings.model == "from-argument"
    assert settings.tail_messages == 6
    assert settings.trigger_factor == 0.5
    assert settings.max_tool_turns == 100
    assert settings.source_of("model") == "argument"
    assert settings.source_of("tail_messages") == "environment variable NBCHAT_TAIL_MESSAGES"
    assert settings.source_of("trigger_factor") == str(path)
    assert settings.source_of("max_tool_turns") == "default"


@pytest.mark.parametrize("n_ctx", [0, MIN_N_CTX, 32768])
def test_the_local_window_may_be_the_models_own_or_at_least_the_minimum(
    n_ctx: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBCHAT_LOCAL_N_CTX", str(n_ctx))
    assert Settings.load().local_n_ctx == n_ctx


@pytest.mark.parametrize(
    ("variable", "suggestion"),
    [
        ("NBCHAT_CONTEXT_TOKENS", "did you mean NBCHAT_CONTEXT_TOKEN_THRESHOLD?"),
        ("NBCHAT_MODLE", "did you mean NBCHAT_MODEL?"),
        ("NBCHAT_BASEURL", "did you mean NBCHAT_BASE_URL?"),
        ("NBCHAT_FOO", "the README's configuration table lists those it reads."),
        ("NBCHAT_" + "X" * 10_000, "the README's configuration table lists those it reads."),
    ],
    ids=["threshold", "model", "base url", "nothing close", "too long to compare"],
)
def test_an_nbchat_variable_nothing_reads_is_warned_about_with_the_closest_real_one(
    variable: str, suggestion: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "4000")
    expected = f"{variable} is not a variable nbchat reads, so it has no effect; {suggestion}"
    with pytest.warns(UnknownVariableWarning) as caught:
        settings = Settings.load()
    assert [str(warning.message) for warning in caught] == [expected]
    assert settings.context_token_threshold is None  # and nothing was taken from it


def test_the_variables_nbchat_reads_are_not_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("NBCHAT_API_KEY", "NBCHAT_RUN_SKIP_INSTALL", "NBCHAT_TEMPERATURE"):
        monkeypatch.setenv(variable, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Settings.load()
    assert unknown_variables({"NBCHAT_HOME": "/x", "OTHER_THING": "1"}) == []


def test_every_nbchat_variable_the_code_and_scripts_name_is_a_known_one() -> None:
    files = [*REPO.joinpath("nbchat").rglob("*.py"), *REPO.joinpath("scripts").iterdir()]
    named = set()
    for path in files:
        named |= set(re.findall(r"NBCHAT_[A-Z][A-Z0-9_]+", path.read_text(encoding="utf-8")))
    assert {"NBCHAT_HOME", "NBCHAT_RUN_SKIP_INSTALL", "NBCHAT_API_KEY"} <= named
    assert named - known_variables() == set()


def test_summary_model_defaults_to_the_chat_model() -> None:
    assert Settings(model="m1").summary_model == "m1"
    assert Settings(model="m1", summary_model="m2").summary_model == "m2"


def test_threshold_on_the_embedded_model_is_its_window_minus_the_reply() -> None:
    assert Settings(max_tokens=512).threshold_for(4096) == 3584
    assert Settings(context_token_threshold=2000).threshold_for(4096) == 2000
    assert Settings(max_tokens=1024).threshold_for(512) == 256


@pytest.mark.parametrize("variable", ["NBCHAT_TOOL_TIMEOUT", "NBCHAT_REQUEST_TIMEOUT"])
def test_a_timeout_of_nan_is_refused(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "nan")
    with pytest.raises(ConfigError) as caught:
        Settings.load()
    name = variable.removeprefix("NBCHAT_").lower()
    assert str(caught.value) == (
        f"{name} must be a positive number of seconds, got nan (from environment variable "
        f"{variable})."
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "NBCHAT_CONTEXT_TOKEN_THRESHOLD",
            "-5",
            "context_token_threshold must be a positive number of tokens, got -5 "
            "(from environment variable NBCHAT_CONTEXT_TOKEN_THRESHOLD).",
        ),
        (
            "NBCHAT_TAIL_MESSAGES",
            "0",
            "tail_messages must be at least 1, got 0 (from environment variable "
            "NBCHAT_TAIL_MESSAGES).",
        ),
        (
            "NBCHAT_BASE_URL",
            "not a url",
            "base_url must be an http:// or https:// URL such as http://127.0.0.1:8080/v1, got "
            "'not a url' (from environment variable NBCHAT_BASE_URL).",
        ),
        (
            "NBCHAT_BASE_URL",
            "http://host:99999/v1",
            "base_url must be an http:// or https:// URL such as http://127.0.0.1:8080/v1, got "
            "'http://host:99999/v1' (from environment variable NBCHAT_BASE_URL).",
        ),
        (
            "NBCHAT_TRIGGER_FACTOR",
            "1.5",
            "trigger_factor must be above 0 and at most 1, got 1.5 (from environment variable "
            "NBCHAT_TRIGGER_FACTOR).",
        ),
        (
            "NBCHAT_TOOL_POLICY",
            "sometimes",
            "tool_policy must be one of ask, allow, deny, got 'sometimes' (from environment "
            "variable NBCHAT_TOOL_POLICY).",
        ),
        (
            "NBCHAT_MAX_TOOL_TURNS",
            "many",
            "max_tool_turns has an invalid value 'many' (from environment variable "
            "NBCHAT_MAX_TOOL_TURNS): invalid literal for int() with base 10: 'many'.",
        ),
        (
            "NBCHAT_LOCAL_N_CTX",
            "10",
            "local_n_ctx must be 0 (the model's own window) or at least 2048 tokens, room for the "
            "system prompt, the tools' schemas (about 1,100 tokens) and a reply, got 10 (from "
            "environment variable NBCHAT_LOCAL_N_CTX).",
        ),
        (
            "NBCHAT_AUTOSTART",
            "perhaps",
            "autostart has an invalid value 'perhaps' (from environment variable NBCHAT_AUTOSTART):"
            " expected true/false, 1/0, yes/no or on/off.",
        ),
    ],
)
def test_bad_environment_values_name_the_setting_and_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        Settings.load()
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tail_messages = 0\n", "tail_messages must be at least 1, got 0 (from {path})."),
        ("colour = 'red'\n", "Unknown setting(s) colour in {path}."),
        ("api_key = 'sk-secret'\n", "{path} must not hold an API key; set NBCHAT_API_KEY instead."),
        (
            "tail_messages = 2.5\n",
            "tail_messages has an invalid value 2.5 (from {path}): expected a whole number.",
        ),
    ],
)
def test_bad_file_values_name_the_file(home: Path, text: str, message: str) -> None:
    path = write_config(home, text)
    with pytest.raises(ConfigError) as caught:
        Settings.load()
    assert str(caught.value) == message.format(path=path)


def test_an_unreadable_file_says_how_to_fix_it(home: Path) -> None:
    path = write_config(home, "model = \n")
    with pytest.raises(ConfigError, match=f"Cannot read the settings file {path}: .*Fix or remove"):
        Settings.load()


def test_bad_arguments_say_they_came_from_an_argument() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.load(tail_messages=0)
    assert str(caught.value) == "tail_messages must be at least 1, got 0 (from argument)."
    with pytest.raises(ConfigError, match=r"^Unknown setting\(s\): colour\.$"):
        Settings.load(colour="red")


def test_api_key_lookup_order(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().resolve_api_key() == API_KEY_PLACEHOLDER
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert Settings().resolve_api_key() == "sk-openai"
    monkeypatch.setenv("NBCHAT_API_KEY", "sk-nbchat")
    assert Settings().resolve_api_key() == "sk-nbchat"
    assert Settings(api_key="sk-explicit").resolve_api_key() == "sk-explicit"


def test_api_key_never_appears_in_repr_or_public_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCHAT_API_KEY", "sk-env-secret-123")
    for settings in (Settings.load(), Settings.load(api_key="sk-arg-secret-456")):
        shown = repr(settings) + str(settings.to_public_dict()) + str(settings)
        assert "secret" not in shown
        assert "api_key" not in settings.to_public_dict()


def test_settings_are_frozen_and_replace_records_the_change() -> None:
    settings = Settings()
    with pytest.raises(AttributeError):
        settings.model = "x"  # type: ignore[misc]
    changed = settings.replace(model="other")
    assert changed.model == "other"
    assert changed.source_of("model") == "argument"
    assert settings.model != "other"


def test_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(home=Path("h"), workspace=Path("w"), db_path=Path("d.db"))
    assert settings.home == tmp_path / "h"
    assert settings.workspace == tmp_path / "w"
    assert settings.db_path == tmp_path / "d.db"


def test_tool_env_allow_reads_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCHAT_TOOL_ENV_ALLOW", "HF_TOKEN, MY_KEY")
    assert Settings.load().tool_env_allow == ("HF_TOKEN", "MY_KEY")
