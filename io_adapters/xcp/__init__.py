"""XCP on Ethernet (docs/xcp.md): the plant as an ECU for CANape, INCA or pyxcp.

* ``adapter``: :class:`XcpAdapter`, the sockets and the thread that serves them;
* ``declaration``: ``--xcp-port`` and the ``[xcp]`` table;
* ``slave``: the command handler (session, memory, pages, calibration groups);
* ``daq``: dynamic DAQ lists and the DTO packets built from state-ring rows;
* ``memory``: the synthetic address space (signals, parameters, EPK) and the events;
* ``a2l``: the A2L generated from that address space;
* ``codes``: the standard's command and error codes.
"""
