"""The control protocol's vocabulary, shared by the server and every transport that carries it (docs/protocol.md).

It sits below both of its users: the server's control handler builds replies
with it, and a transport answers with it the requests it cannot even decode.
"""

from __future__ import annotations

from typing import Any

from .zmq.protocol import PROTOCOL_VERSION, REASONS, schema_id

# Error codes of control replies (besides the input reasons of REASONS that a request can also fail with).
ERROR_CODES = ("oversized", "malformed", "bad_message", "bad_version", "unknown_command", "bad_request",
               "wrong_mode", "bad_state", "unknown_signal", "wrong_type", "not_finite", "out_of_range",
               "not_allowed", "scenario_active", "param_error", "scenario_error", "internal")


def error_reply(code: str, message: str, request: Any = None) -> dict:
    """The reply to a request that failed (also for requests that could not be decoded)."""
    rep: dict = {"v": PROTOCOL_VERSION, "ok": False, "error": {"code": code, "message": message}}
    if isinstance(request, dict):
        rid = request.get("id")
        if rid is None or isinstance(rid, (int, str)) and not isinstance(rid, bool):
            rep["id"] = rid
        if isinstance(request.get("cmd"), str):
            rep["cmd"] = request["cmd"]
    return rep


__all__ = ["ERROR_CODES", "PROTOCOL_VERSION", "REASONS", "error_reply", "schema_id"]
