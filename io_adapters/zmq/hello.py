"""Hello subscriptions: how a subscriber learns that its subscriptions are live (docs/protocol.md, 3.3).

ZeroMQ gives a subscriber no sign of when the publisher has its
subscription: messages published before it arrives are lost for that
subscriber without a trace ("slow joiner").  In lockstep that was the
states of the first ``step`` after subscribing.  So the state socket is an
XPUB, which hands the subscriptions it receives to the server, and a
subscriber adds, after its own topics, one of the form ``hello/<token>``
(a token of its own).  Subscriptions of one connection arrive in the order
they were made, so once the server reads the hello subscription, the
subscriber's earlier ones are in place; the server then publishes one
message on exactly that topic, ``{"v": 1, "seq": <seq of the last state
message sent>}``, and every state message after it reaches the subscriber.

Served between ticks (:meth:`HelloResponder.serve` from the adapter's
``poll_control``), never in the tick.
"""

from __future__ import annotations

import time

import msgpack
import zmq

from ..protocol import PROTOCOL_VERSION

TOPIC_HELLO = b"hello/"
MAX_PER_CALL = 64  # subscription messages taken per call (a peer flooding subscriptions cannot hold the loop)
CHECK_PERIOD_NS = 2_000_000  # realtime: look for subscriptions at most every 2 ms (a recv that finds none is ~1 us)


class HelloResponder:
    """Reads the subscription messages of an XPUB socket and answers the hello ones.

    Parameters
    ----------
    xpub
        The server's state socket (``zmq.XPUB``).
    realtime
        Check at most every :data:`CHECK_PERIOD_NS` (else at every call).
    """

    def __init__(self, xpub: zmq.Socket, realtime: bool):
        self.xpub = xpub
        self.period_ns = CHECK_PERIOD_NS if realtime else 0
        self.next_ns = 0
        self.answered = 0

    def serve(self, seq: int) -> None:
        """Answer the hello subscriptions that arrived; ``seq``: that of the last state message sent.

        Called between ticks.
        """
        if self.period_ns:
            now = time.monotonic_ns()
            if now < self.next_ns:
                return
            self.next_ns = now + self.period_ns
        xpub = self.xpub
        for _ in range(MAX_PER_CALL):
            try:
                sub = xpub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            # b"\x01" + topic subscribes, b"\x00" + topic unsubscribes; only new topics are handed over
            if sub[:1] == b"\x01" and sub[1:1 + len(TOPIC_HELLO)] == TOPIC_HELLO:
                body = msgpack.packb({"v": PROTOCOL_VERSION, "seq": seq})
                try:
                    xpub.send_multipart([sub[1:], body], zmq.NOBLOCK)
                    self.answered += 1
                except zmq.ZMQError:
                    pass  # the subscriber's queue is full: it times out and subscribes again


__all__ = ["HelloResponder", "TOPIC_HELLO"]
