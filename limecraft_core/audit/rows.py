"""One image's audit row: what the audit found in that image, as plain values.

The row holds the audit's settings, the predicted class, the top region and its share of
|weight|, the score change when it is hidden, the stability verdict, with an expected mask the
relevance mass inside it and the pointing game, the flags, and the |weights| on the location
map's grid.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Annotated, Any, get_type_hints

import numpy as np
from annotated_types import MaxLen
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict, create_model
from pydantic_core import ErrorDetails

from .._validate import LimecraftError, check_int
from ..codecs.schema import Bad, check, one_of
from ..config import AUDIT_DEFAULTS, ExplainConfig
from ..limits import THRESHOLDS
from ..result import Explanation
from .regions import (
    TOP_REGIONS,
    RegionDescriptor,
    describe_proposed,
    describe_regions,
    unpack_mask,
)

#: Cells on each side of the location map (normalised image coordinates).
MAP_GRID = 64


DEPENDENCE = THRESHOLDS["audit_dependence"]


FLAG_TEXT = {
    "outside": "the prediction rests outside the expected region",
    "border": "the top region touches the image border",
}


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
    regions : tuple of RegionDescriptor, the strongest regions pushing the predicted class
        (strongest first; empty on error and in rows written before they were kept)
    proposed : tuple of RegionDescriptor, its other regions that are not superpixels
        (proposed, uploaded, drawn), whatever their weight (:func:`~.regions.describe_proposed`):
        where a finding looks for its region in images where it is not among the strongest
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
    regions: tuple[RegionDescriptor, ...] = ()
    proposed: tuple[RegionDescriptor, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def top_words(self) -> str:
        """The top region's name, or "none (no region carries weight)" where every weight is 0
        (``top_region`` is then 0 by convention)."""
        if self.top_share <= 0:
            return "none (no region carries weight)"
        return self.top_name or f"region {self.top_region}"

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
        for name in ("regions", "proposed"):
            d[name] = [{k: list(v) if isinstance(v, tuple) else v for k, v in x.items()}
                       for x in d[name]]  # fmt: skip
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
        doc = check(_RowDoc, d, words=_row_words)
        return cls(**{name: getattr(doc, name) for name in _RowDoc.model_fields if name in d})


_F = Annotated[float, Strict()]


class _RegionDoc(BaseModel):
    """A :class:`RegionDescriptor` in a file: every field present and of its type."""

    model_config = ConfigDict(extra="forbid")
    region: Annotated[int, Strict()]
    name: Annotated[str, Strict(), MaxLen(10_000)]
    weight: _F
    share: _F
    delta: _F
    area: _F
    box: tuple[_F, _F, _F, _F]
    mask: Annotated[str, Strict(), MaxLen(4096)]
    lab_mean: tuple[_F, _F, _F]
    lab_std: tuple[_F, _F, _F]
    key_lab: tuple[_F, _F, _F]
    key_lab_std: tuple[_F, _F, _F]
    grad_mean: _F
    grad_std: _F


def _descriptors(v: list[_RegionDoc]) -> tuple[RegionDescriptor, ...]:
    out = []
    for d in v:
        try:
            unpack_mask(d.mask)
        except ValueError as e:
            raise Bad(f"an audit row's region mask is not a packed mask: {e}") from None
        out.append(RegionDescriptor(**d.model_dump()))
    return tuple(out)


def _nan(v: Any) -> Any:
    return math.nan if v is None else v


def _each_of(words: str, values: tuple[str, ...]) -> Any:
    def ok(v: list[str]) -> tuple[str, ...]:
        for x in v:
            if x not in values:
                raise Bad(words.format(x))
        return tuple(v)

    return ok


#: Each kind of an audit row's field: its strict schema type and its name in a message.
_KINDS: dict[Any, tuple[Any, str]] = {
    str: (Annotated[str, Strict(), MaxLen(10_000)], "a string"),
    int: (Annotated[int, Strict()], "an integer"),
    float: (Annotated[float, BeforeValidator(_nan), Strict()], "a number"),
    bool: (Annotated[bool, Strict()], "true or false"),
    float | None: (Annotated[float | None, Strict()], "a number"),
    bool | None: (Annotated[bool | None, Strict()], "true or false"),
    tuple[str, ...]: (Annotated[list[str], Strict(), MaxLen(10)], "a list of flag names"),
    tuple[RegionDescriptor, ...]: (
        Annotated[list[_RegionDoc], Strict(), MaxLen(16), AfterValidator(_descriptors)],
        "a list of region descriptors",
    ),
}
_HINTS = get_type_hints(AuditRow)
_WHAT = {f.name: _KINDS[_HINTS[f.name]][1] for f in fields(AuditRow)}
#: The fields whose values are a closed set, checked after their kind.
_CLOSED = {
    "status": AfterValidator(
        one_of(("ok", "error"), "an audit row's status must be ok or error, not {got}")
    ),
    "flags": AfterValidator(_each_of("an audit row has an unknown flag {!r}", tuple(FLAG_TEXT))),
}


def _field_type(name: str) -> Any:
    kind = _KINDS[_HINTS[name]][0]
    return Annotated[kind, _CLOSED[name]] if name in _CLOSED else kind


_RowDoc = create_model(  # type: ignore[call-overload]
    "_RowDoc",
    __config__=ConfigDict(extra="forbid"),
    **{
        f.name: (
            _field_type(f.name),
            ... if f.default is MISSING else f.default,
        )
        for f in fields(AuditRow)
    },
)


def _row_words(err: ErrorDetails) -> str:
    name = str(err["loc"][0])
    if err["type"] == "missing":
        return f"an audit row has no {name!r}"
    if err["type"] == "extra_forbidden":
        return f"an audit row has an unknown field {name!r}"
    got = repr(err["input"]) if len(err["loc"]) == 1 else f"a list holding {err['input']!r}"
    return f"audit row field {name!r} must be {_WHAT[name]}, got {got:.60}"


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
    image: np.ndarray | None = None,
) -> AuditRow:
    """The summary row of one image's explanation.

    Parameters
    ----------
    ex : Explanation, with its per-region deltas (``compute_deltas``) and, when the image had
        an expected mask, its ``trust.localisation`` (``explain(expected_mask=...)``)
    file, key, digest : as :class:`AuditRow`
    has_mask : bool, an expected mask was given (its localisation is then in ``ex``)
    seconds : float, the explanation's wall time
    image : (H, W, 3) uint8 ndarray, optional; the image explained. With it the row keeps its
        strongest regions (:func:`~.regions.describe_regions`), which the findings group,
        and its regions that are not superpixels (:func:`~.regions.describe_proposed`)

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
    # with no weight at all (a score that never moves) no region is on top, so none touches
    border = total > 0 and touches_border(ex.segments == top)
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
    strong = () if image is None else describe_regions(image, ex, TOP_REGIONS)
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
        regions=strong,
        proposed=() if image is None else describe_proposed(image, ex, strong),
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
