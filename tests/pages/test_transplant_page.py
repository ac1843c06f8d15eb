"""Inspect's "paste this region into other images" under AppTest: the watermark pasted into
clean gallery photos, the numbers the engine gives, and what a bad upload does (issue 25)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

import limecraft_core as lc
from models import registry
from models.samples import PAGE_WATERMARK, load_sample
from pages.lib import analysis as A
from pages.lib import analysis_file as AF
from pages.lib.transplant_view import clean_photos

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parents[2] / "app.py")
CRAFT = "pages/app_pages/craft.py"
INSPECT = "pages/app_pages/inspect.py"


@pytest.fixture
def marked(monkeypatch, tmp_path):
    """The real model's app on the watermarked page, the watermark a region, on Inspect."""
    monkeypatch.setattr(registry, "DEFAULT_MODEL", "efficientnet_lite0")
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.sidebar.selectbox[0].set_value(PAGE_WATERMARK).run()
    at.switch_page(CRAFT).run()
    next(b for b in at.button if b.label == "Add the watermark as a region").click().run()
    at.switch_page(INSPECT).run()
    assert not at.exception, at.exception
    return at


def test_the_clean_photos_have_no_planted_shortcut():
    names = clean_photos("chelsea")
    assert "chelsea" not in names and names
    assert not any(n.startswith("demo-") or "page" in n for n in names)


def test_pasting_the_watermark_into_four_photos_shows_the_engines_numbers(marked):
    at = marked
    assert at.selectbox(key="edit_region").value == 0  # the named region first: the watermark
    chosen = at.multiselect(key="edit_tp_gallery").value
    assert len(chosen) == 4
    assert at.selectbox(key="edit_follow").value == 478  # carton, the top class
    next(b for b in at.button if b.label == "Paste into 4 images").click().run()
    assert not at.exception, at.exception
    lines = next(m.value for m in at.markdown if m.value.startswith("- ")).splitlines()
    assert len(lines) == 4
    # the engine, on the same images
    clf = registry.load_classifier("efficientnet_lite0")
    source = load_sample(PAGE_WATERMARK).image
    mask = lc.watermark_mask(224, 224)

    def predict(im):
        p = clf.predict(im).astype(np.float64)
        e = np.exp(p - p.max())
        return e / e.sum()

    result, _ = lc.insertion_test(
        source, mask, [load_sample(n).image for n in chosen], predict, 478
    )
    for line, name, b, a in zip(lines, chosen, result.before, result.after, strict=True):
        m = re.match(
            rf"- {re.escape(name)}: carton ([\d.]+) → ([\d.]+) \(([+-][\d.]+); a same-size "
            r"patch ([+-][\d.]+)\)",
            line,
        )
        assert m, line
        assert float(m[1]) == pytest.approx(b, abs=6e-4) and float(m[2]) == pytest.approx(
            a, abs=6e-4
        )
    summary = next(m.value for m in at.markdown if m.value.startswith("**Pasted into 4 images"))
    assert f"turned {result.flips} of" in summary
    # the conclusion follows the numbers (issue 48: it claimed a cause for +0.003 and no flip)
    conclusion = {
        "causes": "It causes carton in these images",
        "weak": "A weak, selective effect",
        "none": "It did not raise carton in these images",
    }[result.finding]
    assert any(m.value.startswith(conclusion) for m in at.markdown), conclusion
    assert not any("shows that it causes" in m.value for m in at.markdown)


def test_the_paste_is_kept_with_the_analysis(marked):
    """Issue 48: the paste is part of the analysis: another image and back, and the file's
    round trip, bring it back with its region, class and numbers."""
    at = marked
    next(b for b in at.button if b.label == "Paste into 4 images").click().run()
    a = at.session_state["limecraft_session"].app
    assert a.paste is not None and a.paste.result.target_class == 478
    lines = next(m.value for m in at.markdown if m.value.startswith("- "))
    at.sidebar.selectbox[0].set_value("coffee").run()
    assert not any(m.value.startswith("**Pasted into") for m in at.markdown)
    at.sidebar.selectbox[0].set_value(PAGE_WATERMARK).run()
    assert at.session_state["limecraft_session"].app.paste is a.paste
    assert next(m.value for m in at.markdown if m.value.startswith("- ")) == lines
    back = AF.from_json(AF.to_json(a)).paste
    assert back.names == a.paste.names and back.region == a.paste.region
    assert np.array_equal(back.mask, a.paste.mask)
    for f in ("before", "after", "top_before", "top_after", "clipped", "null_after"):
        assert np.array_equal(getattr(back.result, f), getattr(a.paste.result, f)), f
    assert all(np.array_equal(x, y) for x, y in zip(back.pictures, a.paste.pictures, strict=True))
    assert max(back.pictures[0].shape[:2]) <= A.PASTE_PICTURE_PX


def test_a_bad_upload_is_a_sentence_and_the_rest_still_pastes(marked):
    at = marked
    at.multiselect(key="edit_tp_gallery").set_value([]).run()
    paste = next(b for b in at.button if b.label.startswith("Paste into"))
    assert paste.disabled  # nothing to paste into
    buf = io.BytesIO()
    Image.fromarray(np.full((300, 200, 3), 90, np.uint8)).save(buf, format="PNG")
    up = next(u for u in at.file_uploader if u.key == "edit_tp_upload")
    up.set_value([("gray.png", buf.getvalue(), "image/png"), ("bad.png", b"nope", "image/png")])
    at.run()
    assert any("bad.png was not used" in e.value for e in at.error), [e.value for e in at.error] + [
        b.label for b in at.button
    ]
    next(b for b in at.button if b.label == "Paste into 1 image").click().run()
    assert any(m.value.startswith("- gray\\.png: carton") for m in at.markdown)  # md-escaped
    assert not at.exception
