"""The audit's prove phase: its top findings proved by removal and insertion against a null.

After the explain phase has grouped the strongest regions into findings (:mod:`.findings`),
:func:`prove_findings` runs :func:`~.proof.prove` on the first ``PROVE_TOP`` of them:

- **removal** over the finding's images predicted its main class (at most ``REMOVAL_IMAGES``:
  the medoid first when it is one, then the most alike by membership), each with its own region
  of the finding (the image's label map == the region id kept in the finding);
- **insertion** of the medoid's region (or, when the medoid is of another class, the first of
  those images') into up to ``CLEAN_IMAGES`` clean images: explained
  images of other classes that are not members, the least alike to the finding first (so that
  none carries it already).

A finding with no clean image (every image one class) is not proved, and its sentence says
so. The images and label maps come from a ``load`` callable of the edge (the audit folder's
``image.png`` and ``segments.npy``), the class probabilities from a ``predict`` callable
(:func:`scorer_predict` makes one from any :class:`~limecraft_core.scorer.Scorer`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from .._validate import LimecraftError, ModelError
from ..scorer import Scorer
from .findings import Finding, Findings, headline
from .grouping import CROSS
from .proof import Intervention, Proof, prove
from .rows import AuditRow

#: The findings proved, the strongest first (each proof costs about 2 x images + 5 x clean
#: model passes).
PROVE_TOP = 5
#: Clean images of other classes the medoid's region is pasted into.
CLEAN_IMAGES = 8
#: The finding's images whose region is hidden (the most alike first).
REMOVAL_IMAGES = 32
#: A cross-class finding (kind ``"place and look, any class"``, the grouping's cross path) pushes each
#: image's own class, so it is proved on each of its first classes in turn (the most frequent
#: first) and confirmed when one is: at most this many tries, each against its own null.
CROSS_CLASSES = 3

__all__ = [
    "CLEAN_IMAGES",
    "CROSS_CLASSES",
    "PROVE_TOP",
    "REMOVAL_IMAGES",
    "prove_findings",
    "scorer_predict",
]

Load = Callable[[str], tuple[np.ndarray, np.ndarray]]


def scorer_predict(scorer: Scorer) -> Callable[[np.ndarray], np.ndarray]:
    """The class probabilities of one image through any scorer (local, work queue, Ray Serve):
    one perturbation that keeps the image's one region, at the scorer's input size.

    Returns
    -------
    callable((H, W, 3) uint8 ndarray) -> (C,) float ndarray, softmax of the raw scores
    """
    import torch

    from ..tensors import resize_chw, to_chw

    def predict(image: np.ndarray) -> np.ndarray:
        h, w = image.shape[:2]
        size = tuple(scorer.input_size or (h, w))
        x = to_chw(np.asarray(image, np.float32) / 255.0, scorer.device)
        x = x if size == (h, w) else resize_chw(x, size)
        labels = torch.zeros(size, dtype=torch.int64, device=scorer.device)
        out = scorer.run_masks(x, torch.zeros_like(x), labels, np.ones((1, 1), bool), 1)
        return torch.softmax(out.float(), dim=1)[0].cpu().numpy()

    return predict


def _target(f: Finding, rows: dict[str, AuditRow], label: str) -> tuple[str, int]:
    """A class of the finding: its name and index (from a member predicted that class)."""
    idx = next(rows[k].predicted for k, _ in f.regions if rows[k].label == label)
    return label, int(idx)


def _clean(
    f: Finding, rows: dict[str, AuditRow], label: str, k: int, near: Callable[[str], float]
) -> list[str]:
    """The clean images to paste into: the least alike first; for a cross-class finding the
    ones where the class is nearest first (``near``: its probability there), where an artifact
    that pushes it can show, the null being pasted into the same images. No image that carries
    the finding (a member, or one with the same region not among its strongest) is clean."""
    members = {key for key, _ in (*f.regions, *f.carriers)}
    likeness = dict(f.membership)
    keys = [r.key for r in rows.values() if r.ok and r.label != label and r.key not in members]
    if f.kind == CROSS:
        return sorted(keys, key=lambda key: (-near(key), key))[:k]
    return sorted(keys, key=lambda key: (likeness.get(key, 0.0), key))[:k]


def _prove_one(
    f: Finding, rows: dict[str, AuditRow], load: Load, predict: Callable, clean: int, seed: int
) -> Finding:
    """The finding proved on its main class; a cross-class finding on each of its first
    ``CROSS_CLASSES`` classes: removal over all of their images, each on its own class, and the
    first insertion that causes its class (else the main class's)."""
    labels = [c for c, _, _ in f.classes][: CROSS_CLASSES if f.kind == CROSS else 1]
    proofs = [p for p in (_proof(f, rows, load, predict, clean, seed, c) for c in labels) if p]
    if not proofs:
        note = (
            f"Not proved: no explained image of another class than '{labels[0]}' to paste it into."
        )
        return replace(f, sentence=f"{f.sentence} {note}")
    label, proof = next(((c, p) for c, p in proofs if p.insertion.finding == "causes"), proofs[0])
    if len(proofs) > 1:
        removal = np.concatenate([p.removal for _, p in proofs])
        null = np.concatenate([p.removal_null for _, p in proofs])
        proof = Proof(proof.target_class, removal, null, proof.insertion)
    iv = Intervention.of(proof)
    own = " (removal: each image's own class)" if len(proofs) > 1 else ""
    return replace(f, sentence=f"{f.sentence} {iv.sentence(label)}{own}", intervention=iv)


def _proof(
    f: Finding, rows: dict[str, AuditRow], load: Load, predict: Callable, clean: int, seed: int,
    label: str,
) -> tuple[str, Proof] | None:  # fmt: skip
    """The finding proved on one of its classes (its members of that class), or None when
    there is no clean image to paste into."""
    label, target = _target(f, rows, label)
    targets = _clean(f, rows, label, clean, lambda key: float(predict(load(key)[0])[target]))
    if not targets:
        return None
    likeness = dict(f.membership)
    regions = dict(f.regions)
    # removal reads the suspect class, so only in the members predicted it (a finding of
    # several classes, e.g. the "outside" one, is proved on its main class)
    order = sorted(
        (key for key in regions if rows[key].label == label),
        key=lambda key: (key != f.medoid, -likeness.get(key, 0.0), key),
    )
    images, masks = [], []
    for key in order[:REMOVAL_IMAGES]:
        image, segments = load(key)
        mask = segments == regions[key]
        if segments.shape != image.shape[:2] or not mask.any():
            raise LimecraftError(
                f"image {key!r}: its saved regions do not hold region {regions[key]}"
            )
        images.append(image)
        masks.append(mask)
    proof = prove(images, masks, 0, [load(k)[0] for k in targets], predict, target, seed=seed)
    return label, proof


def prove_findings(
    found: Findings,
    rows: Sequence[AuditRow],
    load: Load,
    predict: Callable[[np.ndarray], np.ndarray],
    *,
    top: int = PROVE_TOP,
    clean: int = CLEAN_IMAGES,
    seed: int = 0,
) -> Findings:
    """The findings with their first ``top`` proved, the confirmed ones first, and the headline
    the first confirmed finding (or :data:`~.findings.NO_FINDING`).

    Parameters
    ----------
    found : Findings of ``rows`` (:func:`~.findings.findings`), not yet proved
    rows : the audit's rows
    load : callable(key) -> ((H, W, 3) uint8 image, (H, W) int label map), an explained image
        as it was explained and its regions (ids 0..K-1); raises LimecraftError when it cannot
    predict : callable((H, W, 3) uint8 ndarray) -> (C,) class probabilities
    top : int, how many findings to prove (the strongest first)
    clean : int, clean images per insertion test
    seed : int, the nulls' random places

    Returns
    -------
    Findings with ``proved`` True; a finding that could not be proved (no clean image, its
    files unreadable) says why in its sentence and is not confirmed.
    """
    by_key = {r.key: r for r in rows}
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def cached(key: str) -> tuple[np.ndarray, np.ndarray]:
        if key not in cache:
            cache[key] = load(key)
        return cache[key]

    out = []
    for i, f in enumerate(found.discovered):
        if i < top:
            try:
                f = _prove_one(f, by_key, cached, predict, clean, seed)
            except (LimecraftError, ModelError) as e:
                f = replace(f, sentence=f"{f.sentence} Not proved: {e}")
        out.append(f)
    ranked = tuple(sorted(out, key=lambda f: not f.confirmed))  # stable: the rank stays
    return replace(found, discovered=ranked, headline=headline(ranked, proved=True), proved=True)
