"""The model sources as a table (models.registry.SOURCES, models.formats): which source serves
which spec, and a toy source and a toy file format added through the tables alone, then used
by the registry, the CLI's help and an explanation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from toys import ChannelMeans

from limecraft_core import LimecraftError, explain
from models import formats, registry
from models.source import ModelInfo, Source


@pytest.mark.parametrize(
    ("spec", "arch", "kind"),
    [
        ("demo", None, "demo"),
        ("efficientnet_lite0", None, "real"),
        ("resnet50", None, "zoo"),
        ("timm:resnet18", None, "hub"),
        ("hf:org/model", None, "hub"),  # a slash, but a hub model, not a file
        ("some/where/model.onnx", None, "onnx"),
        ("model.onnx", "resnet18", "onnx"),  # an architecture is for a state_dict only
        ("model.pt2", None, "file"),
        ("weights.pth", "resnet18", "file"),
        ("folder/model", None, "file"),
        ("demo", "resnet18", "file"),  # with an architecture: a state_dict file named demo
    ],
)
def test_each_spec_is_served_by_the_first_source_that_matches(spec, arch, kind):
    assert registry.source_of(spec, arch).kind == kind


def test_an_unknown_name_says_what_is_registered():
    with pytest.raises(LimecraftError) as e:
        registry.model_info("no-such-model")
    msg = str(e.value)
    assert msg.startswith("unknown model 'no-such-model'; registered: demo, efficientnet_lite0, ")
    assert msg.endswith("or give a path to a .pt2 / TorchScript .pt / .onnx file")


def test_the_listed_names_are_the_sources_names_in_their_order():
    names = [m.name for m in registry.list_models()]
    assert names[:2] == ["demo", "efficientnet_lite0"] and "resnet50" in names
    assert names == [n for src in registry.SOURCES for n in src.names()]
    assert all(registry.is_registered(n) for n in names)
    assert not registry.is_registered("model.onnx")


def explain_help(capsys) -> str:
    """``limecraft explain --help`` as printed, on one line."""
    from limecraft.cli import main

    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_the_uploader_and_the_cli_read_the_file_formats_of_the_sources(capsys):
    files = [src.format for src in registry.SOURCES if src.format is not None]
    assert set(files) == set(formats.FILE_FORMATS)
    assert formats.suffixes() == (".onnx", ".pt2", ".pt", ".pth", ".ts", ".bin")
    assert "registry name, or a model file: " + formats.in_words() in explain_help(capsys)


def _toy_source() -> Source:
    """A toy model source: ``toy:<classes>`` names a ChannelMeans model with that many
    classes, at 32 px, with its own class names."""

    def classes(spec: str) -> int:
        return int(spec.split(":", 1)[1])

    def info(spec: str) -> ModelInfo:
        return ModelInfo(spec, "toy", 32, classes(spec), "none", True, "", "a toy model")

    return Source(
        "toy",
        matches=lambda spec, arch: spec.startswith("toy:") and arch is None,
        info=info,
        load=lambda spec, *_: ChannelMeans(classes=classes(spec)),
        fit=lambda spec, module, ask: dict(
            input_size=ask.input_size or 32,
            normalize="none",
            labels=ask.labels or [f"toy {i}" for i in range(classes(spec))],
            name=spec,
        ),
        names=lambda: ("toy:3",),
        format=None,
    )


def test_a_toy_source_and_format_added_to_the_tables_alone_are_used_everywhere(monkeypatch, capsys):
    monkeypatch.setattr(registry, "SOURCES", [_toy_source(), *registry.SOURCES])
    toy_files = formats.FileFormat("toy", (".toy",), "a .toy file (a toy)")
    monkeypatch.setattr(formats, "FILE_FORMATS", (*formats.FILE_FORMATS, toy_files))

    assert registry.is_registered("toy:3") and not registry.is_registered("toy:9")
    assert registry.model_info("toy:5").num_classes == 5
    assert "toy:3" in [m.name for m in registry.list_models()]
    clf = registry.load_classifier("toy:4")
    assert clf.name == "toy:4" and clf.labels == ("toy 0", "toy 1", "toy 2", "toy 3")
    assert registry.load_module("toy:4") is registry.load_module("toy:4")  # cached once
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)
    ex = explain(image, clf, segmentation="grid", n_segments=4, samples=30)
    assert ex.class_labels[0].startswith("toy ") and ex.class_weights.shape[1] == ex.n_regions
    # the new file format is offered by the CLI's help and the app's uploader list
    assert ".toy" in formats.suffixes()
    assert "a .toy file (a toy)" in explain_help(capsys)


def test_a_source_is_a_frozen_record():
    src = registry.SOURCES[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        src.kind = "other"  # type: ignore[misc]
