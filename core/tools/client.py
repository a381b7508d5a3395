"""TF's ``tensorflow.python.client`` location: ``from flowrt.client import timeline``."""
from __future__ import annotations

from . import timeline

__all__ = ["timeline"]
