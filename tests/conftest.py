"""Test-suite settings shared by every test module.

Hypothesis draws new examples on each run, which is what finds bugs on a developer's
machine. CI (``.ci/run`` sets ``FLOWRT_HYPOTHESIS_PROFILE=ci``) runs a derandomized
profile instead, so that a change lands or fails on its own merits rather than on the
luck of the draw; examples that once failed are pinned with ``@example`` in the tests.
"""
from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("FLOWRT_HYPOTHESIS_PROFILE", "dev"))
