"""``Regions``: a label map with stable identities, names and reversible merges.

And the ways to make one from a plain label map or a mask image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .._validate import (
    LimecraftError,
)
from .labels import relabel

#: The origins a handcrafted region may have; ``proposed:<proposer>`` names a proposer too.
HAND_ORIGINS = ("drawn", "uploaded")
#: Every origin a region may have, besides ``proposed:<proposer>``.
ORIGINS = ("superpixel", *HAND_ORIGINS, "merged")
_PROPOSED = "proposed:"


def origin_of_key(key: str) -> str:
    """The origin a region's key implies where none was recorded: ``hand:`` is ``drawn``,
    ``merge(...)`` is ``merged``, anything else (``auto:j``, ``background``) ``superpixel``."""
    if key.startswith("hand:"):
        return "drawn"
    if key.startswith("merge("):
        return "merged"
    return "superpixel"


def check_origin(origin: object, allowed: Sequence[str] = ORIGINS) -> str:
    """``origin`` if it is one of ``allowed`` or ``proposed:<proposer>`` (a proposer's name:
    letters, digits, ``_`` and ``-``), else a LimecraftError that lists them."""
    if isinstance(origin, str):
        name = origin.removeprefix(_PROPOSED)
        if origin in allowed or (
            origin.startswith(_PROPOSED)
            and name
            and name.replace("_", "").replace("-", "").isalnum()
        ):
            return origin
    raise LimecraftError(
        f"region origin must be one of {', '.join(allowed)} or proposed:<proposer> "
        f"(e.g. proposed:text), got {origin!r}"
    )


@dataclass(frozen=True, eq=False)
class Regions:
    """A label map with stable identities, names, and reversible merges.

    The finest pieces are *atoms*. Region k is the union of the atoms in ``groups[k]``; regions
    are ordered by their smallest atom, so merging then splitting gives back the same ids.

    Attributes
    ----------
    atoms : (H, W) int32 ndarray, ids 0..A-1 with no gaps
    atom_keys : tuple of str, one per atom, stable across merges and relabelling
        ``"hand:i"`` (handcrafted region i as one feature), ``"hand:i.j"`` (piece j inside it),
        ``"auto:j"`` (automatic superpixel j), ``"background"`` (the rest, as one feature).
    atom_names : tuple of str, one per atom ("" for automatic superpixels)
    groups : tuple of tuple of int, atoms of each region
    group_names : tuple of str, one per region
    source : dict or None, the segmentation settings that made the atoms (flat
        ``SegmentationConfig`` fields), kept through merges and splits; None for a label map
        given as is
    note : str, why the number of automatic regions differs from the one asked for, in a
        sentence to show as is ("" when it was met or none was asked for); kept through merges
        and splits
    atom_origins : tuple of str, one per atom: ``superpixel``, ``drawn``, ``uploaded``,
        ``merged`` (an atom that a restored explanation's merge made) or
        ``proposed:<proposer>``; default derived from the keys (:func:`origin_of_key`); kept
        through merges and splits
    """

    atoms: np.ndarray
    atom_keys: tuple[str, ...]
    atom_names: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...] = field(default=())
    group_names: tuple[str, ...] = field(default=())
    source: dict | None = field(default=None, compare=False)
    note: str = field(default="", compare=False)
    atom_origins: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.atom_keys)
        if not self.atom_origins:
            object.__setattr__(self, "atom_origins", tuple(map(origin_of_key, self.atom_keys)))
        if len(self.atom_origins) != n:
            raise LimecraftError("one origin per atom is needed")
        object.__setattr__(self, "atom_origins", tuple(map(check_origin, self.atom_origins)))
        if not self.groups:
            object.__setattr__(self, "groups", tuple((a,) for a in range(n)))
            object.__setattr__(self, "group_names", tuple(self.atom_names))
        groups = sorted((tuple(sorted(g)) for g in self.groups), key=lambda g: g[0])
        if sorted(a for g in groups for a in g) != list(range(n)):
            raise LimecraftError("every atom must belong to exactly one region")
        if len(self.group_names) != len(self.groups):
            raise LimecraftError("one name per region is needed")
        # Keep names aligned with the sorted groups.
        order = sorted(range(len(self.groups)), key=lambda k: min(self.groups[k]))
        object.__setattr__(self, "group_names", tuple(self.group_names[k] for k in order))
        object.__setattr__(self, "groups", tuple(groups))

    @property
    def n_regions(self) -> int:
        """Number of regions K."""
        return len(self.groups)

    @cached_property
    def labels(self) -> np.ndarray:
        """(H, W) int32 label map of the regions, 0..K-1 with no gaps."""
        lut = np.empty(len(self.atom_keys), dtype=np.int32)
        for k, g in enumerate(self.groups):
            lut[list(g)] = k
        return lut[self.atoms]

    @property
    def keys(self) -> tuple[str, ...]:
        """Stable identity of each region: its atom's key, or ``merge(a+b+...)``."""
        return tuple(
            self.atom_keys[g[0]]
            if len(g) == 1
            else "merge(" + "+".join(self.atom_keys[a] for a in g) + ")"
            for g in self.groups
        )

    @property
    def origins(self) -> tuple[str, ...]:
        """Where each region comes from: its atom's origin, or ``merged`` for several atoms."""
        return tuple(self.atom_origins[g[0]] if len(g) == 1 else "merged" for g in self.groups)

    @property
    def names(self) -> tuple[str, ...]:
        """Display name of each region ("" where it has none)."""
        return self.group_names

    def index_of(self, key: str) -> int:
        """Current id of the region with stable identity ``key``."""
        try:
            return self.keys.index(key)
        except ValueError:
            raise LimecraftError(f"no region with key {key!r}") from None

    def pixel_counts(self) -> np.ndarray:
        """(K,) int64 ndarray, pixels per region."""
        return np.bincount(self.labels.ravel(), minlength=self.n_regions)


def regions_from_labels(labels: np.ndarray, names: Sequence[str] | None = None) -> Regions:
    """Wrap a plain label map as :class:`Regions` (keys ``auto:j``), relabelled to 0..K-1."""
    if not isinstance(labels, np.ndarray) or labels.ndim != 2:
        raise LimecraftError("a label map must be a 2-D integer array")
    atoms = relabel(labels)
    k = int(atoms.max()) + 1
    if names is not None and len(names) != k:
        raise LimecraftError(f"{len(names)} names given for {k} regions")
    return Regions(atoms, tuple(f"auto:{j}" for j in range(k)), tuple(names or [""] * k))


def masks_from_label_image(label_image: np.ndarray) -> list[np.ndarray]:
    """Split a mask image into one boolean mask per region.

    Parameters
    ----------
    label_image : (H, W) ndarray
        Each distinct non-zero value is one region, in increasing order of value. A boolean
        or 0/255 image is one region.

    Returns
    -------
    list of (H, W) bool ndarray, possibly empty.
    """
    if label_image.ndim != 2:
        raise LimecraftError(
            f"a mask image must be 2-D (one channel), got shape {label_image.shape}"
        )
    values = np.unique(label_image)
    return [label_image == v for v in values if v != 0]
