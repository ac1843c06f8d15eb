"""LIMEcraft's engine: LIME over regions that mean something to a person.

Pure, typed functions on arrays and tensors; no UI. File reading lives in
``limecraft_core.io`` and the command line in ``python -m limecraft_core``.
"""

__version__ = "0.1.0"

from ._validate import MAX_PIXELS, MIN_SIDE, Cancelled, LimecraftError  # noqa: E402
from .classifier import Classifier, ModelError, resolve_device  # noqa: E402
from .explain import OUTPUT_SPACES, Explanation, explain, resolve_classifier  # noqa: E402
from .perturbation import (  # noqa: E402
    FILLS,
    SCHEMES,
    MaskSample,
    compose_batch,
    make_fill,
    perturbed_images,
    sample_masks,
)
from .render import (  # noqa: E402
    Heatmap,
    boundaries,
    colorbar,
    delta_map,
    heatmap,
    region_map,
    top_regions,
)
from .segmentation import (  # noqa: E402
    METHODS,
    Regions,
    compose_regions,
    masks_from_label_image,
    merge_regions,
    regions_from_labels,
    relabel,
    segment,
    split_region,
)
from .surrogate import (  # noqa: E402
    SurrogateFit,
    cosine_distance,
    exponential_kernel,
    fit_ridge,
    make_kernel,
    uniform_kernel,
)

__all__ = [
    "FILLS",
    "MAX_PIXELS",
    "METHODS",
    "MIN_SIDE",
    "OUTPUT_SPACES",
    "SCHEMES",
    "Cancelled",
    "Classifier",
    "Explanation",
    "Heatmap",
    "LimecraftError",
    "MaskSample",
    "ModelError",
    "Regions",
    "SurrogateFit",
    "__version__",
    "boundaries",
    "colorbar",
    "compose_batch",
    "compose_regions",
    "cosine_distance",
    "delta_map",
    "explain",
    "exponential_kernel",
    "fit_ridge",
    "heatmap",
    "make_fill",
    "make_kernel",
    "masks_from_label_image",
    "merge_regions",
    "perturbed_images",
    "region_map",
    "regions_from_labels",
    "relabel",
    "resolve_classifier",
    "resolve_device",
    "sample_masks",
    "segment",
    "split_region",
    "top_regions",
    "uniform_kernel",
]
