"""Every numeric parameter of the engine's public functions, out of its range: a LimecraftError
that names the range. One table across the engine's modules (explain, segmentation and
composed regions, perturbation masks, edits, render, canvas), so a new parameter is added
in one place."""

import numpy as np
import pytest
from bad_files import good_image
from toys import ChannelMeans

import limecraft_core as lc
from limecraft_core._validate import MAX_PIXELS

IMG = good_image()
LAB = np.repeat(np.arange(4), IMG.shape[0] * IMG.shape[1] // 4).reshape(IMG.shape[:2])
MASK = np.zeros(IMG.shape[:2], bool)
MASK[5:20, 5:30] = True
MODEL = ChannelMeans(classes=4)


def _explain(**kw):
    kw.setdefault("samples", 20)
    kw.setdefault("segmentation", "grid")
    return lc.explain(IMG, MODEL, **kw)


ENGINE_BAD = [
    ("explain samples", lambda: _explain(samples=9), r"\[10, 200000\]"),
    ("explain seed", lambda: _explain(seed=-1), r"seed must be in \[0, "),
    ("explain kernel_width", lambda: _explain(kernel_width=-0.1), "kernel_width"),
    ("explain ridge_alpha", lambda: _explain(ridge_alpha=2e6), r"\[0, 1000000\]"),
    ("explain top_labels", lambda: _explain(top_labels=0), r"\[1, 100\]"),
    ("explain batch_size", lambda: _explain(batch_size=0), r"\[1, 65536\]"),
    ("explain p", lambda: _explain(p=1.5), r"p must be in \(0"),
    ("explain mask_expansion", lambda: _explain(mask_expansion=100), r"\[0, 64\]"),
    ("explain repeats", lambda: _explain(repeats=0), r"\[1, 50\]"),
    ("explain blur_sigma", lambda: _explain(fill="blur", blur_sigma=0), "blur_sigma must be > 0"),
    ("explain working_size", lambda: _explain(working_size=8), r"\[16, 100000\]"),
    ("explain input_size", lambda: _explain(input_size=2), r"\[8, 4096\]"),
    ("explain n_segments", lambda: _explain(n_segments=0), r"\[1, 5000\]"),
    ("explain target", lambda: _explain(target=7), r"\[0, 3\]"),
    (
        "explain segmentation_params",
        lambda: _explain(segmentation="slic", segmentation_params={"sigma": -1}),
        r"sigma must be in \[0.0, 100.0\]",
    ),
    ("segment n_segments", lambda: lc.segment(IMG, "slic", 6000), r"\[1, 5000\]"),
    (
        "segment working_size",
        lambda: lc.segment(IMG, "slic", 10, working_size=0),
        r"\[16, 100000\]",
    ),
    ("segment seed", lambda: lc.segment(IMG, "quickshift", seed=-3), r"seed must be in \[0, "),
    (
        "segment slic n_segments param",
        lambda: lc.segment(IMG, "slic", params={"n_segments": 0}),
        r"\[1, 5000\]",
    ),
    (
        "segment slic compactness",
        lambda: lc.segment(IMG, "slic", params={"compactness": -1}),
        r"compactness must be in \[0.0, 1000.0\]",
    ),
    (
        "segment quickshift kernel_size",
        lambda: lc.segment(IMG, "quickshift", params={"kernel_size": 0}),
        r"kernel_size must be in \[1.0, 100.0\]",
    ),
    (
        "segment quickshift max_dist",
        lambda: lc.segment(IMG, "quickshift", params={"max_dist": 0}),
        r"max_dist must be in \(0.0, 10000.0\]",
    ),
    (
        "segment quickshift ratio",
        lambda: lc.segment(IMG, "quickshift", params={"ratio": 2}),
        r"ratio must be in \[0.0, 1.0\]",
    ),
    (
        "segment felzenszwalb scale",
        lambda: lc.segment(IMG, "felzenszwalb", params={"scale": -5}),
        r"scale must be in \(0.0, ",
    ),
    (
        "segment felzenszwalb min_size",
        lambda: lc.segment(IMG, "felzenszwalb", params={"min_size": 0}),
        r"min_size must be in \[1, ",
    ),
    (
        "segment watershed n_segments",
        lambda: lc.segment(IMG, "watershed", params={"n_segments": 0}),
        r"\[1, 5000\]",
    ),
    (
        "segment param not a number",
        lambda: lc.segment(IMG, "slic", params={"sigma": "wide"}),
        "must be a number",
    ),
    (
        "segment unknown param",
        lambda: lc.segment(IMG, "grid", params={"zoom": 2}),
        "unknown parameter",
    ),
    (
        "compose inner_segments",
        lambda: lc.compose_regions(IMG, [MASK], inner_segments=0),
        r"\[1, 1000\]",
    ),
    (
        "compose outer_segments",
        lambda: lc.compose_regions(IMG, [MASK], outer_segments=0),
        r"\[1, 5000\]",
    ),
    (
        "compose min_fragment",
        lambda: lc.compose_regions(IMG, [MASK], min_fragment=-1),
        r"min_fragment must be in \[0, ",
    ),
    (
        "compose working_size",
        lambda: lc.compose_regions(IMG, [MASK], working_size=3),
        r"\[16, 100000\]",
    ),
    ("compose seed", lambda: lc.compose_regions(IMG, [MASK], seed=-1), r"seed must be in \[0, "),
    ("compose mask size", lambda: lc.compose_regions(IMG, [MASK[:10]]), "width and height"),
    ("compose mask float", lambda: lc.compose_regions(IMG, np.full(MASK.shape, 0.5)), "integers"),
    ("sample_masks n_regions", lambda: lc.sample_masks(0, 10), ">= 1"),
    ("sample_masks n_samples", lambda: lc.sample_masks(3, 1), r"\[2, 1000000\]"),
    ("sample_masks p", lambda: lc.sample_masks(3, 10, p=0), r"\(0.0, 1.0"),
    ("edit hue", lambda: lc.Edit("color", 0, hue=200), r"\[-180.0, 180.0\]"),
    ("edit saturation", lambda: lc.Edit("color", 0, saturation=5), r"\[0.0, 4.0\]"),
    ("edit brightness", lambda: lc.Edit("color", 0, brightness=-1), r"\[0.0, 4.0\]"),
    ("edit rgb_shift", lambda: lc.Edit("color", 0, rgb_shift=(0, 2, 0)), r"\[-1.0, 1.0\]"),
    ("edit angle", lambda: lc.Edit("rotate", 0, angle=400), r"\[-360.0, 360.0\]"),
    ("edit factor", lambda: lc.Edit("scale", 0, factor=0.05), r"\[0.1, 5.0\]"),
    ("edit sigma", lambda: lc.Edit("blur", 0, sigma=101), r"\[0.0, 100.0\]"),
    ("edit dx", lambda: lc.Edit("move", 0, dx=MAX_PIXELS + 1), r"\[-50000000, 50000000\]"),
    ("edit region", lambda: lc.Edit("move", -1), ">= 0"),
    ("edit region missing", lambda: lc.apply_edit(IMG, LAB, lc.Edit("remove", 9)), r"0\.\.3"),
    ("transform_mask factor", lambda: lc.transform_mask(MASK, factor=9), r"\[0.1, 5.0\]"),
    (
        "render alpha",
        lambda: lc.heatmap(IMG, LAB, np.ones(4), alpha=2),
        r"alpha must be in \[0.0, 1.0\]",
    ),
    (
        "render top_regions alpha",
        lambda: lc.top_regions(IMG, LAB, np.ones(4), alpha=-1),
        r"alpha must be in \[0.0, 1.0\]",
    ),
    (
        "render dim_others",
        lambda: lc.top_regions(IMG, LAB, np.ones(4), dim_others=2),
        r"dim_others must be in \[0.0, 1.0\]",
    ),
    (
        "render region_map alpha",
        lambda: lc.region_map(IMG, LAB, alpha=3),
        r"alpha must be in \[0.0, 1.0\]",
    ),
    ("render k", lambda: lc.top_regions(IMG, LAB, np.ones(4), k=0), ">= 1"),
    ("render segments size", lambda: lc.boundaries(IMG, LAB[:5]), "do not match"),
    ("canvas click NaN", lambda: _region_at(float("nan")), "finite"),
]


def _region_at(x: float) -> int:
    from limecraft_core.regions import region_at

    return region_at(LAB, x, 1.0, 64.0, 48.0)


@pytest.mark.parametrize(("case", "call", "match"), ENGINE_BAD, ids=[r[0] for r in ENGINE_BAD])
def test_engine_parameters_outside_their_range_name_the_range(case, call, match):
    with pytest.raises(lc.LimecraftError, match=match):
        call()
