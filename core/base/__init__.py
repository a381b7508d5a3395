"""Values every layer uses: dtypes, static shapes, the error classes, device names.

See docs/architecture.md for the layers and what each module owns.
"""

#: the flowrt release (``flowrt.__version__``)
VERSION = "0.1.0"
