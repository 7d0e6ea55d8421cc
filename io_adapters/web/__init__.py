"""The web workspace: live plots, the transmission at a glance, timing and control in a browser.

:class:`~io_adapters.web.adapter.WebAdapter` (``[[adapters]] type = "web"``,
``gearbox-hil serve --web [PORT]``) serves one page and a WebSocket from an
aiohttp server in a process of its own (:mod:`io_adapters.web.process`,
:mod:`io_adapters.web.server`) that reads the state ring in shared memory; see
docs/workspace.md.
"""
