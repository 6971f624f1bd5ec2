"""Presenter mode (``?present=1``, on every page): large type and figures for a projector, the
sidebar collapsed, and a QR code of the view's URL so that the room opens exactly what the
presenter shows.

    token = presenter.begin()   # in main(), before the page: reads the flag, page config, CSS, toggle
    ...the page...              # (it updates the URL's query parameters at its end)
    presenter.end(token)        # after the page: the QR code of the page's final URL

The QR code is made here, by ``segno`` (pure Python, no outside service). Its URL is the view's
URL *without* ``present`` (learners get the normal page), with every other query parameter the
page ended with. Its address: ``ATTENTION_EXPLORER_PUBLIC_URL`` (a hosted demo behind a proxy:
the public address of the app's root) if set and valid, else the browser's own address
(``st.context.url``), else the request's Host header, else the server's configured address.

The first half of this module is pure (no Streamlit): URL checking and building, and the QR
image; ``tests/test_presenter.py`` tests it directly.
"""
from __future__ import annotations

import io
import ipaddress
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

PARAM = "present"
ENV = "ATTENTION_EXPLORER_PUBLIC_URL"
THEME = "presentation"  # explorer/views/theme.py: the figures' look on the projector
FIGURE_HEIGHT_SCALE = 1.25  # the figures grow with their type
ROOT_PX = 24  # the projector's type: the page's root font size (CSS below); Streamlit sizes text in rem
QR_PX = 360  # the QR image's width on screen, about (whole modules)
MAX_URL = 4000  # longer bases/hosts are refused; longer share URLs simply do not fit a QR code

log = logging.getLogger("attention_explorer")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


# --- pure: flags, addresses, URLs, the QR image ------------------------------------------------

def is_on(value) -> bool:
    """The URL's ``present`` value: on for 1/true/yes/on (any case), off for anything else."""
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def _host(host: str) -> str | None:
    """A host name or IP literal as it may appear in a URL, or None."""
    if host.startswith("["):  # IPv6 literal
        if not host.endswith("]"):
            return None
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    try:
        host = host.encode("idna").decode("ascii").lower()  # a non-ASCII name: its punycode
    except (UnicodeError, ValueError):
        return None
    host = host.removesuffix(".")
    if not host or len(host) > 253 or not all(_LABEL.match(label) for label in host.split(".")):
        return None
    return host


def clean_base(url) -> str | None:
    """``scheme://host[:port][/path]`` from ``url`` (no trailing slash, no query, no fragment), or
    None when ``url`` is not a plain http(s) address: other schemes (javascript:, data:, file:),
    user names or passwords (``https://good@evil``), spaces, control characters, backslashes, bad
    ports and hosts that are not host names or IP addresses are all refused, not repaired."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    if not url or len(url) > MAX_URL or any(c.isspace() or not c.isprintable() or c in "\\<>\"'`{}|^"
                                            for c in url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or "@" in parts.netloc or not parts.hostname:
        return None
    netloc_host = parts.netloc.rsplit(":", 1)[0] if port is not None or parts.netloc.endswith(":") \
        else parts.netloc
    host = _host(netloc_host)
    if host is None or (port is not None and not 0 < port < 65536):
        return None
    path = quote(unquote(parts.path), safe="/-._~!$&()*+,;=:@").rstrip("/")
    return f"{parts.scheme.lower()}://{host}{'' if port is None else f':{port}'}{path}"


def page_path(context_url: str | None, base_url_path: str = "") -> str:
    """The page's own path ("" for the main page, "lessons", ...): the browser's path without the
    server's ``server.baseUrlPath``."""
    base = clean_base(context_url)
    if base is None:
        return ""
    path = urlsplit(base).path.strip("/")
    prefix = (base_url_path or "").strip("/")
    if prefix and (path == prefix or path.startswith(prefix + "/")):
        path = path[len(prefix):].strip("/")
    return path


def choose_base(*, env: str | None, context_url: str | None, host: str | None = None,
                proto: str | None = None, base_url_path: str = "", fallback: str = "http://localhost:8501"
                ) -> str:
    """The address the QR code points to, without query: the environment's public URL (the app's
    root) with the page's path added, else the browser's, else ``proto://host`` from the request
    (+ baseUrlPath and the page's path), else ``fallback``. A value that is not a plain http(s)
    address is skipped. The main page's address ends in "/" (``https://host/``, ``https://host/ae/``);
    another page's does not (``https://host/ae/lessons``)."""
    page = page_path(context_url, base_url_path)

    def at(root: str) -> str:
        return f"{root.rstrip('/')}/{page}"

    env_base = clean_base(env) if env else None
    if env and env_base is None:
        log.warning("%s is not a plain http(s) address; using the browser's address", ENV)
    if env_base:
        return at(env_base)
    ctx = clean_base(context_url)
    if ctx:
        return at(ctx.removesuffix("/" + page) if page else ctx)
    scheme = "https" if str(proto or "").strip().lower() == "https" else "http"
    prefix = (base_url_path or "").strip("/")
    # a Host header is host[:port] only: anything with a path, user or query in it is refused
    host = host if isinstance(host, str) and not any(c in host for c in "/?#@") else None
    for candidate in ((f"{scheme}://{host}" if host else None), fallback):
        b = clean_base(candidate)
        if b:
            return at(f"{b}/{prefix}" if prefix else b)
    return at("http://localhost:8501")


def share_url(base: str, params: Iterable[tuple[str, str]] | dict) -> str:
    """``base`` with the query ``params`` (pairs in order, or a dict of value or list of values),
    every pair kept except ``present``; keys and values percent-encoded as UTF-8 (Korean, spaces,
    newlines, ``&``, ``#``, ``<``: all escaped). ``base`` must be a plain http(s) address
    (``clean_base``); its trailing "/" is kept, and a bare host gets one (``https://host/?a=1``)."""
    clean = clean_base(base)
    if clean is None:
        raise ValueError(f"not a plain http(s) address: {str(base)[:80]!r}")
    if base.strip().endswith("/") or not urlsplit(clean).path:
        clean += "/"
    if isinstance(params, dict):
        pairs = [(k, x) for k, v in params.items() for x in (v if isinstance(v, (list, tuple)) else [v])]
    else:
        pairs = list(params)
    query = "&".join(f"{quote(str(k), safe='')}={quote(str(v), safe='')}" for k, v in pairs if k != PARAM)
    return f"{clean}?{query}" if query else clean


@dataclass(frozen=True)
class QR:
    png: bytes
    modules: int  # the symbol's width in modules, quiet zone included
    scale: int  # pixels per module
    version: int


def qr_png(url: str, *, width: int = QR_PX) -> QR | None:
    """The QR code of ``url`` as a PNG about ``width`` pixels wide (whole pixels per module, so it
    stays sharp), or None when ``url`` is too long for any QR code."""
    import segno  # noqa: PLC0415 (only presenter mode needs it)

    try:
        code = segno.make(url, error="l", micro=False, boost_error=True)
    except segno.DataOverflowError:
        return None
    modules = code.symbol_size(scale=1, border=4)[0]
    scale = max(2, width // modules)
    buf = io.BytesIO()
    code.save(buf, kind="png", scale=scale, border=4, dark="#000000", light="#ffffff")
    return QR(buf.getvalue(), modules, scale, int(code.version))


def presented(fig):
    """``fig`` as the projector shows it: the presentation theme (explorer/views/theme.py) and
    FIGURE_HEIGHT_SCALE taller. A shared figure (the app's figure memo: never mutated) keeps its
    themed copy, made once: theming costs ~60 ms a figure, about twenty a page, on every rerun."""
    from explorer.views.theme import apply_theme  # noqa: PLC0415

    own = getattr(fig, "__dict__", None)
    shared = own is not None and own.get("_frozen") is not None
    if shared and own.get("_presented") is not None:
        return own["_presented"]
    out = apply_theme(fig, THEME)
    if out.layout.height:
        out.update_layout(height=round(out.layout.height * FIGURE_HEIGHT_SCALE))
    pin_rem_sizes(out)
    if shared:
        own["_presented"] = out
    return out


# Streamlit's plotly theme (st.plotly_chart's default, theme="streamlit") fills the sizes a figure
# leaves unset from its own sizes in rem, converted to pixels from the page's root font size *when the
# chart first draws*, and never again. Presenter mode raises the root font size with CSS that may land
# before or after the first figure draws (the order is Streamlit's): drawn before, the colour bar's
# padding, the axis titles' standoff and the margins' padding stay at 16 px sizes, the plot area is
# 40 px wider, and it stays so for that page. Measured: 1 page load in 8-20 beside two busy cores.
# These are the sizes Streamlit's plotly theme gives at ROOT_PX, written into the figure, where the
# figure's own values win over any theme, whenever the CSS lands. (name: rem) from the theme's source
# (streamlit 1.67, frontend PlotlyChart: fontSizes twoSm 0.75, sm 0.875, md 1; spacing twoXS 0.25,
# sm 0.5, xl 1.25, twoXL 1.5; tests/test_presenter.py reads them from the installed Streamlit).
_REM_SIZES = {
    "layout": {"font.size": 0.75, "title.font.size": 1.0, "title.pad.l": 0.25, "legend.font.size": 0.75,
               "legend.title.font.size": 0.75, "margin.pad": 0.5, "hoverlabel.font.size": 0.75},
    "xaxis": {"title.font.size": 0.875, "title.standoff": 1.25, "tickfont.size": 0.75},
    "yaxis": {"title.font.size": 0.875, "title.standoff": 1.5, "tickfont.size": 0.75},
    "coloraxis": {"colorbar.xpad": 1.5, "colorbar.title.font.size": 0.875, "colorbar.tickfont.size": 0.75},
}


def pin_rem_sizes(fig, root_px: int = ROOT_PX) -> None:
    """Write into ``fig`` (in place) each size Streamlit's plotly theme would otherwise compute from
    the root font size at draw time (``_REM_SIZES``), as pixels at ``root_px``; a size the figure
    sets itself is kept. All in one update of the layout: plotly validates each update, and one per
    size cost twice as much (bench/results/presenter-race-20261129.txt)."""
    own = fig.layout.to_plotly_json()
    holders = [("layout", "", own)] + [(key.rstrip("0123456789"), key, own[key]) for key in own
                                       if key.rstrip("0123456789") in ("xaxis", "yaxis", "coloraxis")]
    named = {key for _, key, _ in holders}
    used = {"xaxis", "yaxis"}  # the default axes, drawn whether or not the figure names them
    for trace in fig.data:  # colour axes named only by their traces
        for holder in (trace, getattr(trace, "marker", None)):
            ref = getattr(holder, "coloraxis", None) if holder is not None else None
            if ref:
                used.add(ref)
    holders += [(key.rstrip("0123456789"), key, {}) for key in sorted(used - named)]
    update: dict = {}
    for kind, key, values in holders:
        for path, rem in _REM_SIZES[kind].items():
            parts = path.split(".")
            node = values
            for part in parts:
                node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                target = update.setdefault(key, {}) if key else update
                for part in parts[:-1]:
                    target = target.setdefault(part, {})
                target[parts[-1]] = round(rem * root_px)
    if update:
        fig.update_layout(update)


# --- on the page -----------------------------------------------------------------------------

STATE = "_present"  # the flag, for the whole session (the URL follows it)
TOGGLE_ON, TOGGLE_OFF = "present_toggle_on", "present_toggle_off"
# constant CSS (no user text): larger type everywhere (Streamlit sizes text in rem), the download
# buttons under the figures hidden (leave presenter mode to download), and the help icons at 1rem
# (Streamlit sets their size in pixels from the root font size when they first draw, which may be
# before this CSS lands: 16 or 24 px from one page load to the next)
CSS = f"<style>\nhtml {{ font-size: {ROOT_PX}px; }}" + """
.stMainBlockContainer { padding-left: 2rem; padding-right: 2rem; max-width: 100%; }
[data-testid="stDownloadButton"] { display: none; }
.st-key-presenter-qr img { image-rendering: pixelated; }
[data-testid="stTooltipIcon"] svg { width: 1rem; height: 1rem; }
</style>"""


@dataclass
class Token:
    on: bool
    slot: object | None  # the placeholder the QR code goes into (presenter mode only)
    bar: object | None = None  # the bar at the top (explorer/poll_ui.py adds its button to it)
    ask: object | None = None  # the "Ask the class" button's contents (explorer/poll_ui.py)
    panel: object | None = None  # where a poll opened to the class is shown, above the page


def active() -> bool:
    """Whether this page run is in presenter mode (export_ui.display_figure asks)."""
    import streamlit as st  # noqa: PLC0415

    try:
        return bool(st.session_state.get(STATE, False))
    except Exception:  # outside a script run (tests of the view helpers)
        return False


def _lang() -> str:
    import streamlit as st  # noqa: PLC0415

    from explorer import i18n  # noqa: PLC0415

    return i18n.lang_or_default(st.session_state.get("lang") or st.query_params.get("lang"))


def _set(on: bool) -> None:
    import streamlit as st  # noqa: PLC0415

    st.session_state[STATE] = on


def begin() -> Token:
    """Before the page: the flag (the URL's ``present`` on the session's first run, the toggle
    after), the sidebar's state, the large type, the toggle and a place for the QR code."""
    import streamlit as st  # noqa: PLC0415

    from explorer import i18n  # noqa: PLC0415

    if STATE not in st.session_state:
        try:
            st.session_state[STATE] = is_on(st.query_params.get_all(PARAM))
        except Exception:  # a malformed URL is no reason to fail
            st.session_state[STATE] = False
    on = active()
    st.set_page_config(initial_sidebar_state="collapsed" if on else "auto")
    # the URL follows the flag (the page's own URL syncing touches only its parameters; a page
    # switch drops the query, and the flag comes back here)
    if on and st.query_params.get(PARAM) != "1":
        st.query_params[PARAM] = "1"
    elif not on and PARAM in st.query_params:
        del st.query_params[PARAM]
    lang = _lang()
    if not on:
        st.session_state[TOGGLE_OFF] = False
        st.sidebar.toggle(i18n.t("present.toggle", lang), key=TOGGLE_OFF, help=i18n.t("present.help", lang),
                          on_change=lambda: _set(bool(st.session_state.get(TOGGLE_OFF))))
        return Token(False, None)
    st.html(CSS)
    bar = st.container(key="presenter-bar", horizontal=True, vertical_alignment="top", gap="large")
    st.session_state[TOGGLE_ON] = True
    bar.toggle(i18n.t("present.toggle", lang), key=TOGGLE_ON, help=i18n.t("present.help", lang),
               on_change=lambda: _set(bool(st.session_state.get(TOGGLE_ON))))
    # the QR code opens from a button, so that the view's figure, not the code, fills the projector
    # when the page opens (at 1920x1080 the code and its URL took the first 400 px)
    share = bar.popover(i18n.t("present.share", lang), icon=":material/qr_code_2:")
    return Token(True, share.empty(), bar=bar)


def current_url() -> str:
    """The URL the room should open: this page, its query as the page left it, without ``present``."""
    import streamlit as st  # noqa: PLC0415

    def option(name, default=None):
        try:
            return st.get_option(name)
        except Exception:
            return default

    try:
        context_url = st.context.url
        headers = st.context.headers
        host, proto = headers.get("Host"), headers.get("X-Forwarded-Proto")
    except Exception:  # no request (AppTest, a bare script run)
        context_url = host = proto = None
    port = option("browser.serverPort") or option("server.port") or 8501
    address = option("browser.serverAddress") or "localhost"
    base = choose_base(env=os.environ.get(ENV), context_url=context_url, host=host, proto=proto,
                       base_url_path=option("server.baseUrlPath", "") or "",
                       fallback=f"http://{address}:{port}")
    # not "asked": the class poll the presenter shows (explorer/poll_ui.py), which the view's link does not open
    pairs = [(k, v) for k in st.query_params.keys() if k != "asked" for v in st.query_params.get_all(k)]
    return share_url(base, pairs)


def end(token: Token | None) -> None:
    """After the page: the QR code of the page's final URL, and that URL as plain text. Never
    raises (a failure here must not cost the presenter the page)."""
    if token is None or not token.on or token.slot is None:
        return
    from explorer import i18n  # noqa: PLC0415

    try:
        lang = _lang()
        url = current_url()
        qr = qr_png(url)
        box = token.slot.container(key="presenter-qr", horizontal=True, vertical_alignment="center")
        if qr is None:
            box.warning(i18n.t("present.too_long", lang, n=len(url)), icon="⚠️")
        else:
            box.image(qr.png, caption=i18n.t("present.scan", lang), width=qr.scale * qr.modules)
        box.code(url, language=None, wrap_lines=True)  # plain text, never markup
    except Exception:
        log.exception("the presenter's QR code failed")
