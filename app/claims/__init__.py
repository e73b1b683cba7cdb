"""Privacy claims on checks and monitors: the API form, the effective claim of a check, and the
runner's per-check test under a claim (the numerics are in :mod:`app.stats.claims`)."""
