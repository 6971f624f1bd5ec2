"""Presenter mode (explorer/presenter.py): the share URL (``present`` dropped, every other parameter
kept and percent-encoded, hostile hosts and environment values refused), the QR code (decoded by a
real decoder, zxing-cpp), and the page with ``?present=1`` in English and Korean (AppTest). The
browser's side (sidebar folded, larger type, the QR code on screen decoding to the page's URL):
tests/test_presenter_e2e.py."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from explorer import i18n, presenter
from explorer.views.theme import get_theme

APP = str(Path(__file__).resolve().parent.parent / "explorer" / "main.py")
zxingcpp = pytest.importorskip("zxingcpp")
Image = pytest.importorskip("PIL.Image")

KOREAN = "나는 학교에 간다\n<b>&amp; 50% #1 a+b=c?</b> 🙂"


def decode(png: bytes) -> list[str]:
    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))]


# --- the URL -------------------------------------------------------------------------------------

def test_share_url_drops_present_keeps_every_other_parameter_in_order():
    pairs = [("present", "1"), ("lang", "ko"), ("text", KOREAN), ("edit", "no_scale,temperature=2"),
             ("unknown", "kept"), ("present", "true"), ("head", "3"), ("head", "4")]
    url = presenter.share_url("https://demo.example.org", pairs)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "demo.example.org", "/")
    assert parse_qsl(parts.query, keep_blank_values=True) == [p for p in pairs if p[0] != "present"]
    assert "present" not in url
    # a dict (the app's query parameters: a value or a list of values) gives the same URL
    as_dict = {"present": "1", "lang": "ko", "text": KOREAN, "edit": "no_scale,temperature=2",
               "unknown": "kept", "head": ["3", "4"]}
    assert presenter.share_url("https://demo.example.org/", as_dict) == url


def test_korean_and_special_characters_are_percent_encoded():
    url = presenter.share_url("http://127.0.0.1:8501", {"text": KOREAN, "x&y": "a=b"})
    assert url.isascii() and url.isprintable()
    query = urlsplit(url).query
    for raw in (" ", "\n", "<", ">", "#", "+", "나"):
        assert raw not in query, raw
    assert query.count("&") == 1  # the one separator: every & inside a key or value is escaped
    assert "%EB%82%98%EB%8A%94" in query  # 나는, UTF-8
    assert dict(parse_qsl(query)) == {"text": KOREAN, "x&y": "a=b"}
    # a page of its own keeps its path; no query: no "?"
    assert presenter.share_url("http://h:1/lessons", {"lesson": "3", "present": "1"}) == "http://h:1/lessons?lesson=3"
    assert presenter.share_url("http://h:1", {"present": "1"}) == "http://h:1/"


@pytest.mark.parametrize("bad", [
    None, "", "   ", "javascript:alert(1)", "data:text/html,<script>alert(1)</script>", "file:///etc/passwd",
    "ftp://example.org", "https://good.example@evil.example", "https://user:pw@host",
    "http://exa mple.org", "http://example.org/\nSet-Cookie: x", "http://example.org\\@evil",
    "http://<script>/", "http://host:99999", "http://host:0", "http://host:port", "http://-bad-.org",
    "http://a..b", "http://" + "a" * 300, "https://example.org/\"onmouseover=\"x", "//example.org",
    "example.org", "http://[::1", "http://[not:an:ip]/", 42,
])
def test_hostile_or_malformed_bases_are_refused(bad):
    assert presenter.clean_base(bad) is None
    with pytest.raises(ValueError):
        presenter.share_url(bad, {"lang": "en"})


def test_clean_bases_are_normalised():
    cb = presenter.clean_base
    assert cb("HTTPS://Demo.Example.ORG:8443/explorer/?q=1#x") == "https://demo.example.org:8443/explorer"
    assert cb("http://[::1]:8501/") == "http://[::1]:8501"
    assert cb("http://10.0.0.5:8501") == "http://10.0.0.5:8501"
    assert cb("https://한국.example/") == "https://xn--3e0b707e.example"  # an IDN: its punycode
    assert cb("http://h/a%20b/lessons") == "http://h/a%20b/lessons"


def test_the_address_comes_from_the_environment_then_the_browser_then_the_request():
    choose = presenter.choose_base
    browser = "http://10.1.2.3:8501/lessons"
    # a hosted demo behind a proxy: the public address, with the page's own path
    assert choose(env="https://demo.example.org/ae/", context_url=browser) == "https://demo.example.org/ae/lessons"
    assert choose(env="https://demo.example.org/ae", context_url="http://10.1.2.3:8501") == "https://demo.example.org/ae/"
    assert choose(env="https://demo.example.org", context_url=None) == "https://demo.example.org/"
    # the server's baseUrlPath is not the page's path
    assert choose(env="https://d.example", context_url="http://10.1.2.3/base/lessons",
                  base_url_path="base") == "https://d.example/lessons"
    assert choose(env=None, context_url="http://10.1.2.3/base", base_url_path="base") == "http://10.1.2.3/base/"
    # a tampered environment value is skipped (and logged), not used
    for env in ("javascript:alert(1)", "https://x@evil.example", "not a url"):
        assert choose(env=env, context_url=browser) == browser
    # no browser address: the request's Host (and the proxy's scheme), then the configured one
    assert choose(env=None, context_url=None, host="demo.example.org", proto="https") == "https://demo.example.org/"
    assert choose(env=None, context_url=None, host="demo.example.org:8080", base_url_path="/ae/") \
        == "http://demo.example.org:8080/ae/"
    for host in ("evil.example/@x", "a b", "x\r\nSet-Cookie: y", "<script>"):
        assert choose(env=None, context_url=None, host=host, fallback="http://localhost:8599") == "http://localhost:8599/"
    assert choose(env=None, context_url="javascript:alert(1)", host=None, fallback="nope") == "http://localhost:8501/"


def test_flag_values():
    assert all(presenter.is_on(v) for v in ("1", "true", "YES", " on ", ["0", "1"]))
    assert not any(presenter.is_on(v) for v in (None, "", "0", "false", "no", "2", "<b>", []))


def test_the_url_and_qr_part_needs_no_streamlit():
    code = ("import sys, explorer.presenter as p; p.qr_png(p.share_url('http://h', {'a': 'b'})); "
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


# --- the QR code ---------------------------------------------------------------------------------

def test_the_qr_code_decodes_to_the_url():
    url = presenter.share_url("https://demo.example.org/ae", {"lang": "ko", "text": KOREAN, "present": "1"})
    qr = presenter.qr_png(url)
    assert qr is not None and qr.png.startswith(b"\x89PNG")
    width = Image.open(io.BytesIO(qr.png)).size[0]
    assert width == qr.modules * qr.scale and width <= presenter.QR_PX
    assert decode(qr.png) == [url]
    # longer URLs get bigger symbols, still decodable
    long_url = presenter.share_url("https://demo.example.org", {"text": "안녕하세요 여러분 " * 10})
    big = presenter.qr_png(long_url)
    assert big is not None and big.version > qr.version and decode(big.png) == [long_url]


def test_a_url_too_long_for_any_qr_code_gives_none():
    assert presenter.qr_png("https://x.example/?text=" + "%EC%95%88" * 1200) is None


def _softmax(seed, run):
    """The seed's softmax-weights figure (layer 0, head 0, its first block), as the page draws it."""
    from explorer.views import stages

    sel = stages.Selection(seed.info.name, 0, 0, 0, stages.blocks_for(seed.info)[0])
    return stages.stage_figure("softmax", run, seed.info, sel)[0]


def test_a_presented_figure_is_themed_taller_and_made_once_per_shared_figure(seed, run):
    from explorer import fastpath

    fig = _softmax(seed, run)
    before = fig.to_json()
    out = presenter.presented(fig)
    assert out.layout.font.size == get_theme(presenter.THEME).font_size
    assert out.layout.height == round(fig.layout.height * presenter.FIGURE_HEIGHT_SCALE)
    assert fig.to_json() == before  # the figure itself is untouched
    assert presenter.presented(fig) is not out  # not shared: themed anew
    shared = fastpath.share(_softmax(seed, run))
    assert presenter.presented(shared) is presenter.presented(shared)  # shared: themed once


def test_a_presented_figure_carries_every_size_streamlit_would_take_from_the_root_font(seed, run):
    """The sizes Streamlit's plotly theme computes from the root font size at draw time are in the
    presented figure itself (so the figure is drawn the same whether presenter mode's CSS landed
    before or after it); a size the theme of the figure sets (its fonts) is kept."""
    out = presenter.presented(_softmax(seed, run))
    theme = get_theme(presenter.THEME)
    px = presenter.ROOT_PX
    assert out.layout.font.size == theme.font_size and out.layout.xaxis.tickfont.size == theme.tick_size
    assert out.layout.coloraxis.colorbar.xpad == round(1.5 * px)
    assert out.layout.yaxis.title.standoff == round(1.5 * px) and out.layout.xaxis.title.standoff == round(1.25 * px)
    assert out.layout.margin.pad == round(0.5 * px) and out.layout.legend.font.size == round(0.75 * px)
    assert out.layout.hoverlabel.font.size == round(0.75 * px)


def _streamlit_plotly_rem_sizes() -> dict[str, float]:
    """From the installed Streamlit's frontend (the bundled PlotlyChart module): every size in its
    plotly theme that it computes from rem at draw time, as {path: rem}."""
    import re

    import streamlit

    js = Path(streamlit.__file__).parent / "static" / "static" / "js"
    src = "".join(f.read_text(encoding="utf-8") for f in js.glob("PlotlyChart*.js"))
    head = re.search(r"let\{genericFonts:\w+,colors:\w+,fontSizes:(\w+)\}=(\w+),\w+=\{", src)
    assert head, "Streamlit's plotly theme was not found in its frontend (a Streamlit upgrade?)"
    fonts_var, theme_var = head.groups()
    tables = "".join(t for t in (f.read_text(encoding="utf-8") for f in js.glob("*.js")) if "twoXL:`" in t)
    def table(first):  # noqa: E306  the rem table that begins with ``first`` (fontSizes, spacing)
        m = re.search(first + r"[^}]*", tables)
        return {k: float(v) for k, v in re.findall(r"(\w+):`([0-9.]+)rem`", m.group(0))}
    fonts, spacing = table(r"twoSm:`0.75rem`,sm:"), table(r"twoXS:`0.25rem`,xs:")
    # parse the object literal after the header: keys, nested objects, leaves up to "," or "}"
    text, i, out, depth_keys = src, head.end(), {}, []
    while True:
        m = re.match(r"\s*(\w+|\"[^\"]+\"):", text[i:])
        if m:
            key = m.group(1).strip('"')
            i += m.end()
            if text[i] == "{":
                depth_keys.append(key)
                i += 1
                continue
            j, level = i, 0
            while level > 0 or text[j] not in ",}":
                level += text[j] in "([{"
                level -= text[j] in ")]}"
                j += 1
            leaf = text[i:j]
            f = re.fullmatch(r"\w+\(" + fonts_var + r"\.(\w+)\)", leaf)
            s = re.fullmatch(r"\w+\(" + theme_var + r"\.spacing\.(\w+)\)", leaf)
            if f or s:
                out[".".join(depth_keys + [key])] = fonts[f.group(1)] if f else spacing[s.group(1)]
            i = j
        if text[i] == ",":
            i += 1
        elif text[i] == "}":
            if not depth_keys:
                return out
            depth_keys.pop()
            i += 1
        elif not m:
            raise AssertionError(f"unexpected text in Streamlit's plotly theme: {text[i:i + 40]!r}")


def test_the_pinned_sizes_are_those_of_the_installed_streamlit():
    """``presenter._REM_SIZES`` is Streamlit's own list (read from its frontend): a Streamlit that sizes
    one more thing from rem, or another size, fails here. Ternary plots: the app draws none."""
    theirs = {k: v for k, v in _streamlit_plotly_rem_sizes().items() if not k.startswith("ternary")}
    ours = {(k if kind == "layout" else f"{kind}.{k}"): v
            for kind, sizes in presenter._REM_SIZES.items() for k, v in sizes.items()}
    assert theirs and ours == theirs


# --- the page (AppTest) --------------------------------------------------------------------------

def app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def qp_pairs(at: AppTest) -> list[tuple[str, str]]:
    out = []
    for k in at.query_params:
        v = at.query_params[k]
        out += [(k, x) for x in (v if isinstance(v, list) else [v])]
    return out


def figure_layouts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec)["layout"] for c in at.get("plotly_chart")]


def block(at: AppTest, key: str, top=None):
    """The block of the page with this key, however deep (the QR code sits in a popover in a bar)."""
    for child in (top if top is not None else at.main).children.values():
        if getattr(child, "key", None) == key:
            return child
        found = block(at, key, child) if getattr(child, "children", None) else None
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_present_renders_in_both_languages_with_its_qr_code(lang):
    at = app(present="1", lang=lang, view="scores", text=KOREAN)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.session_state[presenter.STATE] is True
    # the toggle (on, in the page, not the sidebar) in the page's language
    toggle = at.toggle(key=presenter.TOGGLE_ON)
    assert toggle.value is True and toggle.label == i18n.t("present.toggle", lang)
    assert not [t for t in at.sidebar.toggle if t.key == presenter.TOGGLE_OFF]
    # the QR block: an image and the URL as plain text: the page's final query (model, layer, ...
    # were added by the page at its end), without present
    qr = block(at, "presenter-qr")
    assert qr is not None
    kinds = [c.type for c in qr.children.values()]
    assert kinds == ["image", "code"], kinds
    url = [c for c in qr.children.values() if c.type == "code"][0].value
    pairs = qp_pairs(at)
    assert ("present", "1") in pairs and ("model", "seed") in pairs and ("layer", "0") in pairs
    assert parse_qsl(urlsplit(url).query) == [p for p in pairs if p[0] != "present"]
    assert dict(parse_qsl(urlsplit(url).query))["text"] == KOREAN
    # every figure wears the presentation theme (its large type)
    layouts = figure_layouts(at)
    assert layouts and all(lay["font"]["size"] == get_theme(presenter.THEME).font_size for lay in layouts)


def test_the_toggle_leaves_and_enters_presenter_mode_and_the_url_follows(monkeypatch):
    monkeypatch.setenv(presenter.ENV, "https://demo.example.org/ae")
    at = app(present="1", lang="en", view="tokens")
    url = block(at, "presenter-qr").children[1].value
    assert url.startswith("https://demo.example.org/ae/?") and "present" not in url
    shown = figure_layouts(at)
    at.toggle(key=presenter.TOGGLE_ON).set_value(False).run()
    assert not at.exception
    # the same figures, off: the page's own type and height; on they were larger and taller
    normal = figure_layouts(at)
    assert len(normal) == len(shown) > 0
    for on, off in zip(shown, normal):
        assert on["font"]["size"] > off.get("font", {}).get("size", 12)
        assert on["height"] == round(off["height"] * presenter.FIGURE_HEIGHT_SCALE)
    assert "present" not in at.query_params and block(at, "presenter-qr") is None
    assert at.sidebar.toggle(key=presenter.TOGGLE_OFF).value is False
    at.sidebar.toggle(key=presenter.TOGGLE_OFF).set_value(True).run()
    assert not at.exception
    assert at.query_params["present"] in ("1", ["1"]) and block(at, "presenter-qr") is not None
    # a tampered environment value: the QR code falls back to the server's own address
    monkeypatch.setenv(presenter.ENV, "javascript:alert(1)//")
    at.run()
    url = block(at, "presenter-qr").children[1].value
    assert url.startswith("http://") and "javascript" not in url and "view=tokens" in url
