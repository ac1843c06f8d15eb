"""The HTML report printed by a real Chromium (Debian's, through Playwright) to an A4 PDF.

The PDF is saved as test-artifacts/report.pdf and the page as test-artifacts/report-screen.png
(look at them). Whether a figure was cut by a page break is read from the PDF itself: Chromium
paints a picture split across two pages on both, each time at its full size and clipped to the
page, so a split picture is drawn partly outside a page. A picture drawn wholly inside its page
was not split.
"""

import base64
import io
import re
import unicodedata
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import ARTIFACTS
from PIL import Image
from test_report import demo_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_OBJ = re.compile(rb"(\d+) 0 obj\b")


def _objects(pdf: bytes) -> dict[int, tuple[bytes, bytes | None]]:
    """Every object of a PDF written without object streams (as Chromium writes them):
    number -> (its dictionary text, its stream's raw bytes or None)."""
    out: dict[int, tuple[bytes, bytes | None]] = {}
    pos = 0
    while m := _OBJ.search(pdf, pos):
        i = m.end()
        end, s = pdf.index(b"endobj", i), pdf.find(b"stream", i)
        if s == -1 or s > end:
            out[int(m.group(1))] = (pdf[i:end], None)
            pos = end
            continue
        head = pdf[i:s]
        length = int(re.search(rb"/Length (\d+)", head).group(1))
        start = s + 6 + (2 if pdf[s + 6 : s + 8] == b"\r\n" else 1)
        out[int(m.group(1))] = (head, pdf[start : start + length])
        pos = pdf.index(b"endobj", start + length)
    return out


def _stream(obj: tuple[bytes, bytes | None]) -> bytes:
    head, data = obj
    return zlib.decompressobj().decompress(data) if b"/FlateDecode" in head else data


def _ref_map(text: bytes, key: bytes) -> dict[bytes, int]:
    m = re.search(rb"/" + key + rb"\s*<<(.*?)>>", text, re.S)
    return {n: int(r) for n, r in re.findall(rb"/(\w+)\s+(\d+) 0 R", m.group(1))} if m else {}


_TOKEN = re.compile(
    rb"\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>|/[^\s/\[\]<>()]+|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+|\[|\]"
)


def _then(m, n):
    """The matrix that applies m, then n (PDF's row-vector order)."""
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def _cmap(data: bytes) -> dict[int, str]:
    """A font's ToUnicode map: glyph code -> text."""
    out: dict[int, str] = {}
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", data, re.S):
        for src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            out[int(src, 16)] = bytes.fromhex(dst.decode()).decode("utf-16-be")
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", data, re.S):
        for lo, hi, dst in re.findall(
            rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block
        ):
            first = bytes.fromhex(dst.decode()).decode("utf-16-be")
            for k in range(int(hi, 16) - int(lo, 16) + 1):
                out[int(lo, 16) + k] = first[:-1] + chr(ord(first[-1]) + k)
    return out


@dataclass(frozen=True)
class PrintedPage:
    """What one PDF page shows: its text (in painting order, without white space) and the
    pictures painted on it (image object, box x0, y0, x1, y1 in points)."""

    text: str
    pictures: list[tuple[int, tuple[float, float, float, float]]]


def read_pdf(pdf: bytes) -> list[PrintedPage]:
    """The pages of a PDF as Chromium writes it (Type0 fonts with ToUnicode maps, Flate
    content streams); also checks that each page is A4."""
    objs = _objects(pdf)
    images = {n for n, (head, _) in objs.items() if b"/Subtype /Image" in head}
    heads = [h for _, (h, _) in sorted(objs.items()) if re.search(rb"/Type\s*/Page(?!s)", h)]
    pages = []
    for head in heads:
        box = [float(v) for v in re.search(rb"/MediaBox\s*\[([^\]]*)\]", head).group(1).split()]
        assert abs(box[2] - 595.3) < 2 and abs(box[3] - 841.9) < 2, box  # A4 in points
        res = re.search(rb"/Resources\s+(\d+) 0 R", head)
        resources = objs[int(res.group(1))][0] if res else head
        xobjects = _ref_map(resources, b"XObject")
        fonts = {}
        for name, ref in _ref_map(resources, b"Font").items():
            uni = re.search(rb"/ToUnicode (\d+) 0 R", objs[ref][0])
            fonts[name] = _cmap(_stream(objs[int(uni.group(1))])) if uni else {}
        refs = re.search(rb"/Contents\s*(\[[^\]]*\]|\d+ 0 R)", head).group(1)
        content = b"".join(_stream(objs[int(r)]) for r in re.findall(rb"(\d+) 0 R", refs))
        ctm, stack, operands, font, text, pictures = _IDENTITY, [], [], {}, [], []
        for tok in _TOKEN.findall(content):
            if not (tok[:1].isalpha() or tok in (b"'", b'"', b"*")):
                operands.append(tok)
                continue
            if tok == b"q":
                stack.append(ctm)
            elif tok == b"Q":
                ctm = stack.pop()
            elif tok == b"cm":
                ctm = _then(tuple(float(v) for v in operands[-6:]), ctm)
            elif tok == b"Tf":
                font = fonts.get(operands[-2][1:], {})
            elif tok in (b"Tj", b"TJ", b"'", b'"'):
                for hexa in (o[1:-1] for o in operands if o.startswith(b"<")):
                    codes = re.sub(rb"\s", b"", hexa)
                    text += [
                        font.get(int(codes[i : i + 4], 16), "") for i in range(0, len(codes), 4)
                    ]
            elif tok == b"Do" and xobjects.get(operands[-1][1:]) in images:
                a, b, c, d, e, f = ctm
                xs, ys = [e, a + e, c + e, a + c + e], [f, b + f, d + f, b + d + f]
                pictures.append((xobjects[operands[-1][1:]], (min(xs), min(ys), max(xs), max(ys))))
            operands = []
        pages.append(PrintedPage(_plain("".join(text)), pictures))
    return pages


_IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def cut_pictures(pages: list[PrintedPage]) -> list[tuple[int, tuple]]:
    """The pictures painted partly outside their page: cut by a page break (Chromium moves a
    picture that fits on a page to the next one whole; one taller than a page is cut)."""
    return [
        (number, box)
        for number, page in enumerate(pages, start=1)
        for _, box in page.pictures
        if box[0] < -1 or box[1] < -1 or box[2] > 596.5 or box[3] > 843.5
    ]


def page_of(pages: list[PrintedPage], text: str) -> set[int]:
    """The pages (from 1) on which ``text`` (white space ignored) is printed in one piece."""
    t = _plain(text)
    return {i for i, p in enumerate(pages, start=1) if t in p.text}


def _plain(text: str) -> str:
    """Text without white space, ligatures spelled out (the PDF has "ﬁ" where the page has "fi")."""
    return re.sub(r"\s", "", unicodedata.normalize("NFKC", text))


def _png(h: int, w: int) -> str:
    buf = io.BytesIO()
    Image.fromarray(np.full((h, w, 3), 90, np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def printed_whole(pages: list[PrintedPage], painted: list[int], block: dict) -> bool:
    """Whether one page holds all of a block: its pictures (``painted`` gives the page of each
    picture, in document order) and each of its texts in one piece."""
    where = {painted[i] for i in block["pictures"]} or set(range(1, len(pages) + 1))
    for t in block["texts"]:
        where &= page_of(pages, t)
    return len(where) >= 1 and len({painted[i] for i in block["pictures"]}) <= 1


_BLOCKS = """(selector) => [...document.querySelectorAll(selector)]
    .filter(b => b.offsetHeight > 0 && !b.parentElement.closest('.edit'))
    .map(b => ({
        pictures: [...b.querySelectorAll('img')].map(i => [...document.images].indexOf(i)),
        texts: [...b.querySelectorAll('figcaption, .legend, h3, table')]
            .filter(t => t.offsetHeight > 0 && !t.parentElement.closest('table'))
            .map(t => t.innerText),
    }))
    .filter(b => b.pictures.length || b.texts.length)"""


def painted_pages(pages: list[PrintedPage]) -> list[int]:
    """The page of each picture painted, in painting order (which is document order)."""
    return [n for n, p in enumerate(pages, start=1) for _ in p.pictures]


def test_the_checks_see_a_cut_picture_and_a_split_figure(page):
    """The checks can fail: a picture taller than a page is cut, and a figure whose caption
    is pushed to the next page is not printed whole."""
    page.set_content(
        f'<img style="display:block" width="300" height="1300" src="{_png(60, 30)}">'
        f'<figure><img style="display:block" width="100" height="100" src="{_png(10, 10)}">'
        '<figcaption style="break-before:page">Caption of the small picture</figcaption>'
        "</figure>"
    )
    pages = read_pdf(page.pdf(format="A4"))
    cut = sorted({n for n, _ in cut_pictures(pages)})
    assert len(cut) == 2 and cut[1] == cut[0] + 1  # on two pages, partly outside each
    [figure] = page.evaluate(_BLOCKS, "figure")
    painted = painted_pages(pages)
    [small] = figure["pictures"]
    assert page_of(pages, "Caption of the small picture") == {painted[small] + 1}
    assert not printed_whole(pages, painted, figure)
    figure["texts"] = []
    assert printed_whole(pages, painted, figure)


def test_report_prints_on_a4_without_cutting_a_figure_or_a_table(page):
    ARTIFACTS.mkdir(exist_ok=True)
    html_path = ARTIFACTS / "report.html"
    html_path.write_text(demo_report(), encoding="utf-8")
    outside = []
    page.on(
        "request",
        lambda r: None if r.url.startswith(("data:", "file:")) else outside.append(r.url),
    )
    page.goto(html_path.as_uri())
    page.wait_for_load_state("load")
    page.screenshot(path=str(ARTIFACTS / "report-screen.png"), full_page=True)
    pdf = page.pdf(format="A4")
    (ARTIFACTS / "report.pdf").write_bytes(pdf)
    assert outside == []  # the report asks for nothing
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    pages = read_pdf(pdf)
    assert len(pages) >= 2
    assert cut_pictures(pages) == []
    painted = painted_pages(pages)
    assert len(painted) == page.evaluate("document.images.length") >= 8

    # In the print layout: every figure (pictures, caption, legend), every edit (pictures,
    # description, prediction changes), and every short table is printed on one page.
    page.emulate_media(media="print")
    blocks = page.evaluate(_BLOCKS, "figure, .edit, .keep, .facts")
    assert len(blocks) >= 9  # 5 figures, the trust table, an edit, the settings, the facts
    for block in blocks:
        assert printed_whole(pages, painted, block), block["texts"]
    # The folded tables are printed open: the full regions table and the full settings list.
    folded = page.evaluate(
        "[...document.querySelectorAll('.print-only')].map(d => [d.offsetHeight,"
        " d.querySelector('h3').innerText])"
    )
    assert len(folded) == 3
    for height, title in folded:
        assert height > 0 and page_of(pages, title), title
    assert page.evaluate("getComputedStyle(document.querySelector('details')).display") == "none"
