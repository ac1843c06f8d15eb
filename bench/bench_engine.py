"""Engine overhead against the lime package, side by side in one run.

Setup (issue 2): a model of almost no cost (channel means through a linear layer), a 224x224
photo (scikit-image's chelsea), lime's default quickshift regions, mean fill, N=1000. Both tools
get the same label map. lime runs at each batch size in --lime-batch-sizes and its best time is
used. Each timing is the median of --repeats runs.

    python bench/bench_engine.py            # prints a table, the ratio, and writes JSON
"""

from __future__ import annotations

from pathlib import Path

from _common import chelsea, median_time  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)

import argparse
import contextlib
import io
import json
import warnings

import numpy as np
import torch

import limecraft_core as lc


class ChannelMeans(torch.nn.Module):
    """Almost free: the mean colour of the image through a linear layer."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lime-batch-sizes", default="10,100,250,1000")
    ap.add_argument("--json", default="bench/results/engine.json")
    args = ap.parse_args()

    from lime import lime_image

    torch.manual_seed(0)
    model = ChannelMeans().eval()
    image = chelsea()
    # lime's own default segmentation, computed once and handed to both tools.
    segments = lc.segment(image, "quickshift", working_size=None)
    n = args.samples

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2))).float() / 255.0
        with torch.inference_mode():
            return torch.softmax(model(x), dim=1).numpy()

    def run_lime(bs: int) -> None:
        # lime's PyPI wheel always draws a tqdm bar on stderr; keep it out of the table.
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            lime_image.LimeImageExplainer(random_state=0).explain_instance(
                image,
                classifier_fn,
                top_labels=1,
                hide_color=None,
                num_samples=n,
                batch_size=bs,
                segmentation_fn=lambda _: segments,
                random_seed=0,
            )

    def run_ours(deltas: bool) -> None:
        lc.explain(
            image,
            model,
            segments=segments,
            samples=n,
            fill="mean",
            seed=0,
            compute_deltas=deltas,
            device="cpu",
        )

    run_ours(False)  # warm-up: first-call allocations, thread pools
    lime_times = {}
    for bs in [int(b) for b in args.lime_batch_sizes.split(",")]:
        lime_times[bs] = median_time(lambda bs=bs: run_lime(bs), args.repeats)[0]
    best_bs = min(lime_times, key=lime_times.get)
    ours = median_time(lambda: run_ours(False), args.repeats)[0]
    ours_deltas = median_time(lambda: run_ours(True), args.repeats)[0]
    model_only = median_time(
        lambda: [
            classifier_fn(np.repeat(image[None], min(250, n - i), 0)) for i in range(0, n, 250)
        ],
        args.repeats,
    )[0]
    result = {
        "samples": n,
        "regions": int(segments.max()) + 1,
        "lime_seconds_by_batch_size": lime_times,
        "lime_best_batch_size": best_bs,
        "lime_seconds": lime_times[best_bs],
        "limecraft_seconds": ours,
        "limecraft_with_deltas_seconds": ours_deltas,
        "model_only_seconds_numpy_path": model_only,
        "speedup": lime_times[best_bs] / ours,
        "threads": torch.get_num_threads(),
    }
    print(f"regions K={result['regions']}, N={n}, torch threads={result['threads']}")
    print("| tool | seconds | ratio |")
    print("|---|---|---|")
    for bs, t in lime_times.items():
        print(f"| lime_image (batch {bs}) | {t:.3f} | {t / ours:.1f}x |")
    print(f"| limecraft explain | {ours:.3f} | 1.0x |")
    print(
        f"| limecraft explain + 2K per-region passes | {ours_deltas:.3f} | {ours_deltas / ours:.2f}x |"
    )
    print(f"speedup over lime (best batch {best_bs}): {result['speedup']:.1f}x")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
