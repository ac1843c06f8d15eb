"""The explanation's settings: one schema, frozen, validated once at construction.

Every front end derives from these dataclasses: :func:`limecraft_core.explain`'s keywords
(:meth:`ExplainConfig.from_flat`), the CLI's flags (``cli.build_parser``), the app's controls
(``pages/lib/config_form.py``), the JSON ``settings`` (:meth:`ExplainConfig.to_dict`), the HTML
report, and restore (:meth:`ExplainConfig.from_dict`). No field is written out by hand anywhere
else. Each field's metadata carries its help text, its kind (how it is parsed and shown), and
its range, which comes from :data:`limecraft_core.limits.LIMITS`.

Groups: :class:`SegmentationConfig`, :class:`SamplingConfig`, :class:`SurrogateConfig`,
:class:`FillConfig`, :class:`TargetConfig`, :class:`TrustConfig`, :class:`SpeedConfig`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._validate import LimecraftError, check_choice, check_int, parse_colour
from .limits import FILLS, LIMITS, METHODS, PARAM_RANGES, SCHEMES

__all__ = [
    "AUDIT_DEFAULTS",
    "GROUPS",
    "IN_FLIGHT",
    "OUTPUT_SPACES",
    "ExplainConfig",
    "FieldSpec",
    "FillConfig",
    "SamplingConfig",
    "SegmentationConfig",
    "SpeedConfig",
    "SurrogateConfig",
    "TargetConfig",
    "TrustConfig",
    "fields",
]

OUTPUT_SPACES = ("probability", "raw")

#: The audit's settings unless given (the rest are explain's defaults):
#:
#: - its regions are the app's, SLIC with about 40: lime's quickshift parameters (explain's
#:   default) give 10-20 large regions on a 128 px image, which mix a small marker with its
#:   background, so hiding the region no longer hides the marker;
#: - a hidden region is inpainted from the pixels kept around it (``inpaint``, as Inspect's
#:   remove edit does): a marker of flat colour split over two superpixels keeps its colour under
#:   the mean fill (the mean of a flat region is the region), so hiding it changes nothing. On 60
#:   fresh demo images (bench/bench_audit.py's set) the mean fill missed 3 of the 30 images whose
#:   prediction follows the tag; inpaint and blur missed none, with no false alarm.
AUDIT_DEFAULTS: dict[str, Any] = {"segmentation": "slic", "n_segments": 40, "fill": "inpaint"}
#: Images an audit explains at once by default: their chunks share the scorer (see
#: :func:`limecraft_core.audit.run_audit`).
IN_FLIGHT = 4

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

# How a field is parsed from text (CLI) and shown (app). "choice" fields list their choices.
KINDS = (
    "int",
    "float",
    "bool",
    "choice",
    "width",  # a number > 0 or "uniform"
    "fill",  # a fill name or #RRGGBB
    "widths",  # a list of widths
    "ints",  # a list of ints
    "fills",  # a list of fills
    "params",  # name=value pairs
    "inner",  # an int, or one per handcrafted region
    "working_size",  # an int, "auto", or None (full size)
)


@dataclass(frozen=True)
class FieldSpec:
    """One setting, as every front end sees it."""

    name: str  # the flat name: explain()'s keyword, the CLI flag (--name-with-dashes), JSON key
    group: str
    attr: str  # the attribute in its group
    kind: str
    help: str
    default: Any
    optional: bool  # None is allowed (and means "the default behaviour")
    choices: tuple[str, ...] = ()
    page: str = "explain"  # where the app shows it: explain, trust, craft

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def limit(self):
        return LIMITS.get(self.name)


def _f(
    default: Any,
    help: str,
    kind: str,
    *,
    choices: tuple[str, ...] = (),
    optional: bool = False,
    flat: str | None = None,
    page: str = "explain",
) -> Any:
    assert kind in KINDS, kind
    meta = {
        "help": help,
        "kind": kind,
        "choices": choices,
        "optional": optional,
        "flat": flat,
        "page": page,
    }
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


# ----------------------------------------------------------------------------- checks


def _check_limit(name: str, value: Any, kind: str, limit: str | None = None) -> Any:
    """``value`` within the limits table's range for ``limit`` (default ``name``); the message
    quotes that range."""
    lim = LIMITS[limit or name]
    if kind == "int":
        return lim.check(name, value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LimecraftError(f"{name} must be a number, got {value!r}")
    v = float(value)
    above = v > lim.lo if lim.lo_open else v >= lim.lo
    if not (math.isfinite(v) and above and (lim.hi is None or v <= lim.hi)):
        rng = lim.describe()
        raise LimecraftError(
            f"{name} must be {'in ' if lim.hi is not None else ''}{rng}, got {value}"
        )
    return v


def _check_width(name: str, v: Any) -> float | str:
    if v == "uniform":
        return "uniform"
    return _check_limit(name, v, "float", "kernel_width")


def _check_fill_name(name: str, v: Any) -> str:
    if isinstance(v, str) and (v in FILLS or parse_colour(v) is not None):
        return v
    raise LimecraftError(
        f"{name} must be one of {', '.join(FILLS)} or a colour like #808080; got {v!r}"
    )


def _as_tuple(name: str, v: Any) -> tuple:
    if v is None:
        return ()
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise LimecraftError(f"{name} must be a list, got {v!r}")
    return tuple(v)


def _check(spec: FieldSpec, v: Any) -> Any:
    """The value of one field, checked and normalised (tuples for lists, floats for numbers)."""
    name, kind = spec.name, spec.kind
    if v is None and spec.optional:
        return None
    if kind == "int":
        return _check_limit(name, v, "int")
    if kind == "float":
        return _check_limit(name, v, "float")
    if kind == "bool":
        if not isinstance(v, bool):
            raise LimecraftError(f"{name} must be true or false, got {v!r}")
        return v
    if kind == "choice":
        return check_choice(name, v, spec.choices)
    if kind == "width":
        return _check_width(name, v)
    if kind == "fill":
        if callable(v):  # a library user's own fill function (recorded by its name)
            return v
        return _check_fill_name(name, v)
    if kind == "widths":
        return tuple(_check_width(f"{name} entry", w) for w in _as_tuple(name, v))
    if kind == "ints":
        lim = LIMITS[name]
        return tuple(
            sorted(
                {check_int(f"{name} size", n, int(lim.lo), int(lim.hi)) for n in _as_tuple(name, v)}
            )
        )
    if kind == "fills":
        return tuple(_check_fill_name(f"{name} entry", f) for f in _as_tuple(name, v))
    if kind == "params":
        if isinstance(v, Mapping):
            v = tuple(v.items())
        pairs = []
        for item in _as_tuple(name, v):
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise LimecraftError(f"{name} must be name=value pairs, got {item!r}")
            key, val = item
            if key not in PARAM_RANGES:
                raise LimecraftError(
                    f"{name}: unknown parameter {key!r}; known: {', '.join(sorted(PARAM_RANGES))}"
                )
            if isinstance(val, bool) or not isinstance(val, numbers.Real):
                raise LimecraftError(f"{name}: {key} must be a number, got {val!r}")
            pairs.append((str(key), val))
        return tuple(sorted(pairs))
    if kind == "inner":
        lim = LIMITS[name]
        if isinstance(v, (list, tuple)):
            return tuple(
                None if x is None else check_int(name, x, int(lim.lo), int(lim.hi)) for x in v
            )
        return check_int(name, v, int(lim.lo), int(lim.hi))
    if kind == "working_size":
        if v == "auto":
            return v
        lim = LIMITS[name]
        return check_int(name, v, int(lim.lo), int(lim.hi))
    raise AssertionError(f"unknown kind {kind}")


class _Group:
    """Shared behaviour of the setting groups: validate every field once, at construction."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            spec = _spec(type(self), f)
            object.__setattr__(self, f.name, _check(spec, getattr(self, f.name)))


# ----------------------------------------------------------------------------- the groups


@dataclass(frozen=True)
class SegmentationConfig(_Group):
    """How the regions are made (when the caller does not give a finished label map)."""

    method: str = _f(
        "quickshift",
        "superpixel method (quickshift with lime's parameters by default; 'given': a finished "
        "label map)",
        "choice",
        choices=(*METHODS, "given"),
        flat="segmentation",
        page="craft",
    )
    n_segments: int | None = _f(
        None,
        "target number of regions; parameters are scaled to the image size",
        "int",
        optional=True,
        page="craft",
    )
    params: tuple = _f(
        (),
        "the method's own parameters beyond the count, e.g. compactness=20,sigma=1",
        "params",
        flat="segmentation_params",
        page="craft",
    )
    inner_segments: Any = _f(
        None,
        "segment inside each handcrafted region into about N pieces (1: one feature)",
        "inner",
        optional=True,
        page="craft",
    )
    inner_method: str = _f(
        "slic",
        "superpixel method inside handcrafted regions",
        "choice",
        choices=METHODS,
        page="craft",
    )
    outer_segments: int | None = _f(
        None,
        "regions for the rest of the image (1: one background feature; default: the method's)",
        "int",
        optional=True,
        page="craft",
    )
    working_size: Any = _f(
        "auto",
        "segment at most at this size in px, labels scaled back up ('auto': 384 for "
        "quickshift, 512 for the rest; none: full size)",
        "working_size",
        optional=True,
        page="craft",
    )


@dataclass(frozen=True)
class SamplingConfig(_Group):
    """Which perturbations the model sees."""

    samples: int = _f(
        400,
        "N, the perturbed images including the original (at most: sampling stops earlier once "
        "the verdict is stable)",
        "int",
    )
    scheme: str = _f(
        "bernoulli",
        "bernoulli is lime's scheme; stratified and antithetic lower the variance; "
        "glime samples from the kernel",
        "choice",
        choices=SCHEMES,
        flat="sampling",
    )
    p: float = _f(0.5, "probability of keeping each region (0.5 for antithetic)", "float")
    seed: int = _f(
        0, "seeds sampling and segmentation; the same seed gives the same result on CPU", "int"
    )
    dedup: bool = _f(True, "score each distinct mask once (exact)", "bool")
    early_stop: float | None = _f(
        0.9,
        "stop sampling once the sample so far is stable by the verdict's rule (resampled), with "
        "Kendall's W over the regions that matter at least this; none: always score N",
        "float",
        optional=True,
    )
    early_stop_step: int | None = _f(
        None,
        "samples between early-stop checks (default max(100, N/10), rounded up to whole batches)",
        "int",
        optional=True,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.early_stop_step is not None and self.early_stop_step > self.samples:
            raise LimecraftError(
                f"early_stop_step must be in [10, {self.samples}] (at most samples), got "
                f"{self.early_stop_step}"
            )

    @property
    def step(self) -> int:
        """Samples between early-stop checks."""
        return self.early_stop_step or max(100, self.samples // 10)


@dataclass(frozen=True)
class SurrogateConfig(_Group):
    """The weighted linear model fitted to the model's outputs."""

    kernel_width: Any = _f(
        0.25, "exponential kernel width over cosine distance, or 'uniform'", "width"
    )
    ridge_alpha: float = _f(1.0, "ridge regularisation", "float")


@dataclass(frozen=True)
class FillConfig(_Group):
    """What a hidden region shows."""

    fill: Any = _f("mean", f"{', '.join(FILLS)}, or #RRGGBB", "fill")
    blur_sigma: float | None = _f(
        None, "blur fill's sigma in px (default 1/20 of the shorter side)", "float", optional=True
    )
    mask_expansion: int = _f(
        0, "grow hidden regions by this many px so object edges do not leak", "int", page="trust"
    )


@dataclass(frozen=True)
class TargetConfig(_Group):
    """Which classes are explained, and in which output space."""

    output_space: str = _f(
        "probability",
        "explain softmax probabilities or raw scores",
        "choice",
        choices=OUTPUT_SPACES,
    )
    target: int | None = _f(
        None, "the class index to explain (default: top-1)", "int", optional=True
    )
    top_labels: int = _f(1, "explain the top N classes", "int")
    compute_deltas: bool = _f(
        True, "also score each region hidden alone and kept alone (2K model passes)", "bool"
    )


@dataclass(frozen=True)
class TrustConfig(_Group):
    """Checks of whether the explanation can be trusted; each reuses model passes where it can."""

    repeats: int = _f(
        1,
        "explain with seeds seed..seed+R-1 and judge stability over them (1: judge the one "
        "sample by resampling it, no extra model pass)",
        "int",
        page="trust",
    )
    kernel_widths: tuple = _f(
        (), "kernel widths to compare, e.g. 0.1,0.25,0.5,1,uniform", "widths", page="trust"
    )
    convergence: tuple = _f(
        (),
        "sample sizes to measure stability at, e.g. 100,200,500 (needs repeats >= 2)",
        "ints",
        page="trust",
    )
    faithfulness: bool = _f(
        False,
        "deletion/insertion curves, held-out R^2, IROF, ROAD, faithfulness correlation, sparseness",
        "bool",
        page="trust",
    )
    compare_fills: tuple = _f(
        (), "other fills to compare, e.g. blur,inpaint", "fills", page="trust"
    )


@dataclass(frozen=True)
class SpeedConfig(_Group):
    """Where and how the model runs; none of these change the result beyond rounding."""

    device: str = _f("auto", "auto: cuda when available", "choice", choices=DEVICES)
    precision: str = _f(
        "auto",
        "autocast precision (auto: bf16 on a GPU; on a CPU, bf16 where it is native (AVX-512 "
        "BF16 or AMX) and agrees with fp32 on 8 first images, else fp32)",
        "choice",
        choices=PRECISIONS,
    )
    channels_last: bool | None = _f(
        None,
        "NHWC memory format for the model (default: on for a torch module)",
        "bool",
        optional=True,
    )
    batch_size: int | None = _f(
        None,
        "images per forward pass (default: 16 on CPU, 256 on GPU at 224 px)",
        "int",
        optional=True,
    )


GROUPS: dict[str, type] = {
    "segmentation": SegmentationConfig,
    "sampling": SamplingConfig,
    "surrogate": SurrogateConfig,
    "fill": FillConfig,
    "targets": TargetConfig,
    "trust": TrustConfig,
    "speed": SpeedConfig,
}


def _spec(cls: type, f: dataclasses.Field) -> FieldSpec:
    group = next(g for g, c in GROUPS.items() if c is cls)
    m = f.metadata
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return FieldSpec(
        name=m["flat"] or f.name,
        group=group,
        attr=f.name,
        kind=m["kind"],
        help=m["help"],
        default=default,
        optional=m["optional"],
        choices=tuple(m["choices"]),
        page=m["page"],
    )


def fields() -> tuple[FieldSpec, ...]:
    """Every setting, in schema order."""
    return tuple(_spec(cls, f) for cls in GROUPS.values() for f in dataclasses.fields(cls))


_BY_NAME = {s.name: s for s in fields()}


def _jsonable(v: Any, kind: str = "") -> Any:
    if kind == "params":
        return dict(v)
    if isinstance(v, tuple):
        return list(v)
    if callable(v):
        return f"custom:{getattr(v, '__name__', 'function')}"
    return v


@dataclass(frozen=True)
class ExplainConfig:
    """Every setting of one explanation, in groups; immutable and valid once built."""

    segmentation: SegmentationConfig = field(default_factory=SegmentationConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    surrogate: SurrogateConfig = field(default_factory=SurrogateConfig)
    fill: FillConfig = field(default_factory=FillConfig)
    targets: TargetConfig = field(default_factory=TargetConfig)
    trust: TrustConfig = field(default_factory=TrustConfig)
    speed: SpeedConfig = field(default_factory=SpeedConfig)

    def __post_init__(self) -> None:
        n = self.sampling.samples
        big = [c for c in self.trust.convergence if c > n]
        if big:
            raise LimecraftError(
                f"convergence size must be in [10, {n}] (at most samples), got {big[0]}"
            )
        if self.trust.convergence and self.trust.repeats < 2:
            raise LimecraftError(
                "convergence needs repeats >= 2 (stability is measured across repeats)"
            )

    # -- flat views: explain()'s keywords, the CLI's flags, JSON

    @classmethod
    def from_flat(cls, values: Mapping[str, Any] | None = None, **kw: Any) -> ExplainConfig:
        """Build from flat names (``samples=``, ``segmentation=``, ...); unknown names raise."""
        values = {**(values or {}), **kw}
        unknown = sorted(set(values) - set(_BY_NAME))
        if unknown:
            raise LimecraftError(
                f"unknown setting {unknown[0]!r}; known: {', '.join(sorted(_BY_NAME))}"
            )
        groups: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
        for name, v in values.items():
            spec = _BY_NAME[name]
            groups[spec.group][spec.attr] = v
        return cls(**{g: GROUPS[g](**kw_) for g, kw_ in groups.items()})

    def flat(self) -> dict[str, Any]:
        """Every setting by its flat name (Python values: tuples, None)."""
        return {s.name: getattr(getattr(self, s.group), s.attr) for s in fields()}

    def replace(self, **kw: Any) -> ExplainConfig:
        """A copy with some settings changed, by flat name; validated again."""
        return ExplainConfig.from_flat({**self.flat(), **kw})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-ready: ``{group: {flat name: value}}``."""
        out: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
        for s in fields():
            out[s.group][s.name] = _jsonable(getattr(getattr(self, s.group), s.attr), s.kind)
        return out

    @classmethod
    def from_dict(cls, d: Any) -> ExplainConfig:
        """Inverse of :meth:`to_dict`; every value is checked as at construction.

        Raises
        ------
        LimecraftError
            If ``d`` is not such a dict, names an unknown setting, or holds a bad value.
        """
        if not isinstance(d, Mapping):
            raise LimecraftError("settings must be an object of groups")
        flat: dict[str, Any] = {}
        for g, values in d.items():
            if g not in GROUPS:
                raise LimecraftError(f"settings: unknown group {g!r}; known: {', '.join(GROUPS)}")
            if not isinstance(values, Mapping):
                raise LimecraftError(f"settings.{g} must be an object")
            for name, v in values.items():
                spec = _BY_NAME.get(name)
                if spec is None or spec.group != g:
                    raise LimecraftError(f"settings.{g}: unknown setting {name!r}")
                if isinstance(v, str) and v.startswith("custom:"):
                    raise LimecraftError(
                        f"settings.{g}.{name} was a custom function ({v}); it cannot be restored"
                    )
                if isinstance(v, Mapping):
                    v = tuple(v.items())
                flat[name] = tuple(v) if isinstance(v, list) else v
        return cls.from_flat(flat)

    def changed(self) -> dict[str, Any]:
        """The settings that differ from the defaults, by flat name (JSON values)."""
        default = ExplainConfig().to_dict()
        mine = self.to_dict()
        return {name: v for g in GROUPS for name, v in mine[g].items() if default[g][name] != v}

    def items(self) -> Iterator[tuple[FieldSpec, Any]]:
        """(spec, value) for every setting, in schema order."""
        for s in fields():
            yield s, getattr(getattr(self, s.group), s.attr)


def spec(name: str) -> FieldSpec:
    """The schema entry of the setting called ``name`` (flat name)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise LimecraftError(f"unknown setting {name!r}") from None


def check_setting(name: str, value: Any) -> Any:
    """One setting's value, checked by its field's own rule (not the rules between fields,
    which :class:`ExplainConfig` checks once every value is known)."""
    return _check(spec(name), value)


def parse_text(spec_: FieldSpec, text: str) -> Any:
    """A setting's value from text, as typed on the command line (then checked by the schema)."""
    kind = spec_.kind
    t = text.strip()
    if spec_.optional and t.lower() in ("none", ""):
        return None
    try:
        if kind == "int":
            return int(t)
        if kind == "float":
            return float(t)
        if kind == "bool":
            if t.lower() in ("1", "true", "yes", "on"):
                return True
            if t.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind in ("choice", "fill"):
            return t
        if kind == "width":
            return t if t == "uniform" else float(t)
        if kind == "widths":
            return tuple(x if x == "uniform" else float(x) for x in _parts(t))
        if kind == "ints":
            return tuple(int(x) for x in _parts(t))
        if kind == "fills":
            return tuple(_parts(t))
        if kind == "params":
            pairs = []
            for part in _parts(t):
                k, _, v = part.partition("=")
                pairs.append((k.strip(), float(v)))
            return tuple(pairs)
        if kind == "inner":
            parts = _parts(t)
            return int(parts[0]) if len(parts) == 1 else tuple(int(x) for x in parts)
        if kind == "working_size":
            return t if t == "auto" else int(t)
    except ValueError:
        pass
    what = {"int": "an integer", "float": "a number", "ints": "integers separated by commas"}
    raise LimecraftError(f"cannot read {text!r}: expected {what.get(kind, kind)} ({spec_.help})")


def _parts(t: str) -> list[str]:
    return [x.strip() for x in t.split(",") if x.strip()]
