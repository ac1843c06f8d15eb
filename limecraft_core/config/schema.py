"""``ExplainConfig``, every group together, and the schema's other faces.

The other faces: every field's spec (``fields``, ``spec``), one setting checked
(``check_setting``) or parsed from text (``parse_text``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validate import LimecraftError
from .fields import FieldSpec
from .groups import (
    GROUPS,
    FillConfig,
    SamplingConfig,
    SegmentationConfig,
    SpeedConfig,
    SurrogateConfig,
    TargetConfig,
    TrustConfig,
    _spec,
)
from .kinds import KINDS, check_value


def fields() -> tuple[FieldSpec, ...]:
    """Every setting, in schema order."""
    return tuple(_spec(cls, f) for cls in GROUPS.values() for f in dataclasses.fields(cls))


_BY_NAME = {s.name: s for s in fields()}


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
            out[s.group][s.name] = KINDS[s.kind].to_json(getattr(getattr(self, s.group), s.attr))
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

    def changed(self, defaults: ExplainConfig | None = None) -> dict[str, Any]:
        """The settings that differ from ``defaults`` (default: the engine's), by flat name
        (JSON values)."""
        default = (defaults or ExplainConfig()).to_dict()
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
    return check_value(spec(name), value)


def parse_text(spec_: FieldSpec, text: str) -> Any:
    """A setting's value from text, as typed on the command line (then checked by the schema)."""
    kind = KINDS[spec_.kind]
    t = text.strip()
    if spec_.optional and t.lower() in ("none", ""):
        return None
    try:
        return kind.parse(t)
    except ValueError:
        pass
    raise LimecraftError(f"cannot read {text!r}: expected {kind.expects} ({spec_.help})")
