"""Inpaint fills: what the per-perturbation (union) inpaint costs, and what the per-region one leaks.

1. Cost per explanation: ``explain`` with fill ``mean``, ``inpaint-each`` (each region filled
   alone, from everything around it, once per image) and ``inpaint`` (each perturbation's hidden
   regions filled together from its kept pixels, once per batch), on scikit-image's chelsea at
   224x224, SLIC K~60, N masks, on the CPU. Models: ``free`` (mean colour through a linear
   layer: the fill's own cost shows) and resnet18 with random weights. The fills run one after
   the other in each round, so a slow spell of the machine hits them alike; the median round is
   reported, in seconds and as a ratio to ``mean``.
2. Leak: hide every piece of an object split into several regions and compare the fill with
   the object's own pixels inside the hidden union: their correlation, the correlation with the
   object's texture (the image minus its Gaussian blur, sigma 2 px), and how much the fill
   changes when the hidden pixels are inverted (1 - x); a fill that reads only kept pixels
   does not change at all. On a synthetic black/white striped object over a smooth background
   (5 regions), and, given ``--zebra DIR`` (the ``images/`` folder of github.com/MI2DataLab/
   LIMEcraft, with ``zebra.png`` and ``zebra_mask.png``), on the original LIMEcraft's zebra.

    python bench/bench_fill.py [--quick] [--zebra DIR] [--json bench/results/fill.json]
"""

from __future__ import annotations

from pathlib import Path

from _common import chelsea, timed  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import json
import statistics

import numpy as np
import torch
from scipy import ndimage as ndi

from limecraft_core import Classifier, compose_regions, explain, perturbed_images
from models import zoo

FILLS = ("mean", "inpaint-each", "inpaint")


class _Free(torch.nn.Module):
    """The mean colour through a fixed linear layer: almost no cost."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(3, 10, generator=g), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3)) @ self.w


# --------------------------------------------------------------------------- 1. cost


def cost(samples: int, rounds: int, models: list[str], regions: int) -> list[dict]:
    from limecraft_core import segment

    image = chelsea(224)
    labels = segment(image, "slic", n_segments=regions)
    k = int(labels.max()) + 1
    rows = []
    for name in models:
        if name == "free":
            clf = Classifier(_Free(), device="cpu", name="free")
        else:
            net = zoo.build(name, pretrained=False)
            clf = Classifier(net, normalize="imagenet", device="cpu", name=f"{name} (random)")
        times: dict[str, list[float]] = {f: [] for f in FILLS}
        for _ in range(rounds):
            for f in FILLS:
                _, seconds = timed(
                    lambda f=f, clf=clf: explain(
                        image, clf, segments=labels, samples=samples, fill=f, compute_deltas=False
                    )
                )
                times[f].append(seconds)
        med = {f: statistics.median(t) for f, t in times.items()}
        for f in FILLS:
            rows.append(
                {
                    "model": clf.name,
                    "fill": f,
                    "samples": samples,
                    "regions": k,
                    "seconds": med[f],
                    "ratio_to_mean": med[f] / med["mean"],
                }
            )
    return rows


# --------------------------------------------------------------------------- 2. leak


def leak(image: np.ndarray, labels: np.ndarray, hidden_ids: list[int]) -> dict[str, dict]:
    """How much each inpaint fill of the hidden regions reads the hidden pixels."""
    x = np.asarray(image, np.float32) / (255.0 if image.dtype == np.uint8 else 1.0)
    k = int(labels.max()) + 1
    mask = np.ones((1, k), bool)
    mask[0, hidden_ids] = False
    hole = np.isin(labels, hidden_ids)
    texture = x - ndi.gaussian_filter(x, (2, 2, 0))
    inverted = np.where(hole[..., None], 1.0 - x, x).astype(np.float32)
    out = {}
    for f in ("inpaint-each", "inpaint"):
        fill = perturbed_images(x, labels, mask, f)[0][hole]
        other = perturbed_images(inverted, labels, mask, f)[0][hole]
        out[f] = {
            "corr_with_hidden": float(np.corrcoef(fill.ravel(), x[hole].ravel())[0, 1]),
            "corr_with_texture": float(np.corrcoef(fill.ravel(), texture[hole].ravel())[0, 1]),
            "change_when_inverted": float(np.abs(fill - other).mean()),
        }
    return out


def striped_object(h: int = 224, w: int = 224, parts: int = 5, background: int = 60):
    """Black/white stripes (4 px) on an ellipse over a smooth gradient; the object is split into
    ``parts`` vertical regions, the background into a grid of about ``background`` regions."""
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([0.3 + 0.4 * xx / w, 0.45 + 0.25 * yy / h, 0.7 - 0.4 * xx / w], -1)
    obj = ((yy - h / 2) / (h / 4)) ** 2 + ((xx - w / 2) / (w / 2.8)) ** 2 < 1
    img[obj] = (((xx + yy // 3)[obj] // 4) % 2)[:, None].astype(float)
    side = max(1, round(np.sqrt(background)))
    grid = (yy * side // h) * side + xx * side // w
    x0, x1 = xx[obj].min(), xx[obj].max() + 1
    part = np.minimum((xx - x0) * parts // (x1 - x0), parts - 1)
    labels = np.where(obj, part, grid + parts)
    _, labels = np.unique(labels, return_inverse=True)
    return img.astype(np.float32), labels.reshape(h, w), list(range(parts))


def zebra(folder: Path) -> list[tuple[str, np.ndarray, np.ndarray, list[int]]]:
    """The zebra split as LIMEcraft's engine does (inner 5, outer SLIC 60) and as the original
    notebook did (skimage SLIC inside and outside the mask; 20 inside gives 5 pieces)."""
    from PIL import Image
    from skimage.segmentation import slic

    img = np.asarray(Image.open(folder / "zebra.png").convert("RGB"))
    mask = np.asarray(Image.open(folder / "zebra_mask.png").convert("L")) > 0
    r = compose_regions(img, mask, inner_segments=5, outer_segments=60, outer_method="slic")
    ours = [i for i, key in enumerate(r.keys) if key.startswith("hand:")]
    inner = slic(img, n_segments=20, compactness=10, mask=mask, start_label=1)
    outer = slic(img, n_segments=60, compactness=10, mask=~mask, start_label=1)
    lab = np.where(mask, inner - 1, outer + inner.max())
    _, lab = np.unique(lab, return_inverse=True)
    lab = lab.reshape(mask.shape)
    return [
        (f"zebra, compose_regions (K={r.n_regions})", img, r.labels, ours),
        (f"zebra, original's SLIC (K={lab.max() + 1})", img, lab, sorted(np.unique(lab[mask]))),
    ]


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="100 samples, one round, free model")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--regions", type=int, default=70, help="SLIC n_segments (70 gives K=58)")
    ap.add_argument("--models", default="free,resnet18")
    ap.add_argument("--zebra", type=Path, help="folder with zebra.png and zebra_mask.png")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    if args.quick:
        args.samples, args.rounds, args.models = 100, 1, "free"
    torch.manual_seed(0)

    cases = [("striped object, 5 regions", *striped_object())]
    if args.zebra is not None:
        cases += zebra(args.zebra)
    leaks = []
    print(
        "| image | hidden regions | fill | corr. with hidden | corr. with texture | change when hidden inverted |"
    )
    print("|---|---|---|---|---|---|")
    for name, img, lab, ids in cases:
        for f, v in leak(img, lab, ids).items():
            leaks.append({"image": name, "hidden": len(ids), "fill": f, **v})
            print(
                f"| {name} | {len(ids)} | {f} | {v['corr_with_hidden']:.3f} | "
                f"{v['corr_with_texture']:.3f} | {v['change_when_inverted']:.4f} |"
            )

    rows = cost(args.samples, args.rounds, args.models.split(","), args.regions)
    print()
    print(f"| model | fill | K | N | seconds (median of {args.rounds}) | x mean fill |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['fill']} | {r['regions']} | {r['samples']} | "
            f"{r['seconds']:.2f} | {r['ratio_to_mean']:.2f} |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {"torch_threads": torch.get_num_threads(), "cost": rows, "leak": leaks}, indent=2
            )
        )


if __name__ == "__main__":
    main()
