"""Replicas that come back, and a class safe from one noisy visitor (scripts/serve.sh, deploy/).

- A replica killed with SIGKILL (what the kernel does to a process out of memory) is started
  again by serve.sh (a new pid, healthy, the restart in its log); requests through the balancer
  keep succeeding while it is down and after; a real browser page that was on it reconnects and
  still shows its URL state (layer, head, sentence), served by a live session; the browser's
  requests go back to the replica once it is up again.
- Per-client bounds: an address past the page rate or the connection bound gets 429 and a short
  text, while another address is served.
- The Kubernetes manifests are valid against the Kubernetes JSON schema (kubernetes-validate,
  strict, offline) and carry serve.sh's topology; deploy/nginx.conf passes `nginx -t` and carries
  the same supervision and bounds as the config serve.sh writes.
"""
from __future__ import annotations

import contextlib
import copy
import http.client
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from bench import server as sv

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
K8S = ROOT / "deploy" / "k8s"

pytestmark = pytest.mark.timeout(300)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (sh scripts/setup.sh --dev installs it)")


# --- the real balancer: serve.sh with 2 replicas ------------------------------------------------------

@pytest.fixture(scope="module")
def balancer():
    if NGINX is None:
        pytest.skip("nginx is not installed (sh scripts/setup.sh --dev installs it)")
    with sv.Balancer(2, env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}) as bal:
        m = re.search(r"logs in (\S+);", bal.log_tail(200))
        assert m, bal.log_tail()
        bal.run_dir = Path(m.group(1))
        yield bal


def get(bal, path: str = "/", *, source: str = "127.0.0.1", cookie: str = "", timeout: float = 10) -> tuple[int, str]:
    """GET ``path`` through the balancer from ``source`` (a loopback address): (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", bal.port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def replica_pid(bal, i: int) -> int:
    return int((bal.run_dir / f"replica-{i}.pid").read_text())


def sessions_on(port: int) -> int:
    """Established connections into a replica's port (nginx opens one per open page: its websocket)."""
    import psutil

    return sum(1 for c in psutil.net_connections(kind="tcp")
               if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port)


def healthy(port: int) -> bool:
    try:
        return sv._local_get(f"http://127.0.0.1:{port}/_stcore/health", 2).strip() == b"ok"
    except OSError:
        return False


def wait_for(what, timeout: float, every: float = 0.2, page=None):
    """``what()`` once it is true, or its last value after ``timeout`` seconds. With a ``page``,
    the wait lets Playwright deliver the page's events (its sync API does so only inside its calls)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = what()
        if v:
            return v
        if page is not None:
            page.wait_for_timeout(every * 1000)
        else:
            time.sleep(every)
    return what()


class Traffic(threading.Thread):
    """Requests through the balancer every 0.1 s with eight different sticky cookies (so every
    replica gets some), from this machine's own address, until stopped: (status or error) each."""

    def __init__(self, bal):
        super().__init__(daemon=True)
        self.bal, self.results, self.stop = bal, [], threading.Event()
        self.times: list[float] = []  # time.monotonic() as each request was sent

    def run(self):
        k = 0
        while not self.stop.is_set():
            path = "/_stcore/health" if k % 2 else "/"
            self.times.append(time.monotonic())
            try:
                status, _ = get(self.bal, path, cookie=f"ae_replica=traffic{k % 8}", timeout=10)
            except OSError as e:
                status = f"{type(e).__name__}: {e}"
            self.results.append(status)
            k += 1
            self.stop.wait(0.1)


class Sockets:
    """A page's websockets as the browser opened them, and the frames each received."""

    def __init__(self, page):
        self.frames: list[list[int]] = []
        page.on("websocket", self._opened)

    def _opened(self, ws):
        got = [0]
        self.frames.append(got)
        ws.on("framereceived", lambda _frame: got.__setitem__(0, got[0] + 1))

    def answered(self, n: int) -> bool:
        """The page has opened ``n`` websockets and the last one has had frames from a session."""
        return len(self.frames) >= n and self.frames[n - 1][0] > 0


@needs_nginx
@pytest.mark.e2e
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not found")
def test_a_killed_replica_comes_back_and_its_page_is_restored_from_its_url(balancer):
    import psutil

    sync_api = pytest.importorskip("playwright.sync_api")
    bal = balancer
    _, errors = bal.warm_up()  # both replicas have drawn a page once, as before a class
    assert errors == []
    ports = {i: bal.port + i for i in (1, 2)}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        sockets = Sockets(page)
        page.goto(f"{bal.url}/?layer=1&head=2&view=scores&lang=en&text=The%20cat%20sat%20on%20the%20mat.",
                  wait_until="domcontentloaded")

        def slider(label: str):
            return page.locator(f'section[data-testid="stSidebar"] input[type="range"][aria-label="{label}"]')

        def shows(layer: str, head: str) -> bool:
            try:
                return (slider("Layer").input_value(timeout=1000) == layer and slider("Head").input_value(timeout=1000) == head
                        and page.locator('[data-testid="stText"]').first.inner_text(timeout=1000).strip()
                        == "The cat sat on the mat.")
            except Exception:  # not drawn (yet)
                return False

        def shows_the_url_state() -> bool:
            return shows("1", "2")

        assert wait_for(shows_the_url_state, 120, 0.5), "the page never showed its URL state"
        assert sockets.answered(1) and len(sockets.frames) == 1
        # the replica this page's session lives on: the one with an open connection (its websocket)
        on = wait_for(lambda: (lambda c: c if sorted(c.values()) == [0, 1] else None)(
            {i: sessions_on(port) for i, port in ports.items()}), 20, 0.5)
        assert on, {i: sessions_on(port) for i, port in ports.items()}
        dead = max(on, key=on.get)
        old_pid = replica_pid(bal, dead)

        traffic = Traffic(bal)
        traffic.start()
        time.sleep(1.0)
        os.kill(old_pid, signal.SIGKILL)
        t_kill = time.monotonic()

        # the page reconnects by itself: a second websocket, through the balancer to a live replica
        # (Streamlit's client reconnects without a rerun: the page stays as drawn until the next action)
        assert wait_for(lambda: len(sockets.frames) >= 2, 60, 0.5, page), f"no reconnect: {sockets.frames}"
        reconnect_s = time.monotonic() - t_kill

        # the killed replica is started again: a new pid, healthy
        assert wait_for(lambda: replica_pid(bal, dead) != old_pid, 15), bal.log_tail()
        new_pid = replica_pid(bal, dead)
        assert wait_for(lambda: healthy(ports[dead]), 90, 0.5), bal.log_tail()
        back_s = time.monotonic() - t_kill
        assert not psutil.pid_exists(old_pid) and psutil.pid_exists(new_pid), (
            (bal.run_dir / "serve.log").read_text() + (bal.run_dir / f"replica-{dead}.log").read_text()[-3000:])

        # after the restart the page still shows its state; its next action is the first run of a new
        # session (on the reconnected websocket), which takes the state from the URL: the page is drawn
        # again as its URL says (explorer/main.py: read_url_once), and the action after works as ever
        assert wait_for(shows_the_url_state, 30, 0.5, page), page.url
        slider("Head").focus()
        slider("Head").press("ArrowRight")
        assert wait_for(lambda: sockets.answered(2), 60, 0.5, page), sockets.frames
        assert len(sockets.frames) == 2
        assert wait_for(shows_the_url_state, 60, 0.5, page), page.url
        slider("Head").focus()
        slider("Head").press("ArrowRight")
        page.wait_for_function("() => location.search.includes('head=3')", timeout=60_000)
        assert slider("Head").input_value() == "3" and slider("Layer").input_value() == "1"
        assert page.locator('[data-testid="stText"]').first.inner_text().strip() == "The cat sat on the mat."
        assert page.locator('[data-testid="stException"]').count() == 0
        time.sleep(1.0)
        traffic.stop.set()
        traffic.join(20)

        # reloaded, the page goes back to its replica (nginx tries a failed replica again 5 s after its
        # last failure) and is drawn from its URL
        # This page is the only client left (the traffic has stopped), so its websocket is on the replica
        # that has a connection while the other has none. (A count before and after the reload was racy:
        # one request still in flight at the first count made the reload look like no change, and once the
        # page was back, every later reload closed one websocket there and opened another.)
        (alive,) = [i for i in ports if i != dead]

        def reload_lands_on_its_replica() -> bool:
            n = len(sockets.frames)
            page.reload(wait_until="domcontentloaded")
            assert wait_for(lambda: sockets.answered(n + 1), 60, 0.5, page), sockets.frames
            return wait_for(lambda: sessions_on(ports[dead]) >= 1 and sessions_on(ports[alive]) == 0, 3, 0.2)
        assert wait_for(reload_lands_on_its_replica, 45, 2.0), "the browser never returned to its replica"
        assert wait_for(lambda: shows("1", "3"), 60, 0.5, page), page.url
        browser.close()

    # requests through the balancer succeeded all along: while the replica was down and after
    # (a count of all requests depends on how fast the rest of the test ran: the ones that matter are
    # those sent while the replica was down, one every 0.1 s plus the request's own time)
    while_down = [r for t, r in zip(traffic.times, traffic.results) if t_kill <= t <= t_kill + back_s]
    assert len(while_down) >= 5, (len(while_down), back_s)
    assert set(traffic.results) == {200}, [r for r in traffic.results if r != 200][:5]
    # nginx saw the dead replica refuse and passed the requests on (passive health)
    nginx_log = (bal.run_dir / "nginx-error.log").read_text()
    assert f"127.0.0.1:{ports[dead]}" in nginx_log and "Connection refused" in nginx_log
    # the restart is logged: in the replica's log, serve.sh's log and serve.sh's stderr
    line = f"replica {dead} (port {ports[dead]}, pid {old_pid}) was killed by signal 9"
    replica_log = (bal.run_dir / f"replica-{dead}.log").read_text()
    assert line in replica_log and f"started again: pid {new_pid}" in replica_log
    assert line in (bal.run_dir / "serve.log").read_text() and line in bal.log_tail(200)
    assert back_s < 60, f"the replica took {back_s:.0f} s to come back"
    print(f"\npage reconnected {reconnect_s:.1f} s after the kill; replica healthy again after {back_s:.1f} s; "
          f"{len(traffic.results)} requests through the balancer, all 200")

    # killed again, and again right after its restart: the second wait is twice the first (the back-off;
    # the first is 1 s if the replica had run a minute, else already 2 s)
    def delay_after(pid: int) -> int | None:
        m = re.search(rf"pid {pid}\) was killed by signal 9 after \d+ s; starting it again in (\d+) s",
                      (bal.run_dir / "serve.log").read_text())
        return int(m.group(1)) if m else None

    os.kill(new_pid, signal.SIGKILL)
    assert wait_for(lambda: replica_pid(bal, dead) != new_pid, 15), bal.log_tail()
    third_pid = replica_pid(bal, dead)
    os.kill(third_pid, signal.SIGKILL)
    assert wait_for(lambda: delay_after(third_pid), 10), (bal.run_dir / "serve.log").read_text()
    assert delay_after(new_pid) in (1, 2) and delay_after(third_pid) == 2 * delay_after(new_pid)
    assert wait_for(lambda: replica_pid(bal, dead) != third_pid and healthy(ports[dead]), 60, 0.5), bal.log_tail()


@needs_nginx
def test_an_address_past_its_bounds_gets_429_while_another_is_served(balancer):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    bal = balancer
    # page loads: 30 a minute per address with a burst of 20 (serve.sh's defaults)
    statuses = [get(bal, "/", source="127.0.0.9")[0] for _ in range(30)]
    assert statuses[:20] == [200] * 20 and statuses[-1] == 429, statuses
    status, body = get(bal, "/", source="127.0.0.9")
    assert status == 429 and body.startswith("Too many requests from your address") and len(body) < 200
    assert get(bal, "/", source="127.0.0.10")[0] == 200  # another address is served meanwhile

    # open pages (websockets): 8 at once per address
    def websocket(source: str):
        return connect(f"ws://127.0.0.1:{bal.port}/_stcore/stream", subprotocols=["streamlit"],
                       origin=f"http://127.0.0.1:{bal.port}", source_address=(source, 0), open_timeout=30,
                       proxy=None)

    with contextlib.ExitStack() as held:
        for _ in range(8):
            held.enter_context(websocket("127.0.0.11"))
        with pytest.raises(InvalidStatus) as refused:
            held.enter_context(websocket("127.0.0.11"))
        assert refused.value.response.status_code == 429
        assert b"Too many requests" in refused.value.response.body
        held.enter_context(websocket("127.0.0.12"))  # another address opens its page
    assert wait_for(lambda: _opens(websocket, "127.0.0.11"), 10)  # the bound is on pages open at once


def _opens(websocket, source: str) -> bool:
    try:
        with websocket(source):
            return True
    except Exception:
        return False


@needs_nginx
def test_serve_sh_and_deploy_nginx_carry_the_same_supervision_and_bounds(balancer, tmp_path):
    served = (balancer.run_dir / "nginx.conf").read_text()
    deployed = (ROOT / "deploy" / "nginx.conf").read_text()
    for conf in (served, deployed):
        assert "hash $ae_replica consistent" in conf
        assert re.search(r"server \S+ max_fails=1 fail_timeout=5s;", conf)
        assert "proxy_next_upstream error timeout;" in conf and "http_404" in conf
        assert "limit_conn_status 429;" in conf and "limit_req_status 429;" in conf
        assert "rate=30r/m" in conf and "limit_conn ae_conn 8;" in conf
        assert conf.count("burst=20 nodelay") == 2 and "return 429" in conf
        # closed edges: Streamlit's upload route refused, request bodies bounded (tests/test_deploy.py
        # sends them through deploy/nginx.conf)
        assert re.search(r"location \^~ /_stcore/upload_file \{[^}]*return 403", conf)
        body = re.search(r"client_max_body_size (\d+)k;", conf)
        assert body and int(body.group(1)) <= 64
    # deploy/nginx.conf is a valid nginx config (the compose service name made local)
    conf = tmp_path / "nginx.conf"
    conf.write_text(deployed.replace("server app:8501", "server 127.0.0.1:9"))
    r = subprocess.run([NGINX, "-t", "-q", "-p", str(tmp_path), "-c", str(conf),
                        "-g", f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


# --- the Kubernetes manifests and the compose file ---------------------------------------------------

def manifests() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.setdefault(doc["kind"], []).append(doc)
    return out


def test_the_kubernetes_manifests_are_valid_and_carry_the_topology():
    kv = pytest.importorskip("kubernetes_validate")
    docs = manifests()
    assert set(docs) >= {"Deployment", "Service", "Ingress", "HorizontalPodAutoscaler", "NetworkPolicy"}
    for kind, items in docs.items():
        for doc in items:
            for version in ("1.30", "1.37"):
                kv.validate(doc, version, strict=True)  # raises on any mistake, unknown fields included

    # the validator is no rubber stamp: a misspelt probe and a replica count as text fail it
    (dep,) = docs["Deployment"]
    broken = copy.deepcopy(dep)
    c = broken["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, "1.37", strict=True)
    broken = copy.deepcopy(dep)
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, "1.37", strict=True)

    # the topology: pods with health probes and the shared cookie secret from a Secret ...
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (app,) = dep["spec"]["template"]["spec"]["containers"]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert app[probe]["httpGet"]["path"] == "/_stcore/health", probe
    port_names = {p["name"]: p["containerPort"] for p in app["ports"]}
    env = {e["name"]: e for e in app["env"]}
    assert env["STREAMLIT_SERVER_COOKIE_SECRET"]["valueFrom"]["secretKeyRef"]["name"]
    assert env["ATTENTION_EXPLORER_HOSTED"]["value"] == "1" and env["OMP_NUM_THREADS"]["value"] == "1"
    assert app["resources"]["requests"]["cpu"] and app["resources"]["limits"]["memory"]
    # ... behind a Service that selects them ...
    (svc,) = docs["Service"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert all(p["targetPort"] in port_names or p["targetPort"] in port_names.values() for p in svc["spec"]["ports"])
    # ... reached through an Ingress that keeps a browser on its pod by a cookie and bounds each client ...
    # (the Ingress that denies every address, Streamlit's upload route, is tests/test_deploy.py's)
    ingresses = [i for i in docs["Ingress"]
                 if "nginx.ingress.kubernetes.io/denylist-source-range" not in i["metadata"]["annotations"]]
    for ing in ingresses:
        a = ing["metadata"]["annotations"]
        assert a["nginx.ingress.kubernetes.io/affinity"] == "cookie"
        assert a["nginx.ingress.kubernetes.io/session-cookie-name"] == "ae_replica"
        assert int(a["nginx.ingress.kubernetes.io/limit-connections"]) > 0
        for rule in ing["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"]["name"] == svc["metadata"]["name"]
                assert path["backend"]["service"]["port"]["name"] in {p["name"] for p in svc["spec"]["ports"]}
    page = next(i for i in ingresses if any(p["path"] == "/" for r in i["spec"]["rules"] for p in r["http"]["paths"]))
    assert int(page["metadata"]["annotations"]["nginx.ingress.kubernetes.io/limit-rpm"]) > 0
    assert int(page["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600  # websockets
    # ... and scaled on CPU
    (hpa,) = docs["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": dep["metadata"]["name"]}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu" and metric["resource"]["target"]["type"] == "Utilization"
    assert hpa["spec"]["minReplicas"] >= 2


def test_compose_restarts_replicas_and_uses_the_same_balancer():
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    app, balancer = compose["services"]["app"], compose["services"]["balancer"]
    assert app["restart"] == "unless-stopped" and balancer["restart"] == "unless-stopped"
    assert "/_stcore/health" in " ".join(app["healthcheck"]["test"])
    assert app["environment"]["STREAMLIT_SERVER_COOKIE_SECRET"].startswith("${COOKIE_SECRET:?")
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in balancer["volumes"]
    assert balancer["depends_on"]["app"]["condition"] == "service_healthy"
