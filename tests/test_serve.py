"""Serving a class: a short workshop against a real hosted server (any error fails), and the real
balancer (scripts/serve.sh: two replicas behind nginx) with real browsers — every session sticks to
one replica, so its page, its websocket and a download made on the page all work."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import server as sv

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
HAVE_NGINX = bool(shutil.which("nginx") or Path("/usr/sbin/nginx").exists())


def test_a_short_workshop_runs_without_a_single_error():
    """Four learners clicking every half second to a second (layer, head, block, view, new
    sentences), then a burst: every action answers, none with an error."""
    with sv.Server(hosted=True) as srv:
        _, errors = sv.warm_up(srv)
        assert errors == []
        r = sv.workshop_test(srv.port, [srv.proc.pid], learners=4, seconds=8, think=(0.5, 1.0), p_sentence=0.3,
                             arrival=1.0, run_timeout=60)
        assert srv.proc.poll() is None, srv.log_tail()
    assert r.errors == [], r.errors
    assert len(r.burst) == 4 and r.actions >= 12
    assert r.latencies.get("sentence") and sum(len(r.latencies.get(k, [])) for k in sv.CLICKS) >= 6
    assert r.cpu_s > 0


@pytest.mark.skipif(not HAVE_NGINX, reason="nginx is not installed (sh scripts/setup.sh --dev installs it)")
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found")
def test_the_balancer_keeps_each_browser_on_one_replica_downloads_included(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sv.Balancer(2) as bal:
        assert len(bal.pids) == 2
        _, errors = bal.warm_up()  # both replicas have drawn a page once, as before a class
        assert errors == []
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            cookies = set()
            for i in range(6):  # six browsers: with a non-sticky balancer, a download fails half the time
                ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
                page = ctx.new_page()
                page.goto(f"{bal.url}/?view=tokens&lang=en&text=hi%20{i}", wait_until="domcontentloaded")
                switch = page.get_by_text("Download (PNG · SVG · PDF · CSV)").first
                switch.wait_for(timeout=180_000)
                switch.click()
                csv_button = page.get_by_role("button", name="CSV", exact=True).first
                csv_button.wait_for(timeout=60_000)
                with page.expect_download(timeout=60_000) as dl:
                    csv_button.click()
                path = tmp_path / f"{i}-{dl.value.suggested_filename}"
                dl.value.save_as(path)
                assert f"hi-{i}" in path.name  # this session's own sentence
                assert path.read_text(encoding="utf-8-sig").startswith("position,token,shown as,id")
                cookies |= {c["value"] for c in ctx.cookies() if c["name"] == "ae_replica"}
                ctx.close()
            browser.close()
        assert len(cookies) == 6  # each browser got its own sticky cookie from the balancer
        assert all(p_alive(pid) for pid in bal.pids)


def p_alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)
