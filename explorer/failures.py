"""What a visitor sees when something fails on the server: a short message and a log id; the details
(the exception, its message, its traceback, the server's paths) go to the server's log under the same id.

    except Exception:
        ident = failures.logged(log, "loading %s failed", name)      # inside the except block
        st.error(t("model_failed", name=name, id=ident))

The id is 8 hexadecimal digits, random (``secrets``): a host finds the visitor's failure with
``grep <id>`` in the server's log; it says nothing about the server.
"""
from __future__ import annotations

import logging
import secrets

ID_HEX = 8


def new_id() -> str:
    return secrets.token_hex(ID_HEX // 2)


def logged(log: logging.Logger, what: str, *args) -> str:
    """Log the exception being handled (``log.exception``) as ``[id] what``; returns the id."""
    ident = new_id()
    log.exception("[%s] " + what, ident, *args)
    return ident


class Shown(Exception):
    """An exception whose message is written for the page (no path, no traceback; in the page's
    language): a download that was refused or failed says it under its button (``install``)."""


def _shown(exc: BaseException | None) -> Shown | None:
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, Shown):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


_installed = False


def install() -> None:
    """Once per process: a download made when clicked (``st.download_button(data=callable)``) that
    raises ``Shown`` shows that message under its button. Streamlit 1.67 answers any failure of such a
    callable with its own fixed "Failed to generate file for download"; this handler answers the same
    way except for a ``Shown``, whose words it sends instead (the button shows a failure's message for
    five seconds). Anything else is logged and answered as before."""
    global _installed
    if _installed:
        return
    try:
        import asyncio

        from streamlit.runtime import backend_operation_handler as boh
    except ImportError:
        return
    handler = getattr(boh, "DeferredFileHandler", None)
    if handler is None or not hasattr(handler, "handle"):
        logging.getLogger("attention_explorer").warning(
            "this Streamlit has no DeferredFileHandler: a refused export says Streamlit's own words")
        _installed = True
        return

    async def handle(self, request, session_id):
        file_id = request.deferred_file.file_id
        try:
            url = await asyncio.to_thread(self._get_media_file_mgr().execute_deferred, file_id)
        except Exception as e:
            shown = _shown(e)
            if shown is None:
                boh._LOGGER.exception("Error executing deferred callable for file_id %s", file_id)
            return boh.BackendOperationResponse(
                request_id=request.request_id,
                error_msg=str(shown) if shown is not None else "Failed to generate file for download")
        return boh.BackendOperationResponse(request_id=request.request_id,
                                            deferred_file=boh.DeferredFileResponsePayload(url=url))

    handle.__wrapped__ = handler.handle
    handler.handle = handle
    _installed = True
