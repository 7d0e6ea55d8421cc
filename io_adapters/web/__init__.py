"""The web workspace: live plots, the transmission at a glance, timing and control in a browser.

:class:`~io_adapters.web.adapter.WebAdapter` (``[[adapters]] type = "web"``,
``gearbox-hil serve --web [PORT]``) serves one page and a WebSocket from an
aiohttp server in a thread of its own (:mod:`io_adapters.web.server`); see
docs/workspace.md.
"""
