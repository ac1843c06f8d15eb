import csv
import io

import numpy as np
from toys import ChannelMeans

from limecraft_core import explain, top_regions
from limecraft_core.report import html_report, regions_csv


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
    page = html_report(
        image=photo,
        explanation=res,
        pictures={"top regions": top_regions(photo, res.segments, res.weights)},
        edits=["move region 0 by (+3, +0) px <b>"],
        prediction_changes=[
            {"label": "<img src=x onerror=alert(2)>", "original": 0.5, "edited": 0.25}
        ],
        source="<evil>.png",
    )
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;evil&gt;.png" in page
    assert page.count("data:image/png;base64,") == 2
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    assert "-0.2500" in page  # the prediction change


def test_regions_csv_has_one_row_per_region_and_defuses_formulas(photo):
    mask = np.zeros(photo.shape[:2], bool)
    mask[:20, :20] = True
    res = explain(
        photo,
        ChannelMeans(),
        regions_mask=[mask],
        region_names=["=HYPERLINK(1)"],
        samples=30,
        outer_segments=1,
    )
    rows = list(csv.DictReader(io.StringIO(regions_csv(res))))
    assert len(rows) == res.n_regions == 2
    assert rows[0]["name"] == "'=HYPERLINK(1)"
    assert float(rows[0]["weight"]) == res.weights[0]


def test_report_shows_the_verdicts_and_the_segmentation_that_ran(photo):
    """The report carries what the JSON carries: the stability verdict (and the other checks'
    verdicts), and the segmentation that really made the regions."""
    res = explain(
        photo,
        ChannelMeans(),
        segmentation="slic",
        n_segments=12,
        samples=60,
        repeats=3,
        faithfulness=True,
        compare_fills=["gray"],
    )
    page = html_report(image=photo, explanation=res)
    verdict = res.trust.stability.verdict
    assert f"Stability over 3 repeats: <b>{verdict}</b>" in page
    assert "slic superpixels, 0 handcrafted, 0 merged" in page
    assert ("beats random orders" in page) or ("does not beat random orders" in page)
    assert "<td class='l'>segmentation</td><td class='l'>segmentation</td><td class='l'>slic</td>" in page
    assert "quickshift" not in page
