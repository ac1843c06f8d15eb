"""Bake torchvision ImageNet weights into an image: ``python bake_weights.py resnet50,resnet18``.

Run at ``docker build`` time (``--build-arg LIMECRAFT_WEIGHTS=...``). Each file lands in the torch
hub cache, ``$TORCH_HOME/hub/checkpoints``, where ``models/zoo.py`` reads it, so the container
needs no network. Downloads are checked against the hash in the file name
(``get_state_dict(check_hash=True)``). Stand-alone on purpose (torch and torchvision only), so that
the Docker layer it builds does not change with the app's code.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

#: The zoo of ``models/zoo.py`` (a test keeps the two lists equal).
ZOO_NAMES = (
    "resnet50",
    "resnet18",
    "vgg16",
    "densenet121",
    "inception_v3",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "convnext_tiny",
    "vit_b_16",
    "swin_t",
)


def parse_names(spec: str) -> list[str]:
    """Names from a comma- or space-separated list; ``all`` is the whole zoo, ``demo`` ships.

    Raises
    ------
    ValueError
        For a name that is not in the zoo.
    """
    names: list[str] = []
    for name in (n for n in re.split(r"[\s,]+", spec.strip()) if n):
        if name == "all":
            names += ZOO_NAMES
        elif name == "demo":
            continue  # its weights are part of the source tree (models/weights/)
        elif name in ZOO_NAMES:
            names.append(name)
        else:
            raise ValueError(
                f"unknown model {name!r} in LIMECRAFT_WEIGHTS; use names from: all, "
                + ", ".join(ZOO_NAMES)
            )
    return list(dict.fromkeys(names))


def bake(names: Sequence[str]) -> list[Path]:
    """Fetch (or find) each model's weights in the hub cache and check they load.

    Returns
    -------
    list of Path
        The cached weight files, one per name.
    """
    import torch
    import torchvision.models as tvm

    out = []
    for name in names:
        weights = tvm.get_model_weights(name).DEFAULT
        state = weights.get_state_dict(progress=False, check_hash=True)
        # inception_v3's checkpoint carries its auxiliary head (as in models/zoo.py)
        kwargs = {"aux_logits": True, "init_weights": False} if name == "inception_v3" else {}
        tvm.get_model(name, weights=None, **kwargs).load_state_dict(state)
        path = Path(torch.hub.get_dir()) / "checkpoints" / weights.url.rsplit("/", 1)[-1]
        if not path.is_file():
            raise FileNotFoundError(f"{path} was not written")
        print(f"bake_weights: {name}: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
        out.append(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="zoo names, comma or space separated, or all")
    args = parser.parse_args(argv)
    try:
        names = parse_names(" ".join(args.names))
    except ValueError as e:
        sys.stderr.write(f"bake_weights: {e}\n")
        return 2
    if not names:
        print("bake_weights: no zoo weights chosen (the demo model ships with the app)")
        return 0
    bake(names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
