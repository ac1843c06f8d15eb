"""The pure logic behind what the app shows: chart rows, the progress line, the model's fit
warning, and what an uploaded model file is called. No Streamlit runs here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import registry
from models.custom import file_format
from pages.lib import charts
from pages.lib.progress import ExplainProgress

# ----------------------------------------------------------------------------- charts


def test_the_weights_chart_labels_every_bar_and_keeps_small_bars_visible():
    w = np.array([0.8, -0.001, 0.0005, -0.3, 0.02, 0.0, 0.1])
    names = ["the circle", None, "", "the tag", None, None, "sky"]
    df = charts.weights_frame(w, names, k=2)
    # top 2 for (0, 6) and top 2 against (3, 1), sorted by weight; the others are not a bar
    assert list(df["region"]) == [
        "0 the circle  (+0.800)",
        "6 sky  (+0.100)",
        "1  (-0.001)",
        "3 the tag  (-0.300)",
    ]
    assert list(df["effect"]) == ["for the class", "for the class", "against", "against"]
    # a tiny weight is drawn at least 3% of the longest bar, with its sign; the value is true
    shown = df.set_index("region")["shown"]
    assert shown["1  (-0.001)"] == pytest.approx(-charts.MIN_SHARE * 0.8)
    assert shown["0 the circle  (+0.800)"] == pytest.approx(0.8)
    assert df.set_index("region")["weight"]["1  (-0.001)"] == pytest.approx(-0.001)


def test_the_regions_not_drawn_are_summed_in_words_not_as_a_longer_bar():
    """Issue 48: the grey "others (N regions, sum)" bar outgrew every named bar (banana: +0.209
    against the top +0.040). Their sum is a line under the chart, for and against apart."""
    w = np.array([0.04, 0.03, -0.01, *([0.005] * 40), -0.001, -0.001])
    df = charts.weights_frame(w, [None] * w.size, k=2)
    assert len(df) == 4 and set(df["effect"]) == {"for the class", "against"}
    assert charts.others_line(w, k=2) == (
        "Not drawn: the 41 other regions, none stronger than the weakest bar of its colour; "
        "together +0.199 (+0.200 for the class, -0.001 against)."
    )
    assert charts.others_line(np.array([0.4, 0.1]), k=1) == (
        "Not drawn: 1 other region, +0.100, no stronger than the weakest bar of its colour."
    )
    assert charts.others_line(np.array([0.4, -0.2]), k=1) == ""  # every region is drawn
    assert charts.others_line(np.zeros(3), k=2) == "Not drawn: 3 other regions, weight 0."


def test_a_weight_label_is_fixed_notation_even_when_tiny():
    """Issue 48: "28 (-1.13e-04)"; a label is never in e-notation."""
    assert charts.value(-1.13e-4) == "-0.00011"
    assert charts.value(0.0004) == "+0.00040"
    assert charts.value(0.0123) == "+0.012" and charts.value(0.0) == "+0.000"
    assert charts.value(3e-12) == "+0.000000"
    for v in (-1.13e-4, 2e-6, 7e-9, -1e-30, 0.5):
        assert "e" not in charts.value(v)
    labels = charts.weights_frame(np.array([0.3, -1.13e-4]), ["a", None], k=1)["region"]
    assert list(labels) == ["0 a  (+0.300)", "1  (-0.00011)"]


def test_the_one_region_and_zero_charts():
    one = charts.weights_frame(np.array([0.4]), [None], k=1)
    assert list(one["region"]) == ["0  (+0.400)"]
    two = charts.weights_frame(np.array([0.0, -0.2]), ["a", "b"], k=5)
    assert list(two["region"]) == ["1 b  (-0.200)"]
    assert len(charts.weights_frame(np.zeros(3), [None] * 3, k=2)) == 0  # nothing for or against


def test_the_low_fit_warning_says_less_than_half_only_of_a_number_under_half():
    """Issue 48: "R² is 0.50: ... less than half" for R² = 0.495."""
    from pages.lib.views import low_fit_warning

    assert low_fit_warning(0.4952).startswith("R² is 0.495: ")
    assert low_fit_warning(0.49996).startswith("R² is 0.49996: ")
    assert low_fit_warning(0.2).startswith("R² is 0.200: ")
    for r2 in (0.4952, 0.49996, 0.4999999, 0.2):
        shown = float(low_fit_warning(r2).split()[2].rstrip(":"))
        assert shown < 0.5 and "less than half" in low_fit_warning(r2)


def test_the_chart_specs_use_the_overlay_colours_and_never_skip_a_label():
    spec = charts.weights_chart(np.array([0.5, -0.25, 0.1]), ["a", None, "c"], k=3).to_dict()
    enc = spec["encoding"]
    assert enc["y"]["axis"]["labelOverlap"] is False
    assert enc["color"]["scale"]["range"][:2] == ["#00bf33", "#e61a1a"]
    assert spec["height"] >= charts.ROW_PX * 3
    inter = charts.interval_chart(
        np.array([0.5, -0.2]), np.array([0.4, -0.3]), np.array([0.6, -0.1]), ["a", None]
    ).to_dict()
    assert len(inter["layer"]) == 2  # the bars and the interval rules


# ----------------------------------------------------------------------------- progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_one_line_shows_the_passes_and_the_queue_position_together():
    clock = Clock()
    p = ExplainProgress("Explaining", clock=clock)
    assert p.text() == "Explaining: starting…"
    p.passes(0, 12)
    p.waiting(2)
    assert (
        p.text()
        == "Explaining: 0/12 model passes · waiting for the model: 2 explanations ahead of yours"
    )
    clock.t = 30.0  # half a minute behind others: not part of this job's pass rate
    p.waiting(1)
    assert p.text().endswith("1 explanation ahead of yours")
    clock.t = 31.0
    p.passes(2, 12)  # served: the line goes back to passes and time left
    assert p.text() == "Explaining: 2/12 model passes · timing the first passes…"
    clock.t = 33.0
    p.passes(4, 12)  # 2 passes in 2 s: 8 left is about 8 s
    assert p.text() == "Explaining: 4/12 model passes · about 8 s left"
    assert p.fraction == pytest.approx(4 / 12)


def test_the_time_left_is_re_estimated_as_passes_complete():
    clock = Clock()
    p = ExplainProgress("Checking", clock=clock)
    p.passes(0, 100)
    clock.t = 10.0
    p.passes(10, 100)  # 1 s a pass: 90 left
    assert p.seconds_left() == pytest.approx(90.0)
    clock.t = 12.0
    p.passes(30, 100)  # faster now: 30 passes in 12 s
    assert p.seconds_left() == pytest.approx(12 / 30 * 70)
    assert "about 28 s left" in p.text()
    clock.t = 400.0
    p.passes(31, 100)
    assert p.text().endswith("min left")


# ----------------------------------------------------------------------------- models


def test_the_demo_model_warns_on_anything_but_its_own_pictures():
    assert registry.fit_warning("demo", (128, 128, 3)) is None
    msg = registry.fit_warning("demo", (300, 451, 3))
    assert msg is not None and "synthetic shapes" in msg and "mean nothing" in msg
    assert registry.fit_warning("resnet18", (300, 451, 3)) is None
    assert registry.fit_warning("/tmp/x/model.pt2", (300, 451, 3)) is None


class Tiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3))


@pytest.mark.filterwarnings(
    "ignore::FutureWarning"
)  # torch.jit.script: users still have such files
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_uploaded_file_is_described_by_its_kind(tmp_path):
    program = torch.export.export(Tiny(), (torch.rand(1, 3, 8, 8),))
    torch.export.save(program, str(tmp_path / "m.pt2"))
    assert file_format(tmp_path / "m.pt2") == "torch.export (.pt2)"
    torch.jit.save(torch.jit.script(Tiny()), str(tmp_path / "m.pt"))
    assert file_format(tmp_path / "m.pt") == "TorchScript"
    assert file_format(tmp_path / "w.pth", arch="resnet18") == "state_dict (resnet18)"


def test_an_uploaded_file_keeps_its_own_name():
    from pages.lib.sidebar import _safe_name

    assert _safe_name("m.pt2") == "m.pt2"
    assert _safe_name("../../etc/passwd") == "passwd"
    assert _safe_name("C:\\models\\my net.pt") == "my net.pt"
    assert _safe_name("we;ird$name.pt2") == "we_ird_name.pt2"


# ----------------------------------------------------------------------------- large images


def test_pictures_of_a_large_image_are_drawn_from_display_sized_copies_made_once():
    from pages.lib import display

    h, w = 3000, 4500
    image = np.zeros((h, w, 3), np.uint8)
    image[:, : w // 2] = (250, 10, 10)
    labels = np.zeros((h, w), np.int32)
    labels[:, w // 2 :] = 1
    labels[3:6, 3:6] = 2  # 9 pixels between two of the copy's pixel centres (2.0 and 6.0)
    small, small_labels = display.for_drawing(image, labels)
    long_side = display.DRAW_LONG_SIDE
    assert small.shape == (round(h * long_side / w), long_side, 3)
    assert small_labels.shape == small.shape[:2] and small_labels.dtype == labels.dtype
    # each copy's pixel is the label under its centre, and the image is box-filtered
    half = long_side // 2
    assert (small_labels[:, : half - 1] == 0).all() and (small_labels[:, half + 1 :] == 1).all()
    assert (small[:, : half - 1] == (250, 10, 10)).all() and (small[:, half + 1 :] == 0).all()
    # a region smaller than a pixel of the copy may not show in a picture (its row in the
    # regions table is counted from the full-size labels)
    assert 2 not in small_labels
    # made once: the next rerun gets the same copies, a new image gets its own
    again = display.for_drawing(image, labels)
    assert again[0] is small and again[1] is small_labels
    other = image.copy()
    assert display.for_drawing(other, labels)[0] is not small
    # an image that is already small is drawn as it is
    tiny, tiny_labels = image[:200, :300], labels[:200, :300]
    assert display.for_drawing(tiny, tiny_labels) == (tiny, tiny_labels)


def test_the_export_downloads_are_at_the_images_own_size():
    """The page previews are drawn small; the PNG a user downloads is the full picture."""
    import io

    from PIL import Image
    from toys import ChannelMeans

    import limecraft_core as lc
    from pages.lib import views

    h, w = 1500, 2400
    image = np.full((h, w, 3), 120, np.uint8)
    labels = (np.arange(w)[None, :] // 600 + 4 * (np.arange(h)[:, None] // 750)).astype(np.int32)
    n = int(labels.max()) + 1
    ex = lc.explain(image, ChannelMeans(classes=3), labels, input_size=32, samples=20)
    assert ex.n_regions == n
    for name in views.PICTURES:
        with Image.open(io.BytesIO(views.full_size_png(name, image, ex))) as im:
            assert im.size == (w, h), name
