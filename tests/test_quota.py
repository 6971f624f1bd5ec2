"""Quotas on expensive work per page (issue 38, item 5) and what a failure shows (item 7).

- run slots from the container's CPU quota (model/runtime/limits.py: cgroup_cpus, run_slots) on fake cgroup trees;
- the token bucket and the one-in-flight mark per page (explorer/quota.py), on a clock the test moves;
- exports: one in flight per page, the file kept per figure (explorer/export_ui.py, explorer/export/cache.py),
  a refusal's words under the button (explorer/failures.py: install);
- the logit lens and patching refused past a page's quota in the app, cached results still shown;
- a failure on the page: a log id, no path, no traceback; the log has the id and the details;
- chromium started without the server's secrets (its /proc/<pid>/environ).
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
import uuid

import plotly.graph_objects as go
import pytest
from helpers import app

from explorer import failures, i18n, quota
from model.runtime import limits

# --- run slots from the cgroup CPU quota ------------------------------------------------------------------


def cgroup_tree(tmp_path, files: dict[str, str], proc: str = "0::/\n"):
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    proc_file = tmp_path / "proc_cgroup"
    proc_file.write_text(proc)
    return root, proc_file


def test_cgroup_v2_quota_is_read_from_cpu_max(tmp_path):
    root, proc = cgroup_tree(tmp_path, {"cpu.max": "150000 100000\n"})
    assert limits.cgroup_cpus(root, proc) == pytest.approx(1.5)
    root, proc = cgroup_tree(tmp_path / "b", {"cpu.max": "max 100000\n"})
    assert limits.cgroup_cpus(root, proc) is None


def test_cgroup_v2_the_smallest_quota_of_the_process_and_its_parents(tmp_path):
    root, proc = cgroup_tree(tmp_path, {"kubepods/cpu.max": "400000 100000\n",
                                        "kubepods/pod1/cpu.max": "max 100000\n",
                                        "kubepods/pod1/app/cpu.max": "200000 100000\n"},
                             proc="0::/kubepods/pod1/app\n")
    assert limits.cgroup_cpus(root, proc) == pytest.approx(2.0)
    (root / "kubepods/cpu.max").write_text("50000 100000\n")  # a parent's half CPU bounds the child
    assert limits.cgroup_cpus(root, proc) == pytest.approx(0.5)


def test_cgroup_v1_quota_and_no_quota(tmp_path):
    root, proc = cgroup_tree(tmp_path, {"cpu,cpuacct/cpu.cfs_quota_us": "300000\n",
                                        "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
                             proc="4:memory:/x\n2:cpu,cpuacct:/\n0::/\n")
    assert limits.cgroup_cpus(root, proc) == pytest.approx(3.0)
    root, proc = cgroup_tree(tmp_path / "b", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"},
                             proc="1:cpu:/\n")
    assert limits.cgroup_cpus(root, proc) is None
    root, proc = cgroup_tree(tmp_path / "c", {})  # nothing mounted: no quota known
    assert limits.cgroup_cpus(root, proc) is None


def test_run_slots_rule():
    env: dict[str, str] = {}
    assert limits.run_slots(env, quota=None, cpus=64) == limits.MAX_RUNS_CAP  # a big node: the cap
    assert limits.run_slots(env, quota=2.0, cpus=64) == 2  # a pod with limits.cpu: 2 on a 64-core node
    assert limits.run_slots(env, quota=1.5, cpus=64) == 2  # rounded up
    assert limits.run_slots(env, quota=0.5, cpus=64) == 1
    assert limits.run_slots(env, quota=3.0, cpus=2) == 2  # the affinity bounds it too
    assert limits.run_slots({"ATTENTION_EXPLORER_MAX_RUNS": "7"}, quota=1.0, cpus=1) == 7  # the override wins
    assert limits.run_slots({"ATTENTION_EXPLORER_MAX_RUNS": "0"}, quota=1.0, cpus=1) == 1
    with pytest.raises(ValueError, match="ATTENTION_EXPLORER_MAX_RUNS"):
        limits.run_slots({"ATTENTION_EXPLORER_MAX_RUNS": "two"})


def test_run_slots_reads_the_real_files(tmp_path, monkeypatch):
    root, proc = cgroup_tree(tmp_path, {"cpu.max": "100000 100000\n"})
    real = limits.cgroup_cpus
    monkeypatch.setattr(limits, "cgroup_cpus", lambda: real(root, proc))
    assert limits.run_slots({}, cpus=8) == 1


# --- the bucket and the in-flight mark ------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(quota, "clock", lambda: now[0])
    return now


def test_a_page_gets_its_burst_then_waits_for_the_refill(clock):
    q, lim = quota.Quotas(), quota.Limit(per_minute=6, burst=3)
    for _ in range(3):
        q.charge("page-a", "lens", lim=lim)
    with pytest.raises(quota.Refused) as refused:
        q.charge("page-a", "lens", lim=lim)
    assert refused.value.seconds == 10  # one token every 10 s
    q.charge("page-b", "lens", lim=lim)  # another page has its own bucket
    clock[0] += 9.5
    with pytest.raises(quota.Refused):
        q.charge("page-a", "lens", lim=lim)
    clock[0] += 0.5
    q.charge("page-a", "lens", lim=lim)
    assert q.refused == 2


def test_a_large_piece_of_work_is_possible_from_a_full_bucket_and_zero_means_no_bound(clock):
    q = quota.Quotas()
    q.charge("p", "export", cost=500, lim=quota.Limit(60, 60))  # a 500-step GIF: the whole bucket
    with pytest.raises(quota.Refused):
        q.charge("p", "export", cost=1, lim=quota.Limit(60, 60))
    for _ in range(1000):
        q.charge("p", "lens", lim=quota.Limit(0, 1))


def test_one_in_flight_per_page(clock):
    q = quota.Quotas()
    with q.flight("p", "export"):
        with pytest.raises(quota.Refused) as refused:
            with q.flight("p", "export"):
                pass
        assert refused.value.busy
        with q.flight("other", "export"):  # another page is not held up
            pass
    with q.flight("p", "export"):  # released
        pass


def test_pages_are_forgotten_and_bounded(clock):
    q = quota.Quotas(max_pages=3, forget_s=60)
    for i in range(5):
        q.charge(f"p{i}", "lens", lim=quota.Limit(6, 6))
    assert len(q) == 3
    clock[0] += 61
    q.charge("new", "lens", lim=quota.Limit(6, 6))
    assert len(q) == 1


def test_where_quotas_apply():
    assert not quota.enabled({})  # a laptop
    assert quota.enabled({"ATTENTION_EXPLORER_HOSTED": "1"})
    assert quota.enabled({"ATTENTION_EXPLORER_ACCESS_CODE": "sesame"})
    assert not quota.enabled({"ATTENTION_EXPLORER_HOSTED": "1", "ATTENTION_EXPLORER_QUOTAS": "0"})
    assert quota.enabled({"ATTENTION_EXPLORER_QUOTAS": "1"})


def test_limits_from_the_environment():
    assert quota.limit("lens", {}) == quota.Limit(*quota.DEFAULTS["lens"])
    assert quota.limit("lens", {"ATTENTION_EXPLORER_LENS_PER_MINUTE": "12"}) == quota.Limit(12, 12)
    assert quota.limit("patching", {"ATTENTION_EXPLORER_PATCH_PER_MINUTE": "1",
                                    "ATTENTION_EXPLORER_PATCH_BURST": "3"}) == quota.Limit(1, 3)
    with pytest.raises(ValueError, match="ATTENTION_EXPLORER_EXPORT_RENDERS_PER_MINUTE"):
        quota.limit("export", {"ATTENTION_EXPLORER_EXPORT_RENDERS_PER_MINUTE": "-1"})


def test_refusals_say_when_in_both_languages():
    r = quota.Refused("patching", 12.2, lim=quota.Limit(2, 2))
    assert "13 s" in r.message("en") and "2 a minute" in r.message("en")
    assert "13초" in r.message("ko") and "2번" in r.message("ko")
    busy = quota.Refused("export", busy=True)
    assert "still being made" in busy.message("en") and "아직" in busy.message("ko")


# --- exports: one in flight per page, the file kept per figure ------------------------------------------


def timeline(n: int = 3) -> go.Figure:
    frames = [go.Frame(data=[go.Heatmap(z=[[i, 1], [2, 3]])], name=str(i)) for i in range(n)]
    return go.Figure(data=[go.Heatmap(z=[[0, 1], [2, 3]])], frames=frames)


@pytest.fixture
def rendered():
    from explorer.export.cache import RENDERED

    RENDERED.clear()
    quota.QUOTAS.clear()
    yield RENDERED
    RENDERED.clear()
    quota.QUOTAS.clear()


def test_a_second_export_click_while_one_renders_is_refused_not_rendered(rendered, monkeypatch):
    from explorer import export_ui

    monkeypatch.setenv("ATTENTION_EXPLORER_QUOTAS", "1")
    monkeypatch.setattr(quota, "session_id", lambda: "page-1")
    started, release, calls = threading.Event(), threading.Event(), []

    def slow_gif(fig):
        calls.append(len(fig.frames))
        started.set()
        release.wait(10)
        return b"GIF89a..."

    fig = timeline()
    gif = export_ui._deferred(lambda: fig, "gif-steps", slow_gif, lambda f: len(f.frames), "ko", "decoding")
    pdf = export_ui._deferred(lambda: fig, "pdf-steps", slow_gif, lambda f: len(f.frames), "ko", "decoding")
    first: list[bytes] = []
    t = threading.Thread(target=lambda: first.append(gif()))
    t.start()
    assert started.wait(10)
    with pytest.raises(failures.Shown) as refused:
        pdf()  # another button of the same page while the GIF renders
    assert str(refused.value) == i18n.t("quota.export_busy", "ko")
    release.set()
    t.join(10)
    assert first == [b"GIF89a..."] and calls == [3]
    assert gif() == b"GIF89a..." and calls == [3]  # the same figure and format: kept, not rendered again
    other = export_ui._deferred(lambda: timeline(4), "gif-steps", slow_gif, lambda f: len(f.frames), "en", "decoding")
    assert other() == b"GIF89a..." and calls == [3, 4]  # another figure: rendered


def test_a_kept_file_is_free_even_past_the_quota_and_a_new_one_is_refused(rendered, monkeypatch):
    from explorer import export_ui

    monkeypatch.setenv("ATTENTION_EXPLORER_QUOTAS", "1")
    monkeypatch.setenv("ATTENTION_EXPLORER_EXPORT_RENDERS_PER_MINUTE", "5")
    monkeypatch.setattr(quota, "session_id", lambda: "page-2")
    calls = []

    def render(fig):
        calls.append(1)
        return b"x" * 10

    kept = export_ui._deferred(lambda: timeline(5), "gif-steps", render, lambda f: len(f.frames), "en", "d")
    assert kept() == b"x" * 10  # 5 renders: the whole minute's quota
    new = export_ui._deferred(lambda: timeline(2), "gif-steps", render, lambda f: len(f.frames), "en", "d")
    with pytest.raises(failures.Shown, match=r"Try again in \d+ s"):
        new()
    assert kept() == b"x" * 10 and len(calls) == 1


def test_a_kept_figures_key_is_made_once_not_on_every_click(rendered):
    from explorer import export_ui

    fig, prepared = timeline(), []

    def prepare():
        prepared.append(1)
        return fig

    data = export_ui._deferred(prepare, "gif-steps", lambda f: b"GIF", lambda f: 1, "en", "d", ident=(fig, "meta"))
    assert [data(), data(), data()] == [b"GIF"] * 3 and len(prepared) == 1
    other = timeline()  # another figure object (another id): its own key
    export_ui._deferred(lambda: other, "gif-steps", lambda f: b"GIF2", lambda f: 1, "en", "d", ident=(other, "meta"))()
    assert len(export_ui._KEYS) >= 2


def test_an_export_failure_shows_a_log_id_and_logs_the_details(rendered, caplog):
    from explorer import export_ui

    def broken(fig):
        raise RuntimeError("chromium at /opt/secret/chrome crashed")

    data = export_ui._deferred(lambda: timeline(1), "png", broken, lambda f: 1, "en", "scores")
    with caplog.at_level(logging.ERROR), pytest.raises(failures.Shown) as shown:
        data()
    ident = re.search(r"log id ([0-9a-f]{8})", str(shown.value)).group(1)
    assert "/opt/secret" not in str(shown.value)
    assert any(ident in r.getMessage() and r.exc_info and "/opt/secret" in str(r.exc_info[1]) for r in caplog.records)


def test_a_timelines_file_is_the_same_whatever_step_the_page_shows():
    from explorer.export import step_figures
    from explorer.export.cache import figure_key

    def at_step(step: int, values=(1, 2, 3)) -> go.Figure:  # as the Decoding view: data and slider at the step
        frames = [go.Frame(data=[go.Bar(y=[v, v])], name=str(i), traces=[0]) for i, v in enumerate(values)]
        return go.Figure(data=[go.Bar(y=[values[step]] * 2)], frames=frames,
                         layout={"sliders": [{"active": step, "steps": [{"label": str(i)} for i in range(3)]}]})

    key = figure_key(step_figures(at_step(0)), "gif-steps")
    assert figure_key(step_figures(at_step(2)), "gif-steps") == key
    assert figure_key(step_figures(at_step(0, (1, 2, 4))), "gif-steps") != key  # another timeline
    assert figure_key(step_figures(at_step(0)), "pdf-steps") != key
    assert figure_key(at_step(0), "gif-steps") != figure_key(at_step(2), "gif-steps")  # the figures differ


def test_the_cache_is_bounded_in_bytes():
    from explorer.export.cache import Rendered

    c = Rendered(max_bytes=100)
    for i in range(5):
        c.get(f"k{i}", lambda: b"x" * 40)
    assert len(c) == 2 and c.bytes == 80 and c.peek("k4") and c.peek("k0") is None
    assert c.get("big", lambda: b"y" * 101) == b"y" * 101 and c.peek("big") is None  # given, not kept


def test_the_download_button_shows_a_refusals_words():
    """Streamlit answers a failed download callable with its own fixed words; failures.install makes it
    send a ``Shown``'s words (the browser shows them under the button) and keeps the rest as it was."""
    from streamlit.proto.BackMsg_pb2 import BackendOperationRequest
    from streamlit.runtime import backend_operation_handler as boh
    from streamlit.runtime.media_file_manager import MediaFileManager
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    failures.install()
    mgr = MediaFileManager(MemoryMediaFileStorage("/media"))
    handler = boh.DeferredFileHandler(lambda: mgr)

    def answer(fn):
        file_id = mgr.add_deferred(fn, "image/gif", "coords", "f.gif")
        req = BackendOperationRequest(request_id="r1")
        req.deferred_file.file_id = file_id
        return asyncio.run(handler.handle(req, "session"))

    def refused():
        raise failures.Shown(i18n.t("quota.export_busy", "ko"))

    def broken():
        raise RuntimeError("/secret/path")

    assert answer(refused).error_msg == i18n.t("quota.export_busy", "ko")
    assert answer(broken).error_msg == "Failed to generate file for download"
    ok = answer(lambda: b"GIF89a")
    assert not ok.error_msg and ok.deferred_file.url.startswith("/media/")


# --- the logit lens and patching in the app -------------------------------------------------------------


def lens_warnings(at):
    return [w.value for w in at.warning if "logit lens" in w.value]


@pytest.mark.timeout(600)
def test_the_lens_past_a_pages_quota_is_refused_and_a_computed_one_still_shown(monkeypatch):
    monkeypatch.setenv("ATTENTION_EXPLORER_QUOTAS", "1")
    monkeypatch.setenv("ATTENTION_EXPLORER_LENS_PER_MINUTE", "1")
    quota.QUOTAS.clear()
    tag = uuid.uuid4().hex[:6]
    first, second = f"the cat sat {tag}", f"a dog ran {tag}"
    at = app(stage="logit_lens", text=first)
    assert not at.exception and not lens_warnings(at)
    at.sidebar.text_area(key="text").set_value(second).run()
    msgs = lens_warnings(at)
    assert len(msgs) == 1 and "Try again in" in msgs[0] and "1 a minute" in msgs[0], msgs
    at.sidebar.text_area(key="text").set_value(first).run()  # computed before: shown, no quota asked
    assert not at.exception and not lens_warnings(at)
    monkeypatch.setenv("ATTENTION_EXPLORER_QUOTAS", "0")  # a laptop: never bounded
    at.sidebar.text_area(key="text").set_value(second).run()
    assert not lens_warnings(at)


@pytest.mark.timeout(600)
def test_patching_past_a_pages_quota_is_refused_and_a_run_experiment_still_shown(monkeypatch):
    from explorer import state

    monkeypatch.setenv("ATTENTION_EXPLORER_QUOTAS", "1")
    monkeypatch.setenv("ATTENTION_EXPLORER_PATCH_PER_MINUTE", "1")
    quota.QUOTAS.clear()
    state._PATCHES.clear()
    at = app(view="compare", text="hello world", compare="hello worle")
    at.button(key="patch_go").click().run()
    assert not at.exception and not [w for w in at.warning if "many patching experiments" in w.value]
    at.radio(key="patch_kind").set_value("heads").run()
    at.button(key="patch_go").click().run()
    msgs = [w.value for w in at.warning if "many patching experiments" in w.value]
    assert len(msgs) == 1 and "Try again in" in msgs[0], [w.value for w in at.warning]
    at.radio(key="patch_kind").set_value("positions").run()
    at.button(key="patch_go").click().run()  # run before: served from the cache
    assert not at.exception and not [w for w in at.warning if "many patching experiments" in w.value]
    state._PATCHES.clear()


# --- a failure on the page: a log id, the details in the log ---------------------------------------------

SECRET = "/srv/secret-host-path/weights.bin"


@pytest.mark.timeout(600)
def test_a_failing_stage_shows_a_log_id_and_no_path(monkeypatch, caplog):
    from explorer import state

    def broken(*a, **kw):
        raise OSError(f"cannot read {SECRET}")

    monkeypatch.setattr(state, "stage_figure", broken)
    with caplog.at_level(logging.ERROR, logger="attention_explorer"):
        at = app(stage="scores")
    shown = "\n".join(w.value for w in at.warning)
    ids = re.findall(r"log id `([0-9a-f]{8})`", shown)
    assert ids, shown
    assert SECRET not in shown and "Traceback" not in shown and "secret-host-path" not in str(at)
    logged = [r for r in caplog.records if ids[0] in r.getMessage()]
    assert logged and logged[0].exc_info and SECRET in str(logged[0].exc_info[1])


@pytest.mark.timeout(600)
def test_a_failing_lesson_figure_shows_a_log_id_and_no_path(monkeypatch, caplog):
    from test_lessons import lessons_page

    from explorer import state

    def broken(*a, **kw):
        raise OSError(f"cannot read {SECRET}")

    monkeypatch.setattr(state, "stage_figure", broken)
    with caplog.at_level(logging.ERROR, logger="attention_explorer"):
        at = lessons_page(lesson="2", lang="ko")  # its figures come before the question
    shown = "\n".join(w.value for w in at.warning)
    ids = re.findall(r"로그 번호 `([0-9a-f]{8})`", shown)
    assert ids and "secret-host-path" not in str(at), shown
    assert all(any(i in r.getMessage() and SECRET in str(r.exc_info[1]) for r in caplog.records) for i in ids)


@pytest.mark.timeout(600)
def test_a_failing_model_load_shows_a_log_id_and_no_path(monkeypatch, caplog):
    import model
    from explorer import state

    def broken(name):
        raise model.WeightsError(f"{SECRET} is corrupt")

    monkeypatch.setattr(state, "load_model", broken)
    monkeypatch.setenv("ATTENTION_EXPLORER_HOSTED", "1")  # a hosted (guarded) server: explorer/edges.guarded()
    with caplog.at_level(logging.ERROR, logger="attention_explorer"):
        at = app(model="smollm2", lang="ko")
    assert not at.exception
    (error,) = [e.value for e in at.error]
    ident = re.search(r"로그 번호 `([0-9a-f]{8})`", error).group(1)
    assert SECRET not in error and "secret-host-path" not in str(at)
    assert "python -m model.fetch smollm2" in error  # a named model: how to fetch it
    logged = [r for r in caplog.records if ident in r.getMessage()]
    assert logged and SECRET in str(logged[0].exc_info[1])
    # on a laptop (not guarded) the reader is the host: the loader's own words follow the id
    monkeypatch.delenv("ATTENTION_EXPLORER_HOSTED")
    at = app(model="smollm2", lang="ko")
    (error,) = [e.value for e in at.error]
    assert re.search(r"로그 번호 `[0-9a-f]{8}`", error) and f"{SECRET} is corrupt" in error


# --- chromium without the server's secrets ---------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            children = open(f"/proc/{p}/task/{p}/children").read().split()
        except OSError:
            continue
        for c in map(int, children):
            out.append(c)
            todo.append(c)
    return out


def environ_of(pid: int) -> dict[str, str]:
    raw = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    return dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)


def test_browser_env_is_an_allow_list():
    from explorer.export.renderer import browser_env

    env = browser_env({"PATH": "/usr/bin", "HOME": "/home/a", "LANG": "ko_KR.UTF-8", "LC_ALL": "C.UTF-8",
                       "FONTCONFIG_PATH": "/etc/fonts", "ATTENTION_EXPLORER_ACCESS_CODE": "sesame",
                       "STREAMLIT_SERVER_COOKIE_SECRET": "s3cret", "AWS_SECRET_ACCESS_KEY": "k",
                       "REDIS_URL": "redis://:pw@h"})
    assert env["PATH"] == "/usr/bin" and env["LANG"] == "ko_KR.UTF-8" and env["LC_ALL"] == "C.UTF-8"
    assert "TMPDIR" in env and "FONTCONFIG_PATH" in env
    assert not {"ATTENTION_EXPLORER_ACCESS_CODE", "STREAMLIT_SERVER_COOKIE_SECRET", "AWS_SECRET_ACCESS_KEY",
                "REDIS_URL"} & set(env)


@pytest.mark.timeout(300)
def test_the_started_chromium_has_none_of_the_servers_secrets(monkeypatch):
    from explorer import export as ex

    if ex.unavailable_reason() is not None:
        pytest.skip(f"no export browser here: {ex.unavailable_reason()}")
    secrets = {"ATTENTION_EXPLORER_ACCESS_CODE": "access-code-" + uuid.uuid4().hex,
               "STREAMLIT_SERVER_COOKIE_SECRET": "cookie-secret-" + uuid.uuid4().hex,
               "SOME_API_TOKEN": "token-" + uuid.uuid4().hex}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    ex.shutdown()  # a browser started earlier in this process had another environment
    try:
        png = ex.figure_bytes(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])), "png", scale=1, width=200, height=150)
        assert png[:4] == b"\x89PNG"
        wrapper = ex._RENDERER._kaleido.subprocess.pid
        procs = [wrapper] + descendants(wrapper)
        exes = {p: os.path.basename(os.readlink(f"/proc/{p}/exe")) for p in procs if os.path.exists(f"/proc/{p}")}
        # the browser itself (its helpers, --type=renderer/gpu/zygote, write their title over their environment)
        (main,) = [p for p, name in exes.items() if "chrom" in name
                   and b"--type=" not in open(f"/proc/{p}/cmdline", "rb").read()]
        assert "PATH" in environ_of(main) and "PATH" in environ_of(wrapper)  # what it needs, it has
        for p in procs:
            try:
                raw = open(f"/proc/{p}/environ", "rb").read().decode(errors="replace")
            except OSError:  # a helper that exited meanwhile
                continue
            assert not [k for k in secrets if k in raw] and not [v for v in secrets.values() if v in raw], exes.get(p)
    finally:
        ex.shutdown()
    time.sleep(0.1)


# --- the noisy bench's reading of the page (bench/noisy.py) ----------------------------------------------


def test_the_noisy_bench_tells_refusals_from_failures():
    from bench import noisy

    words = noisy._refusal_words()
    w = {"asked": 0, "served": 0, "busy": 0, "rate": 0, "failed": 0, "said": []}
    noisy._count(w, words["lens"], None)
    noisy._count(w, words["lens"], quota.Refused("lens", 9.5, lim=quota.Limit(6, 6)).message("en"))
    noisy._count(w, words["export"], quota.Refused("export", busy=True).message("en"))
    noisy._count(w, words["export"], i18n.t("export_error", "en", id="0123abcd"))
    assert {k: w[k] for k in ("asked", "served", "rate", "busy", "failed")} == {
        "asked": 4, "served": 1, "rate": 1, "busy": 1, "failed": 1}
    res = {"bounds": "b", "learners": {"errors": 0, "click": {"p95_s": 0.1}, "sentence": {"p95_s": 0.1},
                                       "burst": {"p95_s": 0.1}},
           "noisy": {"pages_refused": 1, "websockets_refused": 0,
                     "work": {"lens": dict(w, asked=3, busy=0, rate=2, failed=0), "patching": dict(w, busy=0, rate=0, failed=0)}}}
    assert not noisy.targets(res)["noisy.work"]["ok"]  # patching was never refused
    res["noisy"]["work"]["patching"]["rate"] = 1
    assert noisy.targets(res)["noisy.work"]["ok"]


@pytest.mark.timeout(600)
def test_a_costly_lens_and_ablation_wait_for_a_click(monkeypatch):
    """Past ``state.AUTO_WORK`` multiply-adds, the logit lens, every head's ablation and the Decoding
    view's token-by-token writing run on a click,
    not as the page opens (Gemma 3's lens and ablations of a 10-token sentence: 3.2e10 and 1.9e11, over
    the laptop budget 2e10); below it (the seed's: under 1e9) they are drawn at once. A click makes them
    once; a new sentence asks again; one made already is drawn with no click."""
    from explorer import state

    tag = uuid.uuid4().hex[:6]
    first, second = f"the cat sat {tag}", f"a dog ran {tag}"
    at = app(view="beyond", text=first, block="decoder.cross_attn")  # a block attention_vs_effect reads
    assert not at.exception
    assert not [b for b in at.button if b.key in ("lens_go", "effects_go")]
    assert state.lens_ready("seed", [first], 0) and state.lens_work(state.load_model("seed")[0].info, 12) < 1e9

    monkeypatch.setattr(state, "AUTO_WORK", 1.0)  # every analysis costly
    at.sidebar.text_area(key="text").set_value(second).run()
    assert not at.exception
    go_lens = [b for b in at.button if b.key == "lens_go"]
    go_effects = [b for b in at.button if b.key == "effects_go"]
    assert len(go_lens) == 1 and len(go_effects) == 1
    layers = state.load_model("seed")[0].info.n_layers
    assert f"{layers} layers" in go_lens[0].label and "11,271 entries" in go_lens[0].label, go_lens[0].label
    assert not state.lens_ready("seed", [second], 0)  # nothing computed before the click
    assert not state.effects_ready("seed", second, "decoder.cross_attn")
    go_lens[0].click().run()
    assert not at.exception and state.lens_ready("seed", [second], 0)
    assert not [b for b in at.button if b.key == "lens_go"]  # gone once clicked
    [b for b in at.button if b.key == "effects_go"][0].click().run()
    assert not at.exception and state.effects_ready("seed", second, "decoder.cross_attn")
    assert not [b for b in at.button if b.key in ("lens_go", "effects_go")]
    at.sidebar.text_area(key="text").set_value(first).run()  # made before: drawn with no click
    assert not [b for b in at.button if b.key == "lens_go"]
    # the Decoding view: writing tokens one at a time, on a click when costly
    at = app(view="decoding", text=second)
    (go_trace,) = [b for b in at.button if b.key == "trace_go"]
    n_new = len(state.load_model("seed")[0].tokenizer.encode([second])[0].ids) + 8  # the seed: its length + 8
    assert f"{n_new} tokens" in go_trace.label and not state.trace_ready("seed", second)
    go_trace.click().run()
    assert not at.exception and state.trace_ready("seed", second)
    assert not [b for b in at.button if b.key == "trace_go"]
