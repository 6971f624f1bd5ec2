"""The shipped deployments (deploy/compose.yaml, deploy/nginx.conf, deploy/k8s/, the Dockerfile)
apply what the host's guide (docs/host.md, docs/host.ko.md) says: the access code required and
passed on, one Secret name and key, uploads and request bodies refused at the balancer, the client's address set by the balancer,
memory limits at or above the measured peaks, hardened containers and pods, a versioned image,
and the replicas' shared Redis (deploy/k8s/redis/, compose's `redis`): wired by its Service's
name and one Secret, reachable from the app only, its shipped command run against a real
redis-server.

Everything is read from the files themselves (PyYAML, a small compose interpolation); the nginx
test runs the real deploy/nginx.conf in front of a recording backend. tests/test_supervise.py
validates every manifest against the Kubernetes schema.
"""
from __future__ import annotations

import copy
import http.client
import importlib.util
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import tomllib
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
ACCESS = "ATTENTION_EXPLORER_ACCESS_CODE"
REQUIRE = "ATTENTION_EXPLORER_REQUIRE_ACCESS_CODE"
TRUSTED = "ATTENTION_EXPLORER_TRUSTED_PROXIES"
REDIS_URL = "ATTENTION_EXPLORER_REDIS_URL"
APP = "attention-explorer"  # the app's Deployment, Service and pod label
REDIS = "attention-explorer-redis"  # Redis's Deployment, Service, NetworkPolicy and pod label
ENV = {"ACCESS_CODE": "tiger-42", "COOKIE_SECRET": "c" * 64, "REDIS_PASSWORD": "d" * 64}

pytestmark = pytest.mark.timeout(120)


# --- reading the files --------------------------------------------------------------------------

def version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def compose_raw() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


_VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


class Missing(Exception):
    """A required compose variable is unset or empty: compose refuses to start with this message."""


def interpolate(value, env: dict[str, str]):
    """Compose's variable interpolation (${X}, ${X:-d}, ${X-d}, ${X:?e}, ${X?e}, ${X:+a}, $X, $$)
    applied to every string of a parsed compose file."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group(1):
            return "$"
        name = m.group(2) or m.group(5)
        op, arg = m.group(3), m.group(4) or ""
        val = env.get(name)
        unset_or_empty = not val
        if op in (":-", "-"):
            return interpolate(arg, env) if (unset_or_empty if op == ":-" else val is None) else val
        if op in (":?", "?"):
            if unset_or_empty if op == ":?" else val is None:
                raise Missing(f"{name}: {arg}")
            return val
        if op in (":+", "+"):
            return interpolate(arg, env) if not (unset_or_empty if op == ":+" else val is None) else ""
        return val or ""

    return _VAR.sub(one, value)


def compose(env: dict[str, str] | None = None) -> dict:
    env = ENV if env is None else env
    return interpolate(compose_raw(), env)


def manifests() -> dict[str, list[dict]]:
    """Every manifest `kubectl apply -R -f deploy/k8s/` applies (redis/ included), by kind."""
    out: dict[str, list[dict]] = {}
    for f in sorted(K8S.rglob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.setdefault(doc["kind"], []).append(doc)
    return out


def named(kind: str, name: str) -> dict:
    (doc,) = [d for d in manifests()[kind] if d["metadata"]["name"] == name]
    return doc


def deployment(name: str = APP) -> tuple[dict, dict]:
    dep = named("Deployment", name)
    (app,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, app


def dockerfile_env() -> dict[str, str]:
    """The ENV of the Dockerfile's final image (KEY=VALUE pairs, continuation lines joined)."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for k, v in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)", line):
                env[k] = v
    return env


def mib(quantity: str) -> float:
    """A memory quantity of Kubernetes (Gi, Mi, G, M, ...) or Docker (g, m, k, b) in MiB."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(quantity))
    assert m, quantity
    n, unit = float(m.group(1)), m.group(2)
    factor = {"": 1 / 2**20, "b": 1 / 2**20, "k": 1 / 1024, "kb": 1 / 1024, "Ki": 1 / 1024,
              "m": 1, "mb": 1, "Mi": 1, "g": 1024, "gb": 1024, "Gi": 1024, "Ti": 2**20,
              "K": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20}[unit]
    return n * factor


def memory_table():
    spec = importlib.util.spec_from_file_location("deploy_memory", DEPLOY / "memory.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- the access code -----------------------------------------------------------------------------

def test_compose_requires_the_access_code_and_passes_it_to_the_app():
    # without a code (or with an empty one) compose refuses to start, naming the variable
    for env in ({**ENV, "ACCESS_CODE": None}, {**ENV, "ACCESS_CODE": ""}):
        with pytest.raises(Missing, match="ACCESS_CODE"):
            compose({k: v for k, v in env.items() if v is not None})
    app = compose()["services"]["app"]
    assert app["environment"][ACCESS] == "tiger-42"
    assert app["environment"][REQUIRE] == "1"
    assert app["environment"]["ATTENTION_EXPLORER_HOSTED"] == "1"


def secret_refs(app: dict) -> dict[str, tuple[str, str, bool]]:
    return {e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"],
                        bool(e["valueFrom"]["secretKeyRef"].get("optional", False)))
            for e in app["env"] if "secretKeyRef" in e.get("valueFrom", {})}


GUIDES = (ROOT / "docs" / "host.md", ROOT / "docs" / "host.ko.md")  # the host's guide, English and Korean


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_kubernetes_requires_the_access_code_from_the_secret_the_guide_creates(guide):
    _, app = deployment()
    refs = secret_refs(app)
    env = {e["name"]: e.get("value") for e in app["env"]}
    assert ACCESS in refs, "the Deployment does not read the access code"
    access_name, access_key, optional = refs[ACCESS]
    assert not optional, "an optional access code lets a pod start open when the Secret is missing"
    assert env[REQUIRE] == "1"
    # the host's guide creates every Secret the Deployment reads, under the same name and key
    text = guide.read_text(encoding="utf-8")
    created = set()
    for m in re.finditer(r"kubectl create secret generic (\S+)((?: [^\n]*?)?)(?:\n|$)", text):
        created |= {(m.group(1), k) for k in re.findall(r"--from-literal=([A-Za-z0-9_.-]+)=", m.group(2))}
    refs |= {f"redis {var}": ref for var, ref in secret_refs(deployment(REDIS)[1]).items()}
    for var, (name, key, _) in refs.items():
        assert (name, key) in created, f"{var}: the Deployment reads Secret {name!r} key {key!r}; {guide.name} creates {sorted(created)}"
    # and the guide's own snippet of that env entry does not make it optional (and is there)
    shown = False
    for block in re.findall(r"```ya?ml\n(.*?)```", text, flags=re.S):
        if ACCESS in block:
            assert not re.search(r"optional:\s*true", block), f"{guide.name} shows the access code as optional"
            assert f"name: {access_name}" in block and f"key: {access_key}" in block
            shown = True
    assert shown, f"{guide.name} does not show the Deployment's access-code env entry"


# --- the balancer: uploads, bodies, the client's address -----------------------------------------

def test_nginx_conf_refuses_uploads_and_sets_the_forwarded_address():
    conf = (DEPLOY / "nginx.conf").read_text()
    m = re.search(r"location\s+(?:\^~\s+)?/_stcore/upload_file\s*\{([^}]*)\}", conf)
    assert m and re.search(r"return\s+403\b", m.group(1)), "no location refusing /_stcore/upload_file"
    size = re.search(r"client_max_body_size\s+(\d+)([kKmM]?);", conf)
    assert size and int(size.group(1)) * {"": 1, "k": 1024, "m": 2**20}[size.group(2).lower()] <= 64 * 1024
    assert re.search(r"proxy_set_header\s+X-Forwarded-For\s+\$remote_addr;", conf)
    assert "$proxy_add_x_forwarded_for" not in conf  # a client's own header is never passed on


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, dict, int]] = []

    def _any(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        type(self).seen.append((self.command, self.path, dict(self.headers), n))
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = _any

    def log_message(self, *args):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def balancer(tmp_path):
    """deploy/nginx.conf, as shipped but for its two addresses, in front of a recording backend."""
    if NGINX is None:
        pytest.skip("nginx is not installed (sh scripts/setup.sh --dev installs it)")
    _Recorder.seen = []
    backend = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    port = _free_port()
    conf = (DEPLOY / "nginx.conf").read_text()
    assert "server app:8501" in conf and re.search(r"listen 80;", conf)
    conf = conf.replace("server app:8501", f"server 127.0.0.1:{backend.server_address[1]}")
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{port};")
    # temporary files in the test's folder (the compiled-in ones need root), as serve.sh does
    temps = " ".join(f"{d}_temp_path {tmp_path}/{d};" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = conf.replace("http {\n", f"http {{\n    {temps}\n", 1)
    (tmp_path / "nginx.conf").write_text(conf)
    proc = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                             "-g", f"daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
        backend.shutdown()
        backend.server_close()


def send(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if body or method in ("PUT", "POST"):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        try:
            if body:
                conn.send(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # nginx answered before taking the whole body: the answer is still there
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


UPLOAD_SPELLINGS = [
    "/_stcore/upload_file/some-session/some-file",
    "/_stcore//upload_file/s/f",
    "//_stcore/upload_file/s/f",
    "/_stcore/upload%5Ffile/s/f",
    "/_stcore%2Fupload_file/s/f",
    "/_stcore/./upload_file/s/f",
    "/_stcore/x/../upload_file/s/f",
    "/_stcore/upload_file",
]


def test_the_balancer_refuses_uploads_and_bodies_and_names_the_client(balancer):
    port = balancer
    # a page and the health check go through, with the client's address as nginx saw it: a
    # forged X-Forwarded-For from the client is replaced, not extended
    assert send(port, "GET", "/", headers={"X-Forwarded-For": "203.0.113.9"})[0] == 200
    assert send(port, "GET", "/_stcore/health")[0] == 200
    assert [(m, p) for m, p, _, _ in _Recorder.seen] == [("GET", "/"), ("GET", "/_stcore/health")]
    assert {h.get("X-Forwarded-For") for _, _, h, _ in _Recorder.seen} == {"127.0.0.1"}
    _Recorder.seen.clear()

    # the upload route, in every spelling nginx normalises, for every method: refused, unseen
    for path in UPLOAD_SPELLINGS:
        for method in ("PUT", "POST", "DELETE", "GET"):
            status, text = send(port, method, path, b"x" * 1024 if method in ("PUT", "POST") else b"")
            assert status == 403, (method, path, status)
            assert "no file uploads" in text
        # a Streamlit-sized upload part (1 MB) is refused by its size first: 413, also unseen
        assert send(port, "PUT", path, b"x" * 2**20)[0] in (403, 413), path
    # any other request with a body past the bound: refused before the app sees it
    for path in ("/", "/_stcore/host-config", "/media/x"):
        assert send(port, "POST", path, b"y" * (64 * 1024))[0] == 413, path
    assert _Recorder.seen == [], [(m, p) for m, p, _, _ in _Recorder.seen]


def test_the_ingress_refuses_uploads_and_bodies_as_the_balancer_does():
    """ingress-nginx, the cluster's nginx: the upload route denied to every address, bodies bounded."""
    ingresses = manifests()["Ingress"]
    denied = [i for i in ingresses if any(p["path"].rstrip("/") == "/_stcore/upload_file"
                                          for r in i["spec"]["rules"] for p in r["http"]["paths"])]
    assert denied, "no Ingress takes /_stcore/upload_file"
    for ing in denied:
        a = ing["metadata"]["annotations"]
        ranges = {r.strip() for r in a.get("nginx.ingress.kubernetes.io/denylist-source-range", "").split(",")}
        assert {"0.0.0.0/0", "::/0"} <= ranges, "the upload route is not denied to every address"
        for r in ing["spec"]["rules"]:
            for p in r["http"]["paths"]:
                assert p["pathType"] == "Prefix"
    # every host an Ingress serves has the refusal (the longest path wins within a host)
    hosts = {r.get("host") for i in ingresses for r in i["spec"]["rules"]}
    assert hosts == {r.get("host") for i in denied for r in i["spec"]["rules"]}
    for ing in ingresses:
        size = ing["metadata"]["annotations"].get("nginx.ingress.kubernetes.io/proxy-body-size", "1m")
        assert mib(size.replace("k", "Ki").replace("m", "Mi")) <= 64 / 1024, (ing["metadata"]["name"], size)


# --- compose's network: the trusted proxy is the balancer's network only --------------------------

def test_compose_trusts_forwarded_addresses_only_from_the_balancers_internal_network():
    c = compose()
    app, bal = c["services"]["app"], c["services"]["balancer"]
    (net,) = [n for n in app["networks"] if n in bal["networks"]]  # the replicas' network with the balancer
    assert c["networks"][net].get("internal") is True  # has no way out
    subnets = [s["subnet"] for s in c["networks"][net]["ipam"]["config"]]
    assert app["environment"][TRUSTED] == ",".join(subnets)
    # a host that moves the network (its range collides with theirs) moves the trust with it
    moved = compose({**ENV, "AE_BACKEND_SUBNET": "10.99.0.0/24"})
    assert moved["services"]["app"]["environment"][TRUSTED] == "10.99.0.0/24"
    assert moved["networks"][net]["ipam"]["config"][0]["subnet"] == "10.99.0.0/24"
    assert "ports" not in app  # the replicas are reached only through the balancer


def test_kubernetes_names_the_trusted_proxies_as_a_setting_the_host_must_make():
    _, app = deployment()
    env = {e["name"]: e.get("value") for e in app["env"]}
    assert TRUSTED in env and env[TRUSTED]
    text = (K8S / "deployment.yaml").read_text()
    assert re.search(rf"#.*ingress controller.*\n(?:\s*#.*\n)*\s*- name: {TRUSTED}", text), \
        "the placeholder must say what to put there"


# --- memory: limits from the measurements --------------------------------------------------------

def test_memory_limits_cover_the_measured_peaks_with_headroom():
    mem = memory_table()
    need, which = mem.required_mb()
    assert need > 0 and which
    # every served model with a class measurement is in the bound; the others are said to be unmeasured
    table = mem.peaks()
    for model in mem.SERVED:
        if model in mem.PER_CORE:
            assert (model, mem.PER_CORE[model]) in table, model
            assert need >= table[(model, mem.PER_CORE[model])]["rss_mb"] * mem.HEADROOM
        else:
            assert mem.no_class(model) is not None, f"{model}: neither measured at a class size nor said to be unmeasured"
            assert "not measured" in mem.markdown()
    res = compose()["services"]["app"]["deploy"]["resources"]
    _, app = deployment()
    limits = {"compose limit": res["limits"]["memory"], "kubernetes limit": app["resources"]["limits"]["memory"],
              "compose reservation": res.get("reservations", {}).get("memory", "0"),
              "kubernetes request": app["resources"]["requests"]["memory"]}
    for what, quantity in limits.items():
        value = mib(quantity)
        assert value >= need, f"{what} {value:.0f} MiB < {mem.HEADROOM} x the measured peak ({which}) = {need:.0f} MiB"
    # the figures are the files' own: the SmolLM2 row the issue quotes is among them
    assert any(s.startswith("workshop-smollm2-s4.json workshop[0]") and round(mb) == 2037
               for s, mb in table[("smollm2", 10)]["sources"])


def test_every_workshop_and_soak_result_is_read_or_skipped_with_a_reason():
    mem = memory_table()
    read = {m["source"].split()[0] for m in mem.measurements()}
    for path in mem.result_files():
        if path.name in read or mem.SKIPPED.get(path.name):
            continue
        # a file none of whose rows counts holds only rows the rule leaves out, for its reasons
        data = json.loads(path.read_text())
        rows = [r for k in ("workshop", "runs") for r in data.get(k) or [] if isinstance(r, dict) and r.get("rss_max_mb")]
        assert rows, f"{path.name}: no measurement read from it, none left out for a reason"
        for r in rows:
            assert r["replicas"] != 0 or str(r.get("code", "")).startswith(("baseline", "before")), (path.name, r)
    # a multi-replica row (the sum of several processes) never counts as one replica's peak
    assert all("replicas" not in m or m.get("replicas") == 0 for m in mem.measurements())


# --- hardening ------------------------------------------------------------------------------------

STATE = "ATTENTION_EXPLORER_STATE_DIR"


def written_paths() -> set[str]:
    """Where the app writes at run time (seen under a read-only root: strace of a server drawing a
    page and the lessons, PNG/SVG/PDF exports and the three real models loaded): /tmp (chromium's
    profile, torch's scratch folder) and $HOME (chromium's crash-report and dconf folders); the
    model cache is filled when the image is built. The wrong-code counts go to Redis (below): the
    SQLite folder ($ATTENTION_EXPLORER_STATE_DIR) is never opened when the Redis URL is set."""
    return {"/tmp", dockerfile_env()["HOME"]}


def test_the_deployments_count_in_redis_and_need_no_state_folder():
    store = ROOT / "explorer" / "store.py"
    text = store.read_text()
    assert re.search(rf'^STATE_ENV = "{STATE}"$', text, flags=re.M)
    assert re.search(rf'^REDIS_ENV = "{REDIS_URL}"$', text, flags=re.M)
    c = compose()["services"]["app"]
    _, app = deployment()
    env = {e["name"]: e.get("value") for e in app["env"]}
    assert c["environment"][REDIS_URL].startswith("redis://") and env[REDIS_URL].startswith("redis://")
    # open_store reads the URL first: with it set, the folder is never opened, so nothing mounts one
    from explorer import store as st
    assert st.open_store({REDIS_URL: "redis://:x@127.0.0.1:1/0", STATE: "/nonexistent/never-made"}).kind == "redis"
    assert not Path("/nonexistent/never-made").exists()
    assert STATE not in c["environment"] and STATE not in env
    assert not c.get("volumes") and "volumes" not in compose()
    mounts = {m["mountPath"] for m in app["volumeMounts"]}
    assert dockerfile_env().get(STATE, "/state") not in mounts


@pytest.mark.parametrize("name", [APP, REDIS])
def test_the_pods_are_hardened(name):
    dep, app = deployment(name)
    pod = dep["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    psc, csc = pod["securityContext"], app["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["capabilities"]["drop"] == ["ALL"] and not csc["capabilities"].get("add")
    assert not csc.get("privileged")
    for kind in ("requests", "limits"):
        assert app["resources"][kind]["cpu"] and app["resources"][kind]["memory"], kind
    # every path the app writes is an emptyDir; the image's weights are not hidden under one
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in app["volumeMounts"]}
    if name == REDIS:  # the image's working folder (nothing is saved there), its user not root
        assert psc["runAsUser"] == 999 and "emptyDir" in volumes[mounts["/data"]]
        return
    for path in written_paths():
        assert path in mounts and "emptyDir" in volumes[mounts[path]], path
        assert volumes[mounts[path]]["emptyDir"].get("sizeLimit"), path
    env = {e["name"]: e.get("value") for e in app["env"]}
    assert env.get("HOME", dockerfile_env()["HOME"]) == dockerfile_env()["HOME"]
    assert dockerfile_env()["ATTENTION_EXPLORER_CACHE"] not in mounts


def test_compose_containers_are_hardened():
    c = compose()
    app = c["services"]["app"]
    assert app["read_only"] is True
    tmpfs = {t.split(":")[0] for t in app["tmpfs"]}
    volumes = {v.split(":")[1] for v in app.get("volumes") or []}
    assert written_paths() <= tmpfs | volumes, written_paths() - tmpfs - volumes
    assert dockerfile_env()["ATTENTION_EXPLORER_CACHE"] not in tmpfs | volumes  # the image's weights stay in view
    for name, svc in c["services"].items():
        assert svc.get("read_only") is True, name
        assert "no-new-privileges:true" in svc["security_opt"], name
        assert svc["cap_drop"] == ["ALL"], name
        assert float(svc["deploy"]["resources"]["limits"]["cpus"]) > 0, name
    assert not app.get("cap_add")


def selects(selector: dict, labels: dict) -> bool:
    return selector["matchLabels"].items() <= labels.items()


def test_only_the_ingress_controller_reaches_the_app_and_the_app_reaches_only_redis_and_dns():
    pol = named("NetworkPolicy", APP)
    dep, app = deployment()
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert selects(pol["spec"]["podSelector"], labels)
    assert set(pol["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    # out: Redis's pods on their port, and the cluster's DNS (the URL names the Service); nothing else
    rdep, redis = deployment(REDIS)
    redis_labels = rdep["spec"]["template"]["metadata"]["labels"]
    to_redis, to_dns = pol["spec"]["egress"]
    (peer,) = to_redis["to"]
    assert set(peer) == {"podSelector"} and selects(peer["podSelector"], redis_labels)
    assert not selects(peer["podSelector"], labels)  # not the app's own pods
    assert [(p["protocol"], p["port"]) for p in to_redis["ports"]] == [("TCP", redis["ports"][0]["containerPort"])]
    (peer,) = to_dns["to"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "kube-system"}
    assert peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    assert sorted((p["protocol"], p["port"]) for p in to_dns["ports"]) == [("TCP", 53), ("UDP", 53)]
    assert not any("ipBlock" in peer for rule in pol["spec"]["egress"] for peer in rule["to"])
    (rule,) = pol["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] and peer["podSelector"]["matchLabels"]
    assert "ipBlock" not in peer
    ports = {p["name"]: p["containerPort"] for p in app["ports"]}
    assert [p["port"] for p in rule["ports"]] in (["http"], [ports["http"]])
    assert ports["http"] == 8501


def test_the_image_tag_names_the_version_and_nothing_says_latest():
    v = version()
    images = [compose_raw()["services"]["app"]["image"]]
    others = []
    for items in manifests().values():
        for doc in items:
            spec = doc.get("spec", {}).get("template", {}).get("spec", {})
            found = [c["image"] for c in spec.get("containers", []) + spec.get("initContainers", [])]
            (images if doc["metadata"]["name"] == APP else others).extend(found)
    assert len(images) >= 2 and others
    for image in images:
        assert image.rsplit("/", 1)[-1] == f"attention-explorer:{v}", image
    for image in images + others + [s.get("image", "x:y") for s in compose_raw()["services"].values()]:
        name_tag = image.rsplit("/", 1)[-1]
        assert ":" in name_tag and not name_tag.endswith(":latest"), image
    # every other image names a version (digits), the same one in compose and Kubernetes
    for image in others:
        assert re.fullmatch(r"[a-z0-9./-]+:\d+(\.\d+)+(-[a-z0-9.]+)?", image), image
    assert compose_raw()["services"]["redis"]["image"] in others
    docker = (ROOT / "Dockerfile").read_text()
    assert f'org.opencontainers.image.version="{v}"' in docker
    assert re.search(r"^USER \d+(:\d+)?$", docker, flags=re.M), "a numeric user: runAsNonRoot can check it"


def test_the_image_keeps_secrets_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for pattern in (".env", "**/.env", ".streamlit/secrets.toml"):
        assert pattern in ignored, pattern


def test_the_hardening_fields_are_the_schemas_own():
    """A misspelt hardening field would be ignored by a lenient reader and leave the pod open: the
    Kubernetes schema (strict, as tests/test_supervise.py validates every manifest) refuses it."""
    kv = pytest.importorskip("kubernetes_validate")
    docs = manifests()
    dep, pol = named("Deployment", APP), named("NetworkPolicy", APP)
    for doc in [d for items in docs.values() for d in items]:  # redis/ too (tests/test_supervise.py reads k8s/*.yaml)
        for v in ("1.30", "1.37"):
            kv.validate(doc, v, strict=True)
    broken = copy.deepcopy(dep)
    sc = broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    sc["readOnlyRootFileSystem"] = sc.pop("readOnlyRootFilesystem")
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, "1.37", strict=True)
    broken = copy.deepcopy(pol)
    peer = broken["spec"]["ingress"][0]["from"][0]
    peer["podSelectors"] = peer.pop("podSelector")
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, "1.37", strict=True)


def test_the_compose_file_is_valid_against_the_compose_specification():
    """deploy/schema/compose-spec.json (the Compose Specification's own schema): a key compose does
    not know, or one in the wrong place, fails here as `docker compose config` would refuse it."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((DEPLOY / "schema" / "compose-spec.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    doc = compose()
    assert not [e.message for e in validator.iter_errors(doc)]
    for path, key in ((("services", "app"), "read_only"), (("services", "app", "deploy", "resources", "limits"), "cpus"),
                      (("networks", "backend"), "internal")):
        broken = copy.deepcopy(doc)
        node = broken
        for p in path:
            node = node[p]
        node[key + "_"] = node.pop(key)
        assert list(validator.iter_errors(broken)), f"a misspelt {key} passed the schema"


# --- the replicas' shared Redis -------------------------------------------------------------------

def k8s_env(container: dict) -> dict[str, str]:
    """A container's environment as the kubelet makes it: $(NAME) filled in from the variables
    above it, a Secret's value as secret.NAME.KEY."""
    env: dict[str, str] = {}
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            assert not ref.get("optional"), e["name"]
            env[e["name"]] = f"secret.{ref['name']}.{ref['key']}"
    return env


def test_kubernetes_wires_the_app_to_redis_by_its_service_and_one_secret():
    _, app = deployment()
    rdep, redis = deployment(REDIS)
    svc = named("Service", REDIS)
    url = urllib.parse.urlsplit(k8s_env(app)[REDIS_URL])
    # the URL names the Service, on the port the Service offers, which reaches Redis's container port
    assert url.scheme == "redis" and url.hostname == svc["metadata"]["name"] == REDIS
    (port,) = svc["spec"]["ports"]
    (cport,) = redis["ports"]
    assert url.port == port["port"] and port["targetPort"] in (cport["name"], cport["containerPort"])
    assert cport["containerPort"] == 6379 and url.path == "/0"
    # the Service selects Redis's pods, not the app's
    assert svc["spec"]["selector"].items() <= rdep["spec"]["template"]["metadata"]["labels"].items()
    assert not svc["spec"]["selector"].items() <= named("Deployment", APP)["spec"]["template"]["metadata"]["labels"].items()
    # the app's password and Redis's are one Secret's one key (filled in before the URL is read)
    assert url.password == k8s_env(redis)["REDISCLI_AUTH"] == "secret.attention-explorer-redis.password"
    # the URL reads as explorer/store.py reads it (redis-py's parser), the password kept out of its messages
    from explorer import store
    s = store.RedisStore(urllib.parse.urlunsplit(url._replace(netloc=f":hex0123@{REDIS}:6379")))
    kw = s.client.connection_pool.connection_kwargs
    assert (kw["host"], kw["port"], kw["password"], kw.get("db", 0)) == (REDIS, 6379, "hex0123", 0)
    assert "hex0123" not in f"{s.host}:{s.port}"
    # one Redis, never two at once (two would split the counts), and no persistence asked for
    assert rdep["spec"]["replicas"] == 1 and rdep["spec"]["strategy"]["type"] == "Recreate"
    script = " ".join(redis["command"])
    for flag in ("--save ''", "--appendonly no", "--maxmemory ", "--maxmemory-policy volatile-ttl"):
        assert flag in script, flag
    assert "requirepass" in script and "--requirepass" not in script  # the password on stdin, not argv


def test_only_the_app_reaches_redis_and_redis_reaches_nothing():
    pol = named("NetworkPolicy", REDIS)
    rdep, redis = deployment(REDIS)
    app_labels = named("Deployment", APP)["spec"]["template"]["metadata"]["labels"]
    assert selects(pol["spec"]["podSelector"], rdep["spec"]["template"]["metadata"]["labels"])
    assert not selects(pol["spec"]["podSelector"], app_labels)
    assert set(pol["spec"]["policyTypes"]) == {"Ingress", "Egress"} and pol["spec"]["egress"] == []
    (rule,) = pol["spec"]["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"} and selects(peer["podSelector"], app_labels)  # this namespace's app pods
    assert [(p["protocol"], p["port"]) for p in rule["ports"]] == [("TCP", redis["ports"][0]["containerPort"])]


def test_compose_runs_one_redis_that_only_the_replicas_reach():
    c = compose()
    app, redis, bal = c["services"]["app"], c["services"]["redis"], c["services"]["balancer"]
    url = urllib.parse.urlsplit(app["environment"][REDIS_URL])
    assert url.scheme == "redis" and url.hostname == "redis" and url.port == 6379 and url.path == "/0"
    assert url.password == redis["environment"]["REDISCLI_AUTH"] == ENV["REDIS_PASSWORD"]
    (net,) = redis["networks"]
    assert net in app["networks"] and net not in bal["networks"]  # the balancer, facing browsers, cannot reach it
    assert c["networks"][net].get("internal") is True and "ports" not in redis
    assert redis["user"].split(":")[0] not in ("0", "root") and redis["read_only"] is True
    assert redis["image"] == deployment(REDIS)[1]["image"]  # the same Redis in compose and Kubernetes
    assert app["depends_on"]["redis"]["condition"] in ("service_started", "service_healthy")
    assert "replicas" not in redis.get("deploy", {})  # one store
    # without a password compose refuses to start, naming the variable
    for env in ({**ENV, "REDIS_PASSWORD": ""}, {k: v for k, v in ENV.items() if k != "REDIS_PASSWORD"}):
        with pytest.raises(Missing, match="REDIS_PASSWORD"):
            compose(env)


REDIS_SERVER = shutil.which("redis-server")


def shipped_redis_commands() -> dict[str, tuple[list[str], str]]:
    """Redis's command and health check as compose and Kubernetes run them (compose's $$ is $)."""
    c = compose()["services"]["redis"]
    _, k = deployment(REDIS)
    health = c["healthcheck"]["test"]
    assert health[0] == "CMD-SHELL"
    return {"compose": (c["command"], health[1]),
            "kubernetes": (k["command"], k["readinessProbe"]["exec"]["command"][-1])}


@pytest.mark.parametrize("where", ["compose", "kubernetes"])
def test_the_shipped_redis_command_runs_on_a_real_redis_server(where, tmp_path):
    """The image's command, run by Debian's redis-server (the image runs 7.4; the tests' Debian
    7.0 reads the same options): the password from standard input is required, nothing is saved,
    the memory bound and its policy are set, the health check passes with the password and fails
    without it, and the app's store counts through the URL it is given."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (sh scripts/setup.sh --dev installs it)")
    command, health = shipped_redis_commands()[where]
    assert command[:2] == ["sh", "-c"] and "exec redis-server - " in command[2]
    port, password = _free_port(), "a1" * 32
    # on a free loopback port here; the pod and the container listen on 6379 of their own address
    script = command[2].replace("exec redis-server - ", f"exec redis-server - --port {port} --bind 127.0.0.1 ", 1)
    env = {"PATH": "/usr/bin:/bin", "REDISCLI_AUTH": password}
    proc = subprocess.Popen([*command[:2], script], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, "redis-server stopped at start"
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        assert proc.poll() is None
        assert "REDISCLI_AUTH" not in open(f"/proc/{proc.pid}/cmdline").read() and password not in open(f"/proc/{proc.pid}/cmdline").read()
        hc = health.replace("redis-cli", f"redis-cli -p {port}")
        assert subprocess.run(["sh", "-c", hc], env=env, timeout=10).returncode == 0
        assert subprocess.run(["sh", "-c", hc], env={**env, "REDISCLI_AUTH": "wrong"}, timeout=10).returncode != 0
        assert subprocess.run(["sh", "-c", hc], env={"PATH": env["PATH"]}, timeout=10).returncode != 0

        from explorer import store
        s = store.RedisStore(f"redis://:{password}@127.0.0.1:{port}/0")
        policy = store.Backoff()
        assert s.failed("addr:203.0.113.7", time.time(), policy).failures == 1
        assert s.get("addr:203.0.113.7", policy).failures == 1
        conf = {k: v for k, v in s.client.config_get("*").items()
                if k in ("save", "appendonly", "maxmemory", "maxmemory-policy")}
        assert conf == {"save": "", "appendonly": "no", "maxmemory": str(64 * 2**20), "maxmemory-policy": "volatile-ttl"}
        s.close()
        with pytest.raises(Exception, match="(?i)auth"):
            store.RedisStore(f"redis://127.0.0.1:{port}/0").get("addr:x", policy)
        assert list(tmp_path.iterdir()) == []  # nothing written in its working folder
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
