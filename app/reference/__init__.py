"""Reference mechanisms with known ε and the monitoring paper's scenarios (method.md §8).

See docs/reference_mechanisms.md for the parameters chosen where the paper's copy lost them.
"""

from app.reference.mechanisms import (
    ABORTED,
    DEFAULT_CUTOFF,
    DEFAULT_EPSILON,
    DEFAULT_SCALE_FACTOR,
    DEFAULT_THRESHOLD,
    REFERENCE_MECHANISMS,
    SVT1,
    SVT2,
    SVT4,
    SVT5,
    SVT6,
    Laplace,
    LaplaceGaussian,
    LaplaceSmallerScale,
    OutputKind,
    ReferenceMechanism,
    ReportNoisyMax,
    RNMExponential,
    RNMReportValue,
    SwitchingMechanism,
    get_mechanism,
)
from app.reference.scenarios import SCENARIOS, Scenario

__all__ = [
    "ABORTED",
    "DEFAULT_CUTOFF",
    "DEFAULT_EPSILON",
    "DEFAULT_SCALE_FACTOR",
    "DEFAULT_THRESHOLD",
    "REFERENCE_MECHANISMS",
    "SCENARIOS",
    "SVT1",
    "SVT2",
    "SVT4",
    "SVT5",
    "SVT6",
    "Laplace",
    "LaplaceGaussian",
    "LaplaceSmallerScale",
    "OutputKind",
    "RNMExponential",
    "RNMReportValue",
    "ReferenceMechanism",
    "ReportNoisyMax",
    "Scenario",
    "SwitchingMechanism",
    "get_mechanism",
]
