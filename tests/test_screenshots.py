"""The docs' pictures of the page (docs/images/*.png, docs/screenshot.png, made by
scripts/screenshots.py) show the page as the current code draws it: each is taken again here from the
test process's server (tests/conftest.py) with the script's own code and compared with the committed
file, pixel by pixel. A page that changed (another stage, other words, another layout) fails; then
run ``python scripts/screenshots.py`` and commit the pictures (the new ones are left in
tests/artifacts/screenshots/ to look at).

    pytest -m e2e tests/test_screenshots.py
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts" / "screenshots"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

if not Path("/usr/bin/chromium").exists():
    pytest.skip("/usr/bin/chromium not found (Debian: apt-get install chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")

_spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
screenshots = sys.modules["screenshots"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(screenshots)

# The share of pixels allowed to differ (by more than 32 of 255 in a channel: screenshots.difference).
# Measured 2026-11-28 and 2026-11-29: unchanged code gives the pictures pixel for pixel identical
# (difference 0.0) in all but a few takes in thirty; those few differ by 0.1-0.5 % (a colour bar or a
# subplot one pixel over: bench/results/presenter-race-20261129.txt), far above any bound that still
# sees a changed word. A changed letter drawn on the committed picture differs by ~0.005 % (about 65
# pixels of 1440x900; asserted below), so the bound is ~26 pixels: a changed letter fails.
TOLERANCE = 0.00002
TAKES = 3  # a picture that differs is taken again, up to this many times: a changed page differs in every take


def test_the_docs_pictures_are_the_current_page(shared_server):
    wanted = screenshots.shots()
    made = {p.name for p in (ROOT / "docs" / "images").glob("*.png")}
    assert made == {s.file.name for s in wanted if s.file.parent.name == "images"}, \
        "docs/images/ holds other pictures than scripts/screenshots.py makes"
    stale = []
    with screenshots.browser() as b:
        for shot in wanted:
            new = screenshots.take(b, shared_server, shot)
            d = screenshots.difference(new, shot.file.read_bytes())
            for _ in range(TAKES - 1):
                if d <= TOLERANCE:
                    break
                # (Presenter mode's pictures once differed by 0.28-0.37 % in 1 load of 3-20 under load: its
                # CSS landed before or after Streamlit sized the figures and help icons from the root font
                # size. Mended in explorer/presenter.py, pin_rem_sizes and CSS; not by taking it again.)
                new = screenshots.take(b, shared_server, shot)
                d = min(d, screenshots.difference(new, shot.file.read_bytes()))
            if d > TOLERANCE:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                (ARTIFACTS / shot.file.name).write_bytes(new)
                stale.append(f"{shot.name}: {d:.4%} of pixels differ")
        # a changed page fails: the default page's picture against the page on another stage
        explorer = next(s for s in wanted if s.name == "explorer-en")
        other = screenshots.take(b, shared_server, replace(explorer, path=explorer.path + "&stage=scaled"))
        changed = screenshots.difference(other, explorer.file.read_bytes())
    assert not stale, ("pictures that no longer show the page (run `python scripts/screenshots.py` and commit "
                       f"them; the new ones are in {ARTIFACTS}): " + "; ".join(stale))
    print(f"another stage: {changed:.2%} of pixels differ")
    assert changed > 100 * max(TOLERANCE, 1e-4), changed


def test_a_changed_letter_on_a_picture_is_more_than_the_tolerance():
    """The bound above sees a changed letter: one letter of the page's size drawn on the committed
    picture of the default page differs by more than TOLERANCE; the picture against itself, by 0."""
    import io

    from PIL import Image, ImageDraw, ImageFont

    picture = next(s for s in screenshots.shots() if s.name == "explorer-en").file.read_bytes()
    img = Image.open(io.BytesIO(picture)).convert("RGB")
    font = ImageFont.load_default(size=16)  # Pillow's own font: no system font needed
    ImageDraw.Draw(img).text((200, 450), "Q", fill=(40, 40, 40), font=font)
    out = io.BytesIO()
    img.save(out, format="PNG")
    d = screenshots.difference(out.getvalue(), picture)
    print(f"one letter: {d:.4%} of pixels differ")
    assert d > TOLERANCE
    assert screenshots.difference(picture, picture) == 0.0
