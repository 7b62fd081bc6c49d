"""Building and running the C runtime from Python: builds (build.py), the ctypes host binding
(host.py), the oa_run runner on any target (runner.py) and oa.load's Module (module.py)."""
