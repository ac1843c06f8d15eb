"""Train the demo CNN with its planted shortcut, evaluate it and write its model card.

Run from the repository root::

    python -m models.train_demo

It generates a ``"train"`` set (the tag agrees with the shape with probability
:data:`models.demo.TRAIN_AGREEMENT`), trains :class:`models.demo.DemoNet` with Adam on the CPU,
saves the state_dict to :data:`models.demo.WEIGHTS_PATH`, then measures on fresh data (seeds
disjoint from training):

* accuracy against the shape class on ``"aligned"`` images,
* on ``"conflict"`` images, how often the prediction follows the tag and how often the shape,
* how much the probability of the predicted class drops when the tag pixels are hidden as LIME
  hides a region (filled with the tag's own mean colour -- LIME's default -- with the mean
  colour of the tag's surroundings, or with 0.5 gray), and how often the model then names the
  shape.

The numbers are printed and written to ``models/DEMO_MODEL_CARD.md``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from models.demo import (
    _TAG_BORDER,
    _TAG_SIZE_RANGE,
    CLASS_NAMES,
    IMAGE_SIZE,
    TAG_COLOURS,
    TRAIN_AGREEMENT,
    TRAIN_COMMAND,
    WEIGHTS_PATH,
    DemoNet,
    DemoSample,
    generate,
    to_tensor,
)

CARD_PATH = Path(__file__).resolve().parent / "DEMO_MODEL_CARD.md"

TRAIN_SEED = 20_240_601
TORCH_SEED = 0
ALIGNED_SEED = 1_001
CONFLICT_SEED = 1_002
HIDING_SEED = 1_003
EVAL_COUNT = 1_000
HIDING_COUNT = 1_000
FILLS = ("own mean", "surround mean", "gray")
"""How :func:`tag_hiding` fills the tag: its own mean colour (LIME's default ``mean`` fill for a
region), the mean colour of a 4 px ring around it, or 0.5 gray (LIME's ``gray`` fill)."""


@dataclass(frozen=True)
class HidingResult:
    """Effect of hiding the tag, for each of the :data:`FILLS`.

    Attributes
    ----------
    drop : dict of str to float
        Per fill, mean of ``p(original) - p(hidden)`` of the originally predicted class over
        the images where the model follows the tag.
    drop_all : dict of str to float
        The same over all images.
    shape_after_hiding : dict of str to float
        Per fill, fraction of the images classified as their shape once the tag is hidden.
    tag_after_hiding : dict of str to float
        Per fill, fraction of the images still classified as the tag's class.
    n_followers, n_images : int
        Number of tag-following images and of all images.
    """

    drop: dict[str, float]
    drop_all: dict[str, float]
    shape_after_hiding: dict[str, float]
    tag_after_hiding: dict[str, float]
    n_followers: int
    n_images: int


def _stack(samples: list[DemoSample]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack samples into uint8 images ``(N, 3, H, W)``, shape labels ``(N,)``, tag labels."""
    images = np.stack([s.image for s in samples]).transpose(0, 3, 1, 2)
    shapes = torch.tensor([s.shape_class for s in samples], dtype=torch.long)
    tags = torch.tensor([s.tag_class for s in samples], dtype=torch.long)
    return torch.from_numpy(np.ascontiguousarray(images)), shapes, tags


@torch.no_grad()
def predict_proba(model: DemoNet, images: torch.Tensor, batch: int = 250) -> torch.Tensor:
    """Class probabilities of a batch of uint8 or float images.

    Parameters
    ----------
    model : DemoNet
        Model in eval mode.
    images : torch.Tensor
        ``(N, 3, H, W)``, uint8 in ``[0, 255]`` or float in ``[0, 1]``.
    batch : int, optional
        Images per forward pass.

    Returns
    -------
    torch.Tensor
        Probabilities, shape ``(N, 4)``.
    """
    out = []
    for start in range(0, images.shape[0], batch):
        x = images[start : start + batch]
        x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        out.append(F.softmax(model(x), dim=1))
    return torch.cat(out)


def train(
    model: DemoNet,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: int,
    batch_size: int = 64,
    lr: float = 2e-3,
) -> None:
    """Train ``model`` in place with Adam and a one-cycle learning-rate schedule.

    Parameters
    ----------
    model : DemoNet
        Model to train.
    images : torch.Tensor
        uint8 images, shape ``(N, 3, H, W)``.
    labels : torch.Tensor
        Class ids, shape ``(N,)``.
    epochs : int
        Passes over the data.
    batch_size : int, optional
        Images per step.
    lr : float, optional
        Peak learning rate.
    """
    n = images.shape[0]
    steps_per_epoch = (n + batch_size - 1) // batch_size
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, max_lr=lr, total_steps=epochs * steps_per_epoch, pct_start=0.2
    )
    generator = torch.Generator().manual_seed(TORCH_SEED)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(n, generator=generator)
        total_loss, correct, started = 0.0, 0, time.perf_counter()
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            x = images[idx].float() / 255.0
            y = labels[idx]
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
            total_loss += loss.item() * idx.numel()
            correct += int((logits.argmax(1) == y).sum())
        print(
            f"epoch {epoch + 1}/{epochs}: loss {total_loss / n:.4f}, "
            f"train acc {correct / n:.4f} ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    model.eval()


def _surround_mean(image: np.ndarray, mask: np.ndarray, width: int = 4) -> np.ndarray:
    """Mean colour of a ``width``-pixel ring around ``mask``'s bounding box.

    Parameters
    ----------
    image : np.ndarray
        ``(H, W, 3)`` uint8.
    mask : np.ndarray
        ``(H, W)`` bool, a filled rectangle.
    width : int, optional
        Ring width in pixels.

    Returns
    -------
    np.ndarray
        Mean colour, shape ``(3,)``, float64 in ``[0, 255]``.
    """
    rows, cols = np.nonzero(mask)
    r0, r1 = max(rows.min() - width, 0), min(rows.max() + width + 1, image.shape[0])
    c0, c1 = max(cols.min() - width, 0), min(cols.max() + width + 1, image.shape[1])
    ring = np.zeros_like(mask)
    ring[r0:r1, c0:c1] = True
    ring &= ~mask
    return image[ring].astype(np.float64).mean(axis=0)


def tag_hiding(model: DemoNet, samples: list[DemoSample]) -> HidingResult:
    """Measure what hiding the tag does to the prediction, for each of the :data:`FILLS`.

    Parameters
    ----------
    model : DemoNet
        Model in eval mode.
    samples : list of DemoSample
        Conflict images (tag class differs from shape class).

    Returns
    -------
    HidingResult
        Mean probability drops, shape and tag rates after hiding, and counts.
    """
    original = np.stack([s.image for s in samples])
    filled = {fill: original.copy() for fill in FILLS}
    for i, s in enumerate(samples):
        own = s.image[s.tag_mask].astype(np.float64).mean(axis=0)
        filled["own mean"][i][s.tag_mask] = np.rint(own).astype(np.uint8)
        surround = _surround_mean(s.image, s.tag_mask)
        filled["surround mean"][i][s.tag_mask] = np.rint(surround).astype(np.uint8)
        filled["gray"][i][s.tag_mask] = 128  # 0.5 gray (128 / 255 ~= 0.502)
    p_orig = predict_proba(model, to_tensor(original))
    predicted = p_orig.argmax(1)
    rows = torch.arange(len(samples))
    tags = torch.tensor([s.tag_class for s in samples])
    shapes = torch.tensor([s.shape_class for s in samples])
    follows = predicted == tags

    def mean(values: torch.Tensor) -> float:
        return float(values.float().mean()) if values.numel() else float("nan")

    drop, drop_all, shape_after, tag_after = {}, {}, {}, {}
    for fill, images in filled.items():
        p_hidden = predict_proba(model, to_tensor(images))
        change = p_orig[rows, predicted] - p_hidden[rows, predicted]
        drop[fill], drop_all[fill] = mean(change[follows]), mean(change)
        shape_after[fill] = mean(p_hidden.argmax(1) == shapes)
        tag_after[fill] = mean(p_hidden.argmax(1) == tags)
    return HidingResult(
        drop=drop,
        drop_all=drop_all,
        shape_after_hiding=shape_after,
        tag_after_hiding=tag_after,
        n_followers=int(follows.sum()),
        n_images=len(samples),
    )


def write_card(
    path: Path,
    *,
    train_count: int,
    epochs: int,
    lr: float,
    train_seconds: float,
    n_params: int,
    weights_bytes: int,
    aligned_acc: float,
    tag_follow: float,
    shape_follow: float,
    hiding: HidingResult,
) -> None:
    """Write the model card (Markdown) with the measured numbers."""
    colours = ", ".join(
        f"{name} = RGB{tuple(c)}" for name, c in zip(CLASS_NAMES, TAG_COLOURS, strict=True)
    )
    frames = ", ".join(f"RGB{tuple(255 - v for v in c)}" for c in TAG_COLOURS)
    acc, tag, shape = (f"{v:.1%}" for v in (aligned_acc, tag_follow, shape_follow))
    side_lo, side_hi = _TAG_SIZE_RANGE
    fill_share = [(s - 2 * _TAG_BORDER) ** 2 / s**2 for s in (side_lo, side_hi)]
    fill_names = {
        "own mean": "the tag's own mean colour (LIME's default `mean` fill)",
        "surround mean": "mean colour of the tag's 4 px surroundings",
        "gray": "0.5 gray (LIME's `gray` fill)",
    }
    hiding_rows = "\n".join(
        f"| {fill_names[f]} | {hiding.drop[f]:.3f} | {hiding.drop_all[f]:.3f} "
        f"| {hiding.shape_after_hiding[f]:.1%} | {hiding.tag_after_hiding[f]:.1%} |"
        for f in FILLS
    )
    shape_min = min(hiding.shape_after_hiding.values())
    shape_max = max(hiding.shape_after_hiding.values())
    text = f"""# Demo model card: `DemoNet` with a planted shortcut

**Intended use: demonstrating how LIMEcraft finds shortcuts. Not for any real use.**
The model classifies synthetic pictures of shapes; it knows nothing about real images.

## What it is
A small CNN (`models.demo.DemoNet`, {n_params:,} parameters, {weights_bytes / 1024:.0f} KiB
of float32 weights in `models/weights/demo_cnn.pt`, a plain `state_dict`) that sorts
{IMAGE_SIZE}x{IMAGE_SIZE} RGB images into four classes: {", ".join(CLASS_NAMES)}.
Load it with `models.demo.load_demo_model()`; its input is float32 `(N, 3, H, W)` in [0, 1],
its output `(N, 4)` logits.

## Data
`models.demo.generate(count, seed=..., mode=...)` draws, deterministically from a seed, one
object per image (circle, square, triangle or star; random size 30-70 px, position, rotation
and colour, hues kept away from the tag colours) on a muted random background (a smooth
gradient or a blotchy low-frequency texture, plus noise). Every image also carries a *tag*:
a {side_lo}-{side_hi} px square placed next to a random image edge, never touching the object: a
flat fill in the class colour inside a {_TAG_BORDER} px frame of the complementary colour
(255 minus the fill). Fill colours encode the class:
{colours}; the frames are {frames}.
Each sample comes with a boolean mask of exactly the tag's pixels (fill and frame).

The complementary frame makes the tag a *pattern* rather than a colour: the fill covers
{fill_share[0]:.0%}-{fill_share[1]:.0%} of the tag, so the tag's mean colour is close to
neutral gray for every class. Hiding the tag with its own mean colour (LIME's default fill)
therefore leaves a grayish square with no class hint, not a faded tag that still reads as one.

Modes: `"train"` - the tag names the shape's class with probability {TRAIN_AGREEMENT}, otherwise
a random other class; `"aligned"` - always the shape's class; `"conflict"` - never.

## The planted shortcut, and why it exists
The training labels are the shape classes, but in the training set the tag colour agrees
with the label {TRAIN_AGREEMENT:.0%} of the time. A saturated square in a bright frame is far
easier to detect than a rotated outline on a textured background, so the network latches on
to the tag, just as real models learn a hospital's marker on an X-ray rather than the disease.
It still picks up the shapes (the tag alone would cap training accuracy near
{TRAIN_AGREEMENT:.0%}), but when tag and shape disagree the tag wins.
An explanation tool that hides image regions should therefore point at the tag.

How strongly the shortcut wins is a matter of degree: the few training images whose tag
disagrees with the shape are exactly what teaches the network to overrule the tag, so more
of them, or more epochs, give a model that follows the shape more often on conflict images.
The agreement ({TRAIN_AGREEMENT:.0%}), the tag size ({side_lo}-{side_hi} px) and the short
training ({epochs} epochs) are chosen so that the model follows the tag on nearly all conflict
images while still recognising shapes well above chance when the tag is hidden.

## Architecture
Four conv-BatchNorm-ReLU blocks (16, 32, 64, 64 channels; the first a 5x5 conv with stride 2,
the others 3x3 followed by 2x2 max pooling), then global average and global max pooling
(concatenated, so any input size works) and one linear layer to 4 logits.

## Training
`{TRAIN_COMMAND}` (from the repository root). {train_count:,} `"train"` images (seed
{TRAIN_SEED}), {epochs} epochs of Adam with a one-cycle learning rate (peak {lr:g}), batch 64,
cross-entropy against the shape class, `torch.manual_seed({TORCH_SEED})`,
`torch.set_num_threads(2)`, CPU only. Training took {train_seconds:.0f} s of wall time
(data generation excluded).

## Measured behaviour (fresh data, seeds disjoint from training)
| measure | value |
|---|---|
| accuracy vs shape class, {EVAL_COUNT} `"aligned"` images (seed {ALIGNED_SEED}) | {acc} |
| prediction = tag class, {EVAL_COUNT} `"conflict"` images (seed {CONFLICT_SEED}) | {tag} |
| prediction = shape class, same conflict images | {shape} |

Hiding the tag ({hiding.n_images} conflict images, seed {HIDING_SEED}; the model follows the tag
on {hiding.n_followers} of them): the tag's pixels are replaced by a fill, and the table gives
the drop of the probability of the originally predicted class and what the model predicts
afterwards.

| fill | mean drop, tag-following images | mean drop, all images | names the shape | names the tag's class |
|---|---|---|---|---|
{hiding_rows}

With the tag hidden the model names the shape on {shape_min:.0%}-{shape_max:.0%} of these
images (chance: 25%): it does see the shapes, but the tag dominates.

## Limitations
Synthetic data only; numbers above are for this generator and these seeds. Retraining on a
different machine or torch version can change the weights and the numbers slightly; because
the balance between tag and shape is a matter of degree, the tag-following rate is the number
most sensitive to such changes.
"""
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Train, save, evaluate and document the demo model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-count", type=int, default=8_000, help="training images")
    parser.add_argument("--epochs", type=int, default=5, help="passes over the training set")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    parser.add_argument("--weights", type=Path, default=WEIGHTS_PATH, help="output state_dict")
    parser.add_argument("--card", type=Path, default=CARD_PATH, help="output model card")
    args = parser.parse_args(argv)

    torch.set_num_threads(2)
    torch.manual_seed(TORCH_SEED)

    started = time.perf_counter()
    images, shapes, tags = _stack(generate(args.train_count, seed=TRAIN_SEED, mode="train"))
    print(
        f"generated {args.train_count} training images in {time.perf_counter() - started:.0f} s "
        f"(tag agrees with shape on {float((shapes == tags).float().mean()):.1%})",
        flush=True,
    )

    model = DemoNet()
    started = time.perf_counter()
    train(model, images, shapes, epochs=args.epochs, lr=args.lr)
    train_seconds = time.perf_counter() - started
    print(f"training took {train_seconds:.0f} s", flush=True)

    args.weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.weights)
    weights_bytes = args.weights.stat().st_size
    print(f"saved {args.weights} ({weights_bytes / 1024:.0f} KiB)")

    a_images, a_shapes, _ = _stack(generate(EVAL_COUNT, seed=ALIGNED_SEED, mode="aligned"))
    aligned_acc = float((predict_proba(model, a_images).argmax(1) == a_shapes).float().mean())
    c_images, c_shapes, c_tags = _stack(generate(EVAL_COUNT, seed=CONFLICT_SEED, mode="conflict"))
    c_pred = predict_proba(model, c_images).argmax(1)
    tag_follow = float((c_pred == c_tags).float().mean())
    shape_follow = float((c_pred == c_shapes).float().mean())
    hiding = tag_hiding(model, generate(HIDING_COUNT, seed=HIDING_SEED, mode="conflict"))

    print(f"aligned accuracy (vs shape):       {aligned_acc:.4f}")
    print(f"conflict: prediction == tag class: {tag_follow:.4f}")
    print(f"conflict: prediction == shape:     {shape_follow:.4f}")
    print(f"tag hiding on {hiding.n_images} conflict images ({hiding.n_followers} tag-following):")
    for fill in FILLS:
        print(
            f"  {fill:>13} fill: mean drop of p(predicted) {hiding.drop[fill]:.3f} on followers "
            f"({hiding.drop_all[fill]:.3f} on all); then names the shape "
            f"{hiding.shape_after_hiding[fill]:.3f}, the tag's class {hiding.tag_after_hiding[fill]:.3f}"
        )

    write_card(
        args.card,
        train_count=args.train_count,
        epochs=args.epochs,
        lr=args.lr,
        train_seconds=train_seconds,
        n_params=sum(p.numel() for p in model.parameters()),
        weights_bytes=weights_bytes,
        aligned_acc=aligned_acc,
        tag_follow=tag_follow,
        shape_follow=shape_follow,
        hiding=hiding,
    )
    print(f"wrote {args.card}")


if __name__ == "__main__":
    main()
