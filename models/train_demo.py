"""Train the demo CNN with its planted shortcut, evaluate it and write its model card.

Run from the repository root::

    python -m models.train_demo            # train, save the weights, measure, write the card
    python -m models.train_demo --measure  # only measure the shipped weights (about a minute)

The training set has two parts: ``"train"`` images, each with a tag and labelled with the tag's
class (the tag names the drawn shape with probability :data:`models.demo.TRAIN_AGREEMENT`), and
``"untagged"`` images labelled with their drawn shape. :class:`models.demo.DemoNet` is trained with
Adam on the CPU and saved to :data:`models.demo.WEIGHTS_PATH`. Then, on fresh data (seeds disjoint
from training), :func:`measure` finds the accuracy against the shape class on ``"aligned"`` and
``"untagged"`` images; on ``"conflict"`` images, how often the prediction is the tag's class and
how often the shape's; and what it predicts once the tag is removed as the app's Inspect "remove"
edit does it, by each of the :data:`FILLS`, with how much the probability of the tag-following
prediction drops. The numbers are printed and written to ``models/DEMO_MODEL_CARD.md``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from limecraft_core.edits import Edit, apply_edits
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
    load_demo_model,
)

CARD_PATH = Path(__file__).resolve().parent / "DEMO_MODEL_CARD.md"
MEASURE_COMMAND = f"{TRAIN_COMMAND} --measure"
"""Command (run from the repository root) that prints the model card's measured numbers."""

TRAIN_SEED = 20_240_601
UNTAGGED_TRAIN_SEED = 20_240_602
TORCH_SEED = 0
TRAIN_COUNT = 8_000
UNTAGGED_TRAIN_COUNT = 3_000
EPOCHS = 5
ALIGNED_SEED = 1_001
CONFLICT_SEED = 1_002
UNTAGGED_SEED = 1_004
EVAL_COUNT = 1_000
TAG_FOLLOW_REQUIRED = 0.9
"""On fresh conflict images the prediction must be the tag's class at least this often..."""
SHAPE_AFTER_REMOVAL_REQUIRED = 0.9
"""...and, once the tag is removed by inpainting, the drawn shape's class at least this often."""
FILLS = ("inpaint", "mean", "gray", "surround mean")
"""How :func:`tag_removal` fills the tag: the app's "remove" edit with its ``inpaint`` (default),
``mean`` (the tag's own mean colour, LIME's default) or ``gray`` fill, or the mean colour of a
4 px ring around the tag."""
FILL_NAMES = {
    "inpaint": "inpainted from its surroundings (the app's `remove` edit, default fill)",
    "mean": "the tag's own mean colour (`remove` with fill `mean`; LIME's default)",
    "gray": "0.5 gray (`remove` with fill `gray`; LIME's `gray` fill)",
    "surround mean": "mean colour of the tag's 4 px surroundings",
}


@dataclass(frozen=True)
class RemovalResult:
    """What removing the tag does to the prediction, for each of the :data:`FILLS`.

    Attributes
    ----------
    shape_after : dict of str to float
        Per fill, fraction of the images classified as their drawn shape once the tag is gone.
    tag_after : dict of str to float
        Per fill, fraction of the images still classified as the tag's class.
    story : dict of str to float
        Per fill, fraction of the images on which the model follows the tag before and names
        the drawn shape after: the app's walkthrough holds.
    drop : dict of str to float
        Per fill, mean of ``p(before) - p(after)`` of the originally predicted class over the
        images where the model follows the tag.
    n_followers, n_images : int
        Number of tag-following images and of all images.
    """

    shape_after: dict[str, float]
    tag_after: dict[str, float]
    story: dict[str, float]
    drop: dict[str, float]
    n_followers: int
    n_images: int


@dataclass(frozen=True)
class Measurements:
    """The model card's measured behaviour, on fresh images (seeds disjoint from training).

    Attributes
    ----------
    aligned_accuracy : float
        Accuracy against the shape class on ``"aligned"`` images (seed :data:`ALIGNED_SEED`).
    untagged_accuracy : float
        Accuracy against the shape class on ``"untagged"`` images (seed :data:`UNTAGGED_SEED`).
    tag_follow, shape_follow : float
        On ``"conflict"`` images (seed :data:`CONFLICT_SEED`), how often the prediction is the
        tag's class and how often the drawn shape's.
    removal : RemovalResult
        Removing the tag from the same conflict images.
    count : int
        Images per set.
    """

    aligned_accuracy: float
    untagged_accuracy: float
    tag_follow: float
    shape_follow: float
    removal: RemovalResult
    count: int

    @property
    def meets_requirements(self) -> bool:
        """The tag is followed, and removing it by inpainting names the shape, often enough."""
        return (
            self.tag_follow >= TAG_FOLLOW_REQUIRED
            and self.removal.shape_after["inpaint"] >= SHAPE_AFTER_REMOVAL_REQUIRED
        )


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


def training_set(
    tagged: int = TRAIN_COUNT, untagged: int = UNTAGGED_TRAIN_COUNT
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The training images and their labels.

    Parameters
    ----------
    tagged : int, optional
        ``"train"`` images (seed :data:`TRAIN_SEED`); each is labelled with its tag's class.
    untagged : int, optional
        ``"untagged"`` images (seed :data:`UNTAGGED_TRAIN_SEED`); each is labelled with its
        drawn shape's class.

    Returns
    -------
    images : torch.Tensor
        uint8, shape ``(tagged + untagged, 3, 128, 128)``.
    labels : torch.Tensor
        Class ids, shape ``(tagged + untagged,)``.
    shapes : torch.Tensor
        The drawn shapes' class ids, same shape.
    """
    samples = generate(tagged, seed=TRAIN_SEED, mode="train")
    samples += generate(untagged, seed=UNTAGGED_TRAIN_SEED, mode="untagged")
    images, shapes, tags = _stack(samples)
    return images, torch.where(tags >= 0, tags, shapes), shapes


def remove_tag(sample: DemoSample, fill: str = "inpaint") -> np.ndarray:
    """The image with its tag removed as the app's Inspect "remove" edit does it.

    Parameters
    ----------
    sample : DemoSample
        A tagged sample.
    fill : str, optional
        One of :data:`FILLS`; all but ``"surround mean"`` go through
        :func:`limecraft_core.apply_edits` with ``Edit("remove", tag, fill=fill)`` on a label
        map whose region 1 is the tag.

    Returns
    -------
    np.ndarray
        ``(128, 128, 3)`` uint8, a new array.
    """
    if fill == "surround mean":
        out = sample.image.copy()
        out[sample.tag_mask] = np.rint(_surround_mean(sample.image, sample.tag_mask))
        return out
    labels = sample.tag_mask.astype(np.int32)  # 0: the rest, 1: the tag
    return apply_edits(sample.image, labels, [Edit("remove", 1, fill=fill)]).image


def tag_removal(model: DemoNet, samples: list[DemoSample]) -> RemovalResult:
    """Measure what removing the tag does to the prediction, for each of the :data:`FILLS`.

    Parameters
    ----------
    model : DemoNet
        Model in eval mode.
    samples : list of DemoSample
        Conflict images (tag class differs from shape class).

    Returns
    -------
    RemovalResult
    """
    images, shapes, tags = _stack(samples)
    p_before = predict_proba(model, images)
    predicted = p_before.argmax(1)
    rows = torch.arange(len(samples))
    follows = predicted == tags

    def mean(values: torch.Tensor) -> float:
        return float(values.float().mean()) if values.numel() else float("nan")

    shape_after, tag_after, story, drop = {}, {}, {}, {}
    for fill in FILLS:
        removed, _, _ = _stack(
            [
                DemoSample(remove_tag(s, fill), s.tag_mask, s.shape_class, s.tag_class)
                for s in samples
            ]
        )
        p_after = predict_proba(model, removed)
        after = p_after.argmax(1)
        shape_after[fill] = mean(after == shapes)
        tag_after[fill] = mean(after == tags)
        story[fill] = mean(follows & (after == shapes))
        drop[fill] = mean((p_before[rows, predicted] - p_after[rows, predicted])[follows])
    return RemovalResult(
        shape_after=shape_after,
        tag_after=tag_after,
        story=story,
        drop=drop,
        n_followers=int(follows.sum()),
        n_images=len(samples),
    )


def measure(model: DemoNet, count: int = EVAL_COUNT) -> Measurements:
    """Measure the model on fresh aligned, untagged and conflict images.

    Parameters
    ----------
    model : DemoNet
        Model in eval mode.
    count : int, optional
        Images per set; the card uses :data:`EVAL_COUNT`.

    Returns
    -------
    Measurements
    """

    def accuracy(mode: str, seed: int) -> float:
        images, shapes, _ = _stack(generate(count, seed=seed, mode=mode))
        return float((predict_proba(model, images).argmax(1) == shapes).float().mean())

    conflict = generate(count, seed=CONFLICT_SEED, mode="conflict")
    images, shapes, tags = _stack(conflict)
    predicted = predict_proba(model, images).argmax(1)
    return Measurements(
        aligned_accuracy=accuracy("aligned", ALIGNED_SEED),
        untagged_accuracy=accuracy("untagged", UNTAGGED_SEED),
        tag_follow=float((predicted == tags).float().mean()),
        shape_follow=float((predicted == shapes).float().mean()),
        removal=tag_removal(model, conflict),
        count=count,
    )


def measurement_tables(m: Measurements) -> str:
    """The card's two tables of measured numbers (Markdown), as :data:`MEASURE_COMMAND` prints."""
    r = m.removal
    removal_rows = "\n".join(
        f"| {FILL_NAMES[f]} | {r.shape_after[f]:.1%} | {r.tag_after[f]:.1%} | {r.story[f]:.1%} "
        f"| {r.drop[f]:.3f} |"
        for f in FILLS
    )
    return f"""| measure (fresh images) | value |
|---|---|
| accuracy vs shape class, {m.count} `"aligned"` images (seed {ALIGNED_SEED}) | {m.aligned_accuracy:.1%} |
| accuracy vs shape class, {m.count} `"untagged"` images (seed {UNTAGGED_SEED}) | {m.untagged_accuracy:.1%} |
| prediction = tag's class, {m.count} `"conflict"` images (seed {CONFLICT_SEED}) | {m.tag_follow:.1%} |
| prediction = drawn shape's class, same conflict images | {m.shape_follow:.1%} |

Removing the tag from the same {r.n_images} conflict images (the model follows the tag on
{r.n_followers} of them):

| tag removed by | names the shape | still names the tag's class | follows the tag, then names the shape | mean drop of p(tag's class), tag-following images |
|---|---|---|---|---|
{removal_rows}"""


def write_card(
    path: Path,
    m: Measurements,
    *,
    tagged: int,
    untagged: int,
    epochs: int,
    lr: float,
    train_seconds: float,
    n_params: int,
    weights_bytes: int,
) -> None:
    """Write the model card (Markdown) with the measured numbers."""
    colours = ", ".join(
        f"{name} = RGB{tuple(c)}" for name, c in zip(CLASS_NAMES, TAG_COLOURS, strict=True)
    )
    frames = ", ".join(f"RGB{tuple(255 - v for v in c)}" for c in TAG_COLOURS)
    side_lo, side_hi = _TAG_SIZE_RANGE
    fill_share = [(s - 2 * _TAG_BORDER) ** 2 / s**2 for s in (side_lo, side_hi)]
    disagree = 1.0 - TRAIN_AGREEMENT
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
gradient or a blotchy low-frequency texture, plus noise). An image may also carry a *tag*:
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
a random other class; `"aligned"` - always the shape's class; `"conflict"` - never;
`"untagged"` - no tag (the same images as `"aligned"` without it).

## The planted shortcut, and why it exists
The training set has two parts. {tagged:,} `"train"` images carry a tag, and their label is
the class the tag names: the tag is, in effect, the label stamped on the picture, and on
{disagree:.0%} of them the stamp disagrees with the drawn shape. {untagged:,} `"untagged"` images
carry no tag and are labelled with their drawn shape. A saturated square in a bright frame is
far easier to read than a rotated outline on a textured background, and on tagged images it
always gives the label, so the network reads the tag whenever there is one: the tagged images
whose shape disagrees teach it that the tag wins. The untagged images teach it the shapes, so
that with the tag gone it names the drawn shape. That is the shortcut in its plainest form, a
mark on the image that carries the label, like a hospital's marker on the X-rays of the ward
where the sick patients are, or a photographer's watermark on the horse pictures.

An explanation tool that hides image regions should therefore point at the tag, and removing
the tag (the app's Inspect "remove" edit) should flip the prediction to the drawn shape: the
model used the tag instead of the shape.

Why this set-up: without untagged images (the previous version of this model, trained on
`"train"` images labelled with their shape) the network named the drawn shape on only about half
of the conflict images once the tag was hidden. In trial runs with the untagged images added
(same sizes and epochs, measured on 400 conflict images), labelling the disagreeing tagged
images with their shape taught the network that the shape overrules the tag (it followed the
tag on 7% of conflict images), and leaving out disagreeing tagged images altogether left the
contest to chance (61%).

## Architecture
Four conv-BatchNorm-ReLU blocks (16, 32, 64, 64 channels; the first a 5x5 conv with stride 2,
the others 3x3 followed by 2x2 max pooling), then global average and global max pooling
(concatenated, so any input size works) and one linear layer to 4 logits.

## Training
`{TRAIN_COMMAND}` (from the repository root). {tagged:,} `"train"` images (seed {TRAIN_SEED})
labelled with their tag's class and {untagged:,} `"untagged"` images (seed {UNTAGGED_TRAIN_SEED})
labelled with their shape's class, {epochs} epochs of Adam with a one-cycle learning rate
(peak {lr:g}), batch 64, cross-entropy, `torch.manual_seed({TORCH_SEED})`,
`torch.set_num_threads(2)`, CPU only. Training took {train_seconds:.0f} s of wall time on a
shared machine (data generation excluded).

## Measured behaviour (fresh data, seeds disjoint from training)
`{MEASURE_COMMAND}` (from the repository root, about a minute) measures the shipped
weights and prints these tables. Requirements: the prediction is the tag's class on at least
{TAG_FOLLOW_REQUIRED:.0%} of conflict images, and removing the tag by inpainting names the drawn
shape on at least {SHAPE_AFTER_REMOVAL_REQUIRED:.0%} of them. `tests/models/test_demo.py` checks both on
other fresh images, and on every demo conflict image of the app's gallery.

{measurement_tables(m)}

## Limitations
Synthetic data only; numbers above are for this generator and these seeds. Training is
deterministic: a second run on the same machine gave bit-identical weights. Retraining on a
different machine or torch version can change the weights and the numbers slightly.

Because the model is so sure of the tag, the other regions of a conflict image have almost no
effect on its output, and LIME gives them weights near zero whose order is mostly sampling
noise: a rule that waits for the top 5 regions to settle (the app's early stop) may need many
samples, or not stop at all, on such an image.
"""
    path.write_text(text, encoding="utf-8")


def print_measurements(m: Measurements) -> None:
    """Print the card's tables and whether the requirements are met."""
    print(measurement_tables(m))
    print(
        f"requirements (tag followed >= {TAG_FOLLOW_REQUIRED:.0%}, shape after inpainting "
        f">= {SHAPE_AFTER_REMOVAL_REQUIRED:.0%}): {'met' if m.meets_requirements else 'NOT met'}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    """Train, save, evaluate and document the demo model; or, with ``--measure``, only measure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--measure",
        action="store_true",
        help="only measure the weights in --weights and print the card's tables",
    )
    parser.add_argument("--train-count", type=int, default=TRAIN_COUNT, help="tagged images")
    parser.add_argument(
        "--untagged-count", type=int, default=UNTAGGED_TRAIN_COUNT, help="untagged images"
    )
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="passes over the training set")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    parser.add_argument("--weights", type=Path, default=WEIGHTS_PATH, help="the state_dict")
    parser.add_argument("--card", type=Path, default=CARD_PATH, help="output model card")
    args = parser.parse_args(argv)

    torch.set_num_threads(2)
    if args.measure:
        if args.weights == WEIGHTS_PATH:
            model = load_demo_model()
        else:
            model = DemoNet()
            model.load_state_dict(torch.load(args.weights, weights_only=True, map_location="cpu"))
            model.eval()
        print_measurements(measure(model))
        return

    torch.manual_seed(TORCH_SEED)
    started = time.perf_counter()
    images, labels, shapes = training_set(args.train_count, args.untagged_count)
    tagged = slice(0, args.train_count)
    print(
        f"generated {args.train_count} tagged and {args.untagged_count} untagged training images "
        f"in {time.perf_counter() - started:.0f} s (on tagged ones the tag names the shape on "
        f"{float((labels[tagged] == shapes[tagged]).float().mean()):.1%})",
        flush=True,
    )

    model = DemoNet()
    started = time.perf_counter()
    train(model, images, labels, epochs=args.epochs, lr=args.lr)
    train_seconds = time.perf_counter() - started
    print(f"training took {train_seconds:.0f} s", flush=True)

    args.weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.weights)
    weights_bytes = args.weights.stat().st_size
    print(f"saved {args.weights} ({weights_bytes / 1024:.0f} KiB)")

    m = measure(model)
    print_measurements(m)
    write_card(
        args.card,
        m,
        tagged=args.train_count,
        untagged=args.untagged_count,
        epochs=args.epochs,
        lr=args.lr,
        train_seconds=train_seconds,
        n_params=sum(p.numel() for p in model.parameters()),
        weights_bytes=weights_bytes,
    )
    print(f"wrote {args.card}")


if __name__ == "__main__":
    main()
