"""The session's analysis: one value, its actions, its file format, and the app flows around it
(saved as you work, reloaded, owned, kept when the image changes, exported and restored)."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import image_uploader
from PIL import Image
from streamlit.testing.v1 import AppTest
from toys import LinearPixels

import limecraft_core as lc
from limecraft_core.edits import Edit, apply_edits
from models.samples import load_sample, sample_names
from pages.lib import analysis as A
from pages.lib import analysis_file as AF

APP = str(Path(__file__).resolve().parents[2] / "app.py")
CRAFT = "pages/app_pages/craft.py"
EXPLAIN = "pages/app_pages/explain.py"
INSPECT = "pages/app_pages/inspect.py"
EXPORT = "pages/app_pages/export.py"


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


# ----------------------------------------------------------------------------- the value


def _explained(image: np.ndarray, regions: lc.Regions) -> lc.Explanation:
    model = LinearPixels(image.shape[:2], classes=3)
    return lc.explain(image, model, segments=regions, samples=60, seed=0, repeats=2)


@pytest.fixture
def full(quadrants) -> A.Analysis:
    """An analysis with every part filled in."""
    a = A.new(quadrants, "quad.png", source="upload")
    a.id = "not-saved-in-the-file"
    m = np.zeros(quadrants.shape[:2], bool)
    m[2:10, 2:10] = True
    A.add_region(a, m, "square")
    m2 = np.zeros_like(m)
    m2[20:30, 20:30] = True
    A.add_region(a, m2, "")
    A.set_segmentation(a, A.SegSettings("grid", 9, "segment", ()))
    seg = A.segmentation_config(a)
    regions, _ = lc.prepare_regions(
        lc._validate.as_float_image(quadrants),
        seg,
        regions_mask=[h.mask for h in a.hand],
        names=[h.name for h in a.hand],
    )
    A.merge(a, regions, [2, 3], "pair")
    A.apply_edit(a, Edit("color", 0, hue=60))
    A.apply_edit(a, Edit("move", 1, dx=3, dy=-2, fill="gray"))
    merged = lc.merge_by_keys(regions, a.merges[0].keys, "pair")
    cfg = A.APP_CONFIG.replace(samples=60, repeats=2)
    ex = _explained(quadrants, merged)
    A.set_explanation(a, ex, cfg)
    a.trust_explanation = ex
    edited = apply_edits(quadrants, merged.labels, a.edits)
    A.set_edited(a, edited.image, _explained(edited.image, lc.regions_from_labels(edited.labels)))
    a.selected = frozenset({"auto:1"})
    return a


def test_a_watermark_edit_survives_the_analysis_file():
    """Saved and read back as every edit is, its opacity and text size with it."""
    a = A.new(np.zeros((64, 64, 3), np.uint8), "w.png", source="upload")
    A.apply_edit(a, Edit("watermark", 0, opacity=0.8, text_size=40))
    back = AF.from_json(AF.to_json(a))
    assert back.edits == a.edits and back.edits[0].opacity == 0.8
    assert back.edits[0].text_size == 40


def test_each_regions_origin_reaches_the_regions_and_survives_the_file(quadrants):
    from pages.lib import caches

    a = A.new(quadrants, "quad.png", source="upload")
    m = np.zeros(quadrants.shape[:2], bool)
    m[2:10, 2:10] = True
    A.add_region(a, m, "drawn one")
    A.add_region(a, ~m, "mask.png 2", "uploaded")
    with pytest.raises(lc.LimecraftError, match="origin"):
        A.add_region(a, m, "odd", "superpixel")
    assert caches.regions(a).origins[:2] == ("drawn", "uploaded")
    d = json.loads(AF.to_json(a))
    assert [r["origin"] for r in d["regions"]] == ["drawn", "uploaded"]
    assert [h.origin for h in AF.from_json(json.dumps(d)).hand] == ["drawn", "uploaded"]
    for r in d["regions"]:  # a file saved before origins were recorded
        del r["origin"]
    assert [h.origin for h in AF.from_json(json.dumps(d)).hand] == ["drawn", "drawn"]


def test_the_value_round_trips_with_edits_and_results(full):
    text = AF.to_json(full)
    d = json.loads(text)
    assert d["format"] == "limecraft-analysis" and d["format_version"] == 1
    assert "not-saved-in-the-file" not in text  # the id is the store's, not the value's
    back = AF.from_json(text)
    assert np.array_equal(back.image, full.image) and back.image_name == "quad.png"
    assert [(h.name, h.inner, h.colour, h.uid) for h in back.hand] == [
        (h.name, h.inner, h.colour, h.uid) for h in full.hand
    ]
    assert all(np.array_equal(b.mask, f.mask) for b, f in zip(back.hand, full.hand, strict=True))
    assert back.hand[1].name == "region 2"
    assert back.merges == full.merges and back.merges[0].name == "pair"
    assert back.seg == full.seg and back.selected == full.selected
    assert back.edits == full.edits
    assert back.config == full.config
    for got, want in (
        (back.explanation, full.explanation),
        (back.trust_explanation, full.trust_explanation),
        (back.edited_explanation, full.edited_explanation),
    ):
        assert np.array_equal(got.class_weights, want.class_weights)
        assert got.region_names == want.region_names and got.config == want.config
        assert got.trust.stability.verdict == want.trust.stability.verdict
    assert np.array_equal(back.edited_image, full.edited_image)
    assert AF.to_json(back) == text  # the same value again: the same text


def test_the_fingerprint_follows_every_change(full):
    before = AF.fingerprint(full)
    full.hand[0].mask[0, 0] = True
    assert AF.fingerprint(full) != before
    before = AF.fingerprint(full)
    A.undo_edit(full)
    assert AF.fingerprint(full) != before
    before = AF.fingerprint(full)
    full.message = "session only"
    full.canvas_version += 1
    assert AF.fingerprint(full) == before


def test_actions_keep_the_value_consistent(quadrants):
    a = A.new(quadrants, "q")
    with pytest.raises(lc.LimecraftError, match="Nothing is drawn"):
        A.add_region(a, np.zeros((32, 32), bool))
    with pytest.raises(lc.LimecraftError, match="32x32"):
        A.add_region(a, np.ones((8, 8), bool))
    h = A.add_region(a, np.eye(32, dtype=bool), "diagonal")
    a.selected = frozenset({"auto:0"})
    A.update_region(a, h.uid, "line", 3)
    assert a.hand[0].name == "line" and a.hand[0].inner == 3 and not a.selected
    assert A.segmentation_config(a).inner_segments == (3,)
    assert A.segmentation_config(a, handcrafted=False).inner_segments is None
    ex = _explained(quadrants, lc.regions_from_labels(np.arange(32 * 32).reshape(32, 32) // 256))
    A.set_explanation(a, ex, A.APP_CONFIG)
    A.set_model(a, "another")
    assert a.explanation is None  # the results were the old model's
    A.delete_region(a, h.uid)
    assert a.hand == [] and not A.has_work(a)
    assert A.summary(a) == "q · no changes"


def test_a_plain_explanation_restores_with_its_regions_and_settings(quadrants):
    a = A.new(quadrants, "q")
    labels = np.arange(32 * 32).reshape(32, 32) // 256
    ex = _explained(quadrants, lc.regions_from_labels(labels, ["a", "b", "c", "d"]))
    ex = lc.Explanation.from_json(ex.to_json())
    A.restore_explanation(a, ex)
    assert a.restored.names == ("a", "b", "c", "d") and a.explanation is ex
    assert a.config.sampling.samples == 60  # within the app's range (50..20000)
    big = A.new(np.zeros((40, 40, 3), np.uint8), "other")
    with pytest.raises(lc.LimecraftError, match="load the same image first"):
        A.restore_explanation(big, ex)


def _bad(full, change) -> str:
    d = json.loads(AF.to_json(full))
    change(d)
    return json.dumps(d)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(format="something"), "not a LIMEcraft analysis"),
        (lambda d: d.update(format_version=99), "format_version"),
        (lambda d: d["image"].update(png="!!!"), "not base64"),
        (lambda d: d["image"].update(png="aGVsbG8="), "image"),
        (lambda d: d["regions"][0].update(mask=d["image"]["tag_mask"] or "eA=="), "mask"),
        (lambda d: d["regions"][0].update(colour="chartreuse"), "colour"),
        (lambda d: d["regions"][0].update(inner=10**9), "inner"),
        (lambda d: d["regions"][0].update(uid="../x"), "uid"),
        (lambda d: d["segmentation"].update(method="magic"), "segmentation method"),
        (lambda d: d["segmentation"].update(params=[["evil", 1]]), "params"),
        (lambda d: d["edits"][0].update(hue=999), "hue"),
        (lambda d: d["edits"][0].update(__class__="x"), "unknown field"),
        (lambda d: d["settings"]["sampling"].update(samples="many"), "settings"),
        (lambda d: d["results"]["explanation"].update(classes=[]), "results.explanation"),
        (lambda d: d.update(edits=[d["edits"][0]] * (A.MAX_EDITS + 1)), "at most"),
        (lambda d: d.update(regions={"not": "a list"}), "regions must be a list"),
    ],
)
def test_a_bad_file_is_refused_with_a_clear_message(full, change, says):
    with pytest.raises(lc.LimecraftError, match=says):
        AF.from_json(_bad(full, change))


def test_a_mask_that_would_inflate_past_the_pixel_limit_is_refused_unread(full):
    import base64
    import io

    buf = io.BytesIO()
    np.savez_compressed(buf, a=np.zeros((8000, 8000), bool))  # 64 MP: over MAX_PIXELS
    bomb = base64.b64encode(buf.getvalue()).decode()
    text = _bad(full, lambda d: d["regions"][0].update(mask=bomb))
    with pytest.raises(lc.LimecraftError, match="at most"):
        AF.from_json(text)
    with pytest.raises(lc.LimecraftError, match=r"nested too deeply|not a JSON"):
        AF.from_json("[" * 100_000)


# ----------------------------------------------------------------------------- app flows


def run_app(query: dict | None = None, user=None, secrets=None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    if secrets is not None:
        at.secrets.update(secrets)
    if user is not None:
        at.user = user
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def button(at, label):
    return next(b for b in at.button if b.label == label)


def widget(widgets, label):
    """The widget with this label (widgets that show the analysis have per-analysis keys)."""
    return next(w for w in widgets if w.label == label)


def setting(at, name: str):
    """A settings widget (its key carries the analysis view after a switch: set_NAME-N)."""
    return next(w for w in at.number_input if w.key.split("-")[0] == f"set_{name}")


def image_captions(at) -> list[str]:
    """The captions of every picture on the page (st.image has no AppTest accessor)."""
    out = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if type(child).__name__ == "Image":
                out.extend(i.caption for i in child.proto.imgs)
            walk(child)

    walk(at._tree)
    return out


def explain(at, samples: int = 100, repeats: int = 1) -> lc.Explanation:
    at.switch_page(EXPLAIN).run()
    setting(at, "samples").set_value(samples)
    setting(at, "repeats").set_value(repeats)
    at.run()
    button(at, "Explain").click().run()
    assert not at.exception, at.exception
    return at.session_state["limecraft_session"].app.explanation


@pytest.mark.slow
@pytest.mark.parametrize("method", lc.SEGMENTERS)
def test_the_recorded_segmentation_is_the_one_chosen_on_craft(method):
    at = run_app()
    at.switch_page(CRAFT).run()
    widget(at.selectbox, "Superpixels").set_value(method)
    widget(at.slider, "Target number of regions").set_value(12)
    at.run()
    assert not at.exception, at.exception
    ex = explain(at)
    seg = ex.config.segmentation
    assert seg.method == method and seg.n_segments == 12
    assert seg.working_size == A.working_size(method)
    assert ex.run.handcrafted == 0
    # the CLI's own region stage, given the recorded settings, makes the same regions
    s = at.session_state["limecraft_session"].app
    again, _ = lc.prepare_regions(lc._validate.as_float_image(s.image), seg)
    assert np.array_equal(again.labels, ex.segments)


@pytest.mark.slow
def test_handcrafted_regions_are_recorded_and_survive_export_and_restore():
    at = run_app()
    at.switch_page(CRAFT).run()
    widget(at.selectbox, "Superpixels").set_value("grid")
    at.run()
    button(at, "Add the tag as a region").click().run()
    ex = explain(at)
    seg = ex.config.segmentation
    assert seg.method == "grid" and seg.inner_segments == (1,) and seg.outer_segments == 40
    assert ex.run.handcrafted == 1 and ex.region_names[0] == "tag"
    text = AF.to_json(at.session_state["limecraft_session"].app)

    other = run_app()
    other.switch_page(EXPORT).run()
    other.file_uploader(key="restore_upload").set_value(
        ("a.json", text.encode(), "application/json")
    ).run()
    assert not other.exception, other.exception
    s = other.session_state["limecraft_session"].app
    assert [h.name for h in s.hand] == ["tag"] and s.seg.method == "grid"
    assert np.array_equal(s.explanation.class_weights, ex.class_weights)
    other.switch_page(EXPLAIN).run()
    assert any("(1 handcrafted, grid superpixels)" in c for c in image_captions(other))
    again = explain(other)
    assert again.config.segmentation == seg and again.run.handcrafted == 1
    assert np.array_equal(again.segments, ex.segments)


@pytest.mark.slow
def test_a_restored_plain_explanation_counts_its_handcrafted_regions():
    at = run_app()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    ex = explain(at)
    other = run_app()
    other.switch_page(EXPORT).run()
    other.file_uploader(key="restore_upload").set_value(
        ("e.json", ex.to_json().encode(), "application/json")
    ).run()
    other.switch_page(EXPLAIN).run()
    assert not other.exception
    assert any("(1 handcrafted" in c for c in image_captions(other))
    assert any("1 handcrafted" in s.value for s in other.success)


@pytest.mark.slow
def test_a_reload_brings_the_analysis_back():
    at = run_app()
    aid = (
        at.query_params["a"][0] if isinstance(at.query_params["a"], list) else at.query_params["a"]
    )
    assert len(aid) * 6 >= 128
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.text_input(key=f"hname-{at.session_state['limecraft_session'].app.hand[0].uid}").input(
        "the tag"
    ).run()
    at.switch_page(INSPECT).run()
    at.radio(key="edit_kind").set_value("remove").run()
    button(at, "Apply edit").click().run()
    ex = explain(at)

    again = run_app({"a": aid})  # a new session on the same URL: what a reload is
    s = again.session_state["limecraft_session"].app
    assert s.id == aid and [h.name for h in s.hand] == ["the tag"]
    assert [e.kind for e in s.edits] == ["remove"]
    assert np.array_equal(s.explanation.class_weights, ex.class_weights)
    assert any("surrogate fidelity" in m.value for m in again.markdown)
    # an id that is not saved: a plain message and a fresh analysis
    lost = run_app({"a": "x" * 32})
    assert lost.session_state["limecraft_session"].app.hand == []
    assert any("not saved here" in e.value for e in lost.main.error)


OIDC = {
    "auth": {
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "cookie_secret": "a-test-cookie-secret-of-some-length",
        "client_id": "test-client",
        "client_secret": "test-secret",
        "server_metadata_url": "https://id.example.org/.well-known/openid-configuration",
    }
}


@pytest.mark.slow
def test_an_analysis_opens_only_for_the_account_that_made_it(monkeypatch):
    monkeypatch.setenv("LIMECRAFT_AUTH", "oidc")
    monkeypatch.setenv("LIMECRAFT_ALLOWED_EMAILS", "@example.org")
    ada = {"is_logged_in": True, "email": "ada@example.org", "name": "Ada"}
    eve = {"is_logged_in": True, "email": "eve@example.org", "name": "Eve"}
    at = run_app(user=ada, secrets=OIDC)
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.run()
    aid = at.session_state["limecraft_session"].app.id

    stranger = run_app({"a": aid}, user=eve, secrets=OIDC)
    s = stranger.session_state["limecraft_session"].app
    assert s.hand == [] and s.id != aid  # nothing of Ada's
    assert any("belongs to another account" in e.value for e in stranger.main.error)
    stranger.run()
    assert (
        run_app({"a": aid}, user=ada, secrets=OIDC)
        .session_state["limecraft_session"]
        .app.hand[0]
        .name
        == "tag"
    )


@pytest.mark.slow
def test_signing_out_forgets_the_analysis(monkeypatch):
    from pages.lib import auth

    password = "correct horse battery staple"
    monkeypatch.setenv("LIMECRAFT_AUTH", "password")
    monkeypatch.setenv("LIMECRAFT_PASSWORD_HASH", auth.hash_password(password))
    at = run_app()
    at.text_input(key="auth_password").input(password)
    at.button[0].click().run()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    old = at.session_state["limecraft_session"].app.id
    at.sidebar.button(key="auth_sign_out").click().run()
    assert "app" not in at.session_state and "a" not in at.query_params
    assert [b.label for b in at.button] == ["Sign in"]
    at.text_input(key="auth_password").input(password)
    at.button[0].click().run()
    s = at.session_state["limecraft_session"].app
    assert s.hand == [] and s.id != old


@pytest.mark.slow
def test_a_new_image_keeps_the_previous_analysis_in_recent():
    at = run_app()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    first = at.session_state["limecraft_session"].app
    photo = load_sample("coffee").image[:120, :160]
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, format="PNG")
    image_uploader(at).set_value(("coffee.png", buf.getvalue(), "image/png")).run()
    assert not at.exception, at.exception
    s = at.session_state["limecraft_session"].app
    assert s.image_name == "coffee.png" and s.hand == [] and s.id != first.id
    back = [b for b in at.sidebar.button if b.label.startswith(first.image_name)]
    assert back and "1 region" in back[0].label
    back[0].click().run()
    s = at.session_state["limecraft_session"].app
    assert s.id == first.id and [h.name for h in s.hand] == ["tag"]
    # the uploaded image waits in the list too (it cannot be picked from the gallery again)
    assert any(b.label.startswith("coffee.png · no changes") for b in at.sidebar.button)
    # and this one, with work, waits in the list when the gallery changes the image
    widget(at.selectbox, "Sample gallery").set_value(sample_names()[1]).run()
    assert at.session_state["limecraft_session"].app.image_name == sample_names()[1]
    widget(at.selectbox, "Sample gallery").set_value(sample_names()[0]).run()
    s = at.session_state["limecraft_session"].app
    assert s.id == first.id and [h.name for h in s.hand] == ["tag"]


def _upload(at, name: str, seed: int) -> None:
    """A new small photo through the sidebar's uploader."""
    noise = np.random.default_rng(seed).integers(0, 256, (64, 80, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, format="PNG")
    image_uploader(at).set_value((name, buf.getvalue(), "image/png")).run()
    assert not at.exception, at.exception


def _recent(at) -> list:
    return at.session_state["limecraft_session"].recent


def test_the_recent_list_comes_back_after_a_page_change_and_a_reload_and_keeps_the_work(
    tmp_path,
):
    """Issue 48, item 3: the list is saved beside the current analysis (the address keeps only
    ``a=``, which every page keeps), so a reload after a page change brings it back; a burst
    of uploads moves untouched entries under "More" before the crafted one, and an entry
    under More opens from the store."""
    from pages.lib.state import Store, StoreConfig

    at = run_app()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    worked = at.session_state["limecraft_session"].app.id
    for i in range(7):
        _upload(at, f"quick-{i}.png", seed=i)
    ids = [r.id for r in _recent(at)]
    assert len(ids) == 7 and worked in ids  # six uploads and the crafted one: none forgotten
    shown = [b.label for b in at.sidebar.expander[-1].button]
    top = [b.label for b in at.sidebar.button if "·" in b.label and b.label not in shown]
    # the crafted analysis is shown as a button; the two oldest untouched uploads are under More
    assert top[-1] == f"{sample_names()[0]} · 1 region" and len(top) == 5
    assert shown == ["quick-1.png · no changes", "quick-0.png · no changes"]
    assert at.sidebar.expander[-1].label == "More (2)"
    at.switch_page(INSPECT).run()  # a page change: Streamlit's navigation drops other params
    assert "r" not in at.query_params

    again = run_app({"a": at.query_params["a"]})  # a new session on the address: a reload
    assert [r.id for r in _recent(again)] == ids
    next(b for b in again.sidebar.button if b.label.startswith("quick-0.png")).click().run()
    s = again.session_state["limecraft_session"].app
    assert s.image_name == "quick-0.png" and s.id in ids
    back = next(b for b in again.sidebar.button if b.label.startswith(sample_names()[0]))
    back.click().run()
    s = again.session_state["limecraft_session"].app
    assert s.id == worked and [h.name for h in s.hand] == ["tag"]

    # an entry whose analysis left the store (expired) says so when picked, and leaves the list
    gone = next(r for r in _recent(again) if r.summary.startswith("quick-3.png"))
    Store(StoreConfig.from_env()).delete(gone.id)
    again.session_state["limecraft_session"].recent = [
        r if r.id != gone.id else type(r).from_dict(r.to_dict()) for r in _recent(again)
    ]  # as after a reload: not held in memory
    next(b for b in again.sidebar.button if b.label.startswith("quick-3.png")).click().run()
    assert gone.id not in [r.id for r in _recent(again)]
    said = [e.value for e in again.error if "is no longer saved here" in e.value]
    assert said and "quick" in said[0] and "it left the list of recent analyses" in said[0]


def _entry(name: str, work: int):
    from pages.lib.state import Recent

    return Recent(name, name, work, name, "k", "m")


def test_the_recent_list_is_cut_by_work_then_age_and_keeps_the_newest():
    from pages.lib.state import kept, shown

    # newest first: three explained uploads, a crafted analysis, two more explained uploads
    rec = [_entry("u5", 1), _entry("u4", 1), _entry("u3", 1), _entry("crafted", 5)]
    rec += [_entry("u2", 1), _entry("u1", 1), _entry("idle", 0)]
    top, more = shown(rec, most=3)
    assert [r.id for r in top] == ["u5", "u4", "crafted"]  # more work outranks newer results
    assert [r.id for r in more] == ["u3", "u2", "u1", "idle"]  # the rest, newest first
    assert [r.id for r in kept(rec, most=5)] == ["u5", "u4", "u3", "crafted", "u2"]
    # the newest entry (the one just left) is always shown, even with the least work
    assert [r.id for r in shown([_entry("new", 0), *rec[:3]], most=2)[0]] == ["new", "u5"]
    assert kept(rec, most=7) == rec and shown(rec, most=0)[0] == rec[:1]


def test_work_counts_each_kind_of_work_and_the_summary_names_it(quadrants):
    a = A.new(quadrants, "q")
    assert A.work(a) == 0 and not A.has_work(a) and A.summary(a) == "q · no changes"
    A.add_region(a, np.eye(32, dtype=bool), "diagonal")
    ex = _explained(quadrants, lc.regions_from_labels(np.arange(32 * 32).reshape(32, 32) // 256))
    a.explanation, a.trust_explanation, a.explanation_auto = ex, ex, ex
    assert A.work(a) == 4  # regions, results, Trust, Compare
    assert A.summary(a) == "q · 1 region, results, Trust, Compare"
    results_only = A.new(quadrants, "r")
    results_only.explanation = ex
    assert A.work(results_only) == 1 < A.work(a)
    # a kept paste is one more kind of work (issue 48, item 2)
    result = lc.Insertion(
        1, np.zeros(1), np.ones(1), np.zeros(1, int), np.ones(1, int), np.zeros(1, bool)
    )
    A.set_paste(a, A.Paste("0 diagonal", np.eye(32, dtype=bool), ("x",), result, (quadrants,)))
    assert A.work(a) == 5 and A.summary(a) == "q · 1 region, results, Trust, Compare, paste"


def test_a_recent_entry_read_back_from_the_store_is_checked():
    from pages.lib.state import Recent

    r = _entry("x" * 32, 2)
    assert Recent.from_dict(r.to_dict()) == r
    bad = [None, [], {**r.to_dict(), "work": "2"}, {**r.to_dict(), "work": True}]
    bad += [{**r.to_dict(), "id": 3}, {k: v for k, v in r.to_dict().items() if k != "summary"}]
    assert [Recent.from_dict(d) for d in bad] == [None] * len(bad)


@pytest.mark.slow
def test_a_new_image_keeps_the_settings_and_says_so_beside_explain():
    """Issue 48, item 5: the settings go with the analyst to the next image, and the page says
    so (beside Explain and on the closed Settings box), with one click back to the defaults."""
    from pages.lib.display import md

    at = run_app()
    at.switch_page(EXPLAIN).run()
    assert not [c for c in at.caption if "Settings" in c.value]
    assert at.expander[0].label == "Settings"
    setting(at, "samples").set_value(3000)
    at.checkbox(key="set_early_stop_on").uncheck().run()
    assert any(
        c.value.endswith("Settings not the defaults: Samples 3000, Early stop off.]")
        for c in at.caption
    )
    first = at.session_state["limecraft_session"].app.image_name
    widget(at.selectbox, "Sample gallery").set_value("chelsea").run()
    s = at.session_state["limecraft_session"].app
    assert s.image_name == "chelsea" and s.config.sampling.samples == 3000
    said = f"Settings carried over from {md(first)}: Samples 3000, Early stop off."
    assert any(said in c.value for c in at.caption)
    assert at.expander[0].label == "Settings · not the defaults"
    button(at, "Back to the defaults").click().run()
    s = at.session_state["limecraft_session"].app
    assert s.config == A.APP_CONFIG and at.expander[0].label == "Settings"
    assert setting(at, "samples").value == A.APP_CONFIG.sampling.samples
    assert not [c for c in at.caption if "Settings" in c.value]


@pytest.mark.slow
def test_switching_gallery_images_and_back_keeps_the_results():
    at = run_app()
    ex = explain(at)
    widget(at.selectbox, "Sample gallery").set_value("chelsea").run()
    assert at.session_state["limecraft_session"].app.explanation is None
    widget(at.selectbox, "Sample gallery").set_value(sample_names()[0]).run()
    assert at.session_state["limecraft_session"].app.explanation is ex
    assert any("surrogate fidelity" in m.value for m in at.markdown)


@pytest.mark.slow
def test_start_fresh_starts_a_new_analysis_and_keeps_the_old_one():
    at = run_app()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    old = at.session_state["limecraft_session"].app.id
    at.sidebar.button(key="start_fresh").click().run()
    s = at.session_state["limecraft_session"].app
    assert s.hand == [] and s.id != old and at.query_params["a"] in (s.id, [s.id])
    assert any("1 region" in b.label for b in at.sidebar.button)


@pytest.mark.slow
def test_inspect_apply_resets_the_pending_edit_and_reexplains_the_preview():
    at = run_app({})
    widget(at.selectbox, "Sample gallery").set_value("demo-conflict-2").run()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.switch_page(INSPECT).run()
    assert at.radio(key="edit_kind").value == "no change" and button(at, "Apply edit").disabled
    at.radio(key="edit_kind").set_value("colour").run()
    at.slider(key="e_hue-0").set_value(60).run()
    assert any("now" in m.value for m in at.markdown if m.value.startswith("Top class:"))
    button(at, "Apply edit").click().run()
    s = at.session_state["limecraft_session"].app
    assert [e.describe() for e in s.edits] == ["recolour region 0 (hue +60°)"]
    # the pending edit is "no change" again: nothing to apply twice
    assert at.radio(key="edit_kind").value == "no change" and button(at, "Apply edit").disabled
    at.radio(key="edit_kind").set_value("colour").run()
    hue = next(sl for sl in at.slider if sl.label == "Hue (degrees)")
    assert hue.value == 0 and hue.key != "e_hue-0"  # the pending controls start from no change
    at.radio(key="edit_kind").set_value("no change").run()
    assert any("tag" in m.value for m in at.markdown if "Applied edits" in m.value)
    button(at, "Explain the edited image").click().run()
    assert not at.exception, at.exception
    labels = lc.prepare_regions(
        lc._validate.as_float_image(s.image),
        A.segmentation_config(s),
        regions_mask=[h.mask for h in s.hand],
        names=[h.name for h in s.hand],
    )[0].labels
    want = apply_edits(s.image, labels, [Edit("color", 0, hue=60)]).image
    assert np.array_equal(s.edited_image, want)
    assert len(s.edits) == 1
    assert "the explained image" in image_captions(at)
    # undo: the explanation no longer matches the preview, and says so
    button(at, "Undo").click().run()
    assert any("differs from the preview" in i.value for i in at.info)
    # another image: no stale message about the other analysis' edits
    widget(at.selectbox, "Sample gallery").set_value("chelsea").run()
    at.run()
    assert not any("differs from the preview" in i.value for i in at.info)


@pytest.mark.slow
def test_apply_applies_the_value_the_press_carries_not_the_one_drawn_last():
    """A slider moved and Apply pressed before the run for the slider's last value had drawn
    the button again (a fast analyst; CI's browser once applied hue +55 for +60): the press
    carries the slider's value, and that is the edit applied, not the button's older one; an
    edit that changes nothing by then is not stacked."""
    at = run_app({})
    widget(at.selectbox, "Sample gallery").set_value("demo-conflict-2").run()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.switch_page(INSPECT).run()
    at.radio(key="edit_kind").set_value("colour").run()
    at.slider(key="e_hue-0").set_value(30).run()  # the button is drawn with hue +30
    at.slider(key="e_hue-0").set_value(60)  # moved again, and pressed before any run
    button(at, "Apply edit").click().run()
    assert not at.exception, at.exception
    s = at.session_state["limecraft_session"].app
    assert [e.describe() for e in s.edits] == ["recolour region 0 (hue +60°)"]
    # and "no change" chosen, then Apply pressed with the button still drawn enabled: nothing
    at.radio(key="edit_kind").set_value("colour").run()
    hue = next(sl for sl in at.slider if sl.label == "Hue (degrees)")
    hue.set_value(20).run()
    at.radio(key="edit_kind").set_value("no change")
    button(at, "Apply edit").click().run()
    assert not at.exception, at.exception
    assert len(s.edits) == 1
    # and the slider moved back to 0 before the press: an edit that changes nothing, not stacked
    at.radio(key="edit_kind").set_value("colour").run()
    key = next(sl.key for sl in at.slider if sl.label == "Hue (degrees)")
    at.slider(key=key).set_value(20).run()
    at.slider(key=key).set_value(0)
    button(at, "Apply edit").click().run()
    assert not at.exception, at.exception
    assert len(s.edits) == 1


#: One change per edit kind, from the Inspect page's controls (widget key prefix, value).
EDIT_CHANGES = {
    "colour": ("e_hue", 60),
    "move": ("e_dx", -6),
    "rotate": ("e_angle", 30),
    "scale": ("e_factor", 1.5),
    "blur": ("e_sigma", 6.0),
    "remove": ("e_fill", "mean"),  # again: black (the mean of a mean-filled region is itself)
    "watermark": ("e_wm_opacity", 0.8),
}


KINDS_BY_LABEL = {"colour": "color"} | {k: k for k in EDIT_CHANGES if k != "colour"}


@pytest.mark.parametrize("kind", list(EDIT_CHANGES))
def test_apply_then_apply_again_edits_once_per_press(kind):
    """Issue 48: after Apply the pending edit is "no change", for every kind (a remove or a
    watermark edit has no slider to reset: it came back as a second, pending edit). The preview,
    the prediction and the re-explanation are those of the applied edits only; Apply again
    (the kind chosen again) applies a second one."""
    at = run_app({})
    widget(at.selectbox, "Sample gallery").set_value("demo-conflict-2").run()
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.switch_page(INSPECT).run()
    prefix, value = EDIT_CHANGES[kind]

    def change(value=value) -> None:
        at.radio(key="edit_kind").set_value(kind).run()
        controls = [*at.slider, *at.selectbox, *at.number_input]
        control = next(w for w in controls if str(w.key).startswith(prefix + "-"))
        control.set_value(value).run()
        button(at, "Apply edit").click().run()
        assert not at.exception, at.exception

    change()
    s = at.session_state["limecraft_session"].app
    assert [e.kind for e in s.edits] == [KINDS_BY_LABEL[kind]]
    assert at.radio(key="edit_kind").value == "no change" and button(at, "Apply edit").disabled
    button(at, "Explain the edited image").click().run()
    assert not at.exception, at.exception
    labels = lc.prepare_regions(
        lc._validate.as_float_image(s.image),
        A.segmentation_config(s),
        regions_mask=[h.mask for h in s.hand],
        names=[h.name for h in s.hand],
    )[0].labels
    once = apply_edits(s.image, labels, s.edits).image
    assert np.array_equal(s.edited_image, once)  # explained: the applied edit, once
    assert not any("differs from the preview" in i.value for i in at.info)
    change("black" if kind == "remove" else value)
    assert [e.kind for e in s.edits] == [KINDS_BY_LABEL[kind]] * 2
    assert len(A.edit_names(s, ("tag",))) == 2


def test_each_image_is_encoded_once_however_often_the_analysis_is_saved(monkeypatch):
    """A large photo takes seconds to encode, and the analysis is saved after every run that
    changed it: the image's PNG is found again by its content, and a changed image is new."""
    import base64

    encoded = []
    real = AF.encode_png
    monkeypatch.setattr(AF, "encode_png", lambda im, **kw: encoded.append(1) or real(im, **kw))
    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    first = AF._b64_png(image)
    assert AF._b64_png(image) is first and AF._b64_png(image.copy()) is first
    assert len(encoded) == 1
    with Image.open(io.BytesIO(base64.b64decode(first))) as im:
        assert np.array_equal(np.asarray(im), image)  # lossless at the fast level
    changed = image.copy()
    changed[0, 0] ^= 1
    assert AF._b64_png(changed) != first and len(encoded) == 2


def test_settings_typed_before_any_explain_come_back_after_a_reload():
    """Issue 29, item 4: Samples 500 and Seed 7 typed, no Explain, then F5: the boxes show 500
    and 7 (they were the last Explain's values before). An Explain afterwards runs with them."""
    at = run_app()
    aid = at.session_state["limecraft_session"].app.id
    setting(at, "samples").set_value(500).run()
    setting(at, "seed").set_value(7).run()
    assert at.session_state["limecraft_session"].app.explanation is None
    again = run_app({"a": aid})  # a new session on the same URL: what a reload is
    assert setting(again, "samples").value == 500 and setting(again, "seed").value == 7
    cfg = again.session_state["limecraft_session"].app.config
    assert cfg.sampling.samples == 500 and cfg.sampling.seed == 7


def test_each_models_results_are_kept_when_the_model_changes_and_after_a_reload():
    """Issue 29, item 5: explain with the demo model, pick efficientnet_lite0 (no results for
    it yet), go back: the demo model's result is there again. The other model's results are
    saved with the analysis, so a reload keeps them too."""
    at = run_app()
    ex = explain(at)
    assert ex is not None
    aid = at.session_state["limecraft_session"].app.id
    at.sidebar.selectbox(key="model_pick").set_value("efficientnet_lite0").run()
    assert not at.exception, at.exception
    s = at.session_state["limecraft_session"].app
    assert s.model_name == "efficientnet_lite0" and s.explanation is None
    assert not any("surrogate fidelity" in m.value for m in at.markdown)
    at.sidebar.selectbox(key="model_pick").set_value("demo").run()
    s = at.session_state["limecraft_session"].app
    assert s.model_name == "demo" and s.explanation is ex and s.other_models == {}
    assert any("surrogate fidelity" in m.value for m in at.markdown)

    at.sidebar.selectbox(key="model_pick").set_value("efficientnet_lite0").run()
    again = run_app({"a": aid})  # a reload while the other model is picked
    s = again.session_state["limecraft_session"].app
    assert s.model_name == "efficientnet_lite0" and s.explanation is None
    assert [r.name for r in s.other_models] == ["demo"]
    again.sidebar.selectbox(key="model_pick").set_value("demo").run()
    back = again.session_state["limecraft_session"].app.explanation
    assert back is not None and np.array_equal(back.class_weights, ex.class_weights)
    # a file written before this kept the results of one model only: it still opens
    d = AF.to_dict(s)
    del d["other_models"]
    assert AF.from_dict(d).other_models == {}


def test_the_first_steps_go_with_the_first_result_and_do_not_come_back():
    """Issue 29, item 8: "How it works" is shown until the first result, not under it, and a
    new image does not bring it back."""
    at = run_app()
    at.switch_page(EXPLAIN).run()

    def steps_shown(at) -> bool:
        return any(m.value.startswith("**How it works**") for m in at.markdown)

    assert steps_shown(at)
    explain(at)
    assert not steps_shown(at)
    widget(at.selectbox, "Sample gallery").set_value("chelsea").run()
    assert at.session_state["limecraft_session"].app.explanation is None and not steps_shown(at)
