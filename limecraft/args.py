"""What the command line's commands share for their arguments: the program's name, a positive
integer, the ``--out`` folder, one flag per setting and the model options.

Each ``*_cmd`` module and ``limecraft.cli`` import it; no command imports another's module.
Only what the parser needs is imported here: the engine's settings schema and its errors,
neither of which imports torch or scikit-image, so --help answers at once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from limecraft_core._validate import LimecraftError
from models import formats

__all__ = [
    "PROG",
    "add_explainers_option",
    "add_model_options",
    "add_propose_option",
    "add_settings",
    "model_kwargs",
    "onnx_inputs",
    "out_dir",
    "positive_int",
    "settings_from_args",
]

PROG = "python -m limecraft"


def positive_int(name: str) -> Callable[[str], int]:
    """argparse type: an integer of at least 1, or a one-line message naming ``name``."""

    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be at least 1, got {v}")
        return v

    return parse


def out_dir(path: str) -> Path:
    """The ``--out`` folder, made if missing; a file in its place is a clear error."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise LimecraftError(f"--out {path!r} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LimecraftError(f"cannot create --out folder {path!r}: {e.strerror or e}") from None
    return out


def _setting_type(spec: Any):
    """argparse type for one setting: text to value, then checked by the schema's own rules."""
    from limecraft_core.config import check_setting, parse_text

    def parse(s: str) -> Any:
        try:
            return check_setting(spec.name, parse_text(spec, s))
        except LimecraftError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = spec.name
    return parse


def add_settings(parser: argparse.ArgumentParser, defaults: dict[str, Any] | None = None) -> None:
    """One flag per setting of ``limecraft_core.config``, grouped as the schema groups them;
    ``defaults`` are the command's own defaults where they differ from the schema's (the
    audit's), as its help says."""
    from limecraft_core.config import GROUPS, fields

    defaults = defaults or {}
    groups = {g: parser.add_argument_group(f"{g} settings") for g in GROUPS}
    for s in fields():
        lim = s.limit
        rng = f"; {lim.describe()}" if lim is not None else ""
        value = defaults.get(s.name, s.default)
        own = " for an audit" if s.name in defaults else ""
        default = f" (default{own}: {value!r})" if value not in (None, ()) else ""
        help_ = f"{s.help}{rng}{default}".replace("%", "%%")
        g = groups[s.group]
        if s.kind == "bool":
            g.add_argument(
                s.flag,
                dest=s.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_,
            )
        elif s.choices:
            g.add_argument(
                s.flag, dest=s.name, choices=s.choices, default=argparse.SUPPRESS, help=help_
            )
        else:
            g.add_argument(
                s.flag,
                dest=s.name,
                type=_setting_type(s),
                default=argparse.SUPPRESS,
                metavar=s.kind.upper(),
                help=help_,
            )


def settings_from_args(a: argparse.Namespace):
    """The ExplainConfig of the flags given (the rest are the schema's defaults)."""
    from limecraft_core.config import ExplainConfig, fields

    return ExplainConfig.from_flat(
        {s.name: getattr(a, s.name) for s in fields() if hasattr(a, s.name)}
    )


def add_model_options(p: argparse.ArgumentParser, where: str) -> None:
    """The model options ``explain`` and ``audit`` share."""
    p.add_argument(
        "--model",
        default="demo",
        help=f"registry name, or a model file: {formats.in_words()} (default: demo); an .onnx "
        f"file runs on onnxruntime in fp32, with its layout, size and labels read from the graph; "
        f"{where}",
    )
    p.add_argument("--arch", help="torchvision architecture of a state_dict given as --model")
    p.add_argument("--labels", help="text file with one class name per line")
    p.add_argument("--input-size", type=positive_int("--input-size"), help="model input size (px)")
    p.add_argument(
        "--normalize",
        choices=["imagenet", "half", "none"],
        help="imagenet: ImageNet's mean and std subtracted (torchvision's models); half: "
        "(x - 0.5) / 0.5, so [-1, 1] (TF-style models such as EfficientNet-Lite); none: pixels "
        "in [0, 1] (default for model files)",
    )
    p.add_argument(
        "--input-range",
        choices=["0-1", "0-255"],
        help=".onnx only: the pixel range the graph takes (default: 0-1)",
    )
    p.add_argument(
        "--onnx-outputs",
        choices=["auto", "logits", "probabilities"],
        help=".onnx only: what the graph returns (default: auto, read from the graph); a "
        "probability graph is explained as log p, so --output-space raw means log-probabilities",
    )
    p.add_argument(
        "--input-layout",
        choices=["auto", "NCHW", "NHWC"],
        help=".onnx only: the input's layout (default: auto, read from the graph)",
    )


def model_kwargs(a: argparse.Namespace, config: Any) -> dict[str, Any]:
    """``models.registry.load_classifier``'s keywords for the model options and settings."""
    from limecraft_core.io import read_labels

    return dict(
        input_size=a.input_size,
        normalize=a.normalize,
        labels=read_labels(a.labels) if a.labels else None,
        device=config.speed.device,
        precision=config.speed.precision,
        arch=a.arch,
        channels_last=config.speed.channels_last,
        input_range=a.input_range,
        outputs=a.onnx_outputs,
        layout=a.input_layout,
    )


def onnx_inputs(model: Any) -> dict[str, Any]:
    """What an ONNX model was run with (its options resolved), for explanation.json."""
    module = getattr(model, "model", None)
    if not hasattr(module, "input_range") or not hasattr(module, "outputs"):
        return {}
    return {
        "input_range": module.input_range,
        "onnx_outputs": module.outputs,
        "input_layout": module.graph.layout,
        "model_description": module.description,
    }


def add_propose_option(
    parser: argparse.ArgumentParser, what: str, defaults: tuple[str, ...] = ()
) -> None:
    """``--propose NAME``, repeatable: a proposer of the engine's table (its ``masks`` entry is
    spelled ``--regions-mask``/``--regions-masks``), whose regions become handcrafted regions
    named as proposed. ``what``: where they go, for the help. With ``defaults`` (the audit's),
    the option is None when not given (:func:`proposers_given` resolves it) and ``none``
    turns them off."""
    from limecraft_core.proposers import PROPOSERS

    names = [n for n in PROPOSERS if n != "masks"]
    listed = "; ".join(f"{n}: {PROPOSERS[n].help}" for n in names)
    said = (
        f". Default: {', '.join(defaults)} where its detector is installed; --propose none for "
        "the superpixels alone"
        if defaults
        else ""
    )
    parser.add_argument(
        "--propose",
        action="append",
        default=None if defaults else [],
        choices=names + (["none"] if defaults else []),
        metavar="NAME",
        help=f"regions proposed by a detector, {what}, named as proposed; repeatable. "
        f"{listed}. The text detector needs `pip install rapidocr-onnxruntime==1.4.4`{said}",
    )


def proposers_given(given: list[str] | None) -> tuple[list[str], str]:
    """The proposers to run from ``--propose`` (None: not given, the audit's defaults where
    their detector is installed) and a note for the user on the defaults left out ('' if none)."""
    from limecraft_core.proposers import (
        AUDIT_PROPOSERS,
        PROPOSERS,
        audit_proposers,
        check_proposer_names,
    )

    if given is None:
        ready = audit_proposers()
        off = [n for n in AUDIT_PROPOSERS if n not in ready]
        if not off:
            return ready, ""
        pips = sorted({PROPOSERS[n].pip for n in off if PROPOSERS[n].pip})
        return ready, (
            f"regions proposed by {', '.join(off)} are off: their detector is not installed "
            f"(run `{'`, `'.join(pips)}`; it needs Python < 3.13)"
            + ("" if ready else "; superpixels only")
        )
    if "none" in given:
        if len(set(given)) > 1:
            raise LimecraftError("--propose none means no proposer: give it alone")
        return [], ""
    return check_proposer_names(list(dict.fromkeys(given))), ""


def _explainer_names(s: str) -> tuple[str, ...]:
    """argparse type for ``--explainers``: a comma list of the table's names, each once."""
    from limecraft_core.explainer_table import explainer_of

    names = tuple(n.strip() for n in s.split(",") if n.strip())
    try:
        if not names:
            raise LimecraftError("--explainers needs at least one name")
        for n in names:
            explainer_of(n)
    except LimecraftError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--explainers names each method once, got {s!r}")
    return names


def add_explainers_option(parser: argparse.ArgumentParser) -> None:
    """``--explainers lime,kernelshap,...``: methods of the engine's table of explainers, run
    over the explanation's own regions. An option of ``explain`` only, not a setting."""
    from limecraft_core.explainer_table import EXPLAINERS

    listed = "; ".join(f"{n}: {e.help} (passes: {e.cost})" for n, e in EXPLAINERS.items())
    parser.add_argument(
        "--explainers",
        type=_explainer_names,
        metavar="NAMES",
        help="a comma list of explainers compared over the explanation's own regions, for its "
        "target, with the same settings: a line per method and whether they agree are printed "
        f"and explanation.json gets an 'explainers' block. {listed}",
    )
