"""The plugin contracts and the runtime that loads plugins: hook specifications, the op
registry, the device, transport and graph-pass contracts, per-device resources.

See docs/architecture.md for the layers and what each module owns.
"""
