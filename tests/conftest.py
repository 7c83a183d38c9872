"""Settings every test shares.

Hypothesis's per-example deadline (200 ms by default) is a timing assertion: on a busy
machine, or with the run spread over workers, an example that is merely slow fails as
``DeadlineExceeded``. The property tests assert results, never speed; speed is measured
in bench/.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("icetide", deadline=None)
settings.load_profile("icetide")
