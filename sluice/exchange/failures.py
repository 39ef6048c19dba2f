"""Where a failure becomes the client's answer: the one mapping, for the exchange and for
the server's calls that no exchange took. Before the response started, the error's
status and headers with its front door's error body; after, the door's error event, and
the connection closes. Cut by shutdown, the 503 (or the last event) goes out at once,
without waiting for the client. An exception no error class describes is logged and
answered as a 500. ``door`` None: the chat wire's shape (a path no door answers).
Only failures come here: nothing per chunk."""

from __future__ import annotations

import logging

from sluice.core.tally import Tally
from sluice.errors import ApiError, InternalError, ShuttingDownError
from sluice.exchange.heads import error_headers
from sluice.exchange.ports import ClientGoneError, ClientStream, FrontDoor, Headers
from sluice.wire.errors import error_event, error_json

_log = logging.getLogger("sluice.server")


def unexpected_failure(request_id: str) -> InternalError:
    """The answer to an exception no error class describes, logged with its traceback:
    call it in the ``except`` clause that caught it."""
    _log.exception("request %s failed", request_id)
    return InternalError("The gateway failed to handle the request.")


async def answer_failure(
    writer: ClientStream, err: ApiError, headers: Headers, door: FrontDoor | None
) -> None:
    """``err`` as the client's answer, waiting for the client to take it; nothing when
    the response already ended."""
    if not writer.started:
        await writer.send(err.http_status, error_headers(err, headers), _body(err, door))
    elif not writer.finished:
        await writer.end(_event(err, door, None), close=True)


def answer_shutdown(
    writer: ClientStream,
    err: ShuttingDownError,
    headers: Headers,
    door: FrontDoor | None,
    tally: Tally | None = None,
) -> int:
    """``err`` as the answer of a response the gateway's stop cut: sent now, the
    connection not kept alive; a stream's last event carries ``tally`` (the usage so
    far). The status: the error's, or 200 when the response had started."""
    try:
        if not writer.started:
            writer.keep_alive = False
            writer.send_now(err.http_status, error_headers(err, headers), _body(err, door))
            return err.http_status
        if not writer.finished:
            writer.end_now(_event(err, door, tally))
    except ClientGoneError:
        pass
    return 200


def _body(err: ApiError, door: FrontDoor | None) -> bytes:
    return error_json(err) if door is None else door.error_body(err)


def _event(err: ApiError, door: FrontDoor | None, tally: Tally | None) -> bytes:
    return error_event(err) if door is None else door.error_event(err, tally)
