"""A model audited over a dataset: one summary row per image, and the findings across them.

The question an audit answers is wider than "why this prediction?": across the images, does
the model rely on the object, or on something that should not matter (a ruler, a hospital's
marker, a watermark, the demo data's planted tag)? Each image is explained as
:func:`~limecraft_core.explain` explains it; :func:`audit_row` reads the explanation into one
row (the predicted class, the top region and its share of |weight|, the score change when it
is hidden, the stability verdict and, with an expected mask, the relevance mass inside it and
the pointing game), :func:`location_grid` puts its |weights| in normalised image coordinates,
and :func:`findings` turns the rows into plain sentences, per-class aggregates and a location
map. :func:`run_audit` explains many images with several in flight through one scorer, so
that their perturbations share the scorer's forward passes where they fit (a work queue
combines the chunks of images of the same input size; a Ray Serve deployment batches the
requests it gets).

Everything here is pure but for threads: files are read and written at the edge
(:mod:`limecraft_core.io.audit_folder`, the CLI and the app), which hands :func:`run_audit` callables
that load each image and receive each result.

The flags, in plain words:

- with an expected mask (the object): **the prediction rests outside the expected region**:
  the top region (largest weight) lies outside it (a pointing-game miss) *and* hiding that
  region alone removes at least ``THRESHOLDS["audit_dependence"]`` (half) of the score. A
  model that merely also looks at a marker keeps its prediction when the marker is hidden,
  because the object holds it up; one that follows the marker loses it.
- without masks: **the top region touches the image border** (where watermarks, rulers and
  text markers sit).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from ._validate import Cancelled, LimecraftError, check_int
from .classifier import ModelError
from .config import AUDIT_DEFAULTS, IN_FLIGHT, ExplainConfig
from .limits import THRESHOLDS
from .result import Explanation
from .scorer import Scorer

__all__ = [
    "AUDIT_DEFAULTS",
    "FLAG_TEXT",
    "MAP_GRID",
    "AuditInput",
    "AuditItem",
    "AuditOutcome",
    "AuditRow",
    "ClassSummary",
    "Findings",
    "audit_config",
    "audit_row",
    "error_row",
    "findings",
    "location_grid",
    "run_audit",
    "sort_rows",
    "touches_border",
]

#: Cells on each side of the location map (normalised image coordinates).
MAP_GRID = 64
#: The border frame of the location map's summary: this share of each side.
FRAME = 0.1

DEPENDENCE = THRESHOLDS["audit_dependence"]

FLAG_TEXT = {
    "outside": "the prediction rests outside the expected region",
    "border": "the top region touches the image border",
}


# ----------------------------------------------------------------------------- settings


def audit_config(settings: dict[str, Any] | None = None) -> ExplainConfig:
    """The audit's settings: :data:`AUDIT_DEFAULTS` under the given ``{name: value}`` settings.

    Raises
    ------
    LimecraftError
        For an unknown or out-of-range setting, or ``compute_deltas=False``: the audit reads the
        score change when the top region is hidden.
    """
    cfg = ExplainConfig.from_flat({**AUDIT_DEFAULTS, **(settings or {})})
    if not cfg.targets.compute_deltas:
        raise LimecraftError(
            "an audit needs the per-region deltas (the score change when the top region is "
            "hidden): leave compute_deltas on (drop --no-compute-deltas)"
        )
    if cfg.segmentation.method == "given":
        raise LimecraftError(
            "an audit segments each image itself: choose a superpixel method, not 'given'"
        )
    return cfg


# ----------------------------------------------------------------------------- one row


@dataclass(frozen=True)
class AuditRow:
    """One image of an audit, as a row of ``audit.csv`` and ``audit.json``.

    Attributes
    ----------
    file : str, the image as given (its path relative to the images folder or list file)
    key : str, the folder of its results under ``images/`` (unique, safe as a file name)
    digest : str, a hash of the image file's bytes (and of its expected mask's)
    status : {"ok", "error"}
    error : str, what went wrong ("" when ok)
    width, height : int, pixels (0 when unread)
    predicted : int, the explained class (top-1 unless a target was set); -1 on error
    label : str, its name
    score : float, the model's output for it (the settings' output space)
    n_regions : int
    top_region : int, the region with the largest weight; -1 on error
    top_name : str, its name ("" for a superpixel)
    top_share : float, its share of the total |weight|
    top_delta : float, the score change when only it is hidden (score minus that output)
    dependence : float, ``top_delta / score``: the share of the score that hiding it removes
    top_touches_border : bool, the top region has a pixel on the image's outermost rows or columns
    verdict : str, the stability verdict ("stable", "borderline", "unstable")
    verdict_reason : str
    has_mask : bool, an expected mask was given for this image
    expected_regions : int, regions at least half inside the expected mask (0: nothing could
        be judged against it; use smaller regions)
    relevance_mass : float or None, share of the positive weight inside the expected region
    pointing_game : bool or None, the top region is inside the expected region
    rank_accuracy : float or None, share of the top-|E| regions that are expected
    flags : tuple of str, keys of :data:`FLAG_TEXT`
    samples_used, model_passes : int
    seconds : float, wall time of this image's explanation
    """

    file: str
    key: str
    digest: str
    status: str = "ok"
    error: str = ""
    width: int = 0
    height: int = 0
    predicted: int = -1
    label: str = ""
    score: float = math.nan
    n_regions: int = 0
    top_region: int = -1
    top_name: str = ""
    top_share: float = math.nan
    top_delta: float = math.nan
    dependence: float = math.nan
    top_touches_border: bool = False
    verdict: str = ""
    verdict_reason: str = ""
    has_mask: bool = False
    expected_regions: int = 0
    relevance_mass: float | None = None
    pointing_game: bool | None = None
    rank_accuracy: float | None = None
    flags: tuple[str, ...] = ()
    samples_used: int = 0
    model_passes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def reason(self) -> str:
        """The flags in one plain sentence ("" when none)."""
        parts = []
        for f in self.flags:
            if f == "outside":
                parts.append(
                    "the top region lies outside the expected region and hiding it alone "
                    f"removes {self.dependence:.0%} of the score"
                )
            else:
                parts.append(FLAG_TEXT[f])
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (NaN as None)."""
        d = asdict(self)
        d["flags"] = list(self.flags)
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()
        }

    @classmethod
    def from_dict(cls, d: Any) -> AuditRow:
        """Read :meth:`to_dict`'s output, checking every field's type (a file is untrusted).

        Raises
        ------
        LimecraftError
            If a field is missing, unknown or of the wrong type.
        """
        if not isinstance(d, dict):
            raise LimecraftError("an audit row must be an object")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise LimecraftError(f"an audit row has an unknown field {unknown[0]!r}")
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name not in d:
                if name in ("file", "key", "digest"):
                    raise LimecraftError(f"an audit row has no {name!r}")
                continue
            values[name] = _field_value(name, str(f.type), d[name])
        row = cls(**values)
        if row.status not in ("ok", "error"):
            raise LimecraftError(f"an audit row's status must be ok or error, not {row.status!r}")
        bad = [f for f in row.flags if f not in FLAG_TEXT]
        if bad:
            raise LimecraftError(f"an audit row has an unknown flag {bad[0]!r}")
        return row


def _field_value(name: str, kind: str, v: Any) -> Any:
    def fail(what: str) -> LimecraftError:
        return LimecraftError(f"audit row field {name!r} must be {what}, got {v!r:.60}")

    optional = "None" in kind
    if v is None and (optional or "float" in kind):
        return None if optional else math.nan
    if kind.startswith("str"):
        if not isinstance(v, str) or len(v) > 10_000:
            raise fail("a string")
        return v
    if kind.startswith("bool"):
        if not isinstance(v, bool):
            raise fail("true or false")
        return v
    if kind.startswith("int"):
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail("an integer")
        return v
    if kind.startswith("float"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise fail("a number")
        return float(v)
    if kind.startswith("tuple"):
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or len(v) > 10:
            raise fail("a list of flag names")
        return tuple(v)
    raise fail(kind)  # pragma: no cover - every field's type is one of the above


def touches_border(region: np.ndarray) -> bool:
    """Whether a (H, W) bool region has a pixel on the outermost rows or columns."""
    r = np.asarray(region, bool)
    return bool(r[0].any() or r[-1].any() or r[:, 0].any() or r[:, -1].any())


def audit_row(
    ex: Explanation,
    *,
    file: str,
    key: str,
    digest: str,
    has_mask: bool = False,
    seconds: float = 0.0,
) -> AuditRow:
    """The summary row of one image's explanation.

    Parameters
    ----------
    ex : Explanation, with its per-region deltas (``compute_deltas``) and, when the image had
        an expected mask, its ``trust.localisation`` (``explain(expected_mask=...)``)
    file, key, digest : as :class:`AuditRow`
    has_mask : bool, an expected mask was given (its localisation is then in ``ex``)
    seconds : float, the explanation's wall time

    Returns
    -------
    AuditRow, its ``flags`` set by the rules in the module docstring.
    """
    w = np.asarray(ex.weights, np.float64)
    top = int(np.argmax(w))
    total = float(np.abs(w).sum())
    score = float(ex.predictions[0])
    delta = float(ex.deltas[0, top])
    dependence = delta / score if score > 0 and math.isfinite(delta) else math.nan
    border = touches_border(ex.segments == top)
    loc = ex.trust.localisation if has_mask else None
    if has_mask and loc is None:
        raise LimecraftError("the explanation has no localisation: explain with expected_mask")
    flags: list[str] = []
    if loc is not None:
        if loc.expected and not loc.pointing_game and dependence >= DEPENDENCE:
            flags.append("outside")
    elif border:
        flags.append("border")
    st = ex.trust.stability
    h, w_px = ex.segments.shape
    return AuditRow(
        file=file,
        key=key,
        digest=digest,
        width=int(w_px),
        height=int(h),
        predicted=int(ex.target),
        label=str(ex.class_labels[0]),
        score=score,
        n_regions=int(ex.n_regions),
        top_region=top,
        top_name=str(ex.region_names[top]),
        top_share=float(abs(w[top]) / total) if total > 0 else 0.0,
        top_delta=delta,
        dependence=dependence,
        top_touches_border=border,
        verdict=st.verdict if st is not None else "",
        verdict_reason=st.reason if st is not None else "",
        has_mask=has_mask,
        expected_regions=0 if loc is None else int(loc.expected),
        relevance_mass=None if loc is None else float(loc.relevance_mass),
        pointing_game=None if loc is None else bool(loc.pointing_game),
        rank_accuracy=None if loc is None else float(loc.relevance_rank_accuracy),
        flags=tuple(flags),
        samples_used=int(ex.run.samples_used or ex.config.sampling.samples),
        model_passes=int(ex.run.model_passes),
        seconds=float(seconds),
    )


def error_row(file: str, key: str, digest: str, error: str, seconds: float = 0.0) -> AuditRow:
    """The row of an image that could not be audited (unreadable, a bad mask, a model failure)."""
    return AuditRow(
        file=file, key=key, digest=digest, status="error", error=" ".join(error.split()),
        seconds=float(seconds),
    )  # fmt: skip


def location_grid(ex: Explanation, grid: int = MAP_GRID) -> np.ndarray:
    """Where an explanation's weight lies, in normalised image coordinates.

    Each pixel gets the |weight| of its region divided by the largest |weight| (so every image
    counts alike, whatever its scale), and the picture is averaged down to ``grid`` x ``grid``
    cells (a non-square image is stretched to the square).

    Returns
    -------
    (grid, grid) float32 ndarray in [0, 1]; all zeros when every weight is 0.
    """
    from skimage.transform import resize

    grid = check_int("grid", grid, 2, 1024)
    a = np.abs(np.asarray(ex.weights, np.float64))
    top = float(a.max()) if a.size else 0.0
    if top <= 0:
        return np.zeros((grid, grid), np.float32)
    per_pixel = (a / top)[ex.segments]
    out = resize(per_pixel, (grid, grid), order=1, anti_aliasing=True, mode="edge")
    return np.clip(out, 0.0, 1.0).astype(np.float32)


# ----------------------------------------------------------------------------- findings


@dataclass(frozen=True)
class ClassSummary:
    """The audited images predicted as one class.

    Attributes
    ----------
    label : str
    images, flagged : int
    mean_score, mean_top_share, mean_dependence : float
    median_relevance_mass : float or None (no expected masks)
    pointing_hits : int or None, images whose top region is inside the expected region
    border : int, images whose top region touches the border
    stable : int, images with a stable verdict
    """

    label: str
    images: int
    flagged: int
    mean_score: float
    mean_top_share: float
    mean_dependence: float
    median_relevance_mass: float | None
    pointing_hits: int | None
    border: int
    stable: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()
        }


@dataclass(frozen=True)
class Findings:
    """What an audit found, in plain sentences first.

    Attributes
    ----------
    sentences : tuple of str, the summary, most important first
    images, ok, errors, flagged : int
    with_masks : int, images that had an expected mask
    classes : tuple of ClassSummary, the most frequent predicted class first
    location : (MAP_GRID, MAP_GRID) float ndarray, the mean of the images' location grids
        (None when no image was explained)
    frame_share : float, share of the location map's total in the border frame (the outer
        ``FRAME`` of each side), to compare with the frame's share of the area (``frame_area``)
    frame_area : float
    peak : str, where the location map is strongest, e.g. "top-left corner" or "centre"
    """

    sentences: tuple[str, ...]
    images: int
    ok: int
    errors: int
    flagged: int
    with_masks: int
    classes: tuple[ClassSummary, ...]
    location: np.ndarray | None
    frame_share: float
    frame_area: float
    peak: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentences": list(self.sentences),
            "images": self.images,
            "ok": self.ok,
            "errors": self.errors,
            "flagged": self.flagged,
            "with_masks": self.with_masks,
            "classes": [c.to_dict() for c in self.classes],
            "location_map": None if self.location is None else np.round(self.location, 5).tolist(),
            "frame_share": _finite(self.frame_share),
            "frame_area": self.frame_area,
            "peak": self.peak,
        }


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def sort_rows(rows: Iterable[AuditRow]) -> list[AuditRow]:
    """Flagged images first (the prediction depending most on the flagged region first), then
    the other explained images by how much hiding their top region removes, then errors."""

    def key(r: AuditRow) -> tuple:
        dep = r.dependence if math.isfinite(r.dependence) else -1.0
        return (not r.ok, not r.flagged, -dep, r.file)

    return sorted(rows, key=key)


_ZONES = (
    ("top-left corner", "top edge", "top-right corner"),
    ("left edge", "centre", "right edge"),
    ("bottom-left corner", "bottom edge", "bottom-right corner"),
)


def _peak(location: np.ndarray) -> str:
    g = location.shape[0]
    y, x = np.unravel_index(int(np.argmax(location)), location.shape)
    zone = lambda v: 0 if v < g / 4 else (2 if v >= g - g / 4 else 1)  # noqa: E731
    return _ZONES[zone(y)][zone(x)]


def _frame(location: np.ndarray) -> tuple[float, float]:
    g = location.shape[0]
    m = max(1, round(FRAME * g))
    inner = np.zeros_like(location, bool)
    inner[m : g - m, m : g - m] = True
    total = float(location.sum())
    share = float(location[~inner].sum() / total) if total > 0 else math.nan
    return share, float((~inner).mean())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _by_label(rows: Sequence[AuditRow]) -> str:
    """ "19 are predicted 'star', 8 'circle' and 3 'square'"."""
    counts = Counter(r.label for r in rows).most_common()
    if not counts:
        return ""
    (first, n0), rest = counts[0], counts[1:]
    parts = [f"{n0} {'is' if n0 == 1 else 'are'} predicted '{first}'"]
    parts += [f"{n} '{label}'" for label, n in rest]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else math.nan


def _classes(ok: Sequence[AuditRow]) -> tuple[ClassSummary, ...]:
    out = []
    for label, n in Counter(r.label for r in ok).most_common():
        rs = [r for r in ok if r.label == label]
        masked = [r for r in rs if r.has_mask]
        deps = [r.dependence for r in rs if math.isfinite(r.dependence)]
        out.append(
            ClassSummary(
                label=label,
                images=n,
                flagged=sum(r.flagged for r in rs),
                mean_score=float(np.mean([r.score for r in rs])),
                mean_top_share=float(np.mean([r.top_share for r in rs])),
                mean_dependence=float(np.mean(deps)) if deps else math.nan,
                median_relevance_mass=_median([r.relevance_mass for r in masked])
                if masked
                else None,
                pointing_hits=sum(bool(r.pointing_game) for r in masked) if masked else None,
                border=sum(r.top_touches_border for r in rs),
                stable=sum(r.verdict == "stable" for r in rs),
            )
        )
    return tuple(out)


def _mask_sentences(masked: list[AuditRow], n: int) -> list[str]:
    """The headline with expected masks, the pointing game, the relevance mass, the unjudged."""
    out = [r for r in masked if r.flagged]
    miss = [r for r in masked if not r.pointing_game]
    s = [
        f"In {len(out)} of {len(masked)} images the prediction rests outside the expected "
        f"region: the top region lies outside it and hiding that region alone removes at least "
        f"{DEPENDENCE:.0%} of the score" + (f"; {_by_label(out)}." if out else "."),
        f"The top region lies outside the expected region in {len(miss)} of {len(masked)} "
        f"images (pointing game: {_plural(len(masked) - len(miss), 'hit')})"
        + (
            f"; in {len(miss) - len(out)} of them the prediction survives hiding it, so the "
            "object holds it up as well."
            if len(miss) > len(out)
            else "."
        ),
    ]
    parts = [
        f"median {_median(ms):.2f} in {who}"
        for ms, who in (
            ([r.relevance_mass for r in out], "the flagged images"),
            ([r.relevance_mass for r in masked if not r.flagged], "the others"),
        )
        if ms
    ]
    s.append("Relevance mass inside the expected region: " + " and ".join(parts) + ".")
    if len(masked) < n:
        k = n - len(masked)
        s.append(
            f"{_plural(k, 'image')} had no expected mask and "
            f"{'was' if k == 1 else 'were'} not judged against one."
        )
    return s


def _border_sentences(ok: list[AuditRow], headline: bool) -> list[str]:
    """Without masks the headline (the border flag), with them one line."""
    border = [r for r in ok if r.top_touches_border]
    if not headline:
        return [f"The top region touches the image border in {len(border)} of {len(ok)} images."]
    s = [
        f"In {len(border)} of {len(ok)} images the top region touches the image border (flagged)"
        + (f"; {_by_label(border)}." if border else ".")
    ]
    if border:
        dep = sum(r.dependence >= DEPENDENCE for r in border)
        s.append(
            f"In {dep} of them hiding that region alone removes at least {DEPENDENCE:.0%} of the "
            "score."
        )
    return s


def _map_sentence(frame_share: float, frame_area: float, peak: str) -> str:
    ratio = frame_share / frame_area if frame_area else math.nan
    lean = (
        "the explanations lean on the border"
        if ratio >= 1.5
        else "the explanations lean on the centre"
        if ratio <= 0.67
        else "about as much as its area"
    )
    return (
        f"Location map: the outer {FRAME:.0%} of each side ({frame_area:.0%} of the area) holds "
        f"{frame_share:.0%} of the mean |weight| ({lean}); it is strongest at the {peak}."
    )


def findings(rows: Sequence[AuditRow], grids: Sequence[np.ndarray] = ()) -> Findings:
    """Plain sentences, per-class aggregates and the location map of an audit.

    Parameters
    ----------
    rows : the audit's rows (any order)
    grids : the explained images' :func:`location_grid` arrays (any order)

    Returns
    -------
    Findings. The first sentence is the headline: with expected masks, how many images'
    predictions rest outside the expected region and what they are predicted; without, how
    many top regions touch the border.
    """
    ok = [r for r in rows if r.ok]
    errors = [r for r in rows if not r.ok]
    masked = [r for r in ok if r.has_mask]
    location = np.mean(np.stack(grids), axis=0) if len(grids) else None
    frame_share, frame_area = _frame(location) if location is not None else (math.nan, 0.0)
    peak = _peak(location) if location is not None else ""
    s: list[str] = []
    if not ok:
        s.append(
            f"No image could be explained ({_plural(len(errors), 'error')}): see the error rows."
            if errors
            else "The audit has no images yet."
        )
    if masked:
        s += _mask_sentences(masked, len(ok))
    if ok:
        s += _border_sentences(ok, headline=not masked)
    if location is not None and math.isfinite(frame_share):
        s.append(_map_sentence(frame_share, frame_area, peak))
    if ok:
        verdicts = Counter(r.verdict for r in ok)
        counts = [f"{verdicts[v]} {v}" for v in ("stable", "borderline", "unstable") if verdicts[v]]
        s.append("Stability: " + ", ".join(counts) + ".")
    if errors and ok:
        s.append(f"{_plural(len(errors), 'image')} could not be audited: see the error rows.")
    return Findings(
        sentences=tuple(s),
        images=len(rows),
        ok=len(ok),
        errors=len(errors),
        flagged=sum(r.flagged for r in ok),
        with_masks=len(masked),
        classes=_classes(ok),
        location=location,
        frame_share=frame_share,
        frame_area=frame_area,
        peak=peak,
    )


# ----------------------------------------------------------------------------- running


@dataclass(frozen=True, eq=False)
class AuditInput:
    """One image, read and ready to explain.

    Attributes
    ----------
    image : (H, W, 3) uint8 ndarray
    expected : (H, W) bool ndarray or None, the expected region (already checked against the
        image's size)
    """

    image: np.ndarray
    expected: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class AuditItem:
    """One image to audit: its names and how to read it (the edge reads the files).

    Attributes
    ----------
    file : str, as :attr:`AuditRow.file`
    key : str, as :attr:`AuditRow.key`
    digest : str, as :attr:`AuditRow.digest`
    load : callable() -> AuditInput; raises LimecraftError for a bad image or mask
    """

    file: str
    key: str
    digest: str
    load: Callable[[], AuditInput]


@dataclass(frozen=True, eq=False)
class AuditOutcome:
    """What one image gave: its row, and on success its input, explanation and location grid."""

    item: AuditItem
    row: AuditRow
    input: AuditInput | None = None
    explanation: Explanation | None = None
    grid: np.ndarray | None = None


def _audit_one(
    item: AuditItem,
    scorer: Scorer,
    config: ExplainConfig,
    stop: threading.Event,
    save: Callable[[AuditOutcome], None] | None,
) -> AuditOutcome:
    out = _explain_one(item, scorer, config, stop)
    if save is not None:
        save(out)
    return out


def _explain_one(
    item: AuditItem, scorer: Scorer, config: ExplainConfig, stop: threading.Event
) -> AuditOutcome:
    from .explain import explain

    t0 = time.perf_counter()
    try:
        inp = item.load()
        ex = explain(
            inp.image,
            scorer,
            config=config,
            expected_mask=inp.expected,
            cancel=stop.is_set,
        )
        row = audit_row(
            ex,
            file=item.file,
            key=item.key,
            digest=item.digest,
            has_mask=inp.expected is not None,
            seconds=time.perf_counter() - t0,
        )
        return AuditOutcome(item, row, inp, ex, location_grid(ex))
    except (Cancelled, KeyboardInterrupt):
        raise
    except (LimecraftError, ModelError) as e:
        msg = str(e)
    except Exception as e:  # a bug of ours on one odd image must not end a long run
        msg = f"internal error: {type(e).__name__}: {e}"
    return AuditOutcome(
        item, error_row(item.file, item.key, item.digest, msg, time.perf_counter() - t0)
    )


def run_audit(
    items: Iterable[AuditItem],
    scorer: Scorer,
    config: ExplainConfig,
    on_result: Callable[[AuditOutcome], None],
    *,
    in_flight: int = IN_FLIGHT,
    save: Callable[[AuditOutcome], None] | None = None,
    tick: Callable[[], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    poll_s: float = 0.2,
) -> int:
    """Explain every item with ``in_flight`` images at a time through one scorer.

    Several explanations in flight call ``scorer.run_masks`` from their own threads: a
    :class:`serving.QueuedScorer` then combines the chunks of images of the same input size into
    shared forward passes, and a :class:`serving.RemoteScorer` keeps that many images' chunks in
    flight to a Ray Serve deployment. An image that fails (unreadable, a bad mask, the model
    raising) gives an error row and the run goes on.

    Parameters
    ----------
    items : AuditItem iterable, read lazily (at most ``in_flight`` images are held at once)
    scorer : Scorer, safe to call from several threads (Classifier, QueuedScorer, RemoteScorer)
    config : ExplainConfig (see :func:`audit_config`)
    on_result : callable(AuditOutcome), called in the caller's thread as each image finishes,
        in the order they finish
    in_flight : int in [1, 64]
    save : callable(AuditOutcome), optional; called in the image's own thread once it is
        explained, before ``on_result`` (the edge writes the image's files there, so that
        writing overlaps the other images' explanations); an exception there ends the run
    tick : callable(), optional; called in the caller's thread at least every ``poll_s``
        seconds while waiting (progress display; an exception raised there stops the run)
    cancel : callable() -> bool, optional; True stops the run (raises ``Cancelled``)

    Returns
    -------
    int, the number of images done. On ``Cancelled``, ``KeyboardInterrupt`` or an exception from
    ``on_result`` or ``tick``, the explanations in flight are stopped at their next batch
    (their images are not reported) before it propagates: everything reported stays reported.
    """
    in_flight = check_int("in_flight", in_flight, 1, 64)
    stop = threading.Event()
    todo = iter(items)
    pending: set[Future] = set()
    done = 0
    pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="limecraft-audit")
    try:

        def refill() -> None:
            while len(pending) < in_flight:
                item = next(todo, None)
                if item is None:
                    return
                pending.add(pool.submit(_audit_one, item, scorer, config, stop, save))

        refill()
        while pending:
            finished, _ = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
            for f in finished:
                pending.discard(f)
                on_result(f.result())
                done += 1
            if cancel is not None and cancel():
                raise Cancelled("the audit was cancelled")
            if tick is not None:
                tick()
            refill()
        return done
    finally:
        stop.set()  # explanations still in flight stop at their next batch
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)
