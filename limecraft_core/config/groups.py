"""The settings' groups, frozen dataclasses validated at construction.

The groups: segmentation, sampling, surrogate, fill, targets, trust and speed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .._validate import LimecraftError
from ..fill_table import FILLS
from ..limits import SCHEMES, SEGMENTERS
from .fields import DEVICES, OUTPUT_SPACES, PRECISIONS, FieldSpec
from .kinds import KINDS, check_value


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
    """A group's field: its default, and its help, kind and page as metadata (``FieldSpec``)."""
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


class _Group:
    """Shared behaviour of the setting groups: validate every field once, at construction."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            spec = _spec(type(self), f)
            object.__setattr__(self, f.name, check_value(spec, getattr(self, f.name)))


@dataclass(frozen=True)
class SegmentationConfig(_Group):
    """How the regions are made (when the caller does not give a finished label map)."""

    method: str = _f(
        "quickshift",
        "superpixel method (quickshift with lime's parameters by default; 'given': a finished "
        "label map)",
        "choice",
        choices=(*SEGMENTERS, "given"),
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
        choices=SEGMENTERS,
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
        1600,
        "N, the perturbed images including the original (at most: sampling stops earlier once "
        "the conclusion is settled)",
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
        1.0,
        "stop sampling once the conclusion is settled: the same top regions, with the same "
        "signs, in at least this share of the resamples of the sample so far, each "
        "distinguishable from zero; none: always score N",
        "float",
        optional=True,
    )
    early_stop_step: int | None = _f(
        None,
        "samples between early-stop checks (default max(100, N/16), rounded up to whole batches)",
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
        return self.early_stop_step or max(100, self.samples // 16)


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
