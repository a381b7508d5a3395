"""The master service (sessions, compile and run steps) and the worker service
(registered partitions, RunGraph, RecvTensors).

See docs/architecture.md for the layers and what each module owns.
"""
