"""Imported once by the fork server of job processes (app.jobs.isolation), so that each job's child
starts from a process with the service's modules loaded (a fork, milliseconds) instead of importing
them again (4-5 s of CPU on a loaded 2-core machine).

The numeric libraries are held to one thread before they are imported: a job is one process on one
core, and each thread's stack and arena count against its limits.
"""

import os

from app.jobs.child import ONE_THREAD

for _name in ONE_THREAD:
    os.environ[_name] = "1"

import numpy  # noqa: E402,F401
import scipy.stats  # noqa: E402,F401

import app.audit.discovery  # noqa: E402,F401
import app.jobs.handlers  # noqa: E402,F401
import app.jobs.runner  # noqa: E402,F401
import app.models  # noqa: E402,F401
import app.monitors.calibration  # noqa: E402,F401
import app.monitors.rediscovery  # noqa: E402,F401
import app.monitors.searches  # noqa: E402,F401
import app.search.run  # noqa: E402,F401
import app.snapshots.compute  # noqa: E402,F401
