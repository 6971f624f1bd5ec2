"""The class's answers (explorer/poll.py) on both stores, SQLite (WAL) and a real redis-server.

Every promise of the module, on each backend: a learner's later answer replaces the earlier, the
same answer sent again (a page that reconnects and replays) changes nothing, counts name every
choice; a closed or revealed poll refuses, as do a reset poll's old round, a choice out of range, a
malformed id and a learner past the bound; answers sent at once by several processes and threads
are all counted, once; a writer process killed with SIGKILL in the middle of its writes loses
nothing it had committed; the store's URL, its default and the password never in a log line."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from redisd import redis_server  # noqa: F401 (the fixture)

from explorer import i18n, poll

ROOT = Path(__file__).resolve().parent.parent
Q = {"en": "Which token does <b>it</b> attend to?", "ko": "<b>it</b>은 어느 토큰을 볼까요?"}
CHOICES = {"en": ["0: the", "1: cat", "2: the", "3: =cmd|' /C calc'!A0"], "ko": ["0: the", "1: cat", "2: the", "3: =x"]}


@pytest.fixture(params=["sqlite", "redis"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/state/{poll.FILENAME}"
    return request.getfixturevalue("redis_server").url


def learner(i: int) -> str:
    return f"learner-{i:06d}"


def test_a_whole_poll_answer_change_replay_close_reveal_reset(url):
    s = poll.open_store(url)
    pid = s.create(Q, CHOICES, meta={"weights": [0.1, 0.2, 0.3, 0.4], "sentence": "the cat"})
    assert poll.valid_id(pid)
    p = s.get(pid)
    assert (p.state, p.round, p.n_choices) == ("open", 1, 4)
    assert p.question_in("ko") == Q["ko"] and p.choices_in("ko")[3] == "3: =x" and p.choices_in("fr") == CHOICES["en"]
    assert p.meta["weights"] == [0.1, 0.2, 0.3, 0.4]
    assert s.counts(pid) == {0: 0, 1: 0, 2: 0, 3: 0}

    assert s.answer(pid, learner(1), 0) == 0
    assert s.answer(pid, learner(2), 2) == 2
    assert s.answer(pid, learner(1), 1) == 1  # learner 1 changes their mind: replaced, not added
    for _ in range(3):
        s.answer(pid, learner(2), 2, round=1)  # a reconnecting page replays its click: no change
    assert s.counts(pid) == {0: 0, 1: 1, 2: 1, 3: 0}
    assert s.mine(pid, learner(1)) == 1 and s.mine(pid, learner(3)) is None
    other = poll.open_store(url)  # another replica's store object sees the same
    assert other.counts(pid) == {0: 0, 1: 1, 2: 1, 3: 0} and other.get(pid).state == "open"

    with pytest.raises(poll.BadChoice):
        s.answer(pid, learner(3), 4)
    with pytest.raises(poll.BadChoice):
        s.answer(pid, learner(3), -1)
    with pytest.raises(poll.BadLearner):
        s.answer(pid, "short", 1)
    with pytest.raises(poll.UnknownPoll):
        s.answer("zzzzzzzz", learner(3), 1)  # well formed, never made
    with pytest.raises(poll.UnknownPoll):
        s.counts("../../etc")  # malformed: refused before the store is asked

    assert other.close(pid).state == "closed"
    with pytest.raises(poll.PollClosed) as refused:
        s.answer(pid, learner(3), 0)
    assert refused.value.code == "closed"
    with pytest.raises(poll.PollClosed):
        s.answer(pid, learner(1), 2)  # a change after the close is refused too
    assert s.counts(pid) == {0: 0, 1: 1, 2: 1, 3: 0}
    assert s.reveal(pid).state == "revealed"
    assert s.close(pid).state == "revealed"  # closing a revealed poll does not hide the reveal
    with pytest.raises(poll.PollClosed):
        s.answer(pid, learner(3), 0)

    p = s.reset(pid)
    assert (p.state, p.round) == ("open", 2) and s.counts(pid) == {0: 0, 1: 0, 2: 0, 3: 0}
    with pytest.raises(poll.StaleRound):  # a page that still shows round 1 replays its click
        s.answer(pid, learner(2), 2, round=1)
    s.answer(pid, learner(2), 3, round=2)
    assert s.counts(pid) == {0: 0, 1: 0, 2: 0, 3: 1} and s.mine(pid, learner(1)) is None


def test_what_a_poll_may_hold_is_bounded(url, monkeypatch):
    s = poll.open_store(url)
    for question, choices in (("q", ["only one"]), ("q", [f"c{i}" for i in range(poll.MAX_CHOICES + 1)]),
                              ("x" * (poll.MAX_QUESTION_CHARS + 1), ["a", "b"]), ({"ko": "q"}, ["a", "b"]),
                              ("q", {"en": ["a", "b"], "ko": ["a"]}), ("q", "ab"), ("q", ["a", 3])):
        with pytest.raises(ValueError):
            s.create(question, choices)
    monkeypatch.setattr(poll, "MAX_LEARNERS", 3)
    pid = s.create("q", ["a", "b"])
    for i in range(3):
        s.answer(pid, learner(i), i % 2)
    with pytest.raises(poll.PollFull):
        s.answer(pid, learner(9), 0)
    s.answer(pid, learner(0), 1)  # a learner already counted may still change their answer
    assert s.counts(pid) == {0: 1, 1: 2}  # learners 1 and 0 on choice 1, learner 2 on 0
    assert len({s.create("q", ["a", "b"]) for _ in range(20)}) == 20


def test_every_refusal_has_words_in_both_languages():
    for code in poll.ERRORS:
        for lang in i18n.LANGS:
            assert i18n.t(f"poll.refused.{code}", lang).strip()
    assert i18n.t("poll.refused.closed", "ko") != i18n.t("poll.refused.closed", "en")


# --- several processes and threads at once ---------------------------------------------------------

WRITER = """
import os, sys, time
from explorer import poll
s = poll.open_store(sys.argv[1])
pid, first, n, go = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
print("ready", flush=True)
while go != "-" and not os.path.exists(go):
    time.sleep(0.005)
for i in range(first, first + n):
    who = f"learner-{i:06d}"
    s.answer(pid, who, i % 3)          # a first answer
    s.answer(pid, who, (i + 1) % 4)    # changed
    s.answer(pid, who, (i + 1) % 4)    # and replayed
    print(who, flush=True)             # committed: answer() has returned
"""


def writer(url: str, pid: str, first: int, n: int, go: str = "-") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, url, pid, str(first), str(n), go], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def expected(learners) -> dict[int, int]:
    out = {0: 0, 1: 0, 2: 0, 3: 0}
    for i in learners:
        out[(i + 1) % 4] += 1
    return out


def test_answers_sent_at_once_by_processes_and_threads_are_each_counted_once(url, tmp_path):
    s = poll.open_store(url)
    pid = s.create(Q, CHOICES)
    go = tmp_path / "go"
    procs = [writer(url, pid, 1000 * k, 100, str(go)) for k in range(3)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()

    def here(first: int) -> None:
        for i in range(first, first + 50):
            s.answer(pid, learner(i), i % 3)
            s.answer(pid, learner(i), (i + 1) % 4)

    threads = [threading.Thread(target=here, args=(5000 + 1000 * k,)) for k in range(2)]
    go.touch()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    everyone = [i for k in range(3) for i in range(1000 * k, 1000 * k + 100)] + \
               [i for k in range(2) for i in range(5000 + 1000 * k, 5000 + 1000 * k + 50)]
    counts = poll.open_store(url).counts(pid)
    assert sum(counts.values()) == len(everyone) == 400
    assert counts == expected(everyone)


def test_a_writer_killed_mid_write_loses_nothing_it_committed(url):
    """A replica's process killed (SIGKILL) while it writes answers as fast as it can: every answer it
    reported committed is there with its last choice, nothing is counted twice, the file is sound, and
    the learner whose click was in flight sends it again to another replica: counted once."""
    s = poll.open_store(url)
    pid = s.create(Q, CHOICES)
    p = writer(url, pid, 0, 100_000)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    committed: list[str] = []
    deadline = time.monotonic() + 60
    while len(committed) < 300 and time.monotonic() < deadline:
        line = p.stdout.readline().strip()
        if line:
            committed.append(line)
    os.kill(p.pid, signal.SIGKILL)  # in the middle of its next writes
    p.wait(10)
    committed += [line.strip() for line in p.stdout.read().splitlines() if line.strip()]
    assert len(committed) >= 300
    after = poll.open_store(url)  # another replica, after the kill
    counts = after.counts(pid)
    done = [int(w.split("-")[1]) for w in committed]
    for i in done:
        assert after.mine(pid, learner(i)) == (i + 1) % 4
    total = sum(counts.values())
    assert total in (len(done), len(done) + 1)  # + the one in flight, if its first write had committed
    in_flight = len(done)
    after.answer(pid, learner(in_flight), (in_flight + 1) % 4)  # its page replays it on the other replica
    after.answer(pid, learner(in_flight), (in_flight + 1) % 4)
    assert after.counts(pid) == expected(done + [in_flight])
    if url.startswith("sqlite"):
        with sqlite3.connect(url[len("sqlite://"):]) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- choosing the store ------------------------------------------------------------------------------

def test_the_store_comes_from_its_url_and_the_environment(tmp_path):
    s = poll.open_store(f"sqlite://{tmp_path}/a/{poll.FILENAME}")
    assert s.kind == "sqlite" and s.path == tmp_path / "a" / poll.FILENAME
    assert oct(os.stat(s.path).st_mode & 0o777) == oct(0o600)  # private: it holds the class's answers
    assert poll.open_store("redis://127.0.0.1:1/3").kind == "redis"  # connected on first use
    for bad in ("http://x", "sqlite://relative.db", "sqlite:///", "", "postgres://h/db"):
        with pytest.raises(ValueError, match=poll.STORE_ENV):
            poll.open_store(bad)
    assert poll.default_url({poll.STORE_ENV: "redis://r:6379/1"}) == "redis://r:6379/1"
    assert poll.default_url({"ATTENTION_EXPLORER_STATE_DIR": str(tmp_path / "run")}) == \
        f"sqlite://{tmp_path / 'run' / poll.FILENAME}"
    assert "secret" not in poll.describe("redis://:secret@host:6379/1") and "host:6379/1" in poll.describe(
        "redis://:secret@host:6379/1")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(OSError):  # no silent per-process memory: the page says the store failed
        poll.open_store(f"sqlite://{blocked}/polls.sqlite3")


def test_a_redis_out_of_reach_raises_within_its_timeouts():
    s = poll.RedisPollStore(f"redis://127.0.0.1:{_closed_port()}/0", timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(Exception):
        s.counts("abcdefgh")
    assert time.monotonic() - t0 < 3


def _closed_port() -> int:
    from redisd import free_port

    return free_port()


# --- compose and Kubernetes: the answers in their one Redis ---------------------------------------

def test_compose_and_kubernetes_keep_the_answers_in_the_redis_every_replica_reaches():
    from urllib.parse import urlsplit

    from test_deploy import REDIS_URL, compose, deployment, k8s_env

    c = compose({"ACCESS_CODE": "tiger-42", "COOKIE_SECRET": "c" * 64, "REDIS_PASSWORD": "d" * 64,
                 "PRESENTER_KEY": "p" * 16})["services"]["app"]["environment"]
    k = k8s_env(deployment()[1])
    for env in (c, k):
        polls, limits = urlsplit(env[poll.STORE_ENV]), urlsplit(env[REDIS_URL])
        # the same server and password as the access limits, its own database
        assert polls.scheme == "redis" and (polls.hostname, polls.port, polls.password) == \
            (limits.hostname, limits.port, limits.password)
        assert polls.path == "/1" and limits.path == "/0"
        assert poll.open_store(env[poll.STORE_ENV]).kind == "redis"  # as explorer/poll.py reads it
    assert c["ATTENTION_EXPLORER_PRESENTER_KEY"] == "p" * 16
    assert k["ATTENTION_EXPLORER_PRESENTER_KEY"] == "secret.attention-explorer-presenter.key"


# --- the questions, the reveal's figure and the CSV -------------------------------------------------

def test_which_token_question_offers_the_allowed_keys_with_the_heads_weights(run, tmp_path):
    from explorer.poll_questions import answer_of, token_question, weights_of
    from explorer.views.data import axis_tokens

    block = "encoder.self_attn" if "encoder.blocks.0.self_attn.hook_pattern" in run else "decoder.self_attn"
    q_toks, k_toks, n_q, n_k = axis_tokens(run, block, 0, 0)
    ask = token_question(run, model="seed", block=block, layer=0, head=1, sentence=0, query=2, text="hello <b>&")
    row = run[f"{block.split('.')[0]}.blocks.0.{block.split('.')[1]}.hook_pattern"][0][1][2][:n_k]
    assert ask.meta["keys"] == [j for j in range(n_k) if row[j] > 0]  # the keys the mask allows, in order
    assert abs(sum(ask.meta["weights"]) - 1) < 1e-5 and ask.meta["answer"] == int(max(
        range(len(ask.meta["weights"])), key=lambda i: ask.meta["weights"][i]))
    assert ask.choices["en"] == ask.choices["ko"] and ask.choices["en"][0].startswith("0: ")
    assert "“2: " in ask.question["en"] and "layer 0" not in ask.question["ko"] and "레이어 0" in ask.question["ko"]
    assert token_question(run, model="seed", block=block, layer=0, head=1, sentence=0, query=n_q, text="") is None
    s = poll.open_store(f"sqlite://{tmp_path}/{poll.FILENAME}")
    p = s.get(s.create(ask.question, ask.choices, meta=ask.meta))  # what the store keeps is what the reveal reads
    assert answer_of(p) == ask.meta["answer"] and weights_of(p) == ask.meta["weights"]


def test_a_lesson_question_goes_to_the_class_in_both_languages_and_a_number_question_does_not():
    from explorer.lessons.catalog import Question
    from explorer.poll_questions import lesson_question

    class Lesson:
        number = 4

        def __init__(self, kind):
            self.kind = kind

        def ask(self, runs, lang):
            words = {"en": ["larger", "smaller"], "ko": ["더 크다", "더 작다"]}[lang]
            return Question(self.kind, f"q-{lang}", words if self.kind == "choice" else [], 1, f"why-{lang}")

    ask = lesson_question(Lesson("choice"), [], "a sentence")
    assert ask.question == {"en": "q-en", "ko": "q-ko"} and ask.choices["ko"] == ["더 크다", "더 작다"]
    assert ask.meta == {"kind": "lesson", "lesson": 4, "sentence": "a sentence", "answer": 1,
                        "why": {"en": "why-en", "ko": "why-ko"}}
    assert lesson_question(Lesson("number"), [], "") is None


def test_the_reveal_figure_and_the_csv_keep_user_text_as_text():
    from helpers import RAW_MARKUP, strings

    from explorer.export import renderer
    from explorer.views import poll as view

    choices = ["0: <b>the</b>", "1: =HYPERLINK(\"x\")", "2: the"]
    counts = {0: 3, 1: 1, 2: 0}
    for lang in i18n.LANGS:
        fig = view.class_and_model(choices, counts, weights=[0.2, 0.7, 0.1], answer=1,
                                   labels=i18n.fig_labels(lang), title="<i>q</i>")
        d = fig.to_dict()
        assert not any(RAW_MARKUP.search(x) for x in strings(d)), [x for x in strings(d) if RAW_MARKUP.search(x)]
        assert "&lt;b&gt;the&lt;/b&gt;" in d["layout"]["yaxis"]["ticktext"][0]
        cls, model = d["data"]
        assert list(cls["x"]) == [0.75, 0.25, 0.0] and list(model["x"]) == [0.2, 0.7, 0.1]
        assert cls["text"][0] == i18n.t("fig.poll_bar", lang, n=3, p="75")
        texts = [a["text"] for a in d["layout"]["annotations"]]
        assert i18n.t("fig.poll_class_n", lang, n=4) in texts and i18n.t("fig.poll_top_key", lang) in texts
    lesson = view.class_and_model(choices, counts, answer=2, labels=i18n.fig_labels("ko")).to_dict()
    assert len(lesson["data"]) == 1 and i18n.t("fig.poll_answer_key", "ko") in [a["text"] for a in lesson["layout"]["annotations"]]
    with pytest.raises(ValueError):
        view.class_and_model(choices, counts, weights=[1.0])

    csv = renderer.table_bytes(view.class_table("=1+1 which?", choices, counts)).decode("utf-8-sig")
    lines = csv.strip().split("\r\n")
    assert lines[0] == "question,choice,count"
    assert lines[1] == "'=1+1 which?,0: <b>the</b>,3"  # a formula made inert; no learner id anywhere
    assert lines[2].startswith("'=1+1 which?,") and lines[2].endswith(",1") and len(lines) == 4


def test_a_browser_behind_the_balancer_is_one_learner_per_poll_without_its_cookie_stored():
    from explorer.poll_ui import browser_learner

    cookie = "f" * 32
    a, b = browser_learner("abcdefgh", cookie), browser_learner("abcdefgh", cookie)
    assert a == b and poll.valid_learner(a) and cookie not in a  # the same browser: the same learner
    assert browser_learner("abcdefgk", cookie) != a and browser_learner("abcdefgh", "e" * 32) != a
    for junk in (None, "", "short", "x" * 200, "bad;cookie=1" * 3):
        assert browser_learner("abcdefgh", junk) is None


def test_a_link_to_no_poll_says_so_in_the_learners_language_without_loading_a_model(tmp_path, monkeypatch):
    from helpers import app

    monkeypatch.setenv(poll.STORE_ENV, f"sqlite://{tmp_path}/{poll.FILENAME}")
    monkeypatch.setattr(poll, "_shared", None)
    for pid, lang in (("zzzzzzzz", "ko"), ("<script>", "en")):
        at = app(timeout=60, poll=pid, lang=lang)
        assert not at.exception
        assert [w.value for w in at.warning] == [i18n.t("poll.refused.unknown", lang)]
        assert not at.get("plotly_chart") and not at.selectbox and not at.slider  # no explorer, no model run
    monkeypatch.setattr(poll, "_shared", None)


def test_the_lessons_page_in_presenter_mode_opens_its_question_to_the_class(tmp_path, monkeypatch):
    """A laptop (no key): presenter mode on lesson 4, "Ask the class" opens the lesson's own question
    in both languages, and the panel shows its count and the learner link (AppTest, the real page)."""
    from helpers import APP
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv(poll.STORE_ENV, f"sqlite://{tmp_path}/{poll.FILENAME}")
    monkeypatch.delenv("ATTENTION_EXPLORER_PRESENTER_KEY", raising=False)
    monkeypatch.delenv("ATTENTION_EXPLORER_HOSTED", raising=False)
    monkeypatch.setattr(poll, "_shared", None)
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in (("present", "1"), ("lesson", "4"), ("lang", "ko")):
        at.query_params[k] = v
    at.run()
    at = at.switch_page("lessons/page.py").run()
    assert not at.exception
    ask = at.button(key="poll_open_lesson")
    assert ask.label == i18n.t("poll.offer_lesson", "ko", n=4)
    at = ask.click().run()
    assert not at.exception
    p = poll.open_store(f"sqlite://{tmp_path}/{poll.FILENAME}").get(at.session_state["_poll_live"])
    assert p.meta["kind"] == "lesson" and p.meta["lesson"] == 4
    assert p.choices["en"] == [i18n.t(f"lesson.4.{k}", "en") for k in ("larger", "smaller", "same")]
    assert p.choices["ko"] == [i18n.t(f"lesson.4.{k}", "ko") for k in ("larger", "smaller", "same")]
    assert [m.value for m in at.metric] == ["0"]
    link = [c.value for c in at.code if "poll=" in c.value]
    assert link and f"poll={p.id}" in link[0] and "lang=ko" in link[0]
    monkeypatch.setattr(poll, "_shared", None)


def test_the_learner_page_answers_changes_is_bounded_per_page_and_sits_behind_the_access_code(tmp_path, monkeypatch):
    """The learner page in the real app (AppTest, no model): a tap answers, another changes the answer,
    past the page's bound a tap is refused with the quota's words and the stored answer stays; with an
    access code set, the poll is not shown before the code."""
    from helpers import app

    url = f"sqlite://{tmp_path}/{poll.FILENAME}"
    monkeypatch.setenv(poll.STORE_ENV, url)
    monkeypatch.setenv("ATTENTION_EXPLORER_QUOTAS", "1")
    monkeypatch.setenv("ATTENTION_EXPLORER_POLL_ANSWERS_PER_MINUTE", "1")
    monkeypatch.setenv("ATTENTION_EXPLORER_POLL_ANSWERS_BURST", "2")
    monkeypatch.setattr(poll, "_shared", None)
    s = poll.open_store(url)
    pid = s.create(Q, CHOICES, meta={"sentence": "the cat <b>"})
    at = app(timeout=60, poll=pid, lang="en")
    assert not at.exception and not at.selectbox
    me = at.query_params["me"][-1] if isinstance(at.query_params["me"], list) else at.query_params["me"]
    assert poll.valid_learner(me) and [b.label for b in at.button][:2] == [md(CHOICES["en"][0]), md(CHOICES["en"][1])]
    at = at.button(key="poll_choice_1").click().run()
    assert s.mine(pid, me) == 1
    at = at.button(key="poll_choice_2").click().run()
    assert s.mine(pid, me) == 2 and s.counts(pid)[2] == 1  # changed, counted once
    at = at.button(key="poll_choice_0").click().run()  # the third tap in a minute: over the bound
    assert s.mine(pid, me) == 2
    assert any("Try again in" in w.value for w in at.warning), [w.value for w in at.warning]

    monkeypatch.setenv("ATTENTION_EXPLORER_ACCESS_CODE", "tiger-42")
    gated = app(timeout=60, poll=pid, lang="en")
    assert not gated.exception and not [b for b in gated.button if b.key and b.key.startswith("poll_choice")]
    assert any(t.value == i18n.t("access.heading", "en") for t in gated.header)
    monkeypatch.setattr(poll, "_shared", None)


def md(text: str) -> str:
    from explorer.poll_ui import md as escape

    return escape(text)
