"""A dataset to audit, as files.

The images of a folder or a list file, the expected masks named as the images, an uploaded zip
unpacked safely, and each image's digest and loader.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .._validate import LimecraftError
from ..audit import AuditInput, AuditItem
from ..proposers import propose
from .images import decode_image, decode_mask, expected_area
from .masks_folder import (
    IMAGE_SUFFIXES,
    _is_image_name,
    check_images_source,
    match_masks,
    read_regions_mask,
)

__all__ = [
    "IMAGE_SUFFIXES",
    "audit_items",
    "file_digest",
    "list_images",
    "match_masks",
    "read_regions_mask",
    "safe_parts",
    "split_dataset",
    "unpack_zip",
]


#: Folder names that hold expected masks in a dataset folder or zip (see split_dataset).
MASK_FOLDERS = ("masks", "expected")


MAX_LIST_BYTES = 50_000_000


#: An uploaded zip may unpack to at most this much, in at most this many files.
MAX_UNPACKED_BYTES = 2 * 2**30


MAX_ZIP_FILES = 100_000


def list_images(source: str | Path) -> list[tuple[str, Path]]:
    """The images to audit: (the name recorded for it, its path), sorted by name.

    ``source`` is a folder (searched recursively for image files; hidden files and folders are
    skipped; the name is the path relative to the folder, with ``/``) or a text file listing one
    image path per line (relative to the list file's folder unless absolute; blank lines and
    lines starting with ``#`` are skipped; the name is the line as written).

    Raises
    ------
    LimecraftError
        If ``source`` does not exist, holds no image, or a list file is unreadable.
    """
    src = check_images_source(source)
    if src.is_dir():
        found = []
        for p in src.rglob("*"):
            rel = p.relative_to(src)
            if any(part.startswith(".") for part in rel.parts) or not p.is_file():
                continue
            if _is_image_name(p.name):
                found.append((rel.as_posix(), p))
        if not found:
            raise LimecraftError(
                f"IMAGES folder {str(src)!r} holds no image files "
                f"({', '.join(s.lstrip('.') for s in IMAGE_SUFFIXES)})"
            )
        return sorted(found)
    try:
        data = src.read_bytes()
    except OSError as e:
        raise LimecraftError(f"cannot read the list file {str(src)!r}: {e.strerror or e}") from None
    if len(data) > MAX_LIST_BYTES:
        raise LimecraftError(f"the list file {str(src)!r} is over {MAX_LIST_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LimecraftError(
            f"IMAGES {str(src)!r} is neither a folder nor a UTF-8 list of image paths"
        ) from None
    out, seen = [], set()
    for line in text.splitlines():
        name = line.strip()
        if not name or name.startswith("#") or name in seen:
            continue
        seen.add(name)
        p = Path(name)
        out.append((name, p if p.is_absolute() else src.parent / p))
    if not out:
        raise LimecraftError(f"the list file {str(src)!r} names no image")
    return out


def split_dataset(root: str | Path) -> tuple[list[tuple[str, Path]], Path | None]:
    """A dataset folder (an unpacked zip, an uploaded folder) as images and a masks folder.

    The masks are the files in a folder named ``masks`` (or ``expected``), at any depth. The
    images are those in a folder named ``images`` when there is one, else every other image
    file (so ``labels.json``'s tags folder of ``demo-data --mixed`` is no image: it sits beside
    ``images``).

    Raises
    ------
    LimecraftError
        If the folder holds no image.
    """
    root = Path(root)
    dirs = sorted(
        (p for p in root.rglob("*") if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: (len(p.parts), str(p)),
    )
    masks = next((d for d in dirs if d.name.lower() in MASK_FOLDERS), None)
    images = next((d for d in dirs if d.name.lower() == "images"), None)
    files = list_images(images or root)
    if masks is not None and images is None:
        inside = masks.relative_to(root).as_posix() + "/"
        files = [(n, p) for n, p in files if not n.startswith(inside)]
        if not files:
            raise LimecraftError("the dataset holds masks but no image beside them")
    return files, masks


def safe_parts(name: str, where: str) -> list[str]:
    """The folders and file name of an uploaded path, refused when it could leave the folder it
    is written to (absolute, ``..``, a drive letter) or names nothing.

    Raises
    ------
    LimecraftError
        Saying which upload (``where``) holds the unsafe path.
    """
    path = name.replace("\\", "/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or ".." in parts or not parts or ":" in parts[0]:
        raise LimecraftError(f"{where} holds an unsafe path {name!r}")
    return parts


def unpack_zip(data: bytes, dest: str | Path) -> Path:
    """Unpack an uploaded zip into the folder ``dest`` safely: no absolute paths or ``..``, no
    links, at most :data:`MAX_ZIP_FILES` files and :data:`MAX_UNPACKED_BYTES` (checked before
    anything is written, then again while inflating).

    Raises
    ------
    LimecraftError
        If it is not a zip, or breaks a rule above.
    """
    dest = Path(dest)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise LimecraftError("that file is not a zip archive") from None
    with zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if len(infos) > MAX_ZIP_FILES:
            raise LimecraftError(f"the zip holds {len(infos):,} files; at most {MAX_ZIP_FILES:,}")
        if sum(i.file_size for i in infos) > MAX_UNPACKED_BYTES:
            raise LimecraftError(
                f"the zip unpacks to over {MAX_UNPACKED_BYTES // 2**30} GB; split the dataset"
            )
        written = 0
        for info in infos:
            parts = safe_parts(info.filename, "the zip")
            if parts[0] == "__MACOSX" or (info.external_attr >> 16) & 0o170000 == 0o120000:
                continue  # macOS resource forks; symbolic links are never followed
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > MAX_UNPACKED_BYTES:
                        raise LimecraftError("the zip unpacks to more than it says; refused")
                    out.write(chunk)
    return dest


def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise LimecraftError(f"{what} {str(path)!r} does not exist") from None
    except OSError as e:
        raise LimecraftError(f"cannot read {what} {str(path)!r}: {e.strerror or e}") from None
    if not data:
        raise LimecraftError(f"{what} {str(path)!r} is empty")
    return data


def file_digest(image: Path, mask: Path | None = None, regions: Path | None = None) -> str:
    """A hash of the image file's bytes, of its expected mask's and of its own regions mask's
    (unreadable files hash as missing; without a regions mask the hash is the one of the image
    and its expected mask alone, as audits before regions masks made it)."""
    h = hashlib.blake2b(digest_size=16)
    if regions is not None:
        h.update(b"|regions")
    for p in (image, mask, *((regions,) if regions is not None else ())):
        if p is None:
            h.update(b"|none")
            continue
        try:
            h.update(b"|" + p.read_bytes())
        except OSError:
            h.update(b"|unreadable")
    return h.hexdigest()


def _keys(names: Sequence[str]) -> list[str]:
    """A folder name per image name: safe characters, ``/`` as ``__``, unique."""
    out, taken = [], set()
    for name in names:
        key = re.sub(r"[^A-Za-z0-9._-]", "_", name.replace("/", "__")).strip(".")[:150] or "image"
        if key in taken:
            key = f"{key}-{hashlib.blake2b(name.encode(), digest_size=4).hexdigest()}"
        taken.add(key)
        out.append(key)
    return out


def audit_items(
    files: Sequence[tuple[str, Path]],
    masks: dict[str, Path] | None = None,
    *,
    regions_masks: dict[str, Path] | None = None,
    proposers: Sequence[str] = (),
) -> list[AuditItem]:
    """The :class:`~limecraft_core.audit.AuditItem` of each image file, with its mask.

    An item's ``load`` reads and decodes the image and its masks, and proposes its regions: the
    analyst's own (``regions_masks``, matched as :func:`match_masks` does) and those of
    ``proposers`` (names of :data:`~limecraft_core.proposers.PROPOSERS`, ``text`` say). It runs
    in the image's own thread, so detection overlaps the other images' model passes. A bad
    image, or a mask that is unreadable, empty or of another size, raises a LimecraftError that
    becomes its error row.
    """
    masks = masks or {}
    regions_masks = regions_masks or {}
    out = []
    for (name, path), key in zip(files, _keys([n for n, _ in files]), strict=True):
        mask, own = masks.get(name), regions_masks.get(name)
        digest = file_digest(path, mask, own)
        out.append(AuditItem(name, key, digest, _loader(name, path, mask, own, tuple(proposers))))
    return out


def _loader(
    name: str, path: Path, mask: Path | None, own: Path | None, proposers: tuple[str, ...]
) -> Callable[[], AuditInput]:
    def load() -> AuditInput:
        image = decode_image(_read(path, "image"), f"image {name!r}")
        area = None
        if mask is not None:
            m = decode_mask(_read(mask, "expected mask"), f"expected mask {mask.name!r}")
            area = expected_area(m, image.shape[:2], f"the expected mask {mask.name!r}")
        if own is None and not proposers:
            return AuditInput(image, area)
        given = None
        if own is not None:
            given = decode_mask(_read(own, "regions mask"), f"regions mask {own.name!r}")
        names = (*(("masks",) if given is not None else ()), *proposers)
        found = propose(image, names, given=given)
        return AuditInput(
            image, area, regions=tuple(found.masks), region_names=tuple(found.names),
            region_origins=tuple(found.origins), notes=found.notes,
        )  # fmt: skip

    return load
