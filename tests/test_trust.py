import numpy as np
import pytest
import torch
from toys import ChannelMeans, LinearPixels

from limecraft_core import Explanation, LimecraftError, explain, segment
from limecraft_core.trust import (
    auc,
    deletion_insertion_masks,
    jaccard_top,
    kendall_w,
    sign_flips,
    stability,
    verdict,
)


def test_kendall_w_extremes():
    same = np.tile(np.arange(10.0), (4, 1))
    assert kendall_w(same) == pytest.approx(1.0)
    # two raters in exactly opposite order: W = 0
    opposite = np.stack([np.arange(10.0), -np.arange(10.0)])
    assert kendall_w(opposite) == pytest.approx(0.0)
    assert kendall_w(same[:1]) == 1.0


def test_jaccard_and_sign_flips():
    w = np.array([[5, 4, 3, 2, 1, 0, 0], [5, 4, 3, 2, 0, 1, 0]], float)
    assert jaccard_top(w, 5) == pytest.approx(4 / 6)
    assert sign_flips(np.array([[1.0, -1, 2], [1, 1, 2]])) == pytest.approx(1 / 3)


def test_verdict_thresholds():
    assert verdict(0.95, 0.9, 0.0) == "stable"
    assert verdict(0.85, 0.9, 0.0) == "borderline"
    assert verdict(0.6, 0.9, 0.0) == "unstable"
    assert verdict(0.95, 0.4, 0.0) == "unstable"
    assert verdict(0.95, 0.9, 0.5) == "unstable"


def test_stability_interval_covers_the_mean():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 12))
    st = stability(w)
    assert st.repeats == 6
    assert np.all(np.array(st.ci_low) <= np.array(st.mean))
    assert np.all(np.array(st.mean) <= np.array(st.ci_high))


def test_deletion_insertion_masks_and_auc():
    dele, ins = deletion_insertion_masks([2, 0, 1], 3)
    assert dele.tolist() == [[1, 1, 1], [1, 1, 0], [0, 1, 0], [0, 0, 0]]
    assert ins.tolist() == [[0, 0, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1]]
    assert auc([1, 1, 1]) == 1.0 and auc([1, 0]) == 0.5


def test_additive_model_is_perfectly_stable(photo):
    model = LinearPixels(photo.shape[:2], classes=2)
    labels = segment(photo, "slic", n_segments=15)
    res = explain(
        photo,
        model,
        segments=labels,
        samples=200,
        fill="gray",
        output_space="raw",
        ridge_alpha=1e-9,
        repeats=4,
        kernel_widths=[0.1, 0.5, "uniform"],
        convergence=[50, 100, 200],
        compute_deltas=False,
    )
    st = res.trust.stability
    assert st.kendall_w == pytest.approx(1.0)
    assert st.sign_flips == 0.0 and st.jaccard_top5 == 1.0
    assert st.verdict == "stable" and res.verdict == "stable"
    assert res.trust.convergence.needed == 50
    # the exact weights do not depend on the kernel either
    sweep = np.array(res.trust.kernel_sweep.weights)
    assert (
        np.allclose(sweep, sweep[0], rtol=1e-4, atol=1e-6)
        and res.trust.kernel_sweep.sensitive == []
    )


def test_a_deliberately_unstable_setup_is_flagged(photo):
    res = explain(
        photo,
        ChannelMeans(),
        samples=12,
        segmentation="grid",
        n_segments=100,
        repeats=5,
        compute_deltas=False,
    )
    assert res.trust.stability.verdict == "unstable"


def test_repeats_share_one_batched_pass(photo):
    calls = []

    def model(x):
        calls.append(x.shape[0])
        return x.mean(dim=(2, 3))

    explain(
        photo,
        model,
        samples=40,
        repeats=3,
        batch_size=1000,
        segmentation="grid",
        n_segments=4,
        dedup=False,
        compute_deltas=False,
    )
    assert calls == [120]  # 3 repeats x 40 samples in one call


def test_deletion_beats_random_on_the_demo_model():
    from models import demo
    from models.registry import load_classifier

    model = load_classifier("demo")
    better = 0
    images = demo.generate(6, seed=31, mode="conflict")
    for s in images:
        res = explain(
            s.image,
            model,
            regions_mask=s.tag_mask,
            samples=400,
            faithfulness=True,
            compute_deltas=False,
        )
        f = res.trust.faithfulness
        assert len(f.deletion) == res.n_regions + 1
        assert f.deletion[0] == pytest.approx(res.predictions[0], abs=1e-5)
        better += f.deletion_auc < f.random_deletion_auc
        assert f.heldout_r2 is not None
    assert better == len(images)


def test_fill_comparison_and_json_keys(photo):
    res = explain(
        photo,
        ChannelMeans(),
        samples=60,
        segmentation="slic",
        n_segments=12,
        repeats=2,
        faithfulness=True,
        compare_fills=["blur", "inpaint"],
        mask_expansion=2,
    )
    d = res.to_dict()
    assert {"kendall_w", "jaccard_top5", "sign_flips", "verdict"} <= set(d["stability"])
    assert {"deletion_auc", "insertion_auc"} <= set(d["faithfulness"])
    assert d["fills"]["fills"] == ["mean", "blur", "inpaint"]
    assert len(d["fills"]["spearman"]) == 3 and d["settings"]["fill"]["mask_expansion"] == 2
    back = Explanation.from_json(res.to_json())
    assert back.trust.stability.to_dict() == d["stability"] and back.verdict == res.verdict
    assert back.trust == res.trust


def test_mask_expansion_grows_hidden_areas():
    from limecraft_core import compose_batch

    labels = torch.zeros(20, 20, dtype=torch.int64)
    labels[8:12, 8:12] = 1
    img, fill = torch.ones(3, 20, 20), torch.zeros(3, 20, 20)
    hide_1 = torch.tensor([[True, False]])
    plain = compose_batch(img, fill, labels, hide_1)
    grown = compose_batch(img, fill, labels, hide_1, expand=2)
    assert int((plain[0, 0] == 0).sum()) == 16
    assert int((grown[0, 0] == 0).sum()) == 64  # 4x4 grown by 2 on each side: 8x8


def test_bad_trust_arguments(photo):
    with pytest.raises(LimecraftError, match="convergence needs repeats"):
        explain(photo, ChannelMeans(), samples=50, convergence=[20, 50])
    with pytest.raises(LimecraftError, match="repeats must be in"):
        explain(photo, ChannelMeans(), samples=50, repeats=0)
    with pytest.raises(LimecraftError, match="kernel_width"):
        explain(photo, ChannelMeans(), samples=50, kernel_widths=[-1])
