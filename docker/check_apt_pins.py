"""Check the Dockerfile's apt pins against Debian's archive today: ``python docker/check_apt_pins.py``.

The image pins ``libgl1`` and ``libglib2.0-0t64`` to exact versions (hadolint's DL3008). Debian
keeps only the newest version of a package in a suite: when a point release or a security update
replaces one, the old version leaves the archive and ``apt-get install pkg=old`` fails the build
with "Version ... was not found" (``libglib2.0-0t64=2.84.4-3~deb13u1`` went that way within
months). This reads each ``"pkg=${ARG}"`` of the Dockerfile's apt lines and the ARG's default,
downloads the package indexes of the base image's suites (Debian 13: trixie, trixie-updates,
trixie-security) and says, for each pin, whether that version is there, and if not which is,
with the ``--build-arg`` to pass. Exit status 1 when a pin is gone. Needs the network.
"""

from __future__ import annotations

import argparse
import lzma
import re
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIRROR = "http://deb.debian.org"
SUITES = (
    ("debian", "trixie"),
    ("debian", "trixie-updates"),
    ("debian-security", "trixie-security"),
)


def pins(dockerfile: str) -> dict[str, tuple[str, str]]:
    """``{package: (ARG name, its default version)}`` for every ``"pkg=${ARG}"`` in the text."""
    defaults = dict(re.findall(r"^ARG\s+(\w+)=(\S+)\s*$", dockerfile, re.M))
    found = re.findall(r'"([a-z0-9][a-z0-9.+-]*)=\$\{(\w+)\}"', dockerfile)
    return {pkg: (arg, defaults.get(arg, "")) for pkg, arg in found}


def versions(index: str, wanted: set[str]) -> dict[str, list[str]]:
    """The versions of the ``wanted`` packages in a Debian ``Packages`` index's text."""
    out: dict[str, list[str]] = {p: [] for p in wanted}
    for stanza in index.split("\n\n"):
        fields = dict(re.findall(r"^(Package|Version): (\S+)$", stanza, re.M))
        pkg = fields.get("Package")
        if pkg in wanted and "Version" in fields and fields["Version"] not in out[pkg]:
            out[pkg].append(fields["Version"])
    return out


def check(pinned: dict[str, tuple[str, str]], available: dict[str, list[str]]) -> list[str]:
    """One line per pin; a line that starts with ``gone`` for a version no suite has. Each
    package's versions come in :data:`SUITES` order, so the last is the newest suite's (a
    security update's, else a point release's): that is the one to pass. Debian's version order
    is not the strings' (``~deb13u10`` comes after ``~deb13u5``), so the suites decide."""
    lines = []
    for pkg, (arg, version) in sorted(pinned.items()):
        have = available.get(pkg, [])
        if version in have:
            lines.append(f"ok    {pkg}={version}")
        elif have:
            lines.append(
                f"gone  {pkg}={version}: the archive has {', '.join(have)}; "
                f"build with --build-arg {arg}={have[-1]} (and update the default)"
            )
        else:
            lines.append(f"gone  {pkg}={version}: no suite has {pkg} at all")
    return lines


def fetch_index(archive: str, suite: str, arch: str) -> str:
    url = f"{MIRROR}/{archive}/dists/{suite}/main/binary-{arch}/Packages.xz"
    with urllib.request.urlopen(url, timeout=120) as r:
        return lzma.decompress(r.read()).decode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dockerfile", default=str(ROOT / "Dockerfile"))
    ap.add_argument("--arch", action="append", help="amd64 and arm64 unless given")
    args = ap.parse_args(argv)
    try:
        pinned = pins(Path(args.dockerfile).read_text())
    except OSError as e:
        print(f"cannot read the Dockerfile: {e}; give its path with --dockerfile", file=sys.stderr)
        return 2
    if not pinned:
        print("no apt pins in", args.dockerfile)
        return 0
    try:
        return _check_all(pinned, args.arch or ["amd64", "arm64"])
    except (OSError, lzma.LZMAError) as e:  # URLError is an OSError
        print(f"cannot read Debian's package indexes from {MIRROR} ({e}); run this where the "
              "archive is reachable", file=sys.stderr)  # fmt: skip
        return 2


def _check_all(pinned: dict[str, tuple[str, str]], archs: list[str]) -> int:
    status = 0
    for arch in archs:
        available: dict[str, list[str]] = {p: [] for p in pinned}
        for archive, suite in SUITES:  # oldest suite first: the newest version comes last
            for pkg, vs in versions(fetch_index(archive, suite, arch), set(pinned)).items():
                available[pkg] += [v for v in vs if v not in available[pkg]]
        print(f"{arch}:")
        for line in check(pinned, available):
            print("  " + line)
            status = 1 if line.startswith("gone") else status
    return status


if __name__ == "__main__":
    sys.exit(main())
