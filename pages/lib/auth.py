"""Who may use the app: open (the default), a shared team password, or OIDC sign-in.

``LIMECRAFT_AUTH`` selects the mode:

- ``none`` (or unset): open, as a local ``streamlit run app.py`` should be;
- ``password``: one shared team password, stored only as a salted scrypt hash in
  ``LIMECRAFT_PASSWORD_HASH`` (make one with ``python -m pages.lib.auth hash``);
- ``oidc``: Streamlit's own OpenID Connect login (``st.login``), configured in the ``[auth]``
  section of ``.streamlit/secrets.toml``; ``LIMECRAFT_ALLOWED_EMAILS`` says who may enter
  (``alice@example.org, @example.org``, or ``*`` for anyone the provider signs in) and
  ``LIMECRAFT_OIDC_PROVIDER`` names an ``[auth.NAME]`` provider section (default: the one in
  ``[auth]`` itself).

Every setting is read from the environment first, then from a top-level key of the same name in
``.streamlit/secrets.toml``. :func:`gate` runs at the top of ``app.py``: until a session has
signed in it shows only the sign-in and stops the script, and a misconfiguration shows a plain
error page (never an open app).
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import hmac
import logging
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import streamlit as st

from pages.lib.session import session

__all__ = [
    "MODES",
    "AuthConfig",
    "AuthConfigError",
    "gate",
    "hash_password",
    "is_allowed",
    "load_config",
    "owner",
    "verify_password",
]

MODES = ("none", "password", "oidc")
HASH_ENV = "LIMECRAFT_PASSWORD_HASH"

# scrypt cost: 32 MiB and about 0.1 s per check; parameters travel inside the hash string.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1
_MAX_SCRYPT_N = 2**20
#: Seconds a wrong password waits, server-wide (checks are serialised): bounds guessing.
FAIL_DELAY_S = 1.0
_CHECK_LOCK = threading.Lock()
_log = logging.getLogger("limecraft.auth")


class AuthConfigError(ValueError):
    """The access-control settings are inconsistent; the message says what to set."""


@dataclass(frozen=True)
class AuthConfig:
    """The access-control settings in force.

    Attributes
    ----------
    mode : {"none", "password", "oidc"}
    password_hash : str, the scrypt hash (``password`` mode)
    provider : str or None, the ``[auth.NAME]`` section to log in with (``oidc`` mode)
    allowed : tuple of str, e-mail addresses and ``@domain`` entries, or ``("*",)``
    """

    mode: str
    password_hash: str = ""
    provider: str | None = None
    allowed: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- password hashes


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """A salted scrypt hash, ``scrypt:N:r:p:SALT:KEY`` (hex), safe to keep in an env file.

    Parameters
    ----------
    password : str, not empty
    salt : bytes, 16 random bytes when None

    Returns
    -------
    str
        Contains no ``$``, quote or space, so it needs no quoting in a shell, YAML or ``.env``.

    Raises
    ------
    ValueError
        If the password is empty.
    """
    if not password:
        raise ValueError("the password is empty")
    salt = secrets.token_bytes(16) if salt is None else salt
    key = _scrypt(password, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
    return f"scrypt:{_SCRYPT_N}:{_SCRYPT_R}:{_SCRYPT_P}:{salt.hex()}:{key.hex()}"


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=256 * r * n * p, dklen=32
    )


def _parse_hash(encoded: str) -> tuple[int, int, int, bytes, bytes]:
    """The parameters, salt and key of a hash; raises AuthConfigError (never echoing the value)."""
    parts = encoded.strip().split(":")
    try:
        if len(parts) != 6 or parts[0] != "scrypt":
            raise ValueError
        n, r, p = (int(x) for x in parts[1:4])
        salt, key = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
        if not (1 < n <= _MAX_SCRYPT_N and n & (n - 1) == 0 and 0 < r <= 32 and 0 < p <= 16):
            raise ValueError
        if len(salt) < 8 or len(key) < 16:
            raise ValueError
    except ValueError:
        raise AuthConfigError(
            f"{HASH_ENV} is not a LIMEcraft password hash (scrypt:N:r:p:salt:key). Make one with "
            "`python -m pages.lib.auth hash` and put its output there, never the password itself."
        ) from None
    return n, r, p, salt, key


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches the hash, compared in constant time.

    Raises
    ------
    AuthConfigError
        If ``encoded`` is not a hash made by :func:`hash_password`.
    """
    n, r, p, salt, key = _parse_hash(encoded)
    if not password:
        return False
    return hmac.compare_digest(_scrypt(password, salt, n, r, p)[: len(key)], key)


# ----------------------------------------------------------------------------- settings


def is_allowed(email: str | None, allowed: Sequence[str]) -> bool:
    """Whether an e-mail address is on the allow-list (``*``, ``a@b.org``, ``@b.org``)."""
    if "*" in allowed:
        return True
    if not email or "@" not in email:
        return False
    email = email.strip().lower()
    domain = "@" + email.rsplit("@", 1)[1]
    return any(a == email or (a.startswith("@") and a == domain) for a in allowed)


def _secrets() -> Mapping:
    try:
        return st.secrets.to_dict()
    except FileNotFoundError:  # no secrets.toml: settings come from the environment only
        return {}


def _setting(name: str, environ: Mapping[str, str], secrets_: Mapping, default: str = "") -> str:
    value = environ.get(name) or None  # empty (e.g. an unset compose variable) is unset
    if value is None:
        value = secrets_.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise AuthConfigError(f"{name} in secrets.toml must be a string")
    return value.strip()


def _authlib_installed() -> bool:
    """Whether Authlib 1.3.2 or later is installed (what st.login needs), from the package's
    metadata, not from Streamlit's internals."""
    from importlib import metadata

    try:
        version = metadata.version("authlib")
    except metadata.PackageNotFoundError:
        return False
    parts = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    return parts >= (1, 3, 2)


def _check_oidc_section(secrets_: Mapping, provider: str | None) -> None:
    """The checks st.login makes, done up front so the page can say what is missing."""
    if not _authlib_installed():
        raise AuthConfigError(
            "LIMECRAFT_AUTH=oidc needs Authlib>=1.3.2: pip install -r requirements.txt"
        )
    auth = secrets_.get("auth")
    if not isinstance(auth, Mapping):
        raise AuthConfigError(
            "LIMECRAFT_AUTH=oidc needs an [auth] section in .streamlit/secrets.toml "
            "(see .streamlit/secrets.toml.example)"
        )
    missing = [k for k in ("redirect_uri", "cookie_secret") if not auth.get(k)]
    section = auth if provider is None else auth.get(provider)
    where = "[auth]" if provider is None else f"[auth.{provider}]"
    if not isinstance(section, Mapping):
        raise AuthConfigError(
            f"LIMECRAFT_OIDC_PROVIDER={provider} but .streamlit/secrets.toml has no {where} section"
        )
    missing += [
        f"{where} {k}"
        for k in ("client_id", "client_secret", "server_metadata_url")
        if not section.get(k)
    ]
    if missing:
        raise AuthConfigError(
            "the [auth] section of .streamlit/secrets.toml is missing: " + ", ".join(missing)
        )


def load_config(
    environ: Mapping[str, str] | None = None, secrets_: Mapping | None = None
) -> AuthConfig:
    """The access-control settings, checked.

    Parameters
    ----------
    environ : mapping, ``os.environ`` when None
    secrets_ : mapping, ``st.secrets`` when None

    Returns
    -------
    AuthConfig

    Raises
    ------
    AuthConfigError
        With a message that says which setting to fix.
    """
    environ = os.environ if environ is None else environ
    secrets_ = _secrets() if secrets_ is None else secrets_
    mode = _setting("LIMECRAFT_AUTH", environ, secrets_).lower() or "none"
    if mode not in MODES:
        raise AuthConfigError(f"LIMECRAFT_AUTH must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "none":
        return AuthConfig("none")
    if mode == "password":
        encoded = _setting(HASH_ENV, environ, secrets_)
        if not encoded:
            raise AuthConfigError(
                f"LIMECRAFT_AUTH=password but {HASH_ENV} is not set. Make a hash with "
                f"`python -m pages.lib.auth hash` and set {HASH_ENV} to it."
            )
        _parse_hash(encoded)
        return AuthConfig("password", password_hash=encoded)
    provider = _setting("LIMECRAFT_OIDC_PROVIDER", environ, secrets_) or None
    allowed = tuple(
        a.strip().lower()
        for a in _setting("LIMECRAFT_ALLOWED_EMAILS", environ, secrets_).split(",")
    )
    allowed = tuple(a for a in allowed if a)
    if not allowed:
        raise AuthConfigError(
            "LIMECRAFT_AUTH=oidc needs LIMECRAFT_ALLOWED_EMAILS: addresses and @domains, comma-"
            "separated, or * for anyone your identity provider signs in"
        )
    _check_oidc_section(secrets_, provider)
    return AuthConfig("oidc", provider=provider, allowed=allowed)


# ----------------------------------------------------------------------------- the gate


def gate() -> None:
    """Let this session through, or show only the sign-in (or a configuration error) and stop.

    Call it in ``app.py`` before the sidebar and ``st.navigation``.
    """
    try:
        cfg = load_config()
    except AuthConfigError as e:
        _log.error("access control is misconfigured: %s", e)
        st.title("LIMEcraft")
        st.error(
            f"LIMEcraft's access control is misconfigured, so the app stays closed: {e}",
            icon=":material/lock:",
        )
        st.stop()
    if cfg.mode == "password":
        _password_gate(cfg)
    elif cfg.mode == "oidc":
        _oidc_gate(cfg)


def _session_token(cfg: AuthConfig) -> str:
    # Ties a session's sign-in to the hash in force: changing the password signs everyone out.
    return hashlib.sha256(cfg.password_hash.encode()).hexdigest()


def owner() -> str:
    """The account this session works as; saved analyses open only for the account that made
    them. ``local`` with access control off; ``team`` in password mode (one shared account);
    ``oidc:<e-mail>`` with OIDC sign-in."""
    try:
        mode = load_config().mode
    except AuthConfigError:
        return "nobody"
    if mode == "password":
        return "team"
    if mode == "oidc":
        email = st.user.get("email") if st.user.get("is_logged_in", False) else None
        return f"oidc:{str(email).lower()}" if email else "oidc:"
    return "local"


def _forget_session() -> None:
    """Signing out leaves nothing of this session's work: the analysis, the recent list, the
    widgets' values and the analysis id in the URL all go."""
    for key in list(st.session_state.keys()):
        del st.session_state[key]
    st.query_params.clear()


def _sign_out() -> None:
    _forget_session()


def _closed() -> None:
    """The only page while signed out (the sign-in is drawn by the gate itself)."""


#: The app's page addresses (app.py): known while signed out, so that a reload of /craft?a=...
#: shows the sign-in, not "Page not found", and comes back to that page and analysis after it.
APP_PATHS = ("craft", "inspect", "trust", "export")


def _hide_pages() -> None:
    """No page links until sign-in: after a sign-out the browser would keep showing the app's."""
    pages = [st.Page(_closed, title="Sign in", default=True)]
    pages += [st.Page(_closed, title="Sign in", url_path=p) for p in APP_PATHS]
    st.navigation(pages, position="hidden")


def _log_out() -> None:
    _forget_session()
    st.logout()


def _password_gate(cfg: AuthConfig) -> None:
    if session().signed_in == _session_token(cfg):
        st.sidebar.button("Sign out", key="auth_sign_out", on_click=_sign_out)
        return
    _hide_pages()
    st.title("LIMEcraft")
    with st.form("auth_sign_in", clear_on_submit=True):
        password = st.text_input("Team password", type="password", key="auth_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        with _CHECK_LOCK:
            ok = verify_password(password, cfg.password_hash)
            if not ok:
                time.sleep(FAIL_DELAY_S)
        if ok:
            session().signed_in = _session_token(cfg)
            st.rerun()
        _log.warning("a wrong team password was entered")
        st.error(
            "Wrong password. Try again, or ask whoever runs this LIMEcraft for the team password.",
            icon=":material/lock:",
        )
    st.stop()


def _oidc_gate(cfg: AuthConfig) -> None:
    user = st.user
    if not user.get("is_logged_in", False):
        _hide_pages()
        st.title("LIMEcraft")
        st.write("Sign in to use LIMEcraft.")
        st.button(
            "Log in", key="auth_login", type="primary", on_click=st.login, args=(cfg.provider,)
        )
        st.stop()
    from .display import md

    email = user.get("email")
    # A provider that says the address is unverified cannot vouch for it.
    verified = user.get("email_verified", True) not in (False, "false")
    if not ("*" in cfg.allowed or (verified and is_allowed(email, cfg.allowed))):
        _log.warning("refused a signed-in account that is not on LIMECRAFT_ALLOWED_EMAILS")
        st.title("LIMEcraft")
        st.error(
            f"You are signed in as {md(email or 'an account without an e-mail address')}, which may "
            "not use this LIMEcraft. Log out and sign in with another account, or ask whoever "
            "runs it to add you.",
            icon=":material/block:",
        )
        st.button("Log out", key="auth_logout", on_click=_log_out)
        st.stop()
    st.sidebar.caption(f"Signed in as {md(user.get('name') or email)}")
    st.sidebar.button("Log out", key="auth_logout", on_click=_log_out)


# ----------------------------------------------------------------------------- CLI


def _read_password(confirm: bool) -> str:
    if sys.stdin.isatty():
        password = getpass.getpass("Team password: ")
        if confirm and getpass.getpass("Again: ") != password:
            raise SystemExit("auth: the two passwords differ")
        return password
    return sys.stdin.readline().rstrip("\r\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pages.lib.auth hash | verify``; the password comes from the terminal or stdin."""
    parser = argparse.ArgumentParser(
        prog="python -m pages.lib.auth", description="LIMEcraft's shared team password"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("hash", help="read a password, print its hash for " + HASH_ENV)
    sub.add_parser("verify", help=f"read a password, exit 0 if it matches ${HASH_ENV}")
    args = parser.parse_args(argv)
    password = _read_password(confirm=args.command == "hash")
    if args.command == "hash":
        try:
            print(hash_password(password))
        except ValueError as e:
            sys.stderr.write(f"auth: {e}\n")
            return 2
        return 0
    try:
        ok = verify_password(password, os.environ.get(HASH_ENV, ""))
    except AuthConfigError as e:
        sys.stderr.write(f"auth: {e}\n")
        return 2
    sys.stderr.write("auth: the password matches\n" if ok else "auth: wrong password\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
