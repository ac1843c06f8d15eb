import base64
import csv
import dataclasses
import html
import io
import re

import numpy as np
import pytest
import torch
from PIL import Image
from toys import ChannelMeans, ChannelMoments

from limecraft_core import ExplainConfig, LimecraftError, explain
from limecraft_core.io.report import (
    MIN_SIDE_PX,
    PredictionChange,
    ReportEdit,
    html_report,
    regions_csv,
)
from limecraft_core.trust import split_verdict

DATA_URL = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


class TagModel(torch.nn.Module):
    """Class 0 ("tag class") scores the mean red of the top-left 16x16 block; class 1 is flat.

    With the black fill, hiding the block drops class 0 by exactly its mean red, and the
    surrogate is exact: the block is the region that drives class 0."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        red = x[:, 0, :16, :16].mean(dim=(1, 2))
        return torch.stack([red, torch.full_like(red, 0.1)], dim=1)


def tag_mask(shape: tuple[int, int]) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[:16, :16] = True
    return mask


@pytest.fixture
def tagged(quadrants):
    """An exact explanation of TagModel on the quadrants image, with three repeats."""
    res = explain(
        quadrants,
        TagModel(),
        regions_mask=[tag_mask(quadrants.shape[:2])],
        region_names=["the tag"],
        labels=["tag class", "other"],
        outer_segments=1,
        fill="black",
        output_space="raw",
        samples=40,
        repeats=3,
    )
    return quadrants, res


def images(page: str) -> list[Image.Image]:
    return [Image.open(io.BytesIO(base64.b64decode(b))) for b in DATA_URL.findall(page)]


def section(page: str, name: str) -> str:
    m = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert m, f"no section {name}"
    return m.group(1)


def conclusion(page: str) -> str:
    return re.search(r'<p class="conclusion"[^>]*>(.*?)</p>', page, re.S).group(1)


def text(fragment: str) -> str:
    """What a reader sees: inline tags dropped, the others (cells, paragraphs) a space."""
    inline = re.sub(r"</?(strong|span|b|code)\b[^>]*>", "", fragment)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", inline)).strip())


def test_report_is_self_contained_and_escapes_user_text(photo):
    mask = np.zeros(photo.shape[:2], bool)
    mask[10:40, 10:40] = True
    res = explain(
        photo,
        ChannelMeans(),
        regions_mask=[mask],
        region_names=["<script>alert(1)</script>"],
        samples=30,
        outer_segments=1,
    )
    edited = photo.copy()
    edited[mask] = 0
    page = html_report(
        image=photo,
        explanation=res,
        edits=[
            ReportEdit(
                "move region 0 by (+3, +0) px <b>",
                photo,
                edited,
                [PredictionChange("<img src=x onerror=alert(2)>", 0.5, 0.25)],
            )
        ],
        source="<evil>.png",
        notes=["<i>note</i>"],
    )
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;evil&gt;.png" in page and "px &lt;b&gt;" in page and "&lt;i&gt;note" in page
    # Nothing to fetch: every picture is inline, no link, stylesheet, script or font is loaded.
    assert "http://" not in page and "https://" not in page
    assert "://" not in DATA_URL.sub("", page)
    assert re.findall(r'\ssrc="([^"]{0,5})', page) == ["data:"] * page.count(' src="')
    for tag in ("<link", "<script", "<iframe", "@import", "url(", "href="):
        assert tag not in page
    assert "-0.2500" in page  # the prediction change


def test_report_summary_names_the_class_the_region_and_what_hiding_it_does(tagged):
    image, res = tagged
    page = html_report(image=image, explanation=res)
    sentence = text(conclusion(page))
    drop = res.deltas[0, 0]
    assert drop > 0.5 and np.argmax(res.weights) == 0  # the tag drives the class
    assert sentence == (
        f"The model says tag class ({res.predictions[0]:.2f}), driven by the tag (region 0): "
        f"hiding it lowers the tag class score by {drop:.2f}. Surrogate fit good "
        f"(R² {res.score:.2f}); {res.verdict} across 3 repeats."
    )
    assert "<strong>tag class</strong>" in conclusion(page)
    assert "<strong>the tag</strong>" in conclusion(page)
    # It comes first: before any picture or table.
    assert page.index('class="conclusion"') < page.index("<img") < page.index("<table")


def test_report_of_one_sample_gives_its_verdict_and_unnamed_regions_their_id(quadrants):
    res = explain(
        quadrants,
        TagModel(),
        segmentation="slic",
        n_segments=4,
        fill="black",
        output_space="raw",
        samples=40,
    )
    page = html_report(image=quadrants, explanation=res)
    sentence = text(conclusion(page))
    top = int(np.argmax(res.weights))
    assert f"driven by region {top}: hiding it lowers the class 0 score by" in sentence
    assert sentence.endswith(
        f"Surrogate fit good (R² {res.score:.2f}); {res.verdict} across 40 resamples of one sample."
    )
    assert "repeats" not in sentence


class AntiTagModel(TagModel):
    """Class 0 falls as the top-left block gets redder: no region supports it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = super().forward(x)
        return torch.stack([1 - s[:, 0], s[:, 1]], dim=1)


def test_report_says_so_when_no_region_supports_the_class(quadrants):
    res = explain(
        quadrants,
        AntiTagModel(),
        regions_mask=[tag_mask(quadrants.shape[:2])],
        outer_segments=1,
        fill="black",
        output_space="raw",
        samples=40,
        ridge_alpha=0.001,  # next to no shrinkage: the background's weight is ~0
    )
    assert res.weights[0] < 0 and abs(res.weights[1]) < 0.01 * abs(res.weights[0])
    sentence = text(conclusion(html_report(image=quadrants, explanation=res)))
    assert sentence.startswith(f"The model says class 0 ({res.predictions[0]:.2f}), but no region")
    assert "driven by" not in sentence


def test_report_verdicts_of_every_trust_check_and_the_segmentation_that_ran(photo):
    res = explain(
        photo,
        ChannelMeans(),
        segmentation="slic",
        n_segments=12,
        samples=60,
        repeats=3,
        faithfulness=True,
        compare_fills=["gray"],
        kernel_widths=[0.25, "uniform"],
        convergence=[30, 60],
    )
    page = html_report(image=photo, explanation=res)
    trust = text(section(page, "trust"))
    st = res.trust.stability
    first, detail = said(st.reason)
    assert f"Stability over 3 repeats {st.verdict} {first}" in trust and detail in trust
    assert (
        f"{len(st.matter)} regions matter: Kendall's W over them {st.matter_kendall_w:.2f}" in trust
    )
    assert f"Kendall's W over the top-10 {st.kendall_w:.3f}" in trust
    assert ("beats random orders" in trust) or ("does not beat random orders" in trust)
    assert "Surrogate fit " in trust and "Kernel widths" in trust and "Convergence" in trust
    assert "Fills" in trust
    assert "slic superpixels, 0 handcrafted, 0 merged" in page
    shown = text(section(page, "settings").split("<details")[0])
    assert "segmentation slic quickshift" in shown  # the method that ran, then the default
    # a front end with other defaults (the app's SLIC) passes them: slic is then no change
    app = ExplainConfig.from_flat(segmentation="slic")
    settings = section(html_report(image=photo, explanation=res, defaults=app), "settings")
    assert "<code>segmentation</code>" not in settings.split("<details")[0]
    assert '<code>segmentation</code></td><td>slic</td><td class="muted">slic</td>' in settings


def said(reason: str) -> tuple[str, str]:
    """A verdict as the report's stability row says it: the conclusion, then on the next line
    the detail (issue 48: it was one sentence)."""
    conclusion, detail = split_verdict(reason)
    return f"{conclusion[0].upper()}{conclusion[1:]}.", f"The detail: {detail}." if detail else ""


def test_the_stability_row_shows_the_conclusion_and_the_detail_on_two_lines(tagged):
    image, res = tagged
    reason = "stable: the conclusion holds: region 0 is first in all 3 repeats; the order of the 2 other regions that matter is settled; 1 other is indistinguishable from zero"
    st = dataclasses.replace(res.trust.stability, reason=reason)
    ex = dataclasses.replace(res, trust=dataclasses.replace(res.trust, stability=st))
    trust = section(html_report(image=image, explanation=ex), "trust")
    cell = re.search(r"<td>(Stable: the conclusion holds.*?)</td>", trust, re.S).group(1)
    first, second = cell.split("<br>")
    assert text(first).startswith(
        "Stable: the conclusion holds: region 0 is first in all 3 repeats."
    )
    assert text(second).startswith(
        "The detail: the order of the 2 other regions that matter is settled; 1 other is "
        "indistinguishable from zero."
    )


def test_report_pictures_are_large_and_decode(photo, quadrants):
    """The explained pictures are at least 512 px on their long side, whatever the image size
    (96x128 and 32x32 here), with the image's aspect ratio."""
    for image in (photo, quadrants):
        res = explain(image, ChannelMeans(), segmentation="slic", n_segments=8, samples=30)
        page = html_report(image=image, explanation=res)
        pics = images(section(page, "pictures"))
        assert len(pics) >= 5  # image, evidence (+ its legend), weights, change, regions
        h, w = image.shape[:2]
        for pic in pics:
            assert max(pic.size) >= MIN_SIDE_PX, pic.size
        figures = [p for p in pics if p.size[1] * w == p.size[0] * h]  # not the legend
        assert len(figures) >= 4
        assert 'class="legend"' in section(page, "pictures")


def test_report_pictures_are_not_grey(tagged):
    """The region that drives the class is coloured in the evidence and weight pictures."""
    image, res = tagged
    pics = images(section(html_report(image=image, explanation=res), "pictures"))
    for pic in pics[1:4:2]:  # the evidence overlay and the weight heatmap
        a = np.asarray(pic.convert("RGB"), float)
        f = a.shape[0] // image.shape[0]
        tag, plain = a[: 16 * f, : 16 * f], np.asarray(image, float)[:16, :16]
        assert abs(tag.mean(axis=(0, 1)) - plain.mean(axis=(0, 1))).max() > 10


def test_report_edits_show_before_and_after_and_the_changes(tagged):
    image, res = tagged
    edited = image.copy()
    edited[:16, :16] = 0
    changes = [PredictionChange("tag class", 0.78, 0.0), PredictionChange("other", 0.1, 0.1)]
    page = html_report(
        image=image,
        explanation=res,
        edits=[ReportEdit("remove region 0 (fill black) (the tag)", image, edited, changes)],
    )
    inspection = section(page, "inspection")
    assert "1. remove region 0 (fill black) (the tag)" in text(inspection)
    before, after = images(inspection)
    assert before.size == after.size and max(before.size) >= MIN_SIDE_PX
    b, a = np.asarray(before.convert("RGB"), float), np.asarray(after.convert("RGB"), float)
    f = b.shape[0] // image.shape[0]
    assert a[: 14 * f, : 14 * f].max() < 8 < b[: 14 * f, : 14 * f].mean()  # the edit shows
    assert '<span class="neg">-0.7800</span>' in inspection
    assert "0.7800" in inspection and "0.0000" in inspection
    # without edits there is no inspection section
    assert 'id="inspection"' not in html_report(image=image, explanation=res)


def test_report_edit_inputs_are_checked(tagged):
    image, res = tagged
    with pytest.raises(LimecraftError, match="uint8"):
        ReportEdit("x", image.astype(float), image)
    with pytest.raises(LimecraftError, match="ReportEdit"):
        html_report(image=image, explanation=res, edits=["move region 0"])
    with pytest.raises(LimecraftError, match="explained image"):
        html_report(image=image[:20], explanation=res)


def test_report_lists_only_the_changed_settings_outside_the_fold(tagged):
    image, res = tagged
    page = html_report(image=image, explanation=res)
    settings = section(page, "settings")
    shown, folded = settings.split("<details", 1)
    changed = res.config.changed()
    assert {"samples", "repeats", "fill", "output_space", "outer_segments"} <= set(changed)
    assert "ridge_alpha" not in changed
    for name in changed:
        assert f"<code>{name}</code>" in shown
    assert re.findall(r"<code>(\w+)</code>", shown) == [
        s.name for s, _ in res.config.items() if s.name in changed
    ]
    assert "<code>ridge_alpha</code>" not in shown and "<code>ridge_alpha</code>" in folded
    assert "None" not in page  # an unset optional setting reads "default", not "None"
    # The full list and the full regions table are folded, with a copy that prints open.
    assert page.count("<details") == page.count('<div class="print-only">') == 2
    assert "@media print" in page and "break-inside:avoid" in page and "size:A4" in page


def test_report_top_regions_table_is_short_and_the_full_one_is_folded(photo):
    res = explain(photo, ChannelMeans(), segmentation="slic", n_segments=30, samples=40)
    assert res.n_regions > 12
    regions = section(html_report(image=photo, explanation=res), "regions")
    short, folded = regions.split("<details", 1)
    assert short.count("<tr>") == 1 + 10  # header and the top 10 by |weight|
    top = np.argsort(-np.abs(res.weights), kind="stable")[:10]
    ids = [int(i) for i in re.findall(r'<tr><td class="n">(\d+)</td>', short)]
    assert ids == top.tolist()
    assert f"All {res.n_regions} regions" in folded
    print_copy = folded.split('<div class="print-only">', 1)[1]
    assert print_copy.count('<tr><td class="n">') == res.n_regions


def test_report_uses_given_pictures_instead_of_its_own(tagged):
    image, res = tagged
    pic = np.zeros((40, 60, 3), np.uint8)
    page = html_report(image=image, explanation=res, pictures={"my <overlay>": pic})
    pics = images(section(page, "pictures"))
    assert [p.size for p in pics] == [(540, 360)]  # upscaled 9x to >= 512 px
    assert "my &lt;overlay&gt;" in page


def test_regions_csv_and_table_have_one_row_per_region_with_its_origin(photo):
    mask = np.zeros(photo.shape[:2], bool)
    mask[:20, :20] = True
    res = explain(
        photo,
        ChannelMeans(),
        regions_mask=[mask],
        region_names=["=HYPERLINK(1)"],
        region_origins=["proposed:text"],
        samples=30,
        outer_segments=1,
    )
    rows = list(csv.DictReader(io.StringIO(regions_csv(res))))
    assert len(rows) == res.n_regions == 2
    assert rows[0]["name"] == "'=HYPERLINK(1)"
    assert float(rows[0]["weight"]) == res.weights[0]
    assert [r["origin"] for r in rows] == ["proposed:text", "superpixel"]
    page = html_report(image=photo, explanation=res)
    assert "<th>region</th><th>origin</th>" in page
    assert "<td>proposed:text</td>" in page and "<td>superpixel</td>" in page


# ----------------------------------------------------------------------------- the demo


def demo_report() -> str:
    """A realistic report: the demo model on a conflict image (a circle with a star's tag),
    the tag drawn by hand, the trust checks, and one edit from the Inspect page (remove the
    tag). Also used by test_report_pdf.py."""
    from limecraft_core.edits import Edit, apply_edits
    from limecraft_core.render import softmax
    from models import registry
    from models.samples import load_sample

    sample = load_sample("demo-conflict-1")
    clf = registry.load_classifier("demo")
    res = explain(
        sample.image,
        clf,
        regions_mask=sample.tag_mask,
        region_names=["tag"],
        samples=200,
        repeats=3,
        faithfulness=True,
        compare_fills=["blur"],
        kernel_widths=[0.25, 1.0],
    )
    edited = apply_edits(sample.image, res.segments, [Edit("remove", 0)]).image
    before, after = softmax(clf.predict(sample.image)), softmax(clf.predict(edited))
    order = np.argsort(-before)
    changes = [PredictionChange(clf.label(int(i)), before[i], after[i]) for i in order]
    edit = ReportEdit("remove region 0 (fill inpaint) (tag)", sample.image, edited, changes)
    return html_report(
        image=sample.image, explanation=res, edits=[edit], source=f"{sample.name}.png"
    )


@pytest.mark.slow
def test_demo_report_says_the_tag_drives_star():
    page = demo_report()
    sentence = text(conclusion(page))
    assert sentence.startswith("The model says star (") and "driven by tag (region 0)" in sentence
    assert "across 3 repeats" in sentence
    inspection = text(section(page, "inspection"))
    assert "remove region 0 (fill inpaint) (tag)" in inspection and "star" in inspection


def test_report_gives_the_field_metrics_with_definitions_and_the_localisation(photo):
    """Every metric of the field that ran appears with its value, definition, baseline and steps,
    and the localisation against the expected area with the pointing game's verdict."""
    mask = np.zeros(photo.shape[:2], bool)
    mask[: photo.shape[0] // 2] = True
    res = explain(
        photo,
        ChannelMoments(),  # with signal under the mean fill (ChannelMeans has none)
        segmentation="slic",
        n_segments=10,
        samples=60,
        faithfulness=True,
        expected_mask=mask,
    )
    trust = text(section(html_report(image=photo, explanation=res), "trust"))
    t = res.trust
    # each row: name, value, reading, then the definition with its baseline and steps
    assert f"IROF {t.irof.value:.2f} ({t.irof.per_region:.2f} per region) higher is better" in trust
    assert f"ROAD gap {t.road.value:.3f}" in trust and "noisy linear imputation" in trust
    assert f"Faithfulness correlation {t.faithfulness_correlation.value:.3f} higher is" in trust
    assert f"Sparseness (Gini) {t.sparseness.value:.3f} {t.sparseness.reading}" in trust
    assert f"baseline mean; {t.irof.steps} steps" in trust
    loc = t.localisation
    assert f"relevance mass {loc.relevance_mass:.0%}" in trust
    outcome = (
        "no positive weight"
        if loc.positive_mass <= 0
        else "the top region is expected"
        if loc.pointing_game
        else "the top region is not expected"
    )
    assert f"Localisation {outcome}" in trust


def test_the_trust_pages_checks_go_in_the_report_beside_the_explanations(photo):
    """Issue 29, item 1: after the Trust page ran on the same regions, the report holds its
    repeat verdict, faithfulness, kernel widths, fills and the field's metrics, not only the
    explanation's own checks. Over other regions it is refused with a message that says why."""
    common = dict(segmentation="slic", n_segments=12, samples=60)
    ex = explain(photo, ChannelMeans(), **common)
    checked = explain(
        photo,
        ChannelMeans(),
        segments=ex.segments,
        **{k: v for k, v in common.items() if k == "samples"},
        repeats=3,
        faithfulness=True,
        compare_fills=["gray"],
        kernel_widths=[0.25, "uniform"],
    )
    alone = text(section(html_report(image=photo, explanation=ex), "trust"))
    assert "Trust page" not in alone
    assert "Faithfulness" not in alone and "IROF" not in alone and "Kernel widths" not in alone
    page = html_report(image=photo, explanation=ex, trust=checked)
    trust = text(section(page, "trust"))
    st = checked.trust.stability
    assert "The Trust page's checks (60 samples × 3 repeats, " in trust
    first, detail = said(st.reason)
    assert f"Stability over 3 repeats {st.verdict} {first}" in trust and detail in trust
    # the explanation's own rows are not repeated in the Trust page's table (issue 48)
    own, page_s = trust.split("The Trust page's checks", 1)
    for row in ("Surrogate fit ", "Early stop "):
        assert own.count(row) == 1 and row not in page_s, row
    f = checked.trust.faithfulness
    assert f"deletion AUC {f.deletion_auc:.3f} (random {f.random_deletion_auc:.3f})" in trust
    assert "Kernel widths" in trust and "Fills" in trust
    assert f"IROF {checked.trust.irof.value:.2f}" in trust  # the field's metrics, from Trust
    # the explanation's own checks come first, the Trust page's after them
    assert trust.index("Surrogate fit") < trust.index("The Trust page's checks")

    other = explain(photo, ChannelMeans(), segmentation="slic", n_segments=5, samples=20)
    with pytest.raises(LimecraftError, match="run them again on the current regions"):
        html_report(image=photo, explanation=ex, trust=other)


def test_report_shows_a_region_pasted_into_other_images(tagged):
    """The insertion test in the report: each image's score of the followed class before and
    after, the flip, the summary sentence and the pasted pictures (issue 29, item 1)."""
    from limecraft_core import insertion_test
    from limecraft_core.io.report import ReportTransplant

    image, res = tagged
    mask = tag_mask(image.shape[:2])

    def probabilities(img: np.ndarray) -> np.ndarray:
        red = img[:16, :16, 0].mean() / 255  # the tag class follows the top-left block's red
        return np.array([red, 0.5])

    dark = [np.full((32, 32, 3), 20, np.uint8), np.full((48, 40, 3), 30, np.uint8)]
    result, pasted = insertion_test(image, mask, dark, probabilities, 0)
    t = ReportTransplant.of(
        result,
        ["dark", "darker"],
        pasted,
        region="the tag",
        label=["tag class", "other"].__getitem__,
    )
    page = html_report(image=image, explanation=res, transplant=t)
    part = section(page, "transplant")
    words = text(part)
    assert result.sentence("tag class") in words and "the region: the tag" in words
    for name, before, after in zip(["dark", "darker"], result.before, result.after, strict=True):
        assert f"{name} {before:.4f} {after:.4f}" in words
    assert words.count("(flipped)") == result.flips == 2  # other -> tag class on both
    pictures = images(part)
    assert len(pictures) == 2 and all(max(p.size) >= MIN_SIDE_PX for p in pictures)
    assert 'id="transplant"' not in html_report(image=image, explanation=res)
    with pytest.raises(LimecraftError, match="ReportTransplant"):
        html_report(image=image, explanation=res, transplant="pasted")


def test_report_sets_lime_beside_limecraft_for_the_same_class(tagged):
    image, res = tagged
    auto = explain(
        image, TagModel(), labels=["tag class", "other"], segmentation="grid", n_segments=9,
        fill="black", output_space="raw", samples=40, seed=1,
    )  # fmt: skip
    part = section(html_report(image=image, explanation=res, comparison=auto), "comparison")
    words = text(part)
    assert "LIMEcraft" in words and "automatic superpixels" in words
    assert f"{res.n_regions} regions" in words and f"{auto.n_regions} regions" in words
    assert "strongest region 0 (the tag)" in words
    assert len(images(part)) == 2
    other = explain(
        image, TagModel(), labels=["tag class", "other"], segmentation="grid", n_segments=9,
        fill="black", output_space="raw", samples=40, seed=1, target=1,
    )  # fmt: skip
    assert 'id="comparison"' not in html_report(image=image, explanation=res, comparison=other)
    with pytest.raises(LimecraftError, match="another image size"):
        html_report(image=image, explanation=res, comparison=explain(
            image[:24], TagModel(), segmentation="grid", n_segments=4, samples=20
        ))  # fmt: skip


def test_the_explainers_side_by_side_when_the_explanation_carries_them(tagged):
    """One overlay per method on one stated scale, the agreement table (pairs x FA, RA, SA,
    SRA, Spearman) and the sentence; no section without the block, also after a reload."""
    from limecraft_core import Explanation, compare_explainers

    image, ex = tagged
    methods = ("lime", "kernelshap", "shapley", "occlusion")
    cmp = compare_explainers(
        image, TagModel(), ex.segments, methods, config=ex.config, target=ex.target
    )
    with_block = Explanation.from_json(dataclasses.replace(ex, explainers=cmp).to_json())
    assert 'id="explainers"' not in html_report(image=image, explanation=ex)
    page = section(html_report(image=image, explanation=with_block), "explainers")
    assert len(images(page)) == len(methods)
    said = text(page)
    assert said.startswith("Explainers side by side 4 methods over the same 2 regions")
    assert cmp.agreement.sentence in said
    assert "divided by its own largest |value|" in said
    header = re.search(r"<thead>(.*?)</thead>", page, re.S).group(1)
    assert text(header) == "pair (top 2) FA RA SA SRA Spearman"
    rows = re.findall(r"<tr><td>(.*?)</tr>", page, re.S)
    assert len(rows) == len(methods) * (len(methods) - 1) // 2
    assert text(rows[0]).startswith("LIME · KernelSHAP 1.00")
