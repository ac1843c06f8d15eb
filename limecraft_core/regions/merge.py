"""Merging regions into one and splitting a merged region back, by id or by stable key."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .._validate import (
    LimecraftError,
    check_int,
)
from .labels import relabel
from .types import Regions


class _Atoms:
    """The atom label map as it is built, with one key and one name per atom."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.atoms = np.full(shape, -1, dtype=np.int32)
        self.keys: list[str] = []
        self.names: list[str] = []
        self.origins: list[str] = []

    def add(
        self,
        pieces: np.ndarray | None,
        where: np.ndarray,
        key: str,
        name: str,
        split: bool,
        origin: str = "superpixel",
    ) -> None:
        if pieces is None:
            pieces = np.zeros(where.shape, np.int64)
        ids = relabel(pieces[where])  # pieces in order of their values, one pass
        self.atoms[where] = len(self.keys) + ids
        for j in range(int(ids.max()) + 1 if ids.size else 0):
            self.keys.append(f"{key}.{j}" if split else key)
            self.names.append(f"{name} · {j + 1}" if split else name)
            self.origins.append(origin)

    def add_auto(self, comps: np.ndarray, rest: np.ndarray) -> None:
        ids = relabel(comps[rest])
        self.atoms[rest] = len(self.keys) + ids
        for j in range(int(ids.max()) + 1):
            self.keys.append(f"auto:{j}")
            self.names.append("")
            self.origins.append("superpixel")

    def regions(self, note: str = "") -> Regions:
        assert (self.atoms >= 0).all()
        return Regions(
            self.atoms,
            tuple(self.keys),
            tuple(self.names),
            note=note,
            atom_origins=tuple(self.origins),
        )


def merge_regions(regions: Regions, ids: Iterable[int], name: str | None = None) -> Regions:
    """Merge regions ``ids`` into one region; its id is the smallest of theirs after reordering.

    Parameters
    ----------
    regions : Regions
    ids : iterable of int, current region ids (0..K-1), at least two
    name : str, optional
        Name of the merged region (default: the names of the parts joined with ``+``).

    Returns
    -------
    Regions, a new object; ``regions`` is unchanged.
    """
    ids = sorted({check_int("region id", i, 0, regions.n_regions - 1) for i in ids})
    if len(ids) < 2:
        raise LimecraftError("select at least two regions to merge")
    merged = tuple(a for i in ids for a in regions.groups[i])
    if name is None:
        name = "+".join(n for n in (regions.names[i] for i in ids) if n) or ""
    groups = [g for i, g in enumerate(regions.groups) if i not in ids] + [merged]
    names = [n for i, n in enumerate(regions.names) if i not in ids] + [name]
    return Regions(
        regions.atoms,
        regions.atom_keys,
        regions.atom_names,
        tuple(groups),
        tuple(names),
        regions.source,
        regions.note,
        regions.atom_origins,
    )


def merge_by_keys(regions: Regions, keys: Iterable[str], name: str | None = None) -> Regions:
    """Merge the regions with these stable keys (see :func:`merge_regions`).

    Keys that no longer exist are ignored, so a list of merges can be replayed on a
    re-composed region map; fewer than two remaining keys leave ``regions`` unchanged.
    """
    present = set(regions.keys)
    ids = [regions.index_of(k) for k in keys if k in present]
    if len(set(ids)) < 2:
        return regions
    return merge_regions(regions, ids, name)


def split_region(regions: Regions, region_id: int) -> Regions:
    """Split a merged region back into the regions it was made of.

    Raises
    ------
    LimecraftError
        If the region is a single piece (nothing to split).
    """
    region_id = check_int("region id", region_id, 0, regions.n_regions - 1)
    group = regions.groups[region_id]
    if len(group) == 1:
        raise LimecraftError(
            f"region {region_id} was not made by a merge; there is nothing to split"
        )
    groups = [g for i, g in enumerate(regions.groups) if i != region_id] + [(a,) for a in group]
    names = [n for i, n in enumerate(regions.names) if i != region_id] + [
        regions.atom_names[a] for a in group
    ]
    return Regions(
        regions.atoms,
        regions.atom_keys,
        regions.atom_names,
        tuple(groups),
        tuple(names),
        regions.source,
        regions.note,
        regions.atom_origins,
    )
