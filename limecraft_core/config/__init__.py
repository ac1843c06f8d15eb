"""The explanation's settings: one schema, frozen, validated once at construction.

Every front end derives from these dataclasses: :func:`limecraft_core.explain`'s keywords
(:meth:`ExplainConfig.from_flat`), the CLI's flags (``cli.build_parser``), the app's controls
(``pages/lib/config_form.py``), the JSON ``settings`` (:meth:`ExplainConfig.to_dict`), the HTML
report, and restore (:meth:`ExplainConfig.from_dict`). No field is written out by hand anywhere
else. Each field's metadata carries its help text, its kind (how it is parsed and shown), and
its range, which comes from :data:`limecraft_core.limits.LIMITS`.

Groups: :class:`SegmentationConfig`, :class:`SamplingConfig`, :class:`SurrogateConfig`,
:class:`FillConfig`, :class:`TargetConfig`, :class:`TrustConfig`, :class:`SpeedConfig`.

The rooms: :mod:`.kinds` (``KINDS``: each kind of value, how it is checked, read from text and
written to text and JSON), :mod:`.fields` (``FieldSpec``),
:mod:`.groups` (the groups) and :mod:`.schema` (``ExplainConfig``, ``fields``, ``spec``,
``check_setting``, ``parse_text``). None of them imports torch: the command line's ``--help``
and the settings form load this package alone.
"""

from __future__ import annotations

from .fields import AUDIT_DEFAULTS, DEVICES, IN_FLIGHT, OUTPUT_SPACES, PRECISIONS, FieldSpec
from .groups import (
    GROUPS,
    FillConfig,
    SamplingConfig,
    SegmentationConfig,
    SpeedConfig,
    SurrogateConfig,
    TargetConfig,
    TrustConfig,
)
from .kinds import KINDS, Kind
from .schema import ExplainConfig, check_setting, fields, parse_text, spec

__all__ = [
    "AUDIT_DEFAULTS",
    "DEVICES",
    "GROUPS",
    "IN_FLIGHT",
    "KINDS",
    "OUTPUT_SPACES",
    "PRECISIONS",
    "ExplainConfig",
    "FieldSpec",
    "FillConfig",
    "Kind",
    "SamplingConfig",
    "SegmentationConfig",
    "SpeedConfig",
    "SurrogateConfig",
    "TargetConfig",
    "TrustConfig",
    "check_setting",
    "fields",
    "parse_text",
    "spec",
]
