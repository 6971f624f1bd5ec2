"""Presenter mode in a real `streamlit run` server and headless Debian chromium: with ``?present=1``
the sidebar is folded and the type is larger (computed font sizes against the normal page); the QR
code on screen, decoded from a screenshot by a real decoder (zxing-cpp), is the page's URL as the
browser shows it (with the parameters the page added at the end of its run) minus ``present``, and
opening it gives the same view, not in presenter mode; the toggles leave and enter the mode.

    pytest -m e2e tests/test_presenter_e2e.py -s
"""
from __future__ import annotations

import io
import time
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from test_e2e import browser, no_exception, server, settle, wait_for_plots  # noqa: F401 (fixtures)

from explorer import i18n

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
zxingcpp = pytest.importorskip("zxingcpp")
Image = pytest.importorskip("PIL.Image")

TEXT = "나는 학교에 간다\n<b>&amp; 50% a+b</b>"
QR_IMG = ".st-key-presenter-qr img"
# the sidebar's width on screen (0 or off-screen when folded), and the type's computed sizes
SIDEBAR_JS = """() => { const s = document.querySelector('section[data-testid="stSidebar"]');
    if (!s) return 0; const r = s.getBoundingClientRect(); return Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0)); }"""
FONTS_JS = """() => ({
    title: parseFloat(getComputedStyle(document.querySelector('h1')).fontSize),
    caption: parseFloat(getComputedStyle(document.querySelector('[data-testid="stCaptionContainer"]')).fontSize),
    text: parseFloat(getComputedStyle(document.querySelector('[data-testid="stText"]')).fontSize)})"""


def pairs(url: str) -> tuple[str, list[tuple[str, str]]]:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}", parse_qsl(parts.query, keep_blank_values=True)


def open_qr(page) -> None:
    """The QR code opens from its button in the presenter's bar (the figure fills the screen first)."""
    if page.locator(QR_IMG).count() == 0:
        page.get_by_role("button", name=i18n.t("present.share", page_lang(page))).click()
    page.wait_for_selector(QR_IMG, timeout=60_000)


def page_lang(page) -> str:
    return "ko" if "lang=ko" in page.url else "en"


def decode_qr(page) -> list[str]:
    open_qr(page)
    shot = page.locator(QR_IMG).screenshot()
    return [r.text for r in zxingcpp.read_barcodes(Image.open(io.BytesIO(shot)))]


def open_page(browser, url: str, n_plots: int = 1):  # noqa: F811
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(url, wait_until="domcontentloaded")
    wait_for_plots(page, n_plots)
    settle(page)
    return page


def test_presenter_mode_and_its_qr_code_in_the_browser(server, browser):  # noqa: F811
    timings = {}
    # presenter mode: a link with only some parameters (the page adds model, layer, head, ... at its end)
    t0 = time.time()
    page = open_page(browser, f"{server}/?present=1&lang=ko&view=tokens&text={quote(TEXT)}")
    open_qr(page)
    page.wait_for_function("() => location.search.includes('model=')", timeout=30_000)
    timings["present_page_cold_s"] = round(time.time() - t0, 2)
    no_exception(page)
    assert page.evaluate(SIDEBAR_JS) == 0  # folded away

    # the QR code, decoded from the screen, is the page's URL without present, and the text under it
    t0 = time.time()
    decoded = decode_qr(page)
    timings["decode_s"] = round(time.time() - t0, 2)
    assert len(decoded) == 1, decoded
    base, shown = pairs(page.url)
    assert ("present", "1") in shown and ("model", "seed") in shown  # the page's final state
    assert pairs(decoded[0]) == (base, [p for p in shown if p[0] != "present"])
    assert dict(pairs(decoded[0])[1])["text"] == TEXT
    assert page.locator('.st-key-presenter-qr [data-testid="stCode"]').inner_text().strip() == decoded[0]

    # the room opens it: the same view and sentence, on the normal page (sidebar open, normal type)
    room = open_page(browser, decoded[0])
    no_exception(room)
    assert room.locator(QR_IMG).count() == 0 and room.evaluate(SIDEBAR_JS) > 200
    assert room.locator('[data-testid="stText"]').first.inner_text().strip() == TEXT.split("\n")[0]
    assert pairs(room.url) == pairs(decoded[0])
    fonts, normal_fonts = page.evaluate(FONTS_JS), room.evaluate(FONTS_JS)
    for name, size in fonts.items():  # every kind of type is larger, by the root size's 24/16
        assert size >= 1.4 * normal_fonts[name], (name, size, normal_fonts[name])

    # the toggle leaves presenter mode (the URL loses present), the sidebar's toggle enters it again
    label = i18n.t("present.toggle", "ko")
    page.locator(f'.st-key-presenter-bar label:has-text("{label}")').click()
    room.locator(f'section[data-testid="stSidebar"] label:has-text("{label}")').click()
    page.wait_for_function("() => !location.search.includes('present=')", timeout=30_000)
    page.wait_for_selector(QR_IMG, state="detached", timeout=30_000)
    page.wait_for_function(f"() => ({SIDEBAR_JS})() > 200", timeout=30_000)
    room.wait_for_function("() => location.search.includes('present=1')", timeout=30_000)
    open_qr(room)
    room.wait_for_function(f"() => ({SIDEBAR_JS})() === 0", timeout=30_000)
    settle(room)
    assert pairs(decode_qr(room)[0])[1] == [p for p in pairs(room.url)[1] if p[0] != "present"]
    no_exception(page)
    no_exception(room)
    print("\npresenter timings:", timings)
    page.close()
    room.close()
