"""The conclusion not settled at the sample cap: the Explain page says so and continues from the
samples already scored (issue 26, item 3)."""

import io

import numpy as np
import pytest
from conftest import image_uploader
from PIL import Image

pytestmark = pytest.mark.slow

EXPLAIN = "pages/app_pages/explain.py"


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


def _samples(at):
    """The Samples setting (its key is per analysis)."""
    return next(w for w in at.number_input if w.label == "Samples")


def _button(at, label):
    return next(b for b in at.button if b.label == label)


def test_an_unsettled_conclusion_offers_more_samples_and_scores_only_the_new_ones(at):
    # noise through the demo model, in 100 regions, at 60 samples: nothing leads firmly
    noise = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, format="PNG")
    image_uploader(at).set_value(("noise.png", buf.getvalue(), "image/png")).run()
    assert at.session_state["limecraft_session"].app.model_name == "demo"
    at.switch_page("pages/app_pages/craft.py").run()
    next(w for w in at.selectbox if w.label == "Superpixels").set_value("grid")
    next(w for w in at.slider if w.label == "Target number of regions").set_value(100)
    at.run()
    at.switch_page(EXPLAIN).run()
    _samples(at).set_value(60)
    at.run()
    _button(at, "Explain").click().run()
    assert not at.exception
    ex = at.session_state["limecraft_session"].app.explanation
    assert ex.config.sampling.samples == 60 and ex.verdict != "stable", ex.trust.stability.reason
    shown = [i.value for i in at.info]
    assert any("The conclusion was not settled by 60 samples" in v for v in shown), shown
    _button(at, "Continue to 120 samples").click().run()
    assert not at.exception
    more = at.session_state["limecraft_session"].app.explanation
    assert more.config.sampling.samples == 120 and more.run.samples_used == 120
    # the 60 masks scored before come from the memo: only the new ones reach the model
    assert ex.run.model_passes > 60  # the first run scored its sample and the deltas
    assert 0 < more.run.model_passes <= 120 - 60, more.run.model_passes
    assert any("Explained" in s.value and "with 120 samples" in s.value for s in at.success)
    # the settings are not changed behind the user's back: Explain again is the 60-sample run
    assert _samples(at).value == 60
