"""Hypothesis profiles: 'ci' (quick, the default, no deadlines: shared machines are noisy) and 'thorough'
(run before resolving an issue: HYPOTHESIS_PROFILE=thorough pytest)."""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=12, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
