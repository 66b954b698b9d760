"""ipu_e2e: the Python harness of the ipu-e2e validation suite.

It drives libipu_e2e.so through ctypes (native.py), runs workloads on the
device model and checks them (runner.py, stress.py), and provides the
ipu-e2e-test and ipu-e2e-bench command lines (cli.py, bench.py).
"""
