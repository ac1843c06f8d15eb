"""Audit: where does the model look across a dataset? Run an audit (the demo set, or a zip of
images and masks), or open one the command line made; read the proved findings first (as
audit.html), then the location map and the flagged images; open an exemplar on Inspect with the
finding's region named, paste a finding into other images, or open any image with its regions."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import streamlit as st

import limecraft_core as lc
from limecraft_core import render
from limecraft_core.audit import (
    FLAG_TEXT,
    REMOVAL_MARGIN,
    AuditRow,
    Finding,
    audit_config,
    sort_rows,
)
from limecraft_core.audit.findings import EXEMPLARS, RISK_RULE
from limecraft_core.audit.proof import CAUSE_MARGIN
from limecraft_core.io import audit_folder, dataset
from limecraft_core.io.audit_folder import LoadedAudit
from limecraft_core.io.audit_report import data_url
from limecraft_core.proposers import AUDIT_PROPOSERS, audit_proposers, check_proposer_names
from pages.lib import analysis as A
from pages.lib import audits, config_form, display, frame, identity, propose_view, state, truth_view
from pages.lib.session import session

frame.start()  # the sidebar and the page's frame, inside this page's run (pages/lib/frame.py)

SOURCES = ("The demo set", "Upload images", "Open a finished audit")
PREFIX = "au_"  # the audit's own copies of the settings widgets


def current() -> tuple[str, Path] | None:
    """This session's audit (in the page address as ``?audit=``) when this account may open it."""
    aid = session().audit_id or st.query_params.get("audit")
    folder = audits.folder_of(aid, state.owner()) if aid else None
    if aid and folder is None:
        audits.remember(None)
        st.info("That audit is not here any more (or is another account's).")
    return (aid, folder) if folder is not None else None


def pick_mine(key: str, ids: list[str]) -> None:
    """ "Your audits" changed: that audit becomes this session's. A value that is none of the
    listed ids (an option's label that Streamlit could not match to this run's options) is not
    taken for an id."""
    picked = st.session_state.get(key)
    if picked in ids:
        audits.remember(picked)


def settings_controls() -> lc.ExplainConfig:
    """The audit's settings: its regions (SLIC, about 40, unless changed), the sampling and the
    fill (inpaint, unless changed); the others are the defaults."""
    base = session().audit_config or audit_config()
    with st.expander("Settings", expanded=False):
        values = config_form.settings_form(base, audits.AUDIT_SETTINGS, prefix=PREFIX)
        st.caption(
            "The other settings are the defaults (the command line takes every one of them). "
            f"{audits.IN_FLIGHT} images are explained at once and share the model's passes."
        )
    try:
        cfg = audit_config({**base.flat(), **values})
    except lc.LimecraftError as e:
        display.error(f"These settings do not fit together: {e}")
        return base
    session().audit_config = cfg
    return cfg


def proposer_control() -> None:
    """Detectors whose regions every image gets beside the superpixels: the audit's default
    (text that reads as a word, where the detector is installed; docs/audit.md)."""
    st.multiselect(
        "Regions proposed by a detector", propose_view.offered(),
        default=audit_proposers(), key="audit_propose",
        format_func=lambda n: f"{n}: {lc.PROPOSERS[n].help}",
        placeholder="None: superpixels only",
        help="Each image gets the detector's regions, named as proposed, beside the "
        "superpixels: a thin artifact (a watermark's text) becomes one region that the audit "
        "can group across images. text-lines leaves out a lone glyph (a drawn star, a tag).",
    )  # fmt: skip
    if off := [n for n in AUDIT_PROPOSERS if n not in audit_proposers()]:  # e.g. Python 3.13
        st.caption(f"The audit's default, {', '.join(off)}, is off here: its detector is not "
                   f"installed (`{lc.PROPOSERS[off[0]].pip}`, Python < 3.13). The audit runs on "
                   "superpixels alone.")  # fmt: skip


def start(source: str, cfg: lc.ExplainConfig) -> None:
    """Create the audit from the chosen source and run it."""
    s = state.get()
    demo = source == SOURCES[0]
    ref = identity.ModelRef("demo") if demo else A.model_ref(s)
    model = {"name": ref.name, "labels": list(ref.labels) if ref.labels else None,
             "arch": ref.arch, "normalize": ref.normalize}  # fmt: skip
    if demo:
        n = int(st.session_state.get("audit_demo_count", audits.DEMO_COUNT))
        name = f"the demo set ({n} images)"
    else:
        up = st.session_state.get("audit_zip")
        if up is None:
            display.error("Choose a zip of images first.")
            return
        name = up.name
    kind = "demo" if demo else "upload"
    try:
        proposers = tuple(check_proposer_names(st.session_state.get("audit_propose") or []))
    except lc.LimecraftError as e:
        display.error(f"That detector cannot run here: {e}")
        return
    app = audits.AppAudit(kind, name, model, cfg.to_dict(), state.owner(), proposers)
    aid, folder = audits.create(app)
    try:
        app = audits.keep_model(folder, app)  # an uploaded model outlives this session
        if demo:
            audits.write_demo_set(folder, n)
        else:
            audits.write_upload(folder, up.getvalue())
    except (lc.LimecraftError, OSError) as e:
        shutil.rmtree(folder, ignore_errors=True)
        display.error(f"That upload cannot be audited: {e}")
        return
    audits.remember(aid)
    run_it(folder, app)


def run_it(folder: Path, app: audits.AppAudit) -> None:
    try:
        audits.run(folder, app)
    except (lc.LimecraftError, lc.ModelError) as e:
        display.error(f"The audit stopped: {e}. The images finished so far are kept.")
        return
    st.rerun()


def open_finished() -> None:
    """A zip or a folder of an audit the command line made, opened here."""
    up = st.session_state.get("audit_open_zip")
    files = st.session_state.get("audit_open_dir") or []
    if up is None and not files:
        display.error("Choose the audit's zip, or its folder, first.")
        return
    name = up.name if up is not None else files[0].name.split("/")[0]
    app = audits.AppAudit("opened", name, {}, {}, state.owner())
    aid, folder = audits.create(app)
    inbox = folder / "opened"  # unpacked apart: nothing in it can replace the audit's own files
    try:
        if up is not None:
            dataset.unpack_zip(up.getvalue(), inbox)
        else:
            audits.write_files(inbox, [(f.name, f.getvalue()) for f in files])
        opened = audit_folder.load_audit(inbox)
    except lc.LimecraftError as e:
        shutil.rmtree(folder, ignore_errors=True)
        display.error(f"That audit could not be opened: {e}")
        return
    for part in ("audit.json", "audit.csv", "audit.html", "images"):
        if (opened.folder.path / part).exists():
            (opened.folder.path / part).rename(folder / part)
    shutil.rmtree(inbox, ignore_errors=True)
    model = {"name": str(opened.model.get("name") or "demo")}
    audits.write_app(folder, audits.AppAudit("opened", name, model, opened.config.to_dict()))
    audits.remember(aid)
    st.rerun()


def _pct(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(100 * x, 1)


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None or not math.isfinite(x) else format(x, fmt)


def intervention_view(f: Finding) -> None:
    """The finding's removal and insertion against their nulls, the margins and the verdict."""
    iv = f.intervention
    if iv is None:
        st.caption("Not proved by intervention.")
        return
    st.markdown(
        "| test | the finding's region | the null | margin | needed |\n|---|--:|--:|--:|---|\n"
        f"| removal: the class's mean drop when hidden ({iv.images} images) | "
        f"{_num(iv.removal_mean, '.3f')} | {_num(iv.removal_null_mean, '.3f')} | "
        f"{_num(iv.removal_margin, '+.3f')} | ≥ {REMOVAL_MARGIN} |\n"
        f"| insertion: the class's mean gain when pasted into {iv.clean_images} clean images | "
        f"{_num(iv.mean_gain, '+.3f')} | {_num(iv.null_gain, '+.3f')} | "
        f"{_num(iv.mean_gain - iv.null_gain, '+.3f')} | ≥ {CAUSE_MARGIN} or a flip, beating "
        f"the null in most images (verdict: {iv.insertion}) |\n"
        f"| insertion: flip rate to the class | {_num(iv.flip_rate, '.0%')} | — | — | |"
    )
    verdict = f"**{iv.verdict.capitalize()} against the null.**"
    (st.error if iv.confirmed else st.info)(verdict, icon=":material/science:")


def finding_card(folder: Path, audit: LoadedAudit, i: int, f: Finding) -> str | None:
    """One finding as audit.html shows it, with "Open in Inspect" on each exemplar and "Paste
    into other images"; returns the action asked for (``open:<key>`` or ``paste``), if any."""
    act = None
    with st.container(border=True):
        st.markdown(f"**Finding {i + 1}** · {display.md(f.kind)}")
        st.markdown(display.md(f.sentence))
        st.markdown(
            f"risk **{f.risk}** ({', '.join(f.indicators) or 'no indicator'})",
            help=f"The rule: {RISK_RULE}",
        )
        shares = ", ".join(f"{n} '{display.md(c)}' ({s:.0%})" for c, n, s in f.classes)
        st.markdown(
            f"Prevalence: {f.images} images ({f.coverage:.0%} of those explained); {shares}; "
            f"{f.class_coverage:.0%} of its main class's images."
        )
        intervention_view(f)
        if f.truth is not None:
            t = f.truth
            st.markdown(
                f"Against your truth ({t.images} images, {t.positives} with the artifact): "
                f"AUROC {t.auroc:.2f}, AP {t.ap:.2f}."
            )
        pics = audits.exemplars(audit, f)
        if pics:
            cols = st.columns(EXEMPLARS)
            for j, (key, pic) in enumerate(pics):
                with cols[j]:
                    file = audit.row(key).file
                    cap = f"{file} (medoid)" if key == f.medoid else file
                    st.image(display.to_display(pic, 160), caption=cap)
                    if st.button("Open in Inspect", key=f"audit_f{i}_open_{j}"):
                        act = f"open:{key}"
        more = [k for k, _ in f.more_carriers]
        if more:
            label = f"Also carried by {len(more)} more image" + ("s" if len(more) != 1 else "")
            with st.expander(label, icon=":material/search:"):
                st.caption("The same region, where it is not among the image's strongest.")
                pick = st.selectbox(
                    "Carrier image", more, format_func=lambda k: audit.row(k).file,
                    key=f"audit_f{i}_carrier",
                )  # fmt: skip
                for _, pic in audits.exemplars(audit, f, [pick]):
                    st.image(display.to_display(pic, 160), caption=audit.row(pick).file)
                if st.button("Open in Inspect", key=f"audit_f{i}_open_carrier"):
                    act = f"open:{pick}"
        if st.button(
            "Paste into other images",
            key=f"audit_f{i}_paste",
            help="Inspect's paste, from the medoid: its region of the finding chosen to paste and "
            "the suspect class to follow",
        ):
            act = "paste"
    return act


def discovered_view(folder: Path, audit: LoadedAudit) -> None:
    """The findings across images, first: the headline, then each finding."""
    found = audit.findings
    st.markdown("**Findings across images**")
    confirmed = found.proved and found.discovered and found.discovered[0].confirmed
    calm = not found.discovered or (found.proved and not confirmed)
    (st.success if calm else st.error)(
        found.headline, icon=":material/check_circle:" if calm else ":material/flag:"
    )
    for i, f in enumerate(found.discovered):
        act = finding_card(folder, audit, i, f)
        if act is None:
            continue
        try:
            app = audits.read_app(folder)
            if act == "paste":
                audits.paste_from(folder, audit, app, i)
            else:
                audits.open_image(folder, audit, app, act.removeprefix("open:"), i)
        except lc.LimecraftError as e:
            display.error(f"That finding could not be opened: {e}")
            return
        st.switch_page("pages/app_pages/inspect.py")


def findings_view(audit: LoadedAudit) -> None:
    f = audit.findings
    if not f.sentences:
        return
    st.markdown("**In plain sentences**")
    box = st.error if f.flagged else st.success
    box(f.sentences[0], icon=":material/flag:" if f.flagged else ":material/check_circle:")
    st.markdown("\n".join(f"- {display.md(s)}" for s in f.sentences[1:]))
    masked = f.with_masks > 0
    st.caption(
        (
            f"Flagged: {FLAG_TEXT['outside']}: the top region is not one of the regions at least "
            "half inside the expected mask, and hiding it alone removes at least half of the "
            "score. A model that also looks at a marker keeps its prediction when the marker is "
            "hidden, because the object holds it up."
        )
        if masked
        else f"Flagged: {FLAG_TEXT['border']}. Give expected masks to judge against the object."
    )
    if f.location is not None:
        left, right = display.columns([1, 2], gap="large")
        hm = render.location_map(f.location, side=320)
        left.image(hm.image, caption="location map: the mean |weight| per position", width=320)
        with right:
            st.markdown("**Where the model looks across the dataset**")
            st.markdown(
                f"The mean |weight| per position over the {f.ok} explained images, in "
                "normalised image coordinates (each image stretched to the square, its weights "
                "divided by its largest): bright where the explanations put their weight. The "
                f"outer 10% of each side ({f.frame_area:.0%} of the area) holds "
                f"{f.frame_share:.0%} of it; it is strongest at the **{f.peak}**."
            )
            st.image(hm.colorbar, width=256)
            st.caption(f"0 ← → {hm.vmax:.2f} (1: every image's strongest region covers the spot)")
    st.markdown("**By predicted class**")
    st.dataframe(
        {
            "predicted": [c.label for c in f.classes],
            "images": [c.images for c in f.classes],
            "flagged": [c.flagged for c in f.classes],
            "mean score": [c.mean_score for c in f.classes],
            "top region's share of |weight| (%)": [_pct(c.mean_top_share) for c in f.classes],
            "hiding it removes (%)": [_pct(c.mean_dependence) for c in f.classes],
            **(
                {
                    "median relevance mass": [c.median_relevance_mass for c in f.classes],
                    "pointing hits": [c.pointing_hits for c in f.classes],
                }
                if masked
                else {}
            ),
            "top region on the border": [c.border for c in f.classes],
            "stable": [c.stable for c in f.classes],
        },
        hide_index=True,
        width="stretch",
        column_config={
            "mean score": st.column_config.NumberColumn(format="%.3f"),
            "median relevance mass": st.column_config.NumberColumn(format="%.2f"),
        },
    )


#: Rows the page's table shows (flagged first); audit.html and audit.csv hold every one.
TABLE_ROWS = 200


def _thumbnails(audit: LoadedAudit, rows: list[AuditRow]) -> list[tuple[str | None, str | None]]:
    """The rows' thumbnail and overlay as data URLs, read once per loaded audit."""
    ses = session()
    held = ses.audit_thumbs
    if held is None or held[0] is not audit:
        held = ses.audit_thumbs = (audit, {})
    cache = held[1]
    for r in rows:
        if r.key not in cache:
            cache[r.key] = tuple(
                data_url(audit.folder.picture(r.key, name), "image/jpeg")
                for name in ("thumb.jpg", "overlay.jpg")
            )
    return [cache[r.key] for r in rows]


def images_view(audit: LoadedAudit) -> list[AuditRow]:
    every = sort_rows(audit.rows)
    rows = every[:TABLE_ROWS]
    masked = audit.findings.with_masks > 0
    st.markdown(f"**Every image, flagged first** ({len(every)})")
    if len(every) > len(rows):
        st.caption(
            f"The first {len(rows)} of {len(every)} are shown here; audit.html and audit.csv "
            "(below) hold every one."
        )
    pictures = _thumbnails(audit, rows)
    table = {
        "flag": ["flagged" if r.flagged else ("error" if not r.ok else "") for r in rows],
        "image": [p[0] for p in pictures],
        "overlay": [p[1] for p in pictures],
        "file": [r.file for r in rows],
        "predicted": [r.label for r in rows],
        "score": [r.score if r.ok else None for r in rows],
        "hiding the top region removes (%)": [_pct(r.dependence) for r in rows],
        "top region on the border": [r.top_touches_border if r.ok else None for r in rows],
    }
    if masked:
        table["relevance mass"] = [r.relevance_mass for r in rows]
        table["pointing game"] = [
            None if r.pointing_game is None else ("hit" if r.pointing_game else "miss")
            for r in rows
        ]
    table["verdict"] = [r.verdict for r in rows]
    table["why"] = [r.reason or r.error for r in rows]
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        height=min(600, 40 + 65 * len(rows)),
        row_height=64,
        column_config={
            "image": st.column_config.ImageColumn("image", width="small"),
            "overlay": st.column_config.ImageColumn("overlay", width="small"),
            "score": st.column_config.NumberColumn(format="%.3f"),
            "relevance mass": st.column_config.NumberColumn(format="%.2f"),
        },
    )
    return every


def one_image(folder: Path, audit: LoadedAudit, rows: list) -> None:
    ok = [r for r in rows if r.ok]
    if not ok:
        return
    st.subheader("Look at one image")

    def label(key: str) -> str:
        r = audit.row(key)
        mark = "⚑ " if r.flagged else ""
        return f"{mark}{r.file} · {r.label} {r.score:.2f}"

    key = st.selectbox(
        "Image", [r.key for r in ok], format_func=label, key="audit_pick",
        help="Flagged images first",
    )  # fmt: skip
    r = audit.row(key)
    pic, facts = display.columns([1, 1])
    with pic:
        over = audit.folder.picture(key, "overlay.png")
        if over is not None:
            st.image(over, caption=f"{r.file}: the top regions for and against {r.label}")
    with facts:
        st.markdown(
            f"**{display.md(r.file)}** · predicted **{display.md(r.label)}** ({r.score:.3f})  \n"
            f"top region: {display.md(r.top_words)} · "
            f"{audits.share(r.top_share)} of the |weight| · hiding it alone removes "
            f"{audits.share(r.dependence)} of the score"
            + (" · it touches the border" if r.top_touches_border else "")
        )
        if r.has_mask:
            st.markdown(
                f"relevance mass inside the expected region: **{r.relevance_mass:.2f}** · "
                f"pointing game: **{'hit' if r.pointing_game else 'miss'}**"
            )
        st.markdown(f"stability: {display.VERDICT_TEXT.get(r.verdict, r.verdict)}")
        if r.flagged:
            st.warning(f"Flagged: {r.reason}.", icon=":material/flag:")
        st.caption(
            "Open it with the audit's regions"
            + (" and its expected mask" if r.has_mask else "")
            + ": Inspect is where you remove or change the top region and watch the prediction."
        )
        row = st.container(horizontal=True)
        to_explain = row.button("Open in Explain", key="audit_open_explain")
        to_inspect = row.button("Open in Inspect", key="audit_open_inspect", type="primary")
    if to_explain or to_inspect:
        try:
            audits.open_image(folder, audit, audits.read_app(folder), key)
        except lc.LimecraftError as e:
            display.error(f"That image could not be opened: {e}")
            return
        target = "inspect.py" if to_inspect else "explain.py"
        st.switch_page(f"pages/app_pages/{target}")


def downloads(audit: LoadedAudit) -> None:
    row = st.container(horizontal=True)
    for name, mime in (
        ("audit.html", "text/html"),
        ("audit.csv", "text/csv"),
        ("audit.json", "application/json"),
    ):
        p = audit.folder.path / name
        if p.exists():
            row.download_button(
                f"Download {name}", p.read_bytes(), file_name=name, mime=mime,
                key=f"audit_dl_{name}",
            )  # fmt: skip


st.title("Audit")
st.caption(
    "Across a dataset, does the model look at the object, or at something that should not "
    "matter (a ruler, a hospital's marker, a watermark, the demo images' tag)?"
)
here = current()
with st.container(border=True):
    st.markdown("**Start an audit**")
    source = st.segmented_control(
        "Images", SOURCES, default=SOURCES[0], key="audit_source", label_visibility="collapsed"
    )
    if source == SOURCES[0]:
        st.number_input(
            "Images in the demo set", 4, 200, audits.DEMO_COUNT, 2, key="audit_demo_count",
            help="Half aligned (the tag names the drawn shape), half conflict (it names another)",
        )  # fmt: skip
        st.caption(
            "Fresh demo images, audited with the demo model; each image's drawn shape is its "
            "expected mask. The model was trained where a coloured tag names the class: does "
            "the audit catch it reading the tag?"
        )
    elif source == SOURCES[1]:
        st.file_uploader(
            "A zip of images",
            type=["zip"],
            key="audit_zip",
            help="Images (PNG, JPEG, WebP, BMP, TIFF, GIF) anywhere in the zip, or in a folder "
            "images/; expected masks, named as their images, in a folder masks/",
        )
        model = A.model_ref(state.get()).display_name
        st.caption(f"Audited with the model chosen in the sidebar: {display.md(model)}.")
    else:
        st.file_uploader(
            "The audit's folder, zipped", type=["zip"], key="audit_open_zip",
            help="The --out folder of python -m limecraft audit (audit.json and images/)",
        )  # fmt: skip
        st.file_uploader(
            "or the folder itself", accept_multiple_files="directory", key="audit_open_dir"
        )
    if source != SOURCES[2]:
        proposer_control()
    cfg = settings_controls() if source != SOURCES[2] else None
    if source == SOURCES[2]:
        if st.button("Open the audit", key="audit_open", type="primary"):
            open_finished()
    elif st.button("Run the audit", key="audit_run", type="primary"):
        start(source, cfg)

mine = audits.mine(state.owner())
if mine:
    names = {
        aid: f"{app.name} · {time.strftime('%d %b %H:%M', time.localtime(t))}"
        for aid, app, t in mine
    }
    st.selectbox(
        "Your audits",
        list(names),
        index=list(names).index(here[0]) if here and here[0] in names else None,
        format_func=names.get,
        key=f"audit_pick_mine-{here[0] if here else ''}",
        on_change=pick_mine,
        args=(f"audit_pick_mine-{here[0] if here else ''}", list(names)),
        placeholder="open one of your earlier audits",
    )
if here is None:
    st.stop()
aid, folder = here
app = audits.read_app(folder)
# an audit run here can be resumed; one opened from the command line's folder is read as it is
resumable = app is not None and app.source != "opened" and audits.dataset(folder).is_dir()
p = audits.plan(folder, app) if resumable else None
if p is not None and p.todo:  # stopped (Cancel, a reload, a failure) before its end
    try:
        written = len(audits.loaded(folder).rows)
    except lc.LimecraftError:
        written = -1
    if written != len(p.done):  # the findings so far, from the finished images
        audits.write_findings(folder, app, p)
    st.info(
        f"This audit stopped after {len(p.done)} of {len(p.items)} images; the finished ones "
        "are kept, and the findings below are theirs.",
        icon=":material/pause_circle:",
    )
    if st.button(f"Resume the audit ({len(p.todo)} to go)", key="audit_resume", type="primary"):
        run_it(folder, app)
try:
    audit = audits.loaded(folder)
except lc.LimecraftError as e:
    if p is None or not p.todo:
        display.error(f"This audit cannot be read: {e}")
    st.stop()
st.divider()
st.subheader(f"Findings · {display.md(app.name if app else audit.source.get('images', ''))}")
st.caption(
    f"model {display.md(audit.model.get('name', ''))} · {audit.findings.images} "
    + ("image" if audit.findings.images == 1 else "images")
    + (f" · {audit.created}" if audit.created else "")
)
if resumable and not (p and p.todo) and audit.complete and not audit.findings.proved:
    st.info(
        "The findings below are not proved yet (the audit was stopped while proving them).",
        icon=":material/science:",
    )
    if st.button("Prove the findings", key="audit_prove", type="primary"):
        try:
            audits.prove(folder, app)
        except (lc.LimecraftError, lc.ModelError) as e:
            display.error(f"The findings could not be proved: {e}")
        else:
            st.rerun()
discovered_view(folder, audit)
truth_view.show(aid, folder, audit)
findings_view(audit)
rows = images_view(audit)
one_image(folder, audit, rows)
st.divider()
downloads(audit)
