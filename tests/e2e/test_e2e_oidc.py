"""OIDC sign-in end to end (issue 17): a real OpenID Connect provider, the app's own streamlit
server, and Debian's Chromium driven by Playwright through the provider's real redirects.

The provider is ``oidc-provider-mock`` (a real OIDC server made for tests: discovery, an
authorize page, token, userinfo, JWKS and end-session endpoints; it accepts any client id and
secret). Its users are predefined with their claims; the test types a user's subject into the
provider's own authorize form, as a person would. The app runs as
``streamlit run app.py --secrets.files <a temporary secrets.toml>``, so the repository's
``.streamlit/secrets.toml`` is neither read nor written. Screenshots go to
test-artifacts/oidc-*.jpg.
"""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import warnings

import pytest
from conftest import ARTIFACTS, _free_port, start_app, stop_app
from e2e_helpers import goto, rerun, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    # oidc-provider-mock 0.3.4 on Authlib 1.9 (in the provider's server thread, in this process):
    # not ours to fix, and an error here would be a 500 from the provider's token endpoint.
    pytest.mark.filterwarnings(r"ignore:get_jwt_config\(self, grant\) is deprecated"),
]

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

#: On the allow-list (LIMECRAFT_ALLOWED_EMAILS, set in the temporary secrets.toml).
ADA = {"sub": "ada", "email": "ada@example.org", "name": "Ada Lovelace"}
#: Signed in by the provider, but not on the allow-list.
EVE = {"sub": "eve", "email": "eve@elsewhere.com", "name": "Eve Mallory"}
ALLOWED_EMAILS = "ada@example.org, @team.example.org"

T = 90_000  # generous: a loaded 2-core machine, and the first run loads the demo model


# ----------------------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def provider():
    """The identity provider, on a free port of localhost, for this module's tests. Missing,
    it skips these tests, except in CI, where it is a failure (requirements-dev.txt has it)."""
    if os.environ.get("CI") and importlib.util.find_spec("oidc_provider_mock") is None:
        pytest.fail("oidc-provider-mock is missing: pip install -r requirements-dev.txt")
    with warnings.catch_warnings():
        pytest.importorskip("authlib.deprecate")  # its own "always" filter first, ours above it
        warnings.filterwarnings("ignore", "authlib.jose module is deprecated", DeprecationWarning)
        oidc_provider_mock = pytest.importorskip("oidc_provider_mock")
    users = [
        oidc_provider_mock.User(
            sub=u["sub"], claims={"email": u["email"], "email_verified": True, "name": u["name"]}
        )
        for u in (ADA, EVE)
    ]
    with oidc_provider_mock.run_server_in_thread(port=0, user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def oidc_app(provider, tmp_path_factory):
    """``streamlit run app.py`` in OIDC mode against the provider; its URL (on localhost, the
    host of redirect_uri, so that the identity cookie is the browser's for this origin)."""
    port = _free_port()
    folder = tmp_path_factory.mktemp("oidc-app")
    secrets_toml = folder / "secrets.toml"
    secrets_toml.write_text(
        f"""\
LIMECRAFT_AUTH = "oidc"
LIMECRAFT_ALLOWED_EMAILS = "{ALLOWED_EMAILS}"

[auth]
redirect_uri = "http://localhost:{port}/oauth2callback"
cookie_secret = "{secrets.token_hex(32)}"
client_id = "limecraft-e2e"
client_secret = "{secrets.token_hex(16)}"
server_metadata_url = "{provider}/.well-known/openid-configuration"
"""
    )
    (folder / "store").mkdir()
    env = {
        # the settings come from the secrets file above (an empty variable counts as unset)
        "LIMECRAFT_AUTH": "",
        "LIMECRAFT_ALLOWED_EMAILS": "",
        "LIMECRAFT_OIDC_PROVIDER": "",
        "LIMECRAFT_STORE_DIR": str(folder / "store"),
    }
    proc, _, _ = start_app(env, port=port, extra_args=("--secrets.files", str(secrets_toml)))
    try:
        yield f"http://localhost:{port}"
    finally:
        stop_app(proc)


# ----------------------------------------------------------------------------- helpers


def visit(page, url: str) -> None:
    """Open ``url`` and wait for the app's first script run there."""
    rerun(page, lambda: page.goto(url), timeout=T, what=f"opening {url}")


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot(page, ARTIFACTS / f"oidc-{name}.jpg", full_page=True)


def expect_sign_in_screen(page) -> None:
    """Only the sign-in: the title, one sentence and the Log in button; nothing of the app."""
    expect(page.get_by_text("Sign in to use LIMEcraft.")).to_be_visible(timeout=T)
    expect(page.locator("h1")).to_have_text("LIMEcraft")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    expect(page.get_by_role("button", name="Explain", exact=True)).to_have_count(0)
    for link in ("Explain", "Craft regions", "Inspect", "Trust", "Export", "Audit"):
        expect(page.get_by_role("link", name=link)).to_have_count(0)
    expect(page.get_by_text(re.compile("signed in as", re.I))).to_have_count(0)
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)


def log_in_at_the_provider(page, provider: str, app: str, who: dict) -> None:
    """Click the app's Log in; on the provider's own authorize page, type the subject and
    authorize; the provider redirects back to the app's callback."""
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{provider}/oauth2/authorize?**", timeout=T)
    assert page.url.startswith(f"{provider}/oauth2/authorize?"), page.url
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    expect(page.get_by_text("Client ID: limecraft-e2e")).to_be_visible()
    # the provider will send the browser back to the app's registered callback
    expect(page.get_by_text(f"You will be redirected to {app}/oauth2callback")).to_be_visible()
    page.get_by_placeholder("sub").fill(who["sub"])

    def authorize() -> None:
        page.get_by_role("button", name="Authorize", exact=True).click()
        page.wait_for_url(re.compile("^" + re.escape(app) + r"/(\?.*)?$"), timeout=T)

    # back at the app: its first script run there
    rerun(page, authorize, timeout=T, what="authorizing at the provider")


def expect_the_app(page, who: dict) -> None:
    expect(page.get_by_role("button", name="Explain", exact=True)).to_be_visible(timeout=T)
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_text(f"Signed in as {who['name']}")).to_be_visible()
    expect(sidebar.get_by_role("button", name="Log out")).to_be_visible()
    for link in ("Craft regions", "Inspect", "Trust", "Export", "Audit"):
        expect(page.get_by_role("link", name=link)).to_be_visible()
    expect(page.get_by_text("Sign in to use LIMEcraft.")).to_have_count(0)
    expect(page.get_by_text("may not use this LIMEcraft")).to_have_count(0)


def log_out_at_the_provider(page, provider: str, app: str) -> None:
    """The app's Log out goes to the provider's end-session page; ending the session there
    sends the browser back to the app."""
    page.wait_for_url(f"{provider}/oauth2/end_session?**", timeout=T)
    expect(page.get_by_role("heading", name="End Session")).to_be_visible()

    def end_session() -> None:
        page.get_by_role("button", name="End session").click()
        page.wait_for_url(re.compile("^" + re.escape(app) + r"/(\?.*)?$"), timeout=T)

    # back at the app: its first script run there
    rerun(page, end_session, timeout=T, what="ending the session at the provider")


def identity_cookies(page) -> list[str]:
    return [c["name"] for c in page.context.cookies() if c["name"].startswith("_streamlit_user")]


# ----------------------------------------------------------------------------- 1. a visitor


def test_a_visitor_sees_only_the_sign_in(page, oidc_app):
    visit(page, oidc_app)
    expect_sign_in_screen(page)
    shot(page, "1-sign-in")
    # an app page's address shows the same sign-in, not the page and not "Page not found"
    visit(page, f"{oidc_app}/craft")
    expect_sign_in_screen(page)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    assert identity_cookies(page) == []


# ----------------------------------------------------------------------------- 2 + 4. in and out


def test_an_allowed_account_signs_in_at_the_provider_and_logs_out(page, oidc_app, provider):
    visit(page, oidc_app)
    expect_sign_in_screen(page)
    log_in_at_the_provider(page, provider, oidc_app, ADA)
    expect_the_app(page, ADA)
    assert "_streamlit_user" in identity_cookies(page)
    shot(page, "2-signed-in")

    # a reload keeps the sign-in (the identity cookie), as it should
    rerun(page, page.reload, timeout=T, what="reload")
    expect_the_app(page, ADA)
    goto(page, "Craft regions")  # waits for its canvas to report its size (a rerun) too
    expect(page.get_by_role("heading", name="Craft regions")).to_be_visible(timeout=T)

    # 4. log out: through the provider's end-session page, back at the sign-in
    page.get_by_test_id("stSidebar").get_by_role("button", name="Log out").click()
    log_out_at_the_provider(page, provider, oidc_app)
    expect_sign_in_screen(page)
    assert identity_cookies(page) == []
    shot(page, "4-logged-out")
    # a reload does not sign the visitor back in, on the app's home or on a page's address
    rerun(page, page.reload, timeout=T, what="reload")
    expect_sign_in_screen(page)
    visit(page, f"{oidc_app}/craft")
    expect_sign_in_screen(page)
    assert identity_cookies(page) == []


# ----------------------------------------------------------------------------- 3. refused


def test_an_account_off_the_allow_list_is_refused_clearly(page, oidc_app, provider):
    visit(page, oidc_app)
    expect_sign_in_screen(page)
    log_in_at_the_provider(page, provider, oidc_app, EVE)
    refusal = page.get_by_test_id("stAlertContentError").get_by_test_id("stMarkdownContainer")
    expect(refusal).to_have_text(
        f"You are signed in as {EVE['email']}, which may not use this LIMEcraft. Log out and sign "
        "in with another account, or ask whoever runs it to add you.",
        timeout=T,
    )
    shot(page, "3-refused")
    expect(page.get_by_test_id("stException")).to_have_count(0)  # no traceback

    def no_app() -> None:
        expect(page.get_by_role("button", name="Explain", exact=True)).to_have_count(0)
        for link in ("Explain", "Craft regions", "Inspect", "Trust", "Export", "Audit"):
            expect(page.get_by_role("link", name=link)).to_have_count(0)
        expect(page.get_by_text(re.compile("^Signed in as"))).to_have_count(0)  # the caption
        expect(page.get_by_role("button", name="Log in")).to_have_count(0)

    no_app()
    # an app page's address: the same refusal, not the page
    visit(page, f"{oidc_app}/craft")
    expect(refusal).to_contain_text("may not use this LIMEcraft", timeout=T)
    expect(page.get_by_role("heading", name="Craft regions")).to_have_count(0)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    no_app()

    # the refusal's Log out ends the session, so that another account can sign in
    page.get_by_role("button", name="Log out").click()
    log_out_at_the_provider(page, provider, oidc_app)
    expect_sign_in_screen(page)
    assert identity_cookies(page) == []
    log_in_at_the_provider(page, provider, oidc_app, ADA)
    expect_the_app(page, ADA)
