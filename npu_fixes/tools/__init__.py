"""Offline tools, never imported at run time: the host loader, audit, the accuracy check
and the ``npu-fixes`` command line."""
