"""Tools on top of everything: the command line, the demo, the plugin conformance kit,
graph pictures and timelines.

See docs/architecture.md for the layers and what each module owns.
"""
