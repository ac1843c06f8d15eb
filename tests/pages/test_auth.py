"""Access control: password hashes, settings, the CLI, and the gate in front of the app (AppTest).

Every AppTest here sets ``at.secrets``, so that a developer's own .streamlit/secrets.toml is
never read.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib
from streamlit.testing.v1 import AppTest

from pages.lib import auth
from pages.lib.session import KEY

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
PASSWORD = "correct horse battery staple"

OIDC_SECRETS = {
    "auth": {
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "cookie_secret": "a-test-cookie-secret-of-some-length",
        "client_id": "test-client",
        "client_secret": "test-secret",
        "server_metadata_url": "https://id.example.org/.well-known/openid-configuration",
    }
}


@pytest.fixture(scope="module")
def password_hash() -> str:
    return auth.hash_password(PASSWORD, salt=bytes(range(16)))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (
        "LIMECRAFT_AUTH",
        "LIMECRAFT_PASSWORD_HASH",
        "LIMECRAFT_ALLOWED_EMAILS",
        "LIMECRAFT_OIDC_PROVIDER",
    ):
        monkeypatch.delenv(name, raising=False)


# ----------------------------------------------------------------------------- password hashes


def test_hash_verifies_only_the_right_password(password_hash):
    assert auth.verify_password(PASSWORD, password_hash)
    assert not auth.verify_password(PASSWORD + " ", password_hash)
    assert not auth.verify_password("", password_hash)
    assert not auth.verify_password("Correct horse battery staple", password_hash)


def test_hash_is_salted_and_keeps_no_password():
    a, b = auth.hash_password(PASSWORD), auth.hash_password(PASSWORD)
    assert a != b  # a fresh random salt each time
    for h in (a, b):
        assert PASSWORD not in h and PASSWORD.encode().hex() not in h
        assert h.startswith("scrypt:32768:8:1:")
        # safe unquoted in a shell, YAML and a compose .env file
        assert not set(h) & set("$ '\"\\#=")
        assert auth.verify_password(PASSWORD, h)


def test_empty_password_cannot_be_hashed():
    with pytest.raises(ValueError, match="empty"):
        auth.hash_password("")


@pytest.mark.parametrize(
    "bad",
    [
        "hunter2",  # the password itself, pasted where the hash belongs
        "scrypt:32768:8:1:00",
        "bcrypt:32768:8:1:" + "00" * 16 + ":" + "00" * 32,
        "scrypt:1000:8:1:" + "00" * 16 + ":" + "00" * 32,  # N not a power of two
        "scrypt:32768:8:1:zz:" + "00" * 32,
    ],
)
def test_a_malformed_hash_is_a_config_error_that_does_not_echo_it(bad):
    with pytest.raises(auth.AuthConfigError, match=r"python -m pages\.lib\.auth hash") as e:
        auth.verify_password("hunter2", bad)
    assert bad not in str(e.value)


# ----------------------------------------------------------------------------- settings


def test_open_by_default():
    assert auth.load_config({}, {}).mode == "none"
    assert auth.load_config({"LIMECRAFT_AUTH": ""}, {}).mode == "none"
    assert auth.load_config({"LIMECRAFT_AUTH": "None"}, {}).mode == "none"


def test_unknown_mode_is_refused():
    with pytest.raises(auth.AuthConfigError, match="none, password, oidc"):
        auth.load_config({"LIMECRAFT_AUTH": "passwrod"}, {})


def test_password_mode_needs_a_hash(password_hash):
    with pytest.raises(auth.AuthConfigError, match="LIMECRAFT_PASSWORD_HASH is not set"):
        auth.load_config({"LIMECRAFT_AUTH": "password"}, {})
    cfg = auth.load_config(
        {"LIMECRAFT_AUTH": "password", "LIMECRAFT_PASSWORD_HASH": password_hash}, {}
    )
    assert cfg == auth.AuthConfig("password", password_hash=password_hash)


def test_settings_fall_back_to_secrets_and_the_environment_wins(password_hash):
    secrets = {"LIMECRAFT_AUTH": "password", "LIMECRAFT_PASSWORD_HASH": password_hash}
    assert auth.load_config({}, secrets).mode == "password"
    # an empty variable (an unset compose default) does not hide the secrets file
    assert auth.load_config({"LIMECRAFT_AUTH": ""}, secrets).mode == "password"
    assert auth.load_config({"LIMECRAFT_AUTH": "none"}, secrets).mode == "none"


def test_oidc_mode_needs_an_allow_list_and_an_auth_section():
    env = {"LIMECRAFT_AUTH": "oidc"}
    with pytest.raises(auth.AuthConfigError, match="LIMECRAFT_ALLOWED_EMAILS"):
        auth.load_config(env, OIDC_SECRETS)
    env["LIMECRAFT_ALLOWED_EMAILS"] = "Alice@Example.org, @team.example.org"
    with pytest.raises(auth.AuthConfigError, match=r"\[auth\] section"):
        auth.load_config(env, {})
    incomplete = {"auth": {k: v for k, v in OIDC_SECRETS["auth"].items() if k != "client_secret"}}
    with pytest.raises(auth.AuthConfigError, match="client_secret"):
        auth.load_config(env, incomplete)
    cfg = auth.load_config(env, OIDC_SECRETS)
    assert cfg.mode == "oidc" and cfg.provider is None
    assert cfg.allowed == ("alice@example.org", "@team.example.org")


def test_oidc_named_provider_must_exist():
    env = {"LIMECRAFT_AUTH": "oidc", "LIMECRAFT_ALLOWED_EMAILS": "*"}
    env["LIMECRAFT_OIDC_PROVIDER"] = "okta"
    with pytest.raises(auth.AuthConfigError, match=r"\[auth\.okta\]"):
        auth.load_config(env, OIDC_SECRETS)
    provider = {k: OIDC_SECRETS["auth"][k] for k in ("redirect_uri", "cookie_secret")}
    provider["okta"] = {
        k: OIDC_SECRETS["auth"][k] for k in ("client_id", "client_secret", "server_metadata_url")
    }
    assert auth.load_config(env, {"auth": provider}).provider == "okta"


def test_secrets_example_is_a_complete_placeholder_config():
    example = tomllib.loads((ROOT / ".streamlit" / "secrets.toml.example").read_text())
    cfg = auth.load_config({"LIMECRAFT_AUTH": "oidc", "LIMECRAFT_ALLOWED_EMAILS": "*"}, example)
    assert cfg.mode == "oidc"
    section = example["auth"]
    assert section["redirect_uri"].endswith("/oauth2callback")
    assert "REPLACE" in section["cookie_secret"] and "REPLACE" in section["client_secret"]


@pytest.mark.parametrize(
    ("email", "allowed", "ok"),
    [
        ("alice@example.org", ("alice@example.org",), True),
        ("Alice@Example.ORG", ("alice@example.org",), True),
        ("bob@example.org", ("alice@example.org",), False),
        ("bob@example.org", ("@example.org",), True),
        ("bob@evil.example.org", ("@example.org",), False),
        ("bob@example.org.evil.com", ("@example.org",), False),
        ("example.org", ("@example.org",), False),
        (None, ("@example.org",), False),
        (None, ("*",), True),
    ],
)
def test_allow_list(email, allowed, ok):
    assert auth.is_allowed(email, allowed) is ok


# ----------------------------------------------------------------------------- CLI


def _cli(args, stdin, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "pages.lib.auth", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_cli_hashes_from_stdin_and_verifies():
    made = _cli(["hash"], PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    h = made.stdout.strip()
    assert auth.verify_password(PASSWORD, h)
    assert PASSWORD not in made.stdout + made.stderr
    right = _cli(["verify"], PASSWORD + "\n", {"LIMECRAFT_PASSWORD_HASH": h})
    wrong = _cli(["verify"], "nope\n", {"LIMECRAFT_PASSWORD_HASH": h})
    assert (right.returncode, wrong.returncode) == (0, 1)
    assert "wrong password" in wrong.stderr and "nope" not in wrong.stderr
    empty = _cli(["hash"], "\n")
    assert empty.returncode == 2 and "empty" in empty.stderr


# ----------------------------------------------------------------------------- the gate (AppTest)


def leaves(at) -> list[str]:
    """The kinds of every element on the page, main area and sidebar, containers left out."""
    out = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if hasattr(child, "children"):
                walk(child)
            else:
                out.append(type(child).__name__)

    walk(at._tree)
    return out


def has_analysis(at: AppTest) -> bool:
    """Whether the session made its analysis (only the app past the sign-in gate does)."""
    return KEY in at.session_state and at.session_state[KEY].app is not None


def app_is_shown(at) -> bool:
    return has_analysis(at) and any(b.label == "Explain" for b in at.button)


def run_app(secrets=None, user=None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets.update(secrets or {"limecraft_test": "no secrets file"})
    if user is not None:
        at.user = user
    return at.run()


@pytest.mark.slow
def test_open_mode_shows_the_app():
    at = run_app()
    assert not at.exception, at.exception
    assert app_is_shown(at)
    assert at.sidebar.selectbox(key="model_pick")
    # no password box: the only text box is the sidebar's model-by-name field
    assert [t.key for t in at.text_input] == ["model_by_name"]
    assert not any(b.label in ("Sign in", "Log in") for b in at.button)


@pytest.mark.slow
def test_password_mode_shows_only_the_sign_in(monkeypatch, password_hash):
    monkeypatch.setenv("LIMECRAFT_AUTH", "password")
    monkeypatch.setenv("LIMECRAFT_PASSWORD_HASH", password_hash)
    at = run_app()
    assert not at.exception, at.exception
    assert sorted(leaves(at)) == ["Button", "TextInput", "Title"]
    assert at.text_input(key="auth_password").label == "Team password"
    assert [b.label for b in at.button] == ["Sign in"]
    assert not has_analysis(at)  # nothing after the gate ran

    # a wrong password: refused, clearly, after the server-wide delay
    at.text_input(key="auth_password").input("hunter2")
    started = time.monotonic()
    at.button[0].click().run()
    assert time.monotonic() - started >= auth.FAIL_DELAY_S
    assert [e.value for e in at.error] == [
        "Wrong password. Try again, or ask whoever runs this LIMEcraft for the team password."
    ]
    assert not app_is_shown(at) and not has_analysis(at)

    # the right one: the app, with a way to sign out
    at.text_input(key="auth_password").input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert app_is_shown(at) and not at.error
    assert PASSWORD not in str(at.session_state.to_dict())

    at.sidebar.button(key="auth_sign_out").click().run()
    assert sorted(leaves(at)) == ["Button", "TextInput", "Title"]


@pytest.mark.slow
def test_changing_the_password_signs_sessions_out(monkeypatch, password_hash):
    monkeypatch.setenv("LIMECRAFT_AUTH", "password")
    monkeypatch.setenv("LIMECRAFT_PASSWORD_HASH", password_hash)
    at = run_app()
    at.text_input(key="auth_password").input(PASSWORD)
    at.button[0].click().run()
    assert app_is_shown(at)
    monkeypatch.setenv("LIMECRAFT_PASSWORD_HASH", auth.hash_password("a new one"))
    at.run()
    assert [b.label for b in at.button] == ["Sign in"]


@pytest.mark.slow
def test_oidc_mode_without_a_login_shows_only_the_login_button(monkeypatch):
    monkeypatch.setenv("LIMECRAFT_AUTH", "oidc")
    monkeypatch.setenv("LIMECRAFT_ALLOWED_EMAILS", "@example.org")
    at = run_app(OIDC_SECRETS, {"is_logged_in": False})
    assert not at.exception, at.exception
    assert [b.label for b in at.button] == ["Log in"]
    assert sorted(leaves(at)) == ["Button", "Markdown", "Title"]
    assert not has_analysis(at)


@pytest.mark.slow
def test_oidc_mode_lets_allowed_accounts_in_and_refuses_others(monkeypatch):
    monkeypatch.setenv("LIMECRAFT_AUTH", "oidc")
    monkeypatch.setenv("LIMECRAFT_ALLOWED_EMAILS", "@example.org")
    user = {"is_logged_in": True, "email": "ada@example.org", "name": "Ada"}
    at = run_app(OIDC_SECRETS, user)
    assert not at.exception, at.exception
    assert app_is_shown(at)
    assert any("Signed in as Ada" in c.value for c in at.sidebar.caption)
    assert at.sidebar.button(key="auth_logout").label == "Log out"

    for stranger in (
        {"is_logged_in": True, "email": "eve@elsewhere.com"},
        {"is_logged_in": True, "email": "eve@example.org", "email_verified": False},
    ):
        at = run_app(OIDC_SECRETS, stranger)
        assert not at.exception, at.exception
        assert not app_is_shown(at) and not has_analysis(at)
        assert "may not use this LIMEcraft" in at.error[0].value
        assert [b.label for b in at.button] == ["Log out"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "secrets", "says"),
    [
        ({"LIMECRAFT_AUTH": "password"}, None, "LIMECRAFT_PASSWORD_HASH is not set"),
        (
            {"LIMECRAFT_AUTH": "password", "LIMECRAFT_PASSWORD_HASH": "hunter2"},
            None,
            "not a LIMEcraft password hash",
        ),
        ({"LIMECRAFT_AUTH": "sso"}, None, "LIMECRAFT_AUTH must be one of"),
        ({"LIMECRAFT_AUTH": "oidc", "LIMECRAFT_ALLOWED_EMAILS": "*"}, None, "[auth] section"),
    ],
)
def test_misconfiguration_is_a_clear_error_page_and_a_closed_app(monkeypatch, env, secrets, says):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    at = run_app(secrets, {"is_logged_in": True, "email": "ada@example.org"})
    assert not at.exception, at.exception  # no traceback
    assert sorted(leaves(at)) == ["Error", "Title"]
    assert "misconfigured" in at.error[0].value and says in at.error[0].value
    assert "hunter2" not in at.error[0].value
    assert not has_analysis(at)
