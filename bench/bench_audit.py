"""The dataset audit: does it find the shortcut, and how many images a minute does it audit?

1. **It finds the shortcut.** ``demo-data --mixed`` makes fresh demo images (half aligned, half
   conflict; seeds never used in training) with the drawn shapes as expected masks; the audit
   runs with its default settings, and its flags are scored against ``labels.json``: the
   positives are the conflict images whose prediction is the tag's class (the model follows the
   tag). Precision and recall are printed, with every miss.
2. **Throughput** of ``python -m limecraft audit`` (the command's own path: reading,
   explaining, writing every image's files), for the demo model at N samples (early stop off,
   so every image scores exactly N), side by side in one run, round-robin over ``--rounds``
   rounds so a slow spell of the machine hits every variant alike:

   * local, one image at a time (``--in-flight 1``: the classifier called directly);
   * local, 4 images in flight through the work queue (their short chunks share passes);
   * Ray Serve on a one-node loopback cluster with 2 replicas (1 CPU each), 4 images in flight
     (``LIMECRAFT_RAY_ADDRESS`` set; every image's weights are checked against the local run's).

   Images per minute count only the explaining and writing (the model is loaded before the
   clock starts; the cluster is started once, before the rounds).

    python bench/bench_audit.py                      # 60 images, N=500, 2 rounds, about 20 min
    python bench/bench_audit.py --images 8 --throughput-images 4 --samples 100 --rounds 1 --no-ray

Writes bench/results/audit.json and audit.md, and prints the Markdown.

3. **The real case** (``--real DIR``, instead of 1 and 2): ``--real-images`` public photos
   picked by ``--real-seed``, each resized and centre-cropped to 224 px, every other one of the
   seeded order with the ImageNet-W watermark (``add_watermark``, as ``python -m limecraft
   watermark`` draws it). The truth: which carry it, its box, and whether it changes
   ``--real-model``'s top-1. Three audits, each ``python -m limecraft audit DIR --out OUT
   --model efficientnet_lite0 --resume`` with no masks: as it comes (its default proposes
   ``text-lines``), with ``--propose none`` (superpixels alone; ``--real-propose`` picks
   another), and on the clean half alone (the null folder). Each ``discovered`` finding of audit.json is
   scored: its mask's IoU with the watermark's box at its grid, the precision of the images it
   lists (share watermarked), its recall over the images whose top-1 the watermark changes, and
   the AUROC and AP of its membership against "carries the watermark"; and images per minute.
   The runs resume (``--work`` keeps them; a smaller ``--real-images`` is a subset of a larger).

    nice -n 10 python bench/bench_audit.py --real /tmp/imagenet --real-images 100 --work W

   Writes bench/results/audit_real.json and audit_real.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from _common import ROOT  # first: it puts the repository on sys.path

from limecraft_core.threads import set_thread_policy

set_thread_policy()  # before torch loads (limecraft_core/threads.py)
os.environ.setdefault("LIMECRAFT_CPU_BF16", "0")  # fp32 everywhere: the variants compare alike

import argparse
import contextlib
import io
import json
import platform
import shlex
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image as PILImage

from limecraft.cli import main as cli
from limecraft_core import Explanation
from models.demo_data import write_demo_mixed

#: Seeds never used to train the demo model (models/train_demo.py uses 20_240_601/2).
ACCEPTANCE_SEED = 515_151
THROUGHPUT_SEED = 616_161


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@contextlib.contextmanager
def ray_address(ray: str | None):
    """``LIMECRAFT_RAY_ADDRESS`` set to ``ray`` (unset for None) while it lasts, then as it was;
    stderr (the progress bar) kept out of the table."""
    old = os.environ.pop("LIMECRAFT_RAY_ADDRESS", None)
    if ray:
        os.environ["LIMECRAFT_RAY_ADDRESS"] = ray
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        os.environ.pop("LIMECRAFT_RAY_ADDRESS", None)
        if old is not None:
            os.environ["LIMECRAFT_RAY_ADDRESS"] = old


def audit(images: Path, masks: Path | None, out: Path, *args: str, ray: str | None = None) -> dict:
    """One ``audit`` run, in this process (without expected masks when ``masks`` is None);
    returns its audit.json."""
    with ray_address(ray):
        code = cli(
            ["audit", str(images), "--model", "demo",
             *(["--expected-masks", str(masks)] if masks is not None else []),
             "--out", str(out), "--quiet", *args]
        )  # fmt: skip
    if code != 0:
        raise SystemExit(f"the audit into {out} exited with {code}")
    return json.loads((out / "audit.json").read_text())


def follows_tag(doc: dict, labels: dict) -> set[str]:
    """The truth: the conflict images whose prediction is the tag's class (the model follows
    the tag)."""
    return {
        r["file"]
        for r in doc["rows"]
        if labels[r["file"]]["mode"] == "conflict"
        and r["predicted"] == labels[r["file"]]["tag_class"]
    }


def score(doc: dict, labels: dict) -> dict:
    truth = follows_tag(doc, labels)
    flagged = {r["file"] for r in doc["rows"] if r["flags"]}
    tp = len(truth & flagged)
    return {
        "images": len(doc["rows"]),
        "conflict": sum(e["mode"] == "conflict" for e in labels.values()),
        "follows_tag": len(truth),
        "flagged": len(flagged),
        "precision": tp / len(flagged) if flagged else float("nan"),
        "recall": tp / len(truth) if truth else float("nan"),
        "missed": sorted(truth - flagged),
        "false_alarms": sorted(flagged - truth),
        "headline": doc["findings"]["sentences"][0],
        "seconds": doc["run"]["seconds"],
    }


def on_tag(doc: dict, data: Path, labels: dict) -> dict[str, bool]:
    """For each image a confirmed finding lists: does the finding's region there lie on the
    image's tag (at least half of the tag's cells, at the rows' grid)? The demo twin of the
    real case's "carries the watermark": the finding names the artifact in that image."""
    from limecraft_core.audit.regions import grid_mask, unpack_mask
    from limecraft_core.io import read_image

    rows = {r["key"]: r for r in doc["rows"]}
    out: dict[str, bool] = {}
    for f in doc["findings"].get("discovered") or []:
        if not (f.get("intervention") or {}).get("confirmed"):
            continue
        for x in [*f["regions"], *(f.get("carriers") or [])]:
            row = rows[x["key"]]
            desc = next(
                d for d in [*row["regions"], *(row.get("proposed") or [])]
                if d["region"] == x["region"]
            )  # fmt: skip
            tag = grid_mask(read_image(data / labels[x["key"]]["tag_mask"])[..., 0] > 127)
            hit = (unpack_mask(desc["mask"]) & tag).sum() >= 0.5 * tag.sum() > 0
            out[x["key"]] = out.get(x["key"], False) or bool(hit)
    return out


def score_discovery(doc: dict, labels: dict, data: Path | None = None) -> dict:
    """An audit without masks against the same truth as :func:`score` (:func:`follows_tag`):
    the images it lists are those of its findings confirmed against the null (their regions'
    images). Precision is counted two ways: against that truth (an aligned image listed is a
    miss there, though the model reads its tag too), and as the real case counts it, the share
    of listed images whose listed region lies on the tag (:func:`on_tag`, with ``data``)."""
    truth = follows_tag(doc, labels)
    found = doc["findings"].get("discovered") or []
    confirmed = [f for f in found if (f.get("intervention") or {}).get("confirmed")]
    strong = {x["key"] for f in confirmed for x in f["regions"]}
    # what a finding lists: its images and its carriers (the same region, not among the strongest)
    listed = strong | {x["key"] for f in confirmed for x in f.get("carriers") or []}
    tp = len(truth & listed)
    tags = on_tag(doc, data, labels) if data is not None else {}
    return {
        "findings": len(found),
        "confirmed": len(confirmed),
        "listed": len(listed),
        "listed_strong": len(strong),
        "precision": tp / len(listed) if listed else float("nan"),
        "recall": tp / len(truth) if truth else float("nan"),
        "precision_on_tag": sum(tags.values()) / len(listed) if listed and tags else None,
        "recall_on_tag": len({k for k, v in tags.items() if v} & truth) / len(truth)
        if tags and truth
        else None,
        "missed": sorted(truth - listed),
        "aligned_listed": sorted(x for x in listed if labels[x]["mode"] == "aligned"),
        "other_listed": sorted(x for x in listed - truth if labels[x]["mode"] != "aligned"),
        "headline": doc["findings"].get("headline") or doc["findings"]["sentences"][0],
        "seconds": doc["run"]["seconds"],
    }


def weights(out: Path, doc: dict) -> dict[str, np.ndarray]:
    return {
        r["file"]: Explanation.from_json(
            (out / "images" / r["key"] / "explanation.json").read_text()
        ).weights
        for r in doc["rows"]
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's options (``bench/bench_gpu.py --dry`` checks its own with this)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--images", type=int, default=60, help="images of the acceptance run")
    ap.add_argument("--throughput-images", type=int, default=24)
    ap.add_argument("--samples", type=int, default=500, help="N of the throughput runs")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray Serve variant")
    ap.add_argument(
        "--only-acceptance",
        action="store_true",
        help="the shortcut's acceptance runs only (with masks, without, other fills); no "
        "throughput",
    )
    ap.add_argument(
        "--compare-fills",
        default="mean,blur",
        help="the acceptance set again under these fills (the default is inpaint)",
    )
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results"))
    ap.add_argument(
        "--work",
        help="folder for the generated images and every audit's files (default: a new "
        "temporary folder, kept)",
    )
    ap.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda", "auto"],
        help="where every audit runs (python -m limecraft audit --device)",
    )
    add_real_arguments(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The command line; ``argv`` (default: ``sys.argv[1:]``) lets a test run it in-process."""
    args = parse_args(argv)
    if args.real:
        args.argv = list(sys.argv[1:] if argv is None else argv)
        return real_main(args)
    dev = ["--device", args.device]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="lc-bench-audit-"))
    result: dict = {
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": args.device,
    }

    # 1. the shortcut: the default settings, then the same images under other fills
    data = work / "acceptance"
    labels = {e["file"]: e for e in write_demo_mixed(data, args.images, ACCEPTANCE_SEED)}
    doc = audit(data / "images", data / "masks", work / "acc-audit", *dev)
    result["acceptance"] = {"seed": ACCEPTANCE_SEED, "settings": "defaults", **score(doc, labels)}
    print(json.dumps(result["acceptance"], indent=1), flush=True)
    # the same images without masks: the findings discovered and proved (issue 51)
    doc = audit(data / "images", None, work / "acc-no-masks", *dev)
    result["acceptance_no_masks"] = score_discovery(doc, labels, data)
    print(json.dumps(result["acceptance_no_masks"], indent=1), flush=True)
    if args.only_acceptance:
        return _write(args, result)
    result["acceptance_by_fill"] = {}
    for fill in filter(None, args.compare_fills.split(",")):
        d = audit(data / "images", data / "masks", work / f"acc-{fill}", "--fill", fill, *dev)
        result["acceptance_by_fill"][fill] = score(d, labels)
        print(fill, {k: result["acceptance_by_fill"][fill][k] for k in ("precision", "recall")})

    # 2. throughput, side by side
    data = work / "throughput"
    write_demo_mixed(data, args.throughput_images, THROUGHPUT_SEED)
    fixed = ["--samples", str(args.samples), "--early-stop", "none", *dev]
    variants = {
        "local, 1 image at a time": (["--in-flight", "1"], None),
        "local, 4 in flight (shared batches)": (["--in-flight", "4"], None),
    }
    cluster = None
    if not args.no_ray:
        from bench_ray import LocalCluster

        t = time.perf_counter()
        cluster = LocalCluster(args.replicas, cluster_cpus=2 * args.replicas)
        result["cluster_start_s"] = round(time.perf_counter() - t, 1)
        variants[f"Ray Serve, {args.replicas} replicas, 4 in flight"] = (
            ["--in-flight", "4"],
            cluster.url,
        )
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    reference: dict[str, np.ndarray] | None = None
    try:
        for r in range(args.rounds):
            for name, (flags, ray) in variants.items():
                out = work / f"tp-{r}-{len(runs[name])}-{abs(hash(name))}"
                d = audit(data / "images", data / "masks", out, *fixed, *flags, ray=ray)
                w = weights(out, d)
                if reference is None:
                    reference = w
                diff = max(float(np.abs(w[k] - reference[k]).max()) for k in reference)
                runs[name].append({**d["run"], "max_weight_diff": diff})
                print(f"round {r + 1}: {name}: {d['run']['images_per_minute']} images/min "
                      f"({d['run']['seconds']} s), max |Δweight| vs the first run {diff:.1e}",
                      flush=True)  # fmt: skip
    finally:
        if cluster is not None:
            cluster.close()
    result["throughput"] = {
        "images": args.throughput_images,
        "samples": args.samples,
        "rounds": args.rounds,
        "variants": {
            name: {
                "images_per_minute": [x["images_per_minute"] for x in rs],
                "median_images_per_minute": float(np.median([x["images_per_minute"] for x in rs])),
                "max_weight_diff": max(x["max_weight_diff"] for x in rs),
                **(
                    {"forward_passes": rs[-1].get("forward_passes"),
                     "shared_passes": rs[-1].get("shared_passes")}
                    if "forward_passes" in rs[-1]
                    else {}
                ),
            }
            for name, rs in runs.items()
        },
    }  # fmt: skip
    return _write(args, result)


def _write(args: argparse.Namespace, result: dict) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(result, indent=1))
    md = markdown(result)
    (out / "audit.md").write_text(md)
    print(md)
    return 0


# --- the real case: public photos, half watermarked, audited as they come (issue 51, item 5) ---

REAL_SEED = 5151
#: The headline "is the watermark" when its mask's IoU with the watermark's box reaches this.
WATERMARK_IOU = 0.5


def prepare_real(
    photos: Path, work: Path, n: int, seed: int, model_name: str, size: int = 224
) -> dict:
    """``n`` photos picked by ``seed``, each in ImageNet's evaluation view (``size`` px); half of
    them (picked by the same seed) carry the ImageNet-W watermark. Writes ``work/images`` (all),
    ``work/clean`` (the clean half alone, the null folder) and returns the truth: which carry the
    watermark, the watermark's box, and the top-1 of each photo with and without it."""
    from bench_watermark import SUFFIXES, eval_crop

    from limecraft_core.edits.watermark import add_watermark, watermark_mask
    from models import registry

    files = sorted(p for p in photos.rglob("*") if p.suffix.lower() in SUFFIXES)
    if len(files) < n:
        raise SystemExit(f"--real {photos}: {len(files)} photos, fewer than --real-images {n}")
    # one seeded order: the first n photos of it, every other one watermarked (so a smaller n
    # is a subset of a larger one, with the same photos watermarked)
    order = np.random.default_rng(seed).permutation(len(files))[:n]
    picked = sorted(files[i] for i in order)
    marked = {files[i].stem for i in order[::2]}
    model = registry.load_classifier(model_name, precision="fp32")
    for folder in (work / "images", work / "clean"):  # a smaller n: no photo of a larger one
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()
    truth = {}
    for p in picked:
        view = eval_crop(p, size, round(size * 256 / 224))
        wm = add_watermark(view).image
        top = np.asarray(model.predict(np.stack([view, wm]))).argmax(1)
        name = f"{p.stem}.png"
        PILImage.fromarray(wm if p.stem in marked else view).save(work / "images" / name)
        if p.stem not in marked:
            PILImage.fromarray(view).save(work / "clean" / name)
        truth[name] = {
            "marked": p.stem in marked,
            "top1_clean": int(top[0]),
            "top1_marked": int(top[1]),
        }
    box = np.argwhere(watermark_mask(size, size, box=True)).tolist()
    return {"seed": seed, "model": model_name, "size": size, "box": box, "files": truth}


def real_audit(images: Path, out: Path, model: str, *args: str) -> dict:
    """``python -m limecraft audit IMAGES --out OUT --model MODEL ARGS --resume`` in this process
    (its own defaults otherwise); an audit that this same command finished is read, not redone."""
    argv = ["audit", str(images), "--out", str(out), "--model", model, "--resume", *args]
    done, said = out / "audit.json", out / "bench-command.json"
    if done.exists() and said.exists() and json.loads(said.read_text()) == argv:
        doc = json.loads(done.read_text())
        # complete, and over the folder as it is now (a larger --real-images adds photos to it)
        if doc.get("complete") and len(doc.get("rows", [])) == len(list(images.glob("*.png"))):
            return doc
    print("python -m limecraft " + " ".join(argv), flush=True)
    code = cli(argv)
    doc = json.loads(done.read_text())
    # every run's own timing, an interrupted one's too: a resumed audit's images per minute is
    # all its images over all its runs' seconds
    log = out / "bench-runs.json"
    runs = [*(json.loads(log.read_text()) if log.exists() else []), doc["run"]]
    log.write_text(json.dumps(runs))
    if code not in (0, 2):  # 2: finished, with error rows
        raise SystemExit(f"the audit into {out} exited with {code}: rerun to resume it")
    said.write_text(json.dumps(argv))
    return doc


def overall_rate(out: Path, doc: dict) -> dict:
    """Images explained, seconds and images per minute over all the runs of one audit."""
    log = out / "bench-runs.json"
    runs = [r for r in (json.loads(log.read_text()) if log.exists() else [doc["run"]])]
    n, sec = sum(r.get("explained", 0) for r in runs), sum(r.get("seconds", 0) for r in runs)
    return {"explained": n, "seconds": round(sec, 1), "runs": len(runs),
            "images_per_minute": round(60 * n / sec, 2) if sec else None}  # fmt: skip


def reuse_finished(done: Path, out: Path, names: list[str]) -> None:
    """Copy the default run's finished images of ``names`` into ``out`` (each image's folder
    is named after its file): the null run's ``--resume`` keeps the ones explained with the same
    settings and pixels, and explains the rest."""
    import shutil

    for name in names:
        src = done / "images" / name
        if src.is_dir() and not (out / "images" / name).exists():
            shutil.copytree(src, out / "images" / name)


def box_on_grid(box_cells: list, size: int, grid: int) -> np.ndarray:
    """The watermark's box (pixel cells of a ``size`` image) at a finding's ``grid``."""
    from limecraft_core.audit.regions import grid_mask

    box = np.zeros((size, size), bool)
    box[tuple(np.asarray(box_cells).T)] = True
    return grid_mask(box, grid)


def score_finding(f: dict, truth: dict, box_cells: list, files_by_key: dict, size: int) -> dict:
    """One ``discovered`` finding of audit.json against the truth: the IoU of its mask with the
    watermark's box at its grid, the precision and recall of the images it lists, and the AUROC
    and AP of its membership scores against "carries the watermark" (and the AUROC against "the
    watermark changes its top-1")."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    grid = f["mask"]["grid"]
    mask = np.zeros((grid, grid), bool)
    if f["mask"]["cells"]:
        mask[tuple(np.asarray(f["mask"]["cells"]).T)] = True
    box = box_on_grid(box_cells, size, grid)
    iou = float((mask & box).sum() / max((mask | box).sum(), 1))
    listed = {files_by_key[r["key"]] for r in f["regions"]}
    carried = listed | {files_by_key[r["key"]] for r in f.get("carriers") or []}
    marked = {k for k, t in truth.items() if t["marked"]}
    changed = {k for k in marked if truth[k]["top1_clean"] != truth[k]["top1_marked"]}
    member = [(files_by_key[k], v) for k, v in f["membership"].items()]
    y = [truth[name]["marked"] for name, _ in member]
    s = [v for _, v in member]
    both = 0 < sum(y) < len(y)
    yc = [name in changed for name, _ in member]
    return {
        "sentence": f["sentence"], "kind": f["kind"], "risk": f["risk"],
        "score": f["score"], "images": len(listed), "mask_iou": round(iou, 3),
        "precision": round(len(listed & marked) / len(listed), 3) if listed else None,
        "recall_changed": round(len(listed & changed) / len(changed), 3) if changed else None,
        "changed_listed": len(listed & changed), "changed": len(changed),
        "carried": len(carried),
        "carried_precision": round(len(carried & marked) / len(carried), 3) if carried else None,
        "carried_recall_changed": round(len(carried & changed) / len(changed), 3)
        if changed else None,
        "changed_carried": len(carried & changed),
        "auroc": round(float(roc_auc_score(y, s)), 3) if both else None,
        "ap": round(float(average_precision_score(y, s)), 3) if both else None,
        "auroc_changed": round(float(roc_auc_score(yc, s)), 3) if 0 < sum(yc) < len(yc) else None,
        "classes": [c["label"] for c in f["classes"][:3]],
    }  # fmt: skip


def per_image(doc: dict, truth: dict, box_cells: list, size: int) -> dict:
    """What each image's row says, before any grouping: how many watermarked (and clean) images
    have a described strong region on the watermark (IoU with its box at least bench_proposers'
    ``IOU_FOUND``, at the rows' grid), and the border flag's precision and recall (the audit's
    one flag without masks)."""
    from bench_proposers import IOU_FOUND, iou

    from limecraft_core.audit.regions import REGION_GRID, unpack_mask

    box = box_on_grid(box_cells, size, REGION_GRID)

    def on_box(regions: list) -> bool:
        return any(iou(unpack_mask(d["mask"]), box) >= IOU_FOUND for d in regions)

    on = {r["file"] for r in doc["rows"] if on_box(r.get("regions") or [])}
    top_on = {r["file"] for r in doc["rows"] if on_box((r.get("regions") or [])[:1])}
    marked = {k for k, t in truth.items() if t["marked"]}
    changed = {k for k in marked if truth[k]["top1_clean"] != truth[k]["top1_marked"]}
    flagged = {r["file"] for r in doc["rows"] if r.get("flags")}
    return {
        "marked": len(marked),
        "strong_region_on_watermark": {"marked": len(on & marked), "clean": len(on - marked),
                                       "changed": len(on & changed)},
        "top_region_on_watermark": {"marked": len(top_on & marked), "clean": len(top_on - marked),
                                    "changed": len(top_on & changed)},
        "border_flag": {
            "flagged": len(flagged),
            "precision": round(len(flagged & marked) / len(flagged), 3) if flagged else None,
            "changed_flagged": len(flagged & changed),
        },
    }  # fmt: skip


def score_run(doc: dict, truth: dict, box_cells: list, size: int = 224) -> dict:
    """A whole audit's findings scored: the headline, and the finding nearest the watermark."""
    files_by_key = {r["key"]: r["file"] for r in doc["rows"]}
    found = [
        score_finding(f, truth, box_cells, files_by_key, size)
        for f in doc["findings"]["discovered"]
    ]
    best = max(range(len(found)), key=lambda i: found[i]["mask_iou"], default=None)
    return {
        "images": len(doc["rows"]),
        "errors": sum(r.get("status") != "ok" for r in doc["rows"]),
        "headline_sentence": doc["findings"].get("headline") or doc["findings"]["sentences"][0],
        "findings": len(found),
        "headline": found[0] if found else None,
        "headline_is_watermark": bool(found) and found[0]["mask_iou"] >= WATERMARK_IOU,
        "nearest_watermark_rank": None if best is None else best + 1,
        "nearest_watermark": None if best is None else found[best],
        "all": found,
        "per_image": per_image(doc, {k: truth[k] for k in files_by_key.values()}, box_cells, size),
        "run": doc["run"],
    }


def real_case(args: argparse.Namespace) -> dict:
    """Prepare the photos, audit them as they come and with ``--propose none``, audit the clean
    half alone (the null folder), and score each run's findings."""
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="lc-bench-audit-real-"))
    args.work = str(work)  # real_ray audits its first photos from here
    work.mkdir(parents=True, exist_ok=True)
    tfile = work / "truth.json"
    want = {"seed": args.real_seed, "n": args.real_images, "model": args.real_model,
            "size": args.real_size}  # fmt: skip
    truth = json.loads(tfile.read_text()) if tfile.exists() else None
    if truth is None or {k: truth.get(k) for k in want} != want:
        truth = {**prepare_real(Path(args.real), work, args.real_images, args.real_seed,
                                args.real_model, args.real_size), "n": args.real_images}  # fmt: skip
        tfile.write_text(json.dumps(truth))
    files, box = truth["files"], truth["box"]
    marked = [k for k, t in files.items() if t["marked"]]
    result: dict = {
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "photos": str(args.real), "seed": args.real_seed, "model": args.real_model,
        "images": len(files), "marked": len(marked), "size": truth["size"],
        "changed": sum(files[k]["top1_clean"] != files[k]["top1_marked"] for k in marked),
        "runs": {},
        "command": "python bench/bench_audit.py " + " ".join(args.argv),
    }  # fmt: skip
    img, clean = work / "images", work / "clean"
    runs = {  # name: (folder, the options beyond the audit's defaults)
        "default": (img, ()),
        f"propose {args.real_propose}": (img, ("--propose", args.real_propose)),
        "null (clean half)": (clean, ()),
    }
    for name, (folder, extra) in runs.items():
        if name.split()[0] in args.real_skip:
            continue
        out = work / ("out-" + name.split()[0])
        if folder == clean and args.real_null_reuse:
            reuse_finished(work / "out-default", out, [p.name for p in clean.glob("*.png")])
        t = time.perf_counter()
        doc = real_audit(folder, out, args.real_model, *extra, *shlex.split(args.real_audit_args))
        result["runs"][name] = {
            "command": "python -m limecraft audit " + " ".join(
                [folder.name + "/", "--out", "OUT", "--model", args.real_model, *extra]),
            **score_run(doc, files, box, truth["size"]),
            "overall": overall_rate(out, doc), "bench_seconds": round(time.perf_counter() - t, 1),
        }  # fmt: skip
        if folder != clean:
            rank = result["runs"][name]["nearest_watermark_rank"]
            result["runs"][name]["changed_misses"] = changed_misses(out, doc, truth, rank)
        print(name, json.dumps({k: v for k, v in result["runs"][name].items()
                                if k not in ("all", "changed_misses")}), flush=True)  # fmt: skip
    return result


def changed_misses(out: Path, doc: dict, truth: dict, nearest: int | None) -> dict:
    """Why each photo the watermark changed is listed or not (bench/audit_misses.py), against
    the finding nearest the watermark (its rank from :func:`score_run`, None for none)."""
    from audit_misses import misses

    listed: set[str] = set()
    carried: set[str] = set()
    if nearest is not None:
        f = doc["findings"]["discovered"][nearest - 1]
        by_key = {r["key"]: r["file"] for r in doc["rows"]}
        listed = {by_key[r["key"]] for r in f["regions"]}
        carried = {by_key[r["key"]] for r in f.get("carriers") or []}
    return misses(out, doc, truth["files"], truth["box"], listed, truth["size"], carried)


def add_real_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("the real case (instead of the demo parts)")
    g.add_argument("--real", metavar="DIR", help="a folder of public photos, e.g. one ImageNet "
                   "photo per class: audit them, half watermarked, as they come")  # fmt: skip
    g.add_argument("--real-images", type=int, default=200, help="photos picked (seeded)")
    g.add_argument("--real-seed", type=int, default=REAL_SEED)
    g.add_argument("--real-model", default="efficientnet_lite0")
    g.add_argument("--real-size", type=int, default=224, help="each photo's side in px")
    g.add_argument("--real-null-reuse", action="store_true",
                   help="the null run keeps the default run's finished clean images (same "
                   "pixels and settings: --resume checks) and groups them; fresh otherwise")  # fmt: skip
    g.add_argument("--real-audit-args", default="", help="more audit options for every run, "
                   "e.g. '--samples 60' for a quick try (the real case uses none)")  # fmt: skip
    g.add_argument("--real-propose", default="none",
                   help="the second run's --propose (none: superpixels alone)")  # fmt: skip
    g.add_argument("--real-skip", nargs="*", default=[], choices=("default", "propose", "null"),
                   help="runs to leave out")  # fmt: skip
    g.add_argument("--real-ray", type=int, default=0, metavar="N",
                   help="also the images per minute of the first N photos, audited locally and "
                   "on Ray Serve with --replicas replicas, side by side (0: not)")  # fmt: skip


def real_ray(args: argparse.Namespace, work: Path) -> dict:
    """The first ``--real-ray`` photos audited with the audit's defaults, locally and on Ray
    Serve with ``--replicas`` replicas (a local cluster of 2 CPUs a replica), one after the
    other in one run: images per minute of each, and the weights' largest difference."""
    import shutil

    from bench_ray import LocalCluster

    sub = work / "ray-images"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir(parents=True)
    for p in sorted((work / "images").glob("*.png"))[: args.real_ray]:
        shutil.copy(p, sub / p.name)
    t = time.perf_counter()
    cluster = LocalCluster(args.replicas, 2 * args.replicas, models=args.real_model)
    res: dict = {"images": args.real_ray, "cluster_start_s": round(time.perf_counter() - t, 1)}
    found: dict = {}
    try:
        for name, ray in (("local", None), (f"Ray Serve, {args.replicas} replicas", cluster.url)):
            out = work / ("ray-out-local" if ray is None else "ray-out-ray")
            shutil.rmtree(out, ignore_errors=True)
            with ray_address(ray):
                code = cli(["audit", str(sub), "--out", str(out), "--model", args.real_model,
                            "--quiet"])  # fmt: skip
            if code not in (0, 2):
                raise SystemExit(f"the audit into {out} exited with {code}")
            doc = json.loads((out / "audit.json").read_text())
            found[name] = weights(out, doc)
            res[name] = {k: doc["run"].get(k) for k in ("images_per_minute", "seconds")}
            print(f"{name}: {res[name]}", flush=True)
    finally:
        cluster.close()
    a, b = found.values()
    res["max_weight_diff"] = max(float(np.abs(a[k] - b[k]).max()) for k in a)
    return res


def real_main(args: argparse.Namespace) -> int:
    r = real_case(args)
    if args.real_ray:
        r["ray"] = real_ray(args, Path(args.work))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit_real.json").write_text(json.dumps(r, indent=1))
    md = markdown_real(r)
    (out / "audit_real.md").write_text(md)
    print(md)
    return 0


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def markdown_real(r: dict) -> str:
    """The real case's results: one table row per audit, its headline and the finding nearest
    the watermark, and each run's sentences."""
    lines = [
        f"# The audit on {r['images']} public photos, half watermarked, as it comes",
        "",
        f"{r['machine']}; `{r['command']}`; photos from `{r['photos']}` picked with seed "
        f"{r['seed']}, resized and centre-cropped to {r['size']} px; {r['marked']} carry the ImageNet-W watermark, and on "
        f"{r['changed']} of those it changes {r['model']}'s top-1. The audits: "
        f"`python -m limecraft audit DIR --out OUT --model {r['model']}` with no masks, as it "
        "comes (its default proposes `text-lines`), and the same with `--propose none` "
        "(superpixels alone); the null is the clean half alone, as it comes.",
        "",
        f"The headline *is the watermark* when its mask's IoU with the watermark's box (at the "
        f"finding's grid) is at least {WATERMARK_IOU}. *Strong in*: the images where its region "
        "is among the strongest for the predicted class (the group); *carried by*: those and the "
        "images where the same region is present but not among the strongest (the finding's "
        "carriers, what its list shows). Precision: the share of the images listed that carry "
        "the watermark. Recall: of the watermarked images whose top-1 the watermark changes, "
        'the share listed. AUROC and AP: its membership scores against "carries the '
        'watermark", over every explained image; AUROC (changed): the same scores against "the '
        'watermark changes its top-1".',
        "",
        "| audit | findings | finding | IoU | strong in | precision | recall (changed) "
        "| carried by | precision | recall (changed) | AUROC | AP | AUROC (changed) | images/min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run in r["runs"].items():
        rate = run["overall"]["images_per_minute"] or "(kept from the default run)"
        for label, f in (("headline", run["headline"]), (
            f"nearest the watermark (#{run['nearest_watermark_rank']})",
            run["nearest_watermark"] if run["nearest_watermark_rank"] not in (None, 1) else None,
        )):  # fmt: skip
            if f is None and label != "headline":
                continue
            if f is None:
                lines.append(f"| {name} | 0 | none | | | | | | | | | | | {rate} |")
                continue
            lines.append(
                f"| {name} | {run['findings']} | {label}: {f['kind']}, {f['risk']}, "
                f"{', '.join(f['classes'])} | {f['mask_iou']:.2f} | {f['images']} | "
                f"{_f(f['precision'])} | {f['changed_listed']}/{f['changed']} "
                f"({_f(f['recall_changed'])}) | {f.get('carried', f['images'])} | "
                f"{_f(f.get('carried_precision', f['precision']))} | "
                f"{f.get('changed_carried', f['changed_listed'])}/{f['changed']} "
                f"({_f(f.get('carried_recall_changed', f['recall_changed']))}) | "
                f"{_f(f['auroc'])} | {_f(f['ap'])} | "
                f"{_f(f.get('auroc_changed'))} | {rate} |"
            )
    if r.get("ray"):
        y = r["ray"]
        rates = "; ".join(
            f"{k}: {v['images_per_minute']} images/min ({v['seconds']} s)"
            for k, v in y.items() if isinstance(v, dict)
        )  # fmt: skip
        lines += ["", f"Side by side on the first {y['images']} photos (the audit's "
                  f"defaults): {rates}; the cluster started in {y['cluster_start_s']} s; the "
                  f"weights' largest difference {y['max_weight_diff']:.1e}."]  # fmt: skip
    for name, run in r["runs"].items():
        o = run["overall"]
        lines += ["", f"**{name}** (`{run['command']}`; {run['images']} images, "
                  f"{run['errors']} errors; {o['explained']} explained in {o['seconds']} s over "
                  f"{o['runs']} run(s) of the command, resumed):", ""]  # fmt: skip
        lines.append(f'- the headline: "{run["headline_sentence"]}"')
        pi = run["per_image"]
        m = pi["marked"]
        s_, t_, b_ = (
            pi["strong_region_on_watermark"],
            pi["top_region_on_watermark"],
            pi["border_flag"],
        )
        lines += [
            f"- before grouping: one of the (up to 3) strong regions an image's row describes lies on "
            f"the watermark (IoU >= 0.3 with its box) in {s_['marked']} "
            f"of {m} watermarked images ({s_['changed']} of {r['changed']} with a changed top-1) and "
            f"{s_['clean']} clean ones; the top region does in {t_['marked']} ({t_['changed']} of "
            f"{r['changed']} changed)",
            f"- the border flag: {b_['flagged']} images, precision {_f(b_['precision'])}, "
            f"{b_['changed_flagged']} of {r['changed']} changed",
        ]
        if run.get("changed_misses"):
            c = run["changed_misses"]
            lines.append(
                f"- the {c['changed']} photos the watermark changed, by the first reason that "
                "applies (bench/audit_misses.py): "
                + "; ".join(f"{k}: {v}" for k, v in c["counts"].items())
            )
        lines += [f"- finding {i + 1} ({f['risk']}, IoU {f['mask_iou']:.2f}, precision "
                  f"{_f(f['precision'])}, AUROC {_f(f['auroc'])}): {f['sentence']}"
                  for i, f in enumerate(run["all"])]  # fmt: skip
    return "\n".join(lines) + "\n"


def markdown(r: dict) -> str:
    a, t = r["acceptance"], r.get("throughput")
    lines = [
        f"Machine: {r['machine']}; torch {r['torch']} ({r['torch_threads']} threads); fp32.",
        "",
        f"**The shortcut**: {a['images']} fresh demo images ({a['conflict']} conflict, seed "
        f"{a['seed']}), default audit settings: the model follows the tag on "
        f"{a['follows_tag']}; the audit flags {a['flagged']}: precision **{a['precision']:.2f}**, "
        f"recall **{a['recall']:.2f}** (missed: {', '.join(a['missed']) or 'none'}; false "
        f"alarms: {', '.join(a['false_alarms']) or 'none'}); {a['seconds']} s.",
        f'Its headline: "{a["headline"]}"',
        "",
    ]
    n = r.get("acceptance_no_masks")
    if n:
        lines += [
            f"**Without masks** (the same images, no `--expected-masks`: the findings discovered "
            f"and proved against the null): {n['findings']} findings, {n['confirmed']} "
            f"confirmed, listing {n['listed']} images: precision **{n['precision']:.2f}**, "
            f"recall **{n['recall']:.2f}** against the same truth (missed: "
            f"{', '.join(n['missed']) or 'none'}; aligned images listed, where the model reads "
            f"the tag too: {len(n['aligned_listed'])}; others: "
            f"{', '.join(n['other_listed']) or 'none'}); {n['seconds']} s."
            + (
                f" Counted as the real case counts (a listed image is right when the finding's "
                f"region there lies on its tag): precision **{n['precision_on_tag']:.2f}**, "
                f"recall **{n['recall_on_tag']:.2f}** (conflict images the model follows, "
                f"listed with the region on the tag)."
                if n.get("precision_on_tag") is not None
                else ""
            ),
            f'Its headline: "{n["headline"]}"',
            "",
        ]
    if r.get("acceptance_by_fill"):
        lines += [
            "The same images under other fills (how a hidden region is filled):",
            "",
            "| fill | flagged | precision | recall | missed | seconds |",
            "|---|---|---|---|---|---|",
            f"| inpaint (the audit's default) | {a['flagged']} | {a['precision']:.2f} | "
            f"{a['recall']:.2f} | {len(a['missed'])} | {a['seconds']} |",
        ]
        for fill, f in r["acceptance_by_fill"].items():
            lines.append(
                f"| {fill} | {f['flagged']} | {f['precision']:.2f} | {f['recall']:.2f} | "
                f"{len(f['missed'])} | {f['seconds']} |"
            )
        lines.append("")
    if t is None:
        return "\n".join(lines) + "\n"
    lines += [
        f"**Throughput**: {t['images']} images, N={t['samples']} (early stop off), "
        f"{t['rounds']} rounds, variants alternating"
        + (
            f"; cluster started in {r['cluster_start_s']} s, before the rounds"
            if "cluster_start_s" in r
            else ""
        )
        + ".",
        "",
        "| variant | images/min (median) | each round | max \\|Δweight\\| vs the first run |",
        "|---|---|---|---|",
    ]
    for name, v in t["variants"].items():
        lines.append(
            f"| {name} | **{v['median_images_per_minute']:.0f}** | "
            f"{', '.join(f'{x:.0f}' for x in v['images_per_minute'])} | {v['max_weight_diff']:.1e} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
