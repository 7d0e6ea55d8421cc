"""Named JSON documents of the page, each kind in the folder the I/O config names for it.

Two kinds: the **layouts** (``[web] layouts``: what the page shows --
signals, window, plots, instruments, gauges, cursors) and the **parameter
sets** (``[web] parameter_sets``: a name -> value map of plant parameters,
applied by the page through the control request ``set_params``, the same
path as a ZeroMQ client's).  The workspace process only keeps them: it
checks the name, the size and the JSON's depth, and never reads or writes a
file outside the folder.

Routes (behind the server's checks, :mod:`io_adapters.web.server`), for
``KIND`` ``layouts`` or ``paramsets``:

* ``GET /api/KIND``: ``{"layouts": [names], "last": name or null}`` (the
  list's key is ``layouts`` for both kinds);
* ``GET /api/KIND/NAME``: the document (``"layout": {...}``);
* ``POST /api/KIND/NAME``: save it (the body, a JSON object); it becomes
  the last one, which the page restores when it loads (layouts).

A name is 1 to 64 letters, digits, spaces, ``_``, ``-`` and ``.``, not
starting with ``.``; it is the file ``NAME.json`` in the folder, and a file
that resolves outside the folder (a link) is refused as if absent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from aiohttp import web

NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9 _.-]{0,63}")
LAST = ".last"  # the name of the layout saved or loaded last
MAX_LISTED = 1000


class LayoutError(Exception):
    """A request the layouts refuse: its HTTP status and one line."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Layouts:
    """One kind's folder; ``folder`` None: none configured (every route says so, 404).

    ``kind`` names a document in messages (``layout``), ``route`` is its
    URL (``/api/layouts``) and ``option`` the ``[web]`` key of its folder.
    """

    def __init__(self, folder: str | None, max_bytes: int, parse, kind: str = "layout", route: str = "/api/layouts",
                 option: str = "layouts"):
        self.folder = Path(folder).resolve() if folder else None
        self.max_bytes = max_bytes
        self.parse = parse  # the server's bounded JSON parser (raises ValueError with one line)
        self.kind, self.route, self.option = kind, route, option

    def add_routes(self, router) -> None:
        router.add_get(self.route, self._list)
        router.add_get(self.route + "/{name}", self._get)
        router.add_post(self.route + "/{name}", self._save)

    # ------------------------------------------------------------------ files
    def path(self, name: str) -> Path:
        """The file of layout ``name``, inside the folder; :class:`LayoutError` for a bad name or a way out."""
        if self.folder is None:
            raise LayoutError(404, f"no {self.kind} folder: set {self.option} = \"FOLDER\" in the [web] table")
        if not NAME.fullmatch(name) or name.endswith("."):
            raise LayoutError(400, f"bad {self.kind} name {name[:80]!r}: 1-64 letters, digits, spaces, _ - and ., "
                                   "not starting or ending with .")
        p = self.folder / f"{name}.json"
        if p.exists() and p.resolve().parent != self.folder:  # a link out of the folder
            raise LayoutError(404, f"no {self.kind} {name!r}")
        return p

    def names(self) -> list[str]:
        if self.folder is None or not self.folder.is_dir():
            return []
        out = []
        for p in sorted(self.folder.glob("*.json")):
            if NAME.fullmatch(p.stem) and p.is_file() and p.resolve().parent == self.folder:
                out.append(p.stem)
            if len(out) >= MAX_LISTED:
                break
        return out

    def last(self) -> str | None:
        try:
            name = (self.folder / LAST).read_text().strip() if self.folder is not None else ""
        except OSError:
            return None
        return name if name in self.names() else None

    def load(self, name: str) -> dict:
        p = self.path(name)
        try:
            text = p.read_bytes()[: self.max_bytes + 1]
        except OSError:
            raise LayoutError(404, f"no {self.kind} {name!r}") from None
        if len(text) > self.max_bytes:
            raise LayoutError(413, f"{self.kind} {name!r} is larger than {self.max_bytes} bytes")
        try:
            layout = self.parse(text)
        except ValueError as exc:
            raise LayoutError(400, f"{self.kind} {name!r}: {exc}") from None
        self._remember(name)
        return layout

    def save(self, name: str, body: bytes) -> None:
        p = self.path(name)
        try:
            layout = self.parse(body)
        except ValueError as exc:
            raise LayoutError(400, f"a {self.kind} is a JSON object: {exc}") from None
        if not isinstance(layout, dict):
            raise LayoutError(400, f"a {self.kind} is a JSON object")
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{name}.json.tmp")
        tmp.write_text(json.dumps(layout, indent=1, sort_keys=True))
        os.replace(tmp, p)  # a reader never sees half a file
        self._remember(name)

    def _remember(self, name: str) -> None:
        try:
            (self.folder / LAST).write_text(name)
        except OSError:  # a read-only folder: layouts load, the page just does not restore the last one
            pass

    # ------------------------------------------------------------------ routes
    def _refused(self, exc: LayoutError) -> web.Response:
        return web.json_response({"ok": False, "error": {"code": self.kind, "message": str(exc)}}, status=exc.status)

    async def _list(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "folder": self.folder is not None, "layouts": self.names(),
                                  "last": self.last()})

    async def _get(self, request: web.Request) -> web.Response:
        try:
            return web.json_response({"ok": True, "name": request.match_info["name"],
                                      "layout": self.load(request.match_info["name"])})
        except LayoutError as exc:
            return self._refused(exc)

    async def _save(self, request: web.Request) -> web.Response:
        try:
            self.save(request.match_info["name"], await request.read())
        except LayoutError as exc:
            return self._refused(exc)
        except OSError as exc:
            return self._refused(LayoutError(500, f"cannot write the {self.kind}: {exc.strerror}"))
        return web.json_response({"ok": True, "name": request.match_info["name"]})


__all__ = ["Layouts", "LayoutError"]
