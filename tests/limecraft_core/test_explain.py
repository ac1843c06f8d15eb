import contextlib
import io
import itertools
import json
import warnings

import numpy as np
import pytest
import torch
from bad_files import JSON_BAD, doc_with, npz_b64
from bad_files import explanation_doc as make_explanation_doc
from scipy.stats import spearmanr
from toys import ChannelMeans, ChannelMoments, LinearPixels

import limecraft_core as lc
from limecraft_core import (
    Cancelled,
    Classifier,
    Explanation,
    LimecraftError,
    ModelError,
    explain,
    make_fill,
    segment,
)
from limecraft_core._validate import MAX_PIXELS


def grid_labels(h, w, rows, cols):
    r = np.minimum(np.arange(h) * rows // h, rows - 1)
    c = np.minimum(np.arange(w) * cols // w, cols - 1)
    return (r[:, None] * cols + c[None, :]).astype(np.int32)


@pytest.mark.parametrize("sampling", ["bernoulli", "stratified", "antithetic"])
@pytest.mark.parametrize("kernel_width", [0.25, "uniform"])
def test_additive_exactness_for_a_pixel_linear_model(photo, sampling, kernel_width):
    """With a model linear in pixels and a constant fill, the true LIME weight of a region is
    exactly f(x) - f(x with that region filled)."""
    model = LinearPixels(photo.shape[:2], classes=3)
    labels = segment(photo, "slic", n_segments=20)
    res = explain(
        photo,
        model,
        segments=labels,
        samples=300,
        fill="gray",
        output_space="raw",
        ridge_alpha=1e-9,
        sampling=sampling,
        kernel_width=kernel_width,
        seed=3,
    )
    x = torch.from_numpy(photo.transpose(2, 0, 1) / 255.0).float()[None]
    f = model(x)[0, res.target].double().item()
    truth = []
    for k in range(res.n_regions):
        xk = x.clone()
        xk[0][:, torch.from_numpy(labels == k)] = 0.5
        truth.append(f - model(xk)[0, res.target].double().item())
    truth = np.array(truth)
    assert np.allclose(res.weights, truth, rtol=1e-4, atol=1e-4 * np.abs(truth).max())
    # the per-region deltas are the same quantity, measured directly
    assert np.allclose(res.deltas[0], truth, rtol=1e-4, atol=1e-4 * np.abs(truth).max())
    assert res.score > 0.999999


@pytest.mark.slow
def test_agrees_with_the_lime_package(photo):
    from lime import lime_image

    torch.manual_seed(0)
    # A smooth nonlinear model: softmax over pixel-linear logits. Pixel weights vary inside each
    # region (a mean fill would leave region-constant weights blind) and their scale per region
    # spreads the regions' true effects apart.
    labels = segment(photo, "slic", n_segments=25)
    k = labels.max() + 1
    g = np.random.default_rng(0)
    per_region = g.uniform(0.2, 3.0, size=(1, k)) * np.array([[1.0], [-1.0]])
    w = per_region[:, labels] * g.normal(size=labels.shape) * 4 / np.sqrt(labels.size)
    w = torch.from_numpy(w).float()  # (2, H, W)

    def probs(x: torch.Tensor) -> torch.Tensor:  # x (N, 3, H, W) in [0, 1]
        logits = torch.einsum("nhw,khw->nk", x.mean(1) - 0.5, w)
        return torch.softmax(logits, dim=1)

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(batch.transpose(0, 3, 1, 2).astype(np.float32) / 255.0)
        return probs(x).numpy()

    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        theirs = lime_image.LimeImageExplainer(random_state=0).explain_instance(
            photo,
            classifier_fn,
            top_labels=1,
            hide_color=None,
            num_samples=3000,
            batch_size=100,
            segmentation_fn=lambda _: labels,
            random_seed=0,
        )
    target = theirs.top_labels[0]
    their_w = np.zeros(k)
    for region, weight in theirs.local_exp[target]:
        their_w[region] = weight
    ours = explain(
        photo,
        probs,
        segments=labels,
        samples=3000,
        fill="mean",
        output_space="raw",
        target=target,
        seed=1,
    )
    rho = spearmanr(ours.weights, their_w).statistic
    assert rho >= 0.95, rho


def test_same_seed_same_weights_other_seed_other_samples(photo):
    model = ChannelMoments()  # with signal under the mean fill (ChannelMeans has none)
    a = explain(photo, model, samples=200, seed=7, segmentation="slic")
    b = explain(photo, model, samples=200, seed=7, segmentation="slic")
    c = explain(photo, model, samples=200, seed=8, segmentation="slic")
    assert np.array_equal(a.weights, b.weights)
    assert np.array_equal(a.segments, b.segments)
    assert not np.array_equal(a.weights, c.weights)


def test_targets_top_labels_and_probability_space(photo):
    model = ChannelMeans(classes=5)
    res = explain(photo, model, samples=100, top_labels=3, segmentation="grid", n_segments=9)
    logits = model(torch.from_numpy(photo.transpose(2, 0, 1) / 255.0).float()[None])[0]
    probs = torch.softmax(logits, 0)
    assert list(res.classes) == torch.argsort(probs, descending=True)[:3].tolist()
    assert res.class_weights.shape == (3, 9)
    assert np.isclose(res.predictions[0], probs.max().item(), atol=1e-6)
    assert res.top_predictions[0][0] == res.target
    one = explain(photo, model, samples=100, target=4, segmentation="grid", n_segments=9)
    assert one.classes == (4,) and one.target == 4
    with pytest.raises(LimecraftError, match=r"target must be in \[0, 4\]"):
        explain(photo, model, samples=100, target=5, segmentation="grid")


def test_model_input_size_and_normalisation_are_applied(photo):
    seen = {}

    def model(x):
        seen["shape"] = tuple(x.shape[1:])
        seen["min"] = float(x.min())
        return x.mean(dim=(2, 3))

    explain(photo, model, samples=20, input_size=64, normalize="imagenet", segmentation="grid")
    assert seen["shape"] == (3, 64, 64)
    assert seen["min"] < 0  # normalised
    res = explain(photo, model, samples=20, segmentation="grid")
    assert seen["shape"] == (3, 96, 128)
    assert res.segments.shape == photo.shape[:2]


def test_result_maps_back_to_the_users_pixels():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (300, 500, 3)).astype(np.uint8)
    res = explain(
        image,
        ChannelMeans(),
        samples=30,
        segmentation="slic",
        n_segments=20,
        input_size=64,
        working_size=128,
    )
    assert res.segments.shape == (300, 500)
    assert res.region_pixels.sum() == 300 * 500


def test_json_round_trip(photo):
    res = explain(photo, ChannelMeans(), samples=50, top_labels=2, segmentation="slic")
    back = Explanation.from_json(res.to_json())
    assert np.array_equal(back.segments, res.segments)
    assert np.allclose(back.class_weights, res.class_weights)
    assert back.classes == res.classes and back.region_keys == res.region_keys
    assert back.config == res.config and back.run == res.run
    d = res.to_dict()
    assert {
        "settings",
        "run",
        "image",
        "target",
        "intercept",
        "score",
        "regions",
        "timings",
    } <= set(d)
    assert set(d["timings"]) >= {"segmentation_s", "sampling_s", "total_s"}
    assert d["image"] == {"width": 128, "height": 96}
    assert set(d["regions"][0]) >= {"id", "pixels", "weight", "delta"}


def test_region_origins_are_recorded_and_round_trip(photo):
    hand = np.zeros(photo.shape[:2], bool)
    hand[10:40, 10:50] = True
    text = np.zeros(photo.shape[:2], bool)
    text[60:80, 70:120] = True
    res = explain(
        photo,
        ChannelMeans(),
        regions_mask=[hand, text],
        region_origins=["uploaded", "proposed:text"],
        samples=30,
        segmentation="slic",
        n_segments=8,
    )
    assert res.region_origins[:2] == ("uploaded", "proposed:text")
    assert set(res.region_origins[2:]) == {"superpixel"}
    d = json.loads(res.to_json())
    assert [r["origin"] for r in d["regions"][:2]] == ["uploaded", "proposed:text"]
    assert Explanation.from_json(res.to_json()).region_origins == res.region_origins
    assert [r["origin"] for r in res.regions_table()] == list(res.region_origins)


def test_an_explanation_saved_before_origins_derives_them_from_the_keys(photo):
    hand = np.zeros(photo.shape[:2], bool)
    hand[10:40, 10:50] = True
    res = explain(
        photo, ChannelMeans(), regions_mask=[hand], samples=30, segmentation="slic", n_segments=8
    )
    d = res.to_dict()
    for r in d["regions"]:
        del r["origin"]
    back = Explanation.from_dict(d)
    assert back.region_origins == ("drawn",) + ("superpixel",) * (res.n_regions - 1)
    assert back.to_dict()["format_version"] == d["format_version"] == 2


def test_a_merged_region_is_merged_in_the_explanation(photo):
    regions = lc.compose_regions(
        photo, [photo[..., 0] > 200], origins=["uploaded"], outer_method="slic", outer_segments=8
    )
    merged = lc.merge_regions(regions, [0, 1])
    res = explain(photo, ChannelMeans(), segments=merged, samples=30)
    assert res.region_origins[0] == "merged" and res.region_keys[0].startswith("merge(")
    assert Explanation.from_json(res.to_json()).region_origins == res.region_origins


def test_an_unknown_origin_in_a_file_names_the_part(photo):
    d = explain(photo, ChannelMeans(), samples=20, segmentation="grid", n_segments=4).to_dict()
    d["regions"][1]["origin"] = "painted"
    with pytest.raises(LimecraftError, match=r"regions\[1\]\.origin: must be one of"):
        Explanation.from_dict(d)


@pytest.mark.parametrize(
    "text",
    ["not json", "{}", '{"format": "limecraft-explanation", "format_version": 1}', "[1, 2]"],
)
def test_from_json_refuses_garbage(text):
    with pytest.raises(LimecraftError):
        Explanation.from_json(text)


# ----------------------------------------------------------------------------- bad session JSON
# Hostile and broken documents (tests/bad_files.py): refused with a LimecraftError, never run.


@pytest.fixture(scope="module")
def explanation_doc() -> dict:
    return make_explanation_doc()


@pytest.mark.parametrize(("case", "make"), JSON_BAD, ids=[r[0] for r in JSON_BAD])
def test_session_json_is_validated_and_refused(explanation_doc, case, make):
    with pytest.raises(LimecraftError):
        Explanation.from_json(make(explanation_doc))


def test_session_json_text_is_data_never_evaluated(explanation_doc):
    marker = "__import__('os').system('touch /nonexistent')"
    text = doc_with(explanation_doc, ("classes", 0, "label"), marker)
    ex = Explanation.from_json(doc_with(json.loads(text), ("regions", 0, "name"), marker))
    assert ex.class_labels[0] == marker and ex.region_names[0] == marker
    # settings follow the schema: text where a setting should be is refused as a value, not run
    with pytest.raises(LimecraftError, match="unknown setting 'note'"):
        Explanation.from_json(doc_with(explanation_doc, ("settings", "sampling", "note"), marker))
    with pytest.raises(LimecraftError, match="fill must be one of"):
        Explanation.from_json(doc_with(explanation_doc, ("settings", "fill", "fill"), marker))


@pytest.mark.parametrize("case", ["deep", "infinity"])
def test_session_json_hostile_numbers_and_nesting(explanation_doc, case):
    text = (
        "[" * 100_000
        if case == "deep"
        else doc_with(explanation_doc, ("classes", 0, "index"), 1e400)
    )
    with pytest.raises(LimecraftError):
        Explanation.from_json(text)


def test_session_json_segments_bomb_is_refused_before_decompressing(explanation_doc):
    big = np.zeros((1, MAX_PIXELS + 1), np.int8)  # 50 MB of zeros, about 50 kB compressed
    text = doc_with(explanation_doc, ("segments", "data"), npz_b64(big))
    with pytest.raises(LimecraftError, match=f"{MAX_PIXELS:,}"):
        Explanation.from_json(text)


def test_progress_and_cancel(photo):
    calls = []
    explain(
        photo,
        ChannelMeans(),
        samples=100,
        batch_size=16,
        segmentation="grid",
        n_segments=4,
        dedup=False,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert calls[-1][0] == calls[-1][1] == 100 + 2 * 4
    assert all(a[0] < b[0] for a, b in itertools.pairwise(calls))
    # With deduplication (the default) 4 regions have only 16 distinct masks to score.
    calls.clear()
    e = explain(
        photo,
        ChannelMeans(),
        samples=100,
        batch_size=16,
        segmentation="grid",
        n_segments=4,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert calls[-1][0] == calls[-1][1] == e.run.model_passes <= 16
    n = {"batches": 0}

    def cancel():
        n["batches"] += 1
        return n["batches"] > 2

    with pytest.raises(Cancelled):
        explain(
            photo, ChannelMeans(), samples=500, batch_size=16, segmentation="grid", cancel=cancel
        )


@pytest.mark.parametrize(
    ("model", "match"),
    [
        (lambda x: x.mean(dim=(1, 2, 3)), r"shape \(N, C\).*returned shape \(16,\)"),
        (lambda x: torch.full((x.shape[0], 3), float("nan")), "NaN"),
        (lambda x: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_a_failing_model_gives_a_clear_error(photo, model, match):
    with pytest.raises(ModelError, match=match):
        explain(photo, model, samples=20, batch_size=16, segmentation="grid")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"samples": 5}, r"samples must be in \[10, 200000\]"),
        ({"kernel_width": -1}, "kernel_width"),
        ({"ridge_alpha": -0.5}, "ridge_alpha"),
        ({"fill": "plaid"}, "fill must be one of"),
        ({"output_space": "logits"}, "output_space must be one of"),
        ({"device": "tpu"}, "device must be one of"),
        ({"batch_size": 0}, "batch_size"),
        ({"segments": np.zeros((5, 5), int)}, "must have the image's width and height"),
        ({"regions_mask": np.zeros((5, 5), bool)}, "must have the image's width and height"),
    ],
)
def test_bad_arguments_say_what_to_do(photo, kwargs, match):
    with pytest.raises(LimecraftError, match=match):
        explain(photo, ChannelMeans(), **kwargs)


def test_bad_images_are_refused():
    with pytest.raises(LimecraftError, match=r"values in \[0, 1\]"):
        explain(np.full((20, 20, 3), 2.0), ChannelMeans())
    with pytest.raises(LimecraftError, match="at least 8"):
        explain(np.zeros((4, 20, 3), np.uint8), ChannelMeans())
    with pytest.raises(LimecraftError, match=r"\(H, W, 3\)"):
        explain(np.zeros((20, 20, 4), np.uint8), ChannelMeans())


def test_input_arrays_are_not_mutated(photo):
    labels = segment(photo, "slic", n_segments=10)
    img0, lab0 = photo.copy(), labels.copy()
    explain(photo, ChannelMeans(), segments=labels, samples=20, fill="inpaint")
    assert np.array_equal(photo, img0) and np.array_equal(labels, lab0)
    make_fill(photo, labels, "blur")
    assert np.array_equal(photo, img0)


def test_a_classifier_object_is_used_as_is(photo):
    clf = Classifier(ChannelMeans(), input_size=32, labels=["a", "b", "c", "d"], name="toy")
    res = explain(photo, clf, samples=20, segmentation="grid")
    assert res.class_labels[0] in "abcd"
    assert res.run.model == "toy" and res.run.input_size == [32, 32]


def test_out_of_memory_halves_the_batch_and_retries(photo):
    """The GPU's OOM path, exercised on the CPU: a model that cannot take more than 4 images."""
    calls = []

    def small_memory(x):
        calls.append(x.shape[0])
        if x.shape[0] > 4:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return x.mean(dim=(2, 3))

    res = explain(
        photo,
        small_memory,
        samples=40,
        batch_size=16,
        segmentation="grid",
        n_segments=4,
        dedup=False,
        early_stop=None,  # one call to the model for every block, as the test counts
    )
    ref = explain(
        photo,
        lambda x: x.mean(dim=(2, 3)),
        samples=40,
        batch_size=16,
        segmentation="grid",
        n_segments=4,
    )
    assert calls[:3] == [16, 8, 4] and max(calls[3:]) <= 4
    assert np.allclose(res.weights, ref.weights, atol=1e-6)


def test_a_model_that_oom_on_one_image_gives_a_clear_error(photo):
    def never(x):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    with pytest.raises(LimecraftError, match="ran out of device memory on a single image"):
        explain(photo, never, samples=20, batch_size=2, segmentation="grid")


def test_half_normalisation_gives_the_model_minus_one_to_one():
    """normalize="half" is (x - 0.5) / 0.5, the input convention of TF-style models such as
    EfficientNet-Lite: black is -1, mid-gray 0, white +1."""
    seen = []
    clf = lc.Classifier(lambda x: seen.append(x.clone()) or x.mean(dim=(2, 3)), normalize="half")
    batch = torch.tensor([0.0, 0.5, 1.0]).view(3, 1, 1, 1).expand(3, 3, 4, 4).contiguous()
    clf(batch)
    np.testing.assert_allclose(seen[0][:, 0, 0, 0].numpy(), [-1.0, 0.0, 1.0])
    with pytest.raises(LimecraftError, match="normalize"):
        lc.Classifier(lambda x: x, normalize="tf")
