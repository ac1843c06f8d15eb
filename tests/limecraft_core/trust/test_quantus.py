"""Agreement with Quantus 0.6.0, the reference implementations of the metrics in
:mod:`limecraft_core.trust`'s metrics (and of the engine's deletion curve).

How region and pixel definitions are made to line up: a 3x16x16 image cut into a 4x4 grid of
equal 4x4-pixel regions (K = 16); the attribution map paints each region's weight on its pixels
(distinct weights, so no ties between regions); the toy model is linear in the pixels
(``toys.LinearPixels``, logits scaled down) scored as softmax probabilities, as the engine's
curves are (``softmax=True`` passed to every Quantus call: its default differs by metric, and
FaithfulnessCorrelation's is logits); the baseline is a
constant 0 (our ``black`` fill, Quantus's ``perturb_baseline=0.0``); ``normalise=False`` and
``abs=False`` everywhere but Sparseness (``abs=True``, its definition). Pixel steps are chosen at
region boundaries. Where Quantus 0.6.0 cannot run as is on this setting, the test says why and
what it adjusts.

Tolerances: 1e-6 on scores and curves (float32 images and outputs on both sides), 1e-5 on IROF
(a sum of K ratios), 1e-9 on the imputation, 1e-6 on sparseness (Quantus adds 1e-7 to every
attribution).
"""

import numpy as np
import pytest
import quantus
import torch
from quantus.functions import perturb_func as qpf
from quantus.helpers import utils as qutils
from toys import LinearPixels

from limecraft_core.perturb import perturbed_images
from limecraft_core.trust import (
    deletion_insertion_masks,
    faithfulness_correlation,
    irof,
    localisation,
    noisy_linear_imputation,
    random_subsets,
    road_counts,
    road_images,
    sparseness,
)

# The tests patch Quantus internals (see each docstring): they are written against this version.
assert quantus.__version__ == "0.6.0", quantus.__version__

H = W = 16
SIDE = 4  # region side in pixels
K = (H // SIDE) * (W // SIDE)
TARGET = 1
TOL = 1e-6


def _grid(h: int = H, w: int = W, side: int = SIDE) -> np.ndarray:
    return (np.arange(h)[:, None] // side) * (w // side) + np.arange(w)[None, :] // side


LABELS = _grid()


class Scaled(torch.nn.Module):
    """Logits of ``LinearPixels`` scaled down, so that the softmax is not saturated."""

    def __init__(self, inner: LinearPixels, scale: float) -> None:
        super().__init__()
        self.inner, self.scale = inner, scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * self.scale


@pytest.fixture(scope="module")
def setup():
    """Image (H, W, 3) float32, model, and the model's true region attribution (logit) for
    TARGET."""
    linear = LinearPixels((H, W), classes=4, seed=3)
    model = Scaled(linear, 0.05).eval()
    image = np.random.default_rng(0).random((H, W, 3)).astype(np.float32)
    contrib = 0.05 * (linear.w[TARGET].numpy() * image.transpose(2, 0, 1)).sum(axis=0)
    weights = np.bincount(LABELS.ravel(), weights=contrib.ravel(), minlength=K)
    assert len(np.unique(weights)) == K  # distinct: no ties between regions
    return image, model, weights


def _probs(model: torch.nn.Module, images: np.ndarray) -> np.ndarray:
    """Target-class softmax of (B, H, W, C) images."""
    with torch.no_grad():
        x = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
        return torch.softmax(model(x), dim=1)[:, TARGET].numpy().astype(np.float64)


def _quantus(metric, model, image, attribution, segmentation=None, **kw) -> np.ndarray:
    """Run a Quantus metric on one image; attribution and segmentation are (H, W) maps."""
    x = image.transpose(2, 0, 1)[None].astype(np.float32)
    a = np.asarray(attribution, np.float32)[None, None]
    s = None if segmentation is None else np.asarray(segmentation)[None, None].astype(np.float32)
    out = metric(
        model=model,
        x_batch=x,
        y_batch=np.array([TARGET]),
        a_batch=a.copy(),
        s_batch=s,
        device="cpu",
        channel_first=True,
        softmax=True,  # Quantus's default differs by metric; our scores are probabilities
        **kw,
    )
    return np.asarray(out, np.float64)


def _deletion_curve(setup, weights) -> np.ndarray:
    """The engine's deletion curve (K+1 outputs), built as _stages.checks._faithfulness builds it."""
    image, model, _ = setup
    order = np.argsort(-np.asarray(weights), kind="stable")
    masks, _ = deletion_insertion_masks(order, K)
    return _probs(model, perturbed_images(image, LABELS, masks, "black"))


Q = {"disable_warnings": True, "display_progressbar": False, "normalise": False, "abs": False}


def test_deletion_curve_is_quantus_pixel_flipping(setup):
    """PixelFlipping flips ``features_in_step`` features of the flattened (C, H, W) input per
    step and returns the score after each step. It asserts that the step divides H*W (not
    C*H*W), so a step is one region's 16 pixel values and three steps hide one region on all
    channels (which channel values a step takes is a tie order; after every third step the
    hidden set is exactly the first j regions): every third score is our curve without step 0."""
    image, model, weights = setup
    painted = weights[LABELS]
    metric = quantus.PixelFlipping(features_in_step=SIDE * SIDE, perturb_baseline=0.0, **Q)
    ref = _quantus(metric, model, image, painted)[0]
    assert ref.shape == (3 * K,)
    ref = ref[2::3]
    ours = _deletion_curve(setup, weights)
    np.testing.assert_allclose(ours[1:], ref, atol=TOL)
    # a wrong order gives another curve
    assert np.abs(_deletion_curve(setup, -weights)[1:] - ref).max() > 1e-3


@pytest.mark.parametrize("order", ["morf", "lerf"])
def test_deletion_curve_is_quantus_region_perturbation(setup, order):
    """RegionPerturbation with ``patch_size`` = region side: its patches are our regions, ordered
    by summed attribution; it returns the drops y_0 - y_j, j = 1..K. LeRF is our deletion curve
    for the reversed order."""
    image, model, weights = setup
    metric = quantus.RegionPerturbation(
        patch_size=SIDE, order=order, regions_evaluation=K, perturb_baseline=0.0, **Q
    )
    ref = _quantus(metric, model, image, weights[LABELS])[0]
    w = weights if order == "morf" else -weights
    ours = _deletion_curve(setup, w)
    np.testing.assert_allclose(ours[0] - ours[1:], ref, atol=TOL)
    wrong = _deletion_curve(setup, -w)
    assert np.abs(ref - (wrong[0] - wrong[1:])).max() > 1e-3


def test_irof_is_quantus_irof(setup, monkeypatch):
    """Quantus's IROF segments with SLIC: we hand it our grid instead. Two shims for Quantus
    0.6.0 bugs that do not touch the definition: numpy 2.4 removed ``np.trapz`` (an alias of
    ``np.trapezoid``), and its default perturbation asserts that the (1, H, W) segment mask has the
    (C, H, W) image's shape, so for C = 3 the mask is broadcast over channels first."""
    image, model, weights = setup
    monkeypatch.setattr(np, "trapz", np.trapezoid, raising=False)
    monkeypatch.setattr(qutils, "get_superpixel_segments", lambda img, segmentation_method: LABELS)

    def by_mask(arr, mask, **kw):
        return qpf.baseline_replacement_by_mask(arr, np.broadcast_to(mask, arr.shape), **kw)

    metric = quantus.IROF(perturb_func=by_mask, perturb_baseline=0.0, return_aggregate=False, **Q)
    ref = _quantus(metric, model, image, weights[LABELS])[0]
    ours = irof(_deletion_curve(setup, weights), fill="black")
    assert ours.value == pytest.approx(ref, abs=1e-5)
    assert ours.per_region == pytest.approx(ref / K, abs=1e-6)
    wrong = irof(_deletion_curve(setup, -weights)).value
    assert abs(wrong - ref) > 0.1


def test_noisy_linear_imputation_is_quantus(setup):
    """The imputation itself, on three channels, noise included: Quantus draws
    ``np.random.randn(C, n)`` from the global generator for the n hole pixels in the order of its
    indices; sorted indices and a RandomState with the same seed give ours the same draws."""
    image, _, _ = setup
    hole = np.isin(LABELS, [0, 5, 6, 15])  # corners, a border and the centre
    hole[9, 2:7] = True  # and an irregular stroke
    np.random.seed(7)  # noqa: NPY002 (Quantus draws from the global generator)
    ref = qpf.noisy_linear_imputation(
        arr=image.transpose(2, 0, 1).astype(np.float64), indices=np.flatnonzero(hole), noise=0.01
    )
    ours = noisy_linear_imputation(image.astype(np.float64), hole, 0.01, np.random.RandomState(7))
    np.testing.assert_allclose(ours, ref.transpose(1, 2, 0), atol=1e-9)
    np.testing.assert_array_equal(ours[~hole], image[~hole])
    other = noisy_linear_imputation(image.astype(np.float64), np.roll(hole, 1, 0), 0.01, 7)
    assert np.abs(other - ours).max() > 1e-2


def _one_channel():
    """A 1x16x16 image, a linear model on it (ROAD's end-to-end setting, see below), its
    predicted class and that class's true region attribution (logit contributions)."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(H * W, 4)).eval()
    image = np.random.default_rng(1).random((H, W, 1)).astype(np.float32)
    with torch.no_grad():
        target = int(model(torch.from_numpy(image.transpose(2, 0, 1)[None].copy())).argmax())
    contrib = model[1].weight[target].detach().numpy().reshape(H, W) * image[..., 0]
    weights = np.bincount(LABELS.ravel(), weights=contrib.ravel(), minlength=K)
    return image, model, weights, target


@pytest.mark.parametrize("order", ["morf", "lerf"])
def test_road_images_are_quantus_road(order):
    """End to end on one channel. Quantus 0.6.0's ROAD ranks the attribution broadcast to
    (C, H, W) and flattened, but indexes the image's (C, H*W) view with those indices, so for
    C > 1 it raises IndexError; with C = 1 it runs as designed (the imputation on three channels
    is checked above). ROAD is MoRF only in Quantus: LeRF is MoRF of the negated attribution.
    Noise is 0 here because Quantus's hole indices come in argsort order (ties inside a region
    in no set order), so its draws cannot be matched pixel by pixel. Percentages 6.25 * count
    hit region boundaries exactly (16 pixels per region, 256 in all).

    Quantus returns, per percentage, whether the predicted class is unchanged, not the class
    score our curves hold: we capture the images it builds and compare those, then compare
    its accuracies with the argmax of the model on ours."""
    image, model, weights, target = _one_channel()
    counts = road_counts(K)
    captured = []

    def capture(arr, indices, **kw):
        out = qpf.noisy_linear_imputation(arr, indices, **kw)
        captured.append(out)
        return out

    metric = quantus.ROAD(
        percentages=[6.25 * c for c in counts], noise=0.0, perturb_func=capture, **Q
    )
    sign = 1 if order == "morf" else -1
    acc = metric(
        softmax=True,
        model=model,
        x_batch=image.transpose(2, 0, 1)[None],
        y_batch=np.array([target]),
        a_batch=(sign * weights[LABELS])[None, None].astype(np.float32),
        device="cpu",
        channel_first=True,
    )
    ours = road_images(image, LABELS, weights, order=order, noise=0.0)
    assert ours.shape == (len(counts), H, W, 1)
    ref = np.stack(captured).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(ours, ref, atol=TOL)
    with torch.no_grad():
        logits = model(torch.from_numpy(ours.transpose(0, 3, 1, 2).copy()))
    kept = (logits.argmax(1).numpy() == target).astype(int)
    np.testing.assert_array_equal(kept, [acc[6.25 * c] for c in counts])
    # MoRF loses the class at the first steps, LeRF keeps it throughout
    assert kept.tolist() == ([0, 0, 1, 1, 0, 1, 1, 1, 1] if order == "morf" else [1] * 9)
    other = road_images(
        image, LABELS, weights, order="lerf" if order == "morf" else "morf", noise=0
    )
    assert np.abs(other - ref).max() > 1e-2


def test_faithfulness_correlation_whole_regions(setup, monkeypatch):
    """Quantus draws each subset as ``np.random.choice(C*H*W, subset_size, replace=False)``:
    single channel values, not whole regions, so at pixel level it cannot be aligned with a
    region-level subset. We replace that draw by our region subsets (every channel of every pixel
    of the hidden regions; subset_size = 3 * 16 * regions hidden) and compare the correlation."""
    image, model, weights = setup
    hide, runs = 5, 20
    masks = random_subsets(K, runs, hide, rng=3)
    draws = iter([np.flatnonzero(np.broadcast_to((~m)[LABELS], (3, H, W))) for m in masks])
    monkeypatch.setattr(np.random, "choice", lambda n, size, replace=True: next(draws))
    metric = quantus.FaithfulnessCorrelation(
        nr_runs=runs,
        subset_size=3 * SIDE * SIDE * hide,
        perturb_baseline=0.0,
        return_aggregate=False,
        **Q,
    )
    ref = _quantus(metric, model, image, weights[LABELS])[0]
    outputs = _probs(model, perturbed_images(image, LABELS, masks, "black"))
    original = _probs(model, image[None])[0]
    ours = faithfulness_correlation(weights, masks, outputs, original, fill="black")
    assert ours.value == pytest.approx(ref, abs=TOL)
    assert ours.steps == runs and ours.mean_hidden == hide
    shuffled = np.random.default_rng(0).permutation(weights)
    assert abs(faithfulness_correlation(shuffled, masks, outputs, original).value - ref) > 0.05


def test_faithfulness_correlation_quantus_own_draws():
    """With one pixel per region on a 1x4x4 image, Quantus's features are our regions, and its
    own seeded draws are ours: :func:`random_subsets` with a RandomState of the same seed."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3)).eval()
    image = np.random.default_rng(4).random((4, 4, 1)).astype(np.float32)
    labels = np.arange(16).reshape(4, 4)
    weights = model[1].weight[TARGET].detach().numpy().astype(np.float64) * image.ravel()
    runs, size = 30, 4
    np.random.seed(11)  # noqa: NPY002 (Quantus draws from the global generator)
    metric = quantus.FaithfulnessCorrelation(
        nr_runs=runs, subset_size=size, perturb_baseline=0.0, return_aggregate=False, **Q
    )
    ref = _quantus(metric, model, image, weights[labels])[0]
    masks = random_subsets(16, runs, size, rng=np.random.RandomState(11))
    imgs = np.where(masks[:, labels][..., None], image[None], 0.0).astype(np.float32)
    outputs, original = _probs(model, imgs), _probs(model, image[None])[0]
    ours = faithfulness_correlation(weights, masks, outputs, original)
    assert ours.value == pytest.approx(ref, abs=TOL)
    other = random_subsets(16, runs, size, rng=np.random.RandomState(12))
    imgs = np.where(other[:, labels][..., None], image[None], 0.0).astype(np.float32)
    assert faithfulness_correlation(weights, other, _probs(model, imgs), original).value != (
        pytest.approx(ref, abs=1e-3)
    )


def test_sparseness_is_quantus(setup):
    """Gini of |attribution|: replicating each region's value on its 16 pixels leaves the Gini
    unchanged, so pixel and region values agree on an equal grid (not on unequal regions,
    where Quantus weights a region by its area and we count it once)."""
    image, model, weights = setup
    metric = quantus.Sparseness(**{**Q, "abs": True})
    ref = _quantus(metric, model, image, weights[LABELS])[0]
    assert sparseness(weights).value == pytest.approx(ref, abs=TOL)
    peaked = weights.copy()
    peaked[3] = 50 * np.abs(weights).max()
    assert sparseness(peaked).value - ref > 0.2


EXPECTED = np.isin(np.arange(K), [0, 1, 4, 5, 10])


def test_relevance_mass_is_quantus(setup):
    """Relevance mass counts positive weight only (Arras et al.); Quantus sums the signed
    attribution, so it is given the positive part. The expected mask is a union of whole
    regions of equal size, so pixel sums are 16 times region sums."""
    image, model, weights = setup
    seg = EXPECTED[LABELS]
    metric = quantus.RelevanceMassAccuracy(**Q)
    ref = _quantus(metric, model, image, np.maximum(weights, 0)[LABELS], seg)[0]
    assert localisation(weights, EXPECTED).relevance_mass == pytest.approx(ref, abs=TOL)
    signed = _quantus(metric, model, image, weights[LABELS], seg)[0]
    assert abs(signed - ref) > 1e-3  # the definitions differ when weights are negative


def test_relevance_rank_accuracy_is_quantus(setup):
    """Quantus takes the top-|S| pixels; with |S| = 16 |E| and no ties between regions these are
    exactly the top-|E| regions."""
    image, model, weights = setup
    metric = quantus.RelevanceRankAccuracy(**Q)
    for w in (weights, -weights):
        ref = _quantus(metric, model, image, w[LABELS], EXPECTED[LABELS])[0]
        assert localisation(w, EXPECTED).relevance_rank_accuracy == pytest.approx(ref, abs=TOL)
    assert localisation(weights, EXPECTED).relevance_rank_accuracy != pytest.approx(
        localisation(-weights, EXPECTED).relevance_rank_accuracy
    )


def test_pointing_game_is_quantus(setup):
    image, model, weights = setup
    metric = quantus.PointingGame(**Q)
    top = int(np.argmax(weights))
    hits = []
    for expected in (np.arange(K) == top, np.arange(K) == (top + 1) % K, EXPECTED):
        ref = _quantus(metric, model, image, weights[LABELS], expected[LABELS])[0]
        ours = localisation(weights, expected).pointing_game
        assert ours == bool(ref)
        hits.append(ours)
    assert hits[:2] == [True, False]
