"""What the browser tests share: one way to wait for a Streamlit rerun, and the steps every page
needs (open the app, go to a page, pick from a select box, take a screenshot).

Waiting for a rerun without guessing (see ../shared/recipes/streamlit_rerun_wait.py): after a
click or a typed value the rerun it causes may not have started yet, so "the status widget is
gone" can hold before it, and a quick rerun may never show as running in the page at all. The
server, though, starts every script run with a ``new_session`` message on the app's websocket
and ends it with ``script_finished``; the browser sends every rerun request (with the value of
every widget) as a ``rerun_script`` message on the same socket. :class:`Runs` reads both, so
:func:`rerun` can wait for the very run that an action caused. Then the test checks what the
page shows with Playwright's ``expect(...)``, which retries until it holds.

Some reruns are caused by the page itself, after the run an action caused: a custom component
reporting its first value (the drawing canvas reports its size once it is drawn; the column
probe of ``pages/lib/display.py`` reports a narrow column). Those are named with ``new=``: the
wait then lasts until each has been sent and the run it caused has finished.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from conftest import ARTIFACTS
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, expect
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

#: Generous: a loaded 2-core machine, and the first run of a fresh server loads the demo model.
T = 120_000
#: How often :func:`rerun` looks at what the websocket brought; Playwright dispatches the
#: websocket's events while the test waits in a Playwright call. A poll, not a guessed wait.
_POLL_MS = 20
_EARLY = ForwardMsg.FINISHED_EARLY_FOR_RERUN  # cut short by the next run: not the end of the work
WIDE, NARROW = 1400, 800
# Debugging (pytest -s): LIMECRAFT_E2E_RUNS=1 prints every run and request; =<pattern> also
# the values of the widgets whose id matches the pattern.
_PRINT = os.environ.get("LIMECRAFT_E2E_RUNS", "")
expect.set_options(timeout=60_000)  # what the page shows, once the run is over: retried this long


def _value(w) -> Any:
    """A widget's value as sent in a rerun request (json values decoded)."""
    kind = w.WhichOneof("value")
    if kind is None:
        return None
    v = getattr(w, kind)
    if kind == "json_value":
        try:
            return json.loads(v)
        except ValueError:
            return v
    if kind.endswith("_array_value"):
        return list(v.data)
    if kind == "file_uploader_state_value":
        return [f.name for f in v.uploaded_file_info]
    return v


class Runs:
    """The script runs of one page and the rerun requests it sent, read from its websockets.

    Every event gets a number in the order the browser saw it: ``started`` (a run began),
    ``finished`` (a run completed, not cut short by the next one) and ``sent`` (a rerun request
    and its widget values by id).
    """

    def __init__(self, page: Page) -> None:
        self.page = page
        self.seq = 0
        self.last_start = 0  # the number of the newest run's start
        self.done_start = 0  # the start number of the newest completed run
        self.sent: list[tuple[int, dict[str, Any]]] = []
        self.log: list[str] = []
        self._t0 = time.monotonic()
        page.on("websocket", self._socket)

    def _socket(self, ws) -> None:
        if not ws.url.endswith("/_stcore/stream"):
            return
        ws.on("framereceived", self._received)
        ws.on("framesent", self._sent)

    def _note(self, what: str) -> None:
        line = f"{time.monotonic() - self._t0:8.3f} #{self.seq} {what}"
        self.log.append(line)
        if _PRINT:
            print("runs:", line, flush=True)

    # A listener that raises breaks the Playwright call in progress: these never raise.
    def _received(self, payload) -> None:
        if not isinstance(payload, (bytes, bytearray)):
            return
        msg = ForwardMsg()
        try:
            msg.ParseFromString(bytes(payload))
        except Exception:
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.seq += 1
            self.last_start = self.seq
            self._note("started")
        elif kind == "script_finished":
            self.seq += 1
            status = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
            if msg.script_finished != _EARLY:
                self.done_start = self.last_start
            self._note(f"finished {status}")

    def _sent(self, payload) -> None:
        if not isinstance(payload, (bytes, bytearray)):
            return
        msg = BackMsg()
        try:
            msg.ParseFromString(bytes(payload))
        except Exception:
            return
        if msg.WhichOneof("type") != "rerun_script":
            return
        self.seq += 1
        try:
            values = {w.id: _value(w) for w in msg.rerun_script.widget_states.widgets}
        except Exception:
            values = {}
        self.sent.append((self.seq, values))
        shown = ""
        if _PRINT not in ("", "1"):
            shown = " " + str({i[-30:]: v for i, v in values.items() if re.search(_PRINT, i)})
        self._note(
            f"sent rerun ({msg.rerun_script.page_name or 'same page'}, {len(values)} widgets)"
            + shown
        )

    # ------------------------------------------------------------------------- waiting

    def _reported(self, mark: int, pattern: str) -> int | None:
        """The number of the first request after ``mark`` with a widget whose id matches
        ``pattern`` that the request before it did not have (a component's first report)."""
        rx = re.compile(pattern)
        before: dict[str, Any] = {}
        for seq, values in self.sent:
            if seq > mark and any(rx.search(i) and i not in before for i in values):
                return seq
            before = values
        return None

    def _carried(self, mark: int, key: str, want: Callable[[Any], bool]) -> int | None:
        """The number of the first request after ``mark`` with a widget whose key matches
        ``key`` (a pattern for the end of its id) and whose value passes ``want``."""
        rx = re.compile(f"-(?:{key})$")
        for seq, values in self.sent:
            if seq > mark and any(rx.search(i) and want(v) for i, v in values.items()):
                return seq
        return None

    def wait(
        self,
        mark: int,
        *,
        new: Iterable[str] = (),
        values: dict[str, Any] | None = None,
        timeout_ms: float = T,
        what: str = "",
    ) -> None:
        """Until a run that started after event ``mark`` -- and after every request named by
        ``new`` and ``values``, and after the last request sent since ``mark`` -- has
        completed."""
        deadline = time.monotonic() + timeout_ms / 1000
        wants = {
            k: (v if callable(v) else (lambda x, v=v: x == v)) for k, v in (values or {}).items()
        }
        while True:
            after = [mark]
            missing = []
            for p in new:
                seq = self._reported(mark, p)
                (after.append(seq) if seq else missing.append(f"a first value of {p!r}"))
            for k, want in wants.items():
                seq = self._carried(mark, k, want)
                (after.append(seq) if seq else missing.append(f"the value of {k!r}"))
            # and any later request the page sent by itself (a component's report): its run
            if self.sent and self.sent[-1][0] > mark:
                after.append(self.sent[-1][0])
            if not missing and self.done_start > max(after):
                return
            if time.monotonic() > deadline:
                tail = "\n".join(self.log[-25:])
                raise AssertionError(
                    f"{what or 'the action'}: no Streamlit run completed within "
                    f"{timeout_ms / 1000:.0f} s"
                    + (f" (still waiting for {', '.join(missing)})" if missing else "")
                    + f"; the websocket's last events:\n{tail}"
                )
            self.page.wait_for_timeout(_POLL_MS)


def track(page: Page) -> Page:
    """Start reading the page's script runs; call it before the page's first ``goto``. Every
    Playwright wait of the page without its own timeout (a click's, a download's, a page
    load's) lasts ``T``, as the waits for runs do, not Playwright's 30 s: on a slow machine with
    the other worker busy, a report built when its button is pressed took longer."""
    page.set_default_timeout(T)
    page._limecraft_runs = Runs(page)
    return page


def runs(page: Page) -> Runs:
    r = getattr(page, "_limecraft_runs", None)
    assert r is not None, "track(page) must come before the page opens the app"
    return r


def rerun(
    page: Page,
    action: Callable[[], Any],
    *,
    new: Iterable[str] = (),
    values: dict[str, Any] | None = None,
    timeout: float = T,
    what: str = "",
) -> None:
    """Do ``action`` (a click, a typed value, a file, a page address), then wait until the
    script run it caused has completed.

    ``new``: patterns of widget ids (custom components) whose first value the page sends by
    itself after that run; also wait for those reports and the runs they cause.
    ``values``: widget keys (patterns for the end of a widget id: the app's ``key=``) and the
    value (or a test of it) a request must carry: for an action that sends several requests,
    such as a slider moved one key press at a time.
    """
    r = runs(page)
    mark = r.seq
    action()
    r.wait(mark, new=new, values=values, timeout_ms=timeout, what=what)


def drive(
    page: Page,
    gate,
    until: Callable[[], bool],
    *,
    timeout: float = T,
    what: str = "",
    settle: bool = False,
) -> None:
    """With the model held at the gate (``gate.hold()``, a :class:`models.gate.GateFiles`): let
    it through one forward call at a time, each only when the page does not yet show what the
    test waits for (``until()`` is false) and the model waits at the gate again, until
    ``until()`` holds. The model stays held afterwards, so the page cannot run ahead of the test,
    however fast the machine. ``settle``: then also until the model waits at the gate again
    (the call let through last has finished, and what it led to has been sent to the page)."""
    deadline = time.monotonic() + timeout / 1000
    while not until() or (settle and not gate.held()):
        if gate.held() and not until():
            gate.grant(1)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what or 'the page'}: not shown after {timeout / 1000:.0f} s; the model passed "
                f"{gate.passed()} forward calls ({gate.waiting()} waiting, allowed "
                f"{gate.allowed()})"
            )
        page.wait_for_timeout(_POLL_MS)


def poll(page: Page, read: Callable[[], Any], *, timeout: float = 30_000, what: str = "") -> Any:
    """``read()``'s first result that is not None, read again every few ms for a value that
    the page computes in Python's hands (bytes fetched from the app), where ``expect`` cannot."""
    deadline = time.monotonic() + timeout / 1000
    while (value := read()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'the value'}: not read within {timeout / 1000:.0f} s")
        page.wait_for_timeout(_POLL_MS)
    return value


def start(page: Page, action: Callable[[], Any], *, what: str = "") -> Callable[..., None]:
    """Do ``action`` (one that starts a long run, such as Explain) and return a function that
    waits for that run (or the run that replaced it, after a Cancel) to complete, so that the
    test can watch the page while the run works."""
    r = runs(page)
    mark = r.seq
    action()

    def finished(timeout: float = T) -> None:
        r.wait(mark, timeout_ms=timeout, what=what)

    return finished


# ----------------------------------------------------------------------------- page steps

#: The custom components that report their first value by themselves once drawn, by page: the
#: drawing canvas (its size) and, in a narrow window, the column probe it is sized by.
CANVAS = r"-canvas-\d+$"


def _narrow(page: Page) -> bool:
    return page.viewport_size["width"] < 1000


def open_app(page: Page, url: str, width: int = WIDE, path: str = "", height: int = 1000) -> None:
    """The app at ``url/path``, ``width`` px wide, after its first run (and, in a narrow
    window, after the rerun the main area's width probe causes)."""
    page.set_viewport_size({"width": width, "height": height})
    new = [r"-main_room$"] if width < 1000 else []
    rerun(page, lambda: page.goto(f"{url}/{path}"), new=new, timeout=T, what=f"opening {url}")
    expect(page.locator("h1").first).to_be_visible()


def goto(page: Page, title: str) -> None:
    """A page of the app by its link in the navigation; waits for its heading."""
    new = []
    if title == "Craft regions":
        new = [CANVAS] + ([r"-canvas_room$"] if _narrow(page) else [])
    rerun(page, lambda: page.get_by_role("link", name=title).click(), new=new, what=title)
    heading = "LIMEcraft" if title == "Explain" else title
    expect(page.locator("h1").filter(has_text=heading).first).to_be_visible()


def pick(page: Page, option) -> None:
    """Click ``option`` in an open select box's list: a rerun, unless it is the option
    already chosen (then the list is closed, and nothing changes)."""
    expect(option).to_be_visible()
    if option.get_attribute("aria-selected") == "true":
        page.keyboard.press("Escape")
        expect(option).to_be_hidden()
    else:
        rerun(page, option.click, what=f"choosing {option}")


def choose(page: Page, label: str, option: str, *, exact: bool = True) -> None:
    """Pick ``option`` in the select box labelled ``label``."""
    page.get_by_label(label).click()
    pick(page, page.get_by_role("option", name=option, exact=exact))


def enter(page: Page, box, value: object, key: str = "Enter", *, shown: bool = True) -> None:
    """Type ``value`` into a text or number box and commit it (Enter, or Tab to leave it);
    ``shown``: the box then shows it (False where the rerun may fold the box away). The value
    the box already has sends no rerun (nothing changed): then nothing is typed."""
    expect(box).to_be_visible()
    if box.input_value() == str(value):
        return

    def act() -> None:
        box.fill(str(value))
        box.press(key)

    rerun(page, act, what=f"typing {value}")
    if shown:
        expect(box).to_have_value(str(value))


def once_more_if_lost(
    page: Page,
    act: Callable[[], Any],
    *,
    what: str,
    landed: Callable[[], bool] = lambda: False,
    again: Callable[[], bool] = lambda: True,
    retry_ms: float = 20_000,
) -> int:
    """Do ``act`` (a click, a file set on an upload control) and return the runs' mark to wait
    from. Either can be lost without a trace while the page is still drawing the element; the
    browser sends its request as the act is handled, so when no request has gone out after
    ``retry_ms`` and the act has not ``landed()`` otherwise (a file shown on the control), it is
    done once more if ``again()`` (the element still there), and the mark is from then."""
    r = runs(page)
    mark = r.seq
    act()
    deadline = time.monotonic() + retry_ms / 1000
    while not (any(seq > mark for seq, _ in r.sent) or landed()):
        if time.monotonic() > deadline:
            if again():
                r._note(f"no request {retry_ms / 1000:.0f} s after {what}: once more")
                mark = r.seq
                act()
            break
        page.wait_for_timeout(100)
    return mark


def click(
    page: Page, locator, *, timeout: float = T, new: Iterable[str] = (), retry_ms: float = 20_000
) -> None:
    """Click something that reruns the script (a button, a link, a radio option), and wait
    for that run.

    A click can be lost without a trace, as a file set on an upload control can
    (:func:`start_upload`): seen once under heavy load, "Score the findings" clicked just after
    the run that drew it, and no request went out within 120 s. Streamlit sends its request as
    the click is handled, so when nothing has been sent after ``retry_ms`` and the element is
    still there and enabled, it is clicked once more; once a request has gone out, the wait
    goes on to its full length."""

    def still_there() -> bool:
        try:
            return locator.is_visible() and locator.is_enabled()
        except PlaywrightError:  # gone, or now several: not the same element
            return False

    mark = once_more_if_lost(
        page, locator.click, what="clicking", again=still_there, retry_ms=retry_ms
    )
    runs(page).wait(mark, new=new, timeout_ms=timeout, what=f"clicking {locator}")


def images_loaded(page: Page) -> None:
    """Until every picture of the page has loaded (for a screenshot)."""
    page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=T)


#: The tests' screenshots are JPEG: for a person to look at, never compared, and about twice
#: as cheap as a PNG of the same page (1400 px wide after an Explain, medians of 10 on a loaded
#: 2-core machine: 0.40 s against 0.74 s a picture, 0.90 s against 1.86 s a tall one), over
#: about a hundred pictures a run. The README's pictures (docs/screenshots.py) stay PNG.
SHOT_QUALITY = 85


def screenshot(page: Page, path: Path, **kw) -> None:
    """``page.screenshot`` to ``path``, as JPEG (:data:`SHOT_QUALITY`) when its suffix says so."""
    if path.suffix.lower() in (".jpg", ".jpeg"):
        kw = {"type": "jpeg", "quality": SHOT_QUALITY, **kw}
    page.screenshot(path=str(path), **kw)


#: Whether :func:`shot` takes its pictures: not in CI (``CI`` set), where nobody looks at them
#: and the clone is thrown away (about 90 pictures, 40-50 s of the browser tests' time), unless
#: ``LIMECRAFT_SHOTS=1``. Run the browser tests without CI set to look at them.
SHOTS = not os.environ.get("CI") or os.environ.get("LIMECRAFT_SHOTS") == "1"


def shot(page: Page, name: str, *, tall: bool = False) -> None:
    """A screenshot under test-artifacts/, ``name``.jpg (``tall``: the whole main area,
    :func:`tall_shot`), for a person to look at; none in CI (:data:`SHOTS`)."""
    if not SHOTS:
        return
    ARTIFACTS.mkdir(exist_ok=True)
    if not tall:
        images_loaded(page)
        screenshot(page, ARTIFACTS / f"{name}.jpg", full_page=True)
        return
    tall_shot(page, ARTIFACTS / f"{name}.jpg")


def tall_shot(
    page: Page,
    path: Path,
    *,
    least: int = 600,
    most: int = 12_000,
    ready: Callable[[Page], None] = images_loaded,
) -> None:
    """The whole main area in one picture: Streamlit scrolls inside it, so the window is made
    as tall as its content (``least`` to ``most`` px) for the picture, after ``ready``. A PNG or
    a JPEG, as ``path``'s suffix says."""
    size = page.viewport_size
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " if (m) { m.scrollTo(0, 0); } window.scrollTo(0, 0);"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    page.set_viewport_size({"width": size["width"], "height": min(max(height, least), most)})
    ready(page)
    screenshot(page, path)
    page.set_viewport_size(size)


def open_expander(page: Page, label: str):
    """Open the expander titled ``label`` (a click on its title: no rerun) unless it is open
    already, and return its content. Whether it is open is read from the page (its content is
    ``inert`` while it is closed), never assumed: a click on an open expander closes it, and a
    rerun that sends the expander again can close it."""
    box = page.locator("[data-testid='stExpander']").filter(
        has=page.locator("summary", has_text=label)
    )
    content = box.first.locator("[data-testid='stExpanderDetails']").first
    if content.get_attribute("inert") is not None:
        box.first.locator("summary").first.click()
    poll(page, lambda: True if content.get_attribute("inert") is None else None, what=label)
    return content


def early_stop_off(page: Page) -> None:
    """Explain's Settings (open): untick Early stop, so that every sample is scored."""
    stop = page.get_by_role("checkbox", name="Early stop", exact=True)
    expect(stop).to_be_checked()  # on by default
    # A click under heavy load can be lost before the checkbox takes it (seen once in a full
    # run: no request went out within two minutes): when nothing was sent after 20 s and the
    # box is still ticked, it is clicked once more; once a request has gone out, or the box
    # shows unticked, the wait goes on to its full length (as upload() does for a file).
    r = runs(page)
    mark = r.seq
    stop.click(force=True)
    try:
        r.wait(mark, timeout_ms=20_000, what="unticking Early stop")
    except AssertionError:
        if any(seq > mark for seq, _ in r.sent) or not stop.is_checked():
            r.wait(mark, timeout_ms=T, what="unticking Early stop")
        else:
            r._note("no request 20 s after unticking Early stop: click again")
            mark = r.seq
            stop.click(force=True)
            r.wait(mark, timeout_ms=T, what="unticking Early stop")
    # its value box goes with it
    expect(page.get_by_role("spinbutton", name="Early stop: value")).to_have_count(0)
    expect(stop).not_to_be_checked()


def pick_sample(page: Page, name: str) -> None:
    """A picture from the sidebar's sample gallery."""
    choose(page, "Sample gallery", name)


def explain(page: Page, timeout: float = 180_000) -> None:
    """Press Explain and wait for its result."""
    click(page, page.get_by_role("button", name="Explain", exact=True), timeout=timeout)
    expect(page.get_by_text(re.compile(r"^Explained \d+ regions"))).to_be_visible()
    expect(page.get_by_text("surrogate fidelity").first).to_be_visible()


def download(page: Page, button) -> bytes:
    """The file a download button gives (pressing it also reruns the script)."""
    with page.expect_download(timeout=T) as d:
        click(page, page.get_by_role("button", name=button))
    with open(d.value.path(), "rb") as f:
        return f.read()


def uploader(page: Page, label: str):
    """The file input of the upload control whose label has ``label``."""
    return (
        page.locator("[data-testid='stFileUploader']")
        .filter(has_text=label)
        .locator("input[type=file]")
    )


def upload(
    page: Page,
    field,
    files,
    *,
    new: Iterable[str] = (),
    what: str = "",
    retry_ms: float = 20_000,
) -> None:
    """Give the upload control's file input ``field`` ``files`` (a path or a list of paths) and
    wait for the run the upload caused (and, as for :func:`rerun`, the reports named by
    ``new``): :func:`start_upload`, then its wait."""
    start_upload(page, field, files, new=new, what=what, retry_ms=retry_ms)()


def start_upload(
    page: Page,
    field,
    files,
    *,
    new: Iterable[str] = (),
    what: str = "",
    retry_ms: float = 20_000,
) -> Callable[..., None]:
    """:func:`start` for an upload: give the upload control's file input ``field`` ``files`` and
    return the function that waits for the run it causes (and the reports named by ``new``), so
    that the test can watch the page while that run works.

    The control's button is waited for first. A file set on the input while the page is still
    rendering the control can be lost without a trace: seen once under heavy load, when no
    request at all went out within two minutes. So when nothing has been sent after
    ``retry_ms`` and the control lists none of the files, they are set once more; once a request
    has gone out, or a file shows, the wait goes on to its full length."""
    box = field.locator("xpath=ancestor::*[@data-testid='stFileUploader'][1]")
    expect(box.get_by_role("button").first).to_be_enabled()
    names = [os.path.basename(str(f)) for f in (files if isinstance(files, list) else [files])]
    listed = box.locator("[data-testid='stFileChipName']").filter(
        has_text=re.compile("|".join(re.escape(n) for n in names))
    )
    mark = once_more_if_lost(
        page, lambda: field.set_input_files(files), what=f"setting {names}",
        landed=lambda: listed.count() > 0, retry_ms=retry_ms,
    )  # fmt: skip

    def finished(timeout: float = T) -> None:
        runs(page).wait(mark, new=new, timeout_ms=timeout, what=what)

    return finished
