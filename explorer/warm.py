"""The server's start: the default page's work done once, in the background, before anyone asks.

``start()`` (called by explorer/app.py's lifespan when the server starts) runs ``warm_up`` in a
daemon thread: the imports of the first page (torch, the model code, the views, plotly's figure
classes), the default model, its run on the default sentences and the default stage's figure, each
through the same caches the page reads (explorer/state.py). A failure is logged and forgotten: the
page then does the same work itself, and says what went wrong as it always does.

``ATTENTION_EXPLORER_WARM=0`` switches it off (e.g. a server started only for its health check).
"""
from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger("attention_explorer")
_started = threading.Event()
done = threading.Event()  # set when the warm-up has finished (or failed)
timings: dict[str, float] = {}


def enabled() -> bool:
    return os.environ.get("ATTENTION_EXPLORER_WARM", "1").strip().lower() not in ("0", "false", "no", "off")


def start() -> bool:
    """Start the warm-up once per process (False when it is off or already started)."""
    if not enabled() or _started.is_set():
        return False
    _started.set()
    threading.Thread(target=_run, name="attention-explorer-warm-up", daemon=True).start()
    return True


def _run() -> None:
    try:
        warm_up()
    except Exception:  # the page does the same work itself, and reports what fails
        log.exception("warm-up failed (the first page will do its own work)")
    finally:
        done.set()


def warm_up(model_name: str = "seed", lang: str = "en") -> dict[str, float]:
    """What the default page needs first, made once: returns the seconds each step took."""
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        timings[name] = round(time.perf_counter() - t0, 3)

    from explorer import inputs, state  # torch, the model code, the views
    from explorer.views import stages
    # and the rest of what the page imports (export, presenter, access): the page then imports nothing
    from explorer import access, export_ui, presenter, ui  # noqa: F401
    from explorer.views import tutorial002  # noqa: F401
    lap("imports")
    m, _ = state.load_model(model_name)
    lap("model")
    texts, _, n_tokens = state.limit_tokens(model_name, m, inputs.limit_sentences(inputs.DEFAULT_TEXT)[0])
    run = state.run(model_name, texts, n_tokens, m.info, next_tokens="last")  # as the page asks
    lap("run")
    block = stages.blocks_for(m.info)[0]
    sel = stages.Selection(model=model_name, sentence=0, layer=0, head=0, block=block)
    record = stages.REGISTRY[inputs.DEFAULT_STAGE]
    state.stage_figure(inputs.DEFAULT_STAGE, model_name, texts, run, m.info, sel, lang)
    if record.click:  # the page draws the figure's clickable copy
        state.stage_figure(inputs.DEFAULT_STAGE, model_name, texts, run, m.info, sel, lang, pick=record.click)
    lap("figure")
    log.info("warm-up: %s", timings)
    return dict(timings)
