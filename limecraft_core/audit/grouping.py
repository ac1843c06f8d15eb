"""The strongest regions of all images grouped across the audit, by place, by look and by class.

Every ok row's :class:`~.regions.RegionDescriptor` values are grouped twice with scikit-learn's
average-linkage :class:`~sklearn.cluster.AgglomerativeClustering` on precomputed distances:

- **by place**: the Jaccard distance (1 - IoU) of the regions' masks in normalised coordinates,
  divided by ``PLACE_DISTANCE`` (0.5: regions that overlap by half are one place);
- **by look**: the Euclidean distance of their key colours (the Lab mean and spread of each
  region's most chromatic pixels of their dominant hue, :func:`~.regions.key_pixels`) in units
  of ``LAB_UNIT`` (a CIE Lab difference of 10, a clearly visible one), divided by
  ``LOOK_DISTANCE``;

each plus ``CLASS_GAP`` when the two regions push different classes, so that regions of two
classes are grouped only when they are very alike. Clusters merge while their mean distance is
under 1. A group counts an image once (its strongest region in the group) and is kept when it
holds at least ``MIN_IMAGES`` images of its main class (the class most of its images are
predicted) and ``MIN_PREVALENCE`` of the images with regions predicted that class (a floor
over the whole folder would hide a shortcut of a class that is a small share of it: a demo set's
10 'square' images of 60, all following the tag). A place group and a look group that share
at least half of their images are one group of kind ``"place and look"``.

**The cross-class path** (an artifact that sits at one place and looks the same is suspicious
whatever class it pushes, e.g. a watermark that tips five photos into five classes): the
regions are grouped a third time, with no class gap, by ``max(place, look')`` where ``look'``
is the smaller of the key-colour distance and, for two text proposals, the character distance
of the text they read (1 - the share of the shorter read's characters that the other holds,
divided by ``TEXT_DISTANCE``: a partial or misread reading of the same text still matches): a semi-transparent watermark's colour follows its background, its
characters do not. Such a group needs only ``MIN_IMAGES`` images, not ``MIN_PREVALENCE``: an
audit explains each photo's own predicted class, so an artifact is a strong region mainly where
it drives the prediction, a small share of the folder. What keeps a clean folder free of
findings is the prove phase's null (:mod:`.proving`), not a flat floor. Its kind is ``CROSS``, ``"place and look, any class"``. A cross group that
shares at least half of its images with a group of the first two views is its twin: when it
holds more images, the two become one ``CROSS`` group with every image of both (on 200 real
photos, half watermarked, the watermark's place group of one class's images held 19 of the 30
images its cross group held, all 30 watermarked), else it is dropped.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .regions import RegionDescriptor
from .rows import AuditRow

PLACE_DISTANCE = 0.5
LOOK_DISTANCE = 1.0
LAB_UNIT = 10.0
CLASS_GAP = 0.6
MIN_IMAGES = 3
MIN_PREVALENCE = 0.2
#: Two text proposals of which the shorter shares only this much less than all of its
#: characters with the other are at threshold.
TEXT_DISTANCE = 0.5
#: A group's medoid: of the members whose mean distance to the others is within this much of
#: the least (a tenth of the threshold), the one whose region holds the largest share of its
#: image's |weight|. Alike regions tie (a synthetic tag's colour is exact), and the first of them
#: may be a sliver of the artifact that, pasted alone, proves nothing.
MEDOID_TIE = 0.1
#: The kind of a cross-class group (alike in place and in look, whatever class it pushes).
CROSS = "place and look, any class"

#: The two ways regions are grouped.
VIEWS = ("place", "look")


@dataclass(frozen=True)
class Group:
    """Regions of several images that are alike.

    Attributes
    ----------
    kind : str, ``"place"``, ``"look"`` or ``"place and look"``
    members : tuple of (row, region) int pairs, indices into the rows given and into that row's
        ``regions``; one per image, in the rows' order
    medoid : (row, region), the member with the least total distance to the others (of those
        within ``MEDOID_TIE`` of it, the strongest region)
    """

    kind: str
    members: tuple[tuple[int, int], ...]
    medoid: tuple[int, int]

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(r for r, _ in self.members)


def region_table(rows: Sequence[AuditRow]) -> list[tuple[int, int]]:
    """Every (row, region) pair of the ok rows, in order."""
    return [(i, j) for i, row in enumerate(rows) if row.ok for j in range(len(row.regions))]


def look_vector(d: RegionDescriptor) -> np.ndarray:
    """(6,) float ndarray: the region's key colour (Lab mean and spread of its most chromatic
    pixels of their dominant hue) in ``LAB_UNIT``. The whole region's spread and gradient are kept
    in the row but not compared: a superpixel larger than a marker mixes the marker's texture with
    its background's."""
    return np.asarray([*d.key_lab, *d.key_lab_std], np.float64) / LAB_UNIT


def view_distances(descs: Sequence[RegionDescriptor], view: str) -> np.ndarray:
    """(n, n) float ndarray: the distance of each pair in one view, 1 at the grouping threshold.

    Raises
    ------
    ValueError
        For a view not in :data:`VIEWS`.
    """
    from sklearn.metrics import pairwise_distances

    if view == "place":
        masks = np.stack([d.grid_mask().ravel() for d in descs])
        return pairwise_distances(masks, metric="jaccard") / PLACE_DISTANCE
    if view == "look":
        looks = np.stack([look_vector(d) for d in descs])
        return pairwise_distances(looks) / LOOK_DISTANCE
    raise ValueError(f"a view is one of {', '.join(VIEWS)}, not {view!r}")


def _text(d: RegionDescriptor) -> frozenset[str]:
    """The characters a text proposal read (its name ``"text: ..."``), empty for any other."""
    head, _, text = d.name.partition(":")
    return frozenset(text.replace(" ", "")) if head.strip() == "text" else frozenset()


def cross_distances(descs: Sequence[RegionDescriptor]) -> np.ndarray:
    """(n, n) float ndarray: the cross-class path's distance, ``max(place, look')`` with
    ``look'`` the smaller of the key-colour and the text distance (module docstring)."""
    look = view_distances(descs, "look")
    texts = [_text(d) for d in descs]
    n = len(descs)
    text = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(n):
            if texts[i] and texts[j]:
                common = len(texts[i] & texts[j]) / min(len(texts[i]), len(texts[j]))
                text[i, j] = (1.0 - common) / TEXT_DISTANCE
    return np.maximum(view_distances(descs, "place"), np.minimum(look, text))


def _clusters(dist: np.ndarray) -> np.ndarray:
    from sklearn.cluster import AgglomerativeClustering

    if len(dist) < 2:
        return np.zeros(len(dist), int)
    model = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=1.0
    )
    return model.fit_predict(dist)


def _group(
    kind: str, idx: np.ndarray, table: list[tuple[int, int]], rows: Sequence[AuditRow],
    dist: np.ndarray,
) -> Group:  # fmt: skip
    best: dict[int, int] = {}  # row -> the index (into table) of its strongest region here
    for k in idx:
        r, j = table[k]
        if r not in best or rows[r].regions[j].weight > rows[r].regions[table[best[r]][1]].weight:
            best[r] = int(k)
    keep = np.asarray(sorted(best.values()), int)
    mean = dist[np.ix_(keep, keep)].sum(axis=1) / max(len(keep) - 1, 1)
    near = np.flatnonzero(mean <= mean.min() + MEDOID_TIE)
    share = [rows[table[keep[i]][0]].regions[table[keep[i]][1]].share for i in near]
    medoid = keep[near[int(np.argmax(share))]]
    return Group(kind, tuple(table[k] for k in keep), table[medoid])


def _merge(a: Group, b: Group, rows: Sequence[AuditRow], kind: str = "place and look") -> Group:
    """One group of ``kind``: every image of both, its strongest region of the two; ``a``'s
    medoid."""
    best: dict[int, int] = {}
    for r, j in (*a.members, *b.members):
        if r not in best or rows[r].regions[j].weight > rows[r].regions[best[r]].weight:
            best[r] = j
    return Group(kind, tuple(sorted(best.items())), a.medoid)


def _overlap(a: Group, b: Group) -> float:
    sa, sb = set(a.rows), set(b.rows)
    return len(sa & sb) / len(sa | sb)


def group_regions(rows: Sequence[AuditRow]) -> tuple[Group, ...]:
    """The groups of alike strong regions across the rows (see the module docstring).

    Parameters
    ----------
    rows : AuditRow sequence; error rows and rows without regions take no part

    Returns
    -------
    tuple of Group, the largest first (then place before look); empty when none is big enough.
    """
    table = region_table(rows)
    images = {r for r, _ in table}
    if len(images) < MIN_IMAGES:
        return ()
    descs = [rows[r].regions[j] for r, j in table]
    labels = np.asarray([rows[r].label for r, _ in table])
    gap = CLASS_GAP * (labels[:, None] != labels[None, :])
    in_class = Counter(rows[r].label for r in images)
    found: dict[str, list[Group]] = {}
    for view in VIEWS:
        dist = view_distances(descs, view) + gap
        cl = _clusters(dist)
        groups = [_group(view, np.flatnonzero(cl == c), table, rows, dist) for c in np.unique(cl)]
        found[view] = [g for g in groups if _prevalent(g, rows, in_class)]
    out = []
    looks = list(found["look"])
    for p in found["place"]:
        twin = max(looks, key=lambda g: _overlap(p, g), default=None)
        if twin is not None and _overlap(p, twin) >= 0.5:
            looks.remove(twin)
            p = _merge(p, twin, rows)
        out.append(p)
    out += looks
    out = _cross(descs, table, rows, out)
    return tuple(sorted(out, key=lambda g: -len(g.members)))


def _prevalent(g: Group, rows: Sequence[AuditRow], in_class: Counter) -> bool:
    """At least ``MIN_IMAGES`` images of its main class, and ``MIN_PREVALENCE`` of them."""
    main, n_main = Counter(rows[r].label for r in g.rows).most_common(1)[0]
    return n_main >= max(MIN_IMAGES, math.ceil(MIN_PREVALENCE * in_class[main]))


def _cross(
    descs: list[RegionDescriptor], table: list[tuple[int, int]], rows: Sequence[AuditRow],
    found: list[Group],
) -> list[Group]:  # fmt: skip
    """``found`` with the cross-class path's groups of at least ``MIN_IMAGES`` images: a cross
    group that shares at least half of its images with a found group is its twin, and when it
    holds more images the two become one group of kind ``CROSS`` (its medoid), with every image
    of both (see the module docstring)."""
    dist = np.minimum(cross_distances(descs), 1e6)  # no text on either side: never alike
    cl = _clusters(dist)
    out, new = list(found), []
    for c in np.unique(cl):
        g = _group(CROSS, np.flatnonzero(cl == c), table, rows, dist)
        if len(g.members) < MIN_IMAGES:
            continue
        twin = max(range(len(out)), key=lambda i: _overlap(g, out[i]), default=None)
        if twin is None or _overlap(g, out[twin]) < 0.5:
            new.append(g)
        elif len(g.members) > len(out[twin].members):
            out[twin] = _merge(g, out[twin], rows, CROSS)
    return out + new


def _view_row(medoid: RegionDescriptor, descs: Sequence[RegionDescriptor], view: str) -> np.ndarray:
    """(n,) float ndarray: :func:`view_distances` from ``medoid`` to each region (its first row,
    without the (n+1, n+1) matrix)."""
    from sklearn.metrics import pairwise_distances

    if view == "place":
        a, b = medoid.grid_mask().ravel()[None], np.stack([d.grid_mask().ravel() for d in descs])
        return pairwise_distances(a, b, metric="jaccard")[0] / PLACE_DISTANCE
    a, b = look_vector(medoid)[None], np.stack([look_vector(d) for d in descs])
    return pairwise_distances(a, b)[0] / LOOK_DISTANCE


def medoid_distances(
    descs: Sequence[RegionDescriptor], medoid: RegionDescriptor, kind: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each region's distance to a group's medoid, 1 on the grouping threshold, two ways, from
    one computation of each view's row:

    - ``mean``: the mean of the group's views' distances (a ``CROSS`` group: its own,
      :func:`cross_distances`), what :func:`similarities` turns into a likeness;
    - ``rule``: the rule that grouped it, the largest of its views' distances (both, for
      ``"place and look"``; a ``CROSS`` group: its own), what :func:`find_carriers` applies.

    Returns
    -------
    (mean, rule), two (n,) float ndarrays (a ``CROSS`` distance at most 1e6: no text on either
    side is never alike).
    """
    if not descs:
        return np.zeros(0), np.zeros(0)
    if kind == CROSS:
        place, look = _view_row(medoid, descs, "place"), _view_row(medoid, descs, "look")
        mine, text = _text(medoid), np.full(len(descs), np.inf)
        for i, d in enumerate(descs):
            theirs = _text(d)
            if mine and theirs:
                text[i] = (1.0 - len(mine & theirs) / min(len(mine), len(theirs))) / TEXT_DISTANCE
        cross = np.minimum(np.maximum(place, np.minimum(look, text)), 1e6)
        return cross, cross
    rows = np.stack([_view_row(medoid, descs, v) for v in VIEWS if v in kind])
    return rows.mean(axis=0), rows.max(axis=0)


def similarities(
    descs: Sequence[RegionDescriptor], medoid: RegionDescriptor, kind: str
) -> np.ndarray:
    """(n,) float ndarray in [0, 1]: how much each region is like a group's medoid in the group's
    own view(s), ``exp(-distance)`` of :func:`medoid_distances`' mean (no threshold is
    applied)."""
    return np.exp(-medoid_distances(descs, medoid, kind)[0])


#: A region carries a finding when its distance to the medoid by the rule that grouped it is at
#: most this (the grouping's own threshold; :func:`find_carriers`).
CARRIER_DISTANCE = 1.0


def find_carriers(
    kind: str, members: Sequence[tuple[AuditRow, RegionDescriptor]], medoid: RegionDescriptor,
    ok: Sequence[AuditRow], main: str,
) -> tuple[dict[str, float], tuple[tuple[str, int], ...]]:  # fmt: skip
    """Every explained image's likeness to a finding, and the images that carry it.

    Each ok row's regions, the strong ones and the others (``AuditRow.proposed``), are compared
    with the medoid's: an image's likeness is the largest :func:`similarities` of its regions;
    it *carries* the finding when it is a member, or when one of its regions lies within
    ``CARRIER_DISTANCE`` of the medoid by the rule that grouped it (:func:`medoid_distances`'
    rule, plus ``CLASS_GAP`` for an image of another class than ``main`` unless the group is
    ``CROSS``, as in the grouping; its nearest region is named). A finding of kind
    ``"outside"`` (expected masks) is carried by its members only.

    Returns
    -------
    (likeness, carriers): ``{image key: float in [0, 1]}`` over ``ok``, and ``(image key,
    region id)`` pairs in the rows' order, each member with its member region.
    """
    pairs = [(r, d) for r in ok for d in (*r.regions, *r.proposed)]
    descs = [d for _, d in pairs]
    mean, rule = medoid_distances(descs, medoid, "place and look" if kind == "outside" else kind)
    likeness = {r.key: 0.0 for r in ok}
    for (r, _), s in zip(pairs, np.exp(-mean), strict=True):
        likeness[r.key] = max(likeness[r.key], float(s))
    mine = {r.key: d.region for r, d in members}
    near: dict[str, tuple[float, int]] = {}
    if kind != "outside" and pairs:
        gap = 0.0 if kind == CROSS else CLASS_GAP * np.asarray([r.label != main for r, _ in pairs])
        for (r, d), dist in zip(pairs, rule + gap, strict=True):
            if dist <= CARRIER_DISTANCE and dist < near.get(r.key, (np.inf, -1))[0]:
                near[r.key] = (float(dist), d.region)
    carriers = tuple(
        (r.key, mine[r.key] if r.key in mine else near[r.key][1])
        for r in ok
        if r.key in mine or r.key in near
    )
    return likeness, carriers
