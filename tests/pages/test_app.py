"""The app under Streamlit's AppTest: open, upload, settings, Explain, pages, errors.

Custom components (the canvas, click-to-select) do not run under AppTest; their logic lives in
limecraft_core.regions.canvas (tested in test_canvas.py) and their effect is injected into the state here.
"""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import image_uploader
from PIL import Image
from streamlit.testing.v1 import AppTest
from test_analysis import image_captions

import limecraft_core as lc
from models.samples import load_sample, sample_names

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parents[2] / "app.py")
CRAFT = "pages/app_pages/craft.py"
INSPECT = "pages/app_pages/inspect.py"
EXPORT = "pages/app_pages/export.py"


def png(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


def state(at):
    return at.session_state["limecraft_session"].app


def button(at, label):
    return next(b for b in at.button if b.label == label)


def widget(widgets, label):
    """The widget with this label (widgets that show the analysis have per-analysis keys)."""
    return next(w for w in widgets if w.label == label)


def test_opens_on_a_sample_with_the_demo_model(at):
    assert at.title[0].value == "LIMEcraft"
    assert state(at).image_name == sample_names()[0]
    assert state(at).model_name == "demo"
    assert button(at, "Explain")
    # the model's top-5 shows at once, in the sidebar
    assert any("top-5" in m.value for m in at.sidebar.markdown)


def test_explain_works_at_once(at):
    button(at, "Explain").click().run()
    assert not at.exception
    ex = state(at).explanation
    assert (
        ex is not None
        and ex.config.sampling.samples == lc.ExplainConfig().sampling.samples == 1600
        and ex.run.model == "demo"
    )
    assert any("Explained" in s.value for s in at.success)
    assert any("surrogate fidelity" in m.value for m in at.markdown)
    # the regions the weights chart does not draw are summed in words under it, not as a bar
    assert any(c.value.startswith("Not drawn: the ") for c in at.caption)
    # the report's settings compare with the app's defaults: none differs here (issue 48)
    from pages.lib import analysis as A

    assert ex.config.segmentation.method == "slic"
    assert ex.config.changed(A.default_config(state(at))) == {}


def test_settings_reach_the_engine(at):
    at.number_input(key="set_samples").set_value(200)
    at.selectbox(key="set_fill").set_value("gray")
    at.number_input(key="set_seed").set_value(7)
    at.run()
    button(at, "Explain").click().run()
    ex = state(at).explanation
    assert ex.config.sampling.samples == 200 and ex.config.fill.fill == "gray"
    assert ex.config.sampling.seed == 7


@pytest.mark.bf16
def test_speed_options_reach_the_engine(at):
    # demo-conflict-3: its explanation settles well before 3000 samples. On demo-conflict-1 the
    # retrained demo model puts all the weight on the tag, and the order of the near-zero rest
    # (the early-stop rule compares the top 5) does not settle within 3000.
    widget(at.selectbox, "Sample gallery").set_value("demo-conflict-3").run()

    def setting(widgets, key):  # a new analysis suffixes the settings' keys
        return next(w for w in widgets if w.key == key or w.key.startswith(key + "-"))

    setting(at.number_input, "set_samples").set_value(3000)
    setting(at.number_input, "set_early_stop").set_value(0.9)
    setting(at.selectbox, "set_precision").set_value("bf16")
    at.run()
    button(at, "Explain").click().run()
    assert not at.exception
    assert state(at).image_name == "demo-conflict-3"
    ex = state(at).explanation
    assert ex.config.speed.precision == "bf16" and ex.run.channels_last is True
    assert ex.config.sampling.early_stop == 0.9 and ex.trust.early_stop is not None
    # the demo model's explanation is stable long before 3000 samples
    assert ex.run.samples_used < 3000
    assert any("stopped early" in s.value for s in at.success)


def test_upload_an_image_and_a_bad_upload(at):
    photo = load_sample("coffee").image[:200, :300]
    at.sidebar.file_uploader[0].set_value(("coffee.png", png(photo), "image/png")).run()
    assert not at.exception
    assert state(at).image_name == "coffee.png" and state(at).image.shape == (200, 300, 3)
    at.sidebar.file_uploader[0].set_value(("broken.png", b"this is not a png", "image/png")).run()
    assert not at.exception
    assert any("not used" in e.value for e in at.sidebar.error)
    assert state(at).image_name == "coffee.png"  # the earlier image is kept


def test_handcrafted_regions_reach_the_explanation(at):
    from pages.lib.state import HandRegion

    s = state(at)
    tag = load_sample(sample_names()[0]).tag_mask
    s.hand.append(HandRegion(name="tag", mask=tag))
    at.switch_page(CRAFT).run()
    assert not at.exception
    assert at.title[0].value == "Craft regions"
    assert at.text_input(key=f"hname-{s.hand[0].uid}").value == "tag"
    at.switch_page("pages/app_pages/explain.py").run()
    at.number_input(key="set_samples").set_value(300)
    at.run()
    button(at, "Explain").click().run()
    ex = s.explanation
    assert ex.region_keys[0] == "hand:0" and ex.region_names[0] == "tag"
    # against the app's defaults for these regions, only the samples differ (issue 48)
    from pages.lib import analysis as A

    assert set(ex.config.changed(A.default_config(s))) == {"samples"}
    assert np.array_equal(ex.segments == 0, tag)
    # LIME versus LIMEcraft: the comparison over automatic superpixels only
    button(at, "Compare with automatic superpixels only").click().run()
    assert s.explanation_auto is not None and s.explanation_auto.region_keys[0].startswith("auto:")


def test_segmentation_settings_change_the_regions(at):
    at.switch_page(CRAFT).run()
    widget(at.selectbox, "Superpixels").set_value("grid")
    widget(at.slider, "Target number of regions").set_value(16)
    at.run()
    assert not at.exception
    assert state(at).seg.method == "grid"
    assert any(c.value.startswith("16 regions") for c in at.caption)


def test_inspect_edit_changes_the_prediction(at):
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()  # region 0 is now the demo's tag
    at.switch_page(INSPECT).run()
    assert not at.exception
    before = next(m.value for m in at.markdown if m.value.startswith("Top class:"))
    assert "(+0.000)" in before
    assert button(at, "Apply edit").disabled  # the edit as it opens changes nothing
    at.radio(key="edit_kind").set_value("remove").run()
    after = next(m.value for m in at.markdown if m.value.startswith("Top class:"))
    assert after != before
    assert not button(at, "Apply edit").disabled
    assert "edited (the region is gone)" in image_captions(at)  # not "the mask moves with it"
    button(at, "Apply edit").click().run()
    assert len(state(at).edits) == 1 and state(at).edits[0].kind == "remove"
    button(at, "Undo").click().run()
    assert state(at).edits == []


def test_export_and_restore(at):
    button(at, "Explain").click().run()
    ex = state(at).explanation
    at.switch_page(EXPORT).run()
    assert not at.exception
    labels = {b.label for b in at.get("download_button")}
    assert {"Explanation (JSON)", "Regions table (CSV)", "Report (HTML)"} <= labels
    # restore into a fresh session with the same image
    other = AppTest.from_file(APP, default_timeout=120)
    other.run()
    other.switch_page(EXPORT).run()
    other.file_uploader[0].set_value(("e.json", ex.to_json().encode(), "application/json")).run()
    assert not other.exception
    got = other.session_state["limecraft_session"].app.explanation
    assert got is not None and np.allclose(got.weights, ex.weights)
    # garbage is refused with a message, and nothing is lost
    other.file_uploader[0].set_value(("e.json", b'{"format": "x"}', "application/json")).run()
    assert any("not restored" in e.value for e in other.error)
    assert other.session_state["limecraft_session"].app.explanation is got


def test_a_model_that_cannot_run_says_why(at):
    at.sidebar.selectbox(key="model_pick").set_value("resnet50").run()
    assert not at.exception
    errors = " ".join([e.value for e in at.error] + [e.value for e in at.sidebar.error])
    assert "resnet50" in errors and "demo" in errors
    button(at, "Explain").click().run()
    assert not at.exception and state(at).explanation is None


def test_sessions_are_separate(at):
    other = AppTest.from_file(APP, default_timeout=120)
    other.run()
    widget(at.selectbox, "Sample gallery").set_value("chelsea").run()
    assert state(at).image_name == "chelsea"
    assert other.session_state["limecraft_session"].app.image_name == sample_names()[0]


def test_trust_page_runs_the_checks(at):
    at.switch_page("pages/app_pages/trust.py").run()
    assert not at.exception
    at.number_input(key="set_samples").set_value(300)
    at.number_input(key="set_repeats").set_value(3)
    at.run()
    button(at, "Check the explanation").click().run()
    assert not at.exception
    ex = state(at).trust_explanation
    assert ex is not None and ex.config.trust.repeats == 3
    t = ex.trust
    assert None not in (t.stability, t.convergence, t.kernel_sweep, t.faithfulness, t.fills)
    assert None not in (t.irof, t.road, t.faithfulness_correlation, t.sparseness)
    assert any("over 3 repeats" in m.value for m in at.markdown)
    # the verdict's sentence, the sign consistency and the field's metrics are on the page
    assert any(m.value.startswith(t.stability.reason[0].upper()) for m in at.markdown)
    assert any(m.value.startswith("**Sign consistency**") for m in at.markdown)
    # the verdict's conclusion, then its detail on a line of its own (issue 48)
    conclusion, detail = lc.trust.split_verdict(t.stability.reason)
    from pages.lib.display import md

    said = [m.value for m in at.markdown]
    assert md(conclusion[0].upper() + conclusion[1:]) + "." in said
    assert detail and f"The detail: {md(detail)}." in said
    # the field's metrics' caption says what each reuses, with its verb
    assert any("faithfulness correlation reuses the held-out sample" in c.value for c in at.caption)
    table = at.table[0].value
    assert list(table.index) == ["IROF", "ROAD", "Faithfulness correlation", "Sparseness (Gini)"]
    assert t.fills.fills[1:] == ["blur", "inpaint", "inpaint-each"]
    # the line charts name their series under the chart, in full (Vega cut long names at 200 px)
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    legends = {
        c["encoding"]["color"]["field"]: c["encoding"]["color"].get("legend")
        for c in specs
        if isinstance(c.get("mark"), dict)
        and c["mark"]["type"] == "line"
        and "color" in c["encoding"]
    }
    for field, orient in (("measure", "bottom"), ("curve", "bottom"), ("order", "right")):
        assert legends[field]["labelLimit"] == 0 and legends[field]["orient"] == orient, field


def test_expected_regions_measure_where_the_model_looks_and_are_saved(at):
    """Mark the tag as expected on Explain: the pointing game hits (the demo model reads the
    tag); unmark it: the measure goes; the mark is saved with the analysis."""
    from pages.lib import analysis_file as AF

    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.switch_page("pages/app_pages/explain.py").run()
    button(at, "Explain").click().run()
    assert not at.exception
    box = widget(at.multiselect, "Expected regions")
    uid = state(at).hand[0].uid
    box.set_value([uid]).run()
    assert not at.exception
    s = state(at)
    loc = s.explanation.trust.localisation
    assert s.hand[0].expected and loc is not None and loc.pointing_game and loc.regions == [0]
    shown = {m.label: m.value for m in at.metric}
    assert (
        shown["Pointing game"] == "hit" and shown["Relevance mass"] == f"{loc.relevance_mass:.0%}"
    )
    back = AF.from_json(AF.to_json(s))
    assert back.hand[0].expected and back.explanation.trust.localisation == loc
    widget(at.multiselect, "Expected regions").set_value([]).run()
    assert state(at).explanation.trust.localisation is None
    assert not any(m.label == "Pointing game" for m in at.metric)


def test_every_result_shows_a_stability_verdict(at):
    button(at, "Explain").click().run()
    ex = state(at).explanation
    assert ex.verdict in ("stable", "borderline", "unstable")
    # judged on the one sample, resampled: no repeat was scored
    assert ex.config.trust.repeats == 1 and ex.trust.stability.source == "stream"
    assert any("over 40 resamples of one sample" in m.value for m in at.markdown)


def test_demo_walkthrough_adds_the_tag(at):
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    s = state(at)
    assert [h.name for h in s.hand] == ["tag"]
    assert np.array_equal(s.hand[0].mask, s.tag_mask)


def test_a_bad_default_model_setting_is_a_message_not_a_traceback():
    # A fresh process: the setting is read when the registry is first imported.
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json; from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({APP!r}, default_timeout=120); at.run()\n"
        "print(json.dumps([len(at.exception), [e.value for e in at.error], len(at.button)]))"
    )
    env = {**os.environ, "LIMECRAFT_DEFAULT_MODEL": "no-such-model"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    n_exc, errors, n_buttons = json.loads(proc.stdout.strip().splitlines()[-1])
    assert n_exc == 0 and n_buttons == 0  # nothing else of the app runs
    assert "LIMECRAFT_DEFAULT_MODEL='no-such-model' is not a registered model" in errors[0]


def _explain_quickly(at) -> None:
    """Explain (60 samples, 2 repeats) on the Explain page, without an exception."""
    at.switch_page("pages/app_pages/explain.py").run()
    widget(at.number_input, "Samples").set_value(60)
    widget(at.number_input, "Repeats").set_value(2)
    at.run()
    button(at, "Explain").click().run()
    assert not at.exception, at.exception


def _every_page_works(at) -> None:
    """Every other page opens with no exception and no error."""
    for page in (CRAFT, INSPECT, "pages/app_pages/trust.py", EXPORT):
        at.switch_page(page).run()
        assert not at.exception and not [e.value for e in at.error], page


def test_an_image_that_segments_into_one_region_explains_on_every_page(at):
    """A flat image under felzenszwalb is one region (K=1): every page works, and the results
    say so instead of drawing a slider from 1 to 1."""
    image_uploader(at).set_value(
        ("flat.png", png(np.full((64, 64, 3), 128, np.uint8)), "image/png")
    ).run()
    at.switch_page(CRAFT).run()
    widget(at.selectbox, "Superpixels").set_value("felzenszwalb").run()
    _explain_quickly(at)
    assert state(at).explanation.n_regions == 1
    assert not [e.value for e in at.error]
    assert any("1 region" in m.value for m in at.markdown)
    _every_page_works(at)


def test_a_flat_image_says_no_region_carries_weight_instead_of_naming_one(at):
    """Its regions under the mean fill are the image again: the demo model's score is the same
    for every sample. The page says so, not "Strongest region ...: region 0 (weight +0.000)".
    At the demo model's own size (128 px) no "not meaningful" warning stands in for the rest."""
    image_uploader(at).set_value(
        ("flat.png", png(np.full((128, 128, 3), 128, np.uint8)), "image/png")
    ).run()
    _explain_quickly(at)
    ex = state(at).explanation
    assert ex.n_regions > 1 and not ex.weights.any() and ex.scores[0] < 0.5
    assert not [w.value for w in at.warning if "mean nothing" in w.value]
    said = [m.value for m in at.markdown]
    assert any(m.startswith("No region carries any weight for ") for m in said), said
    assert not any(m.startswith("Strongest region for") for m in said), said
    # neither "more samples may settle it" nor "the surrogate explains less than half": there
    # is nothing to settle or to fit
    assert not [i.value for i in at.info if "not settled" in i.value]
    assert not [b for b in at.button if b.label.startswith("Continue to")]
    assert not [w.value for w in at.warning if "linear surrogate" in w.value]
    # nor a "low" fit badge over an R² of 0/0: there was nothing to fit
    head = next(m for m in said if "surrogate fidelity" in m)
    assert "R² = **n/a** :gray-badge[nothing to fit]" in head, head
    assert "red-badge[low]" not in head, head
    _every_page_works(at)


def test_two_regions_the_tag_and_the_rest_work_on_every_page(at):
    """K=2: the tag as a handcrafted region and the rest of the image as one background region.
    Every page works, and the sliders whose range would collapse are drawn or replaced."""
    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    radio = next(r for r in at.radio if r.label == "Outside your regions")
    radio.set_value("one").run()
    _explain_quickly(at)
    ex = state(at).explanation
    assert ex.n_regions == 2 and "tag" in ex.region_names
    assert not [e.value for e in at.error]
    k = next(s for s in at.slider if s.label == "Top k for and k against")
    assert (k.min, k.max, k.value) == (1, 2, 2)
    _every_page_works(at)
    at.switch_page(INSPECT).run()
    region = next(s for s in at.selectbox if s.label == "Region")
    # named, with the weight explained; the strongest named region first
    assert region.options[0].startswith("0 tag (weight +"), region.options


def test_one_explain_press_keys_its_run_once(at, monkeypatch):
    """Issue 49, item 5: one click of Explain validates its settings once and hashes the image
    once; the run's key (caches.RunKey) carries both down to the caches and the engine."""
    from pages.lib import caches

    at.number_input(key="set_samples").set_value(100).run()  # a quick run
    counts = {"digest": 0, "validate": 0}
    digest, from_flat = caches.image_digest, lc.ExplainConfig.from_flat.__func__

    def counted_digest(image):
        counts["digest"] += 1
        return digest(image)

    def counted_from_flat(cls, *args, **kw):
        counts["validate"] += 1
        return from_flat(cls, *args, **kw)

    monkeypatch.setattr(caches, "image_digest", counted_digest)
    monkeypatch.setattr(lc.ExplainConfig, "from_flat", classmethod(counted_from_flat))
    button(at, "Explain").click().run()
    assert not at.exception
    ex = state(at).explanation
    assert ex is not None and ex.config.sampling.samples == 100
    assert counts == {"digest": 1, "validate": 1}


def _on_every_surface(at, capsys, ex, image):
    """What each surface says of ``ex``: the CLI's lines, the report's text (tags dropped) and
    the app's markdown, success, info and warning texts (the markdown's escapes undone)."""
    import html
    import re

    from limecraft.printing import print_trust
    from limecraft_core.io.report import html_report

    capsys.readouterr()
    print_trust(ex)
    cli = capsys.readouterr().out
    page = html_report(image=image, explanation=ex)
    report = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))
    kinds = (at.markdown, at.success, at.info, at.warning)
    app = [re.sub(r"\\(.)", r"\1", e.value) for kind in kinds for e in kind]
    return cli, report, app


def test_each_trust_check_is_worded_once_on_every_surface(at, capsys):
    """Issue 49, item 5: each check's words (limecraft_core.trust.words) appear as they are in
    the CLI's lines, in the report and on the Trust page: no surface words a check again."""
    from limecraft_core.trust import words as W

    at.switch_page("pages/app_pages/trust.py").run()
    at.number_input(key="set_samples").set_value(200)
    at.number_input(key="set_repeats").set_value(2)
    at.run()
    button(at, "Check the explanation").click().run()
    assert not at.exception
    s = state(at)
    ex = s.trust_explanation
    said = W.check_words(ex.trust)
    # every worded check ran but localisation (it needs expected regions: the next test)
    assert set(said) == set(W.WORDS) - {"localisation"}
    assert not any(ex.region_names), "the region ids are the names on every surface here"

    cli, report, app = _on_every_surface(at, capsys, ex, s.image)
    for name, w in said.items():
        for clause in filter(None, (w.headline, w.detail)):
            assert clause in cli, (name, clause, cli)
        first = W.sentence(w.headline)
        assert first in report, (name, first)
        assert any(first in v for v in app), (name, first, app)
        if w.detail:
            assert W.detail_line(w.detail) in report and W.detail_line(w.detail) in app
    st_ = ex.trust.stability
    if st_.conclusion:  # how often the conclusion held: the same words in the report and the app
        held = W.sentence(W.conclusion_line(st_))
        assert held in report and any(held in v for v in app), held


def test_the_localisation_is_worded_once_on_every_surface(at, capsys):
    """Issue 49, item 5: with the tag marked as expected, the localisation's words
    (limecraft_core.trust.words) appear as they are in the CLI's sentence, in the report and in
    the app's "Does the model look where you look?"."""
    from limecraft_core.trust import words as W

    at.switch_page(CRAFT).run()
    button(at, "Add the tag as a region").click().run()
    at.switch_page("pages/app_pages/explain.py").run()
    button(at, "Explain").click().run()
    widget(at.multiselect, "Expected regions").set_value([state(at).hand[0].uid]).run()
    assert not at.exception
    s = state(at)
    ex = s.explanation
    loc = ex.trust.localisation
    assert loc is not None and loc.pointing_game  # the demo model reads the tag
    headline = W.check_words(ex.trust)["localisation"].headline
    assert headline.startswith("the top region is inside the expected area and carries")

    cli, report, app = _on_every_surface(at, capsys, ex, s.image)
    assert headline in cli.splitlines(), cli
    assert W.sentence(headline) in report, report
    assert any(W.sentence(headline) in v for v in app), app
