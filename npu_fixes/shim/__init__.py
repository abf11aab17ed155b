"""The run-time shim: what every process that imports npu_fixes runs (standard library,
wrapt and packaging only; it knows no fix by name)."""
