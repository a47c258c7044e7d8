"""belljar's worker: the Python process that runs cells for the belljar kernel.

The supervisor starts it with `serve()` from `belljar_worker.main` and talks to it over fd 3
(see ../PROTOCOL.md). Start-up imports only cheap stdlib modules; everything else (ast,
asyncio, IPython, matplotlib) is loaded when a cell first needs it.
"""
