"""Adapters: real DP libraries' mechanisms as :class:`~dpwatch_sdk.Mechanism` objects, each with
the claim it implies (so that registration and ``assert_dp`` can take it).

- :func:`from_opendp`: an OpenDP ``Measurement`` (e.g. a ``make_*`` pipeline); the claim is its
  privacy map at ``d_in``.
- :func:`from_diffprivlib`: a diffprivlib mechanism and the query whose answer it randomises; the
  claim is the mechanism's own ``epsilon`` (and ``delta``).
- :func:`from_function`: any ``f(database, n, rng)``, with the claim you state.

The libraries draw one output per call; the adapters call them ``n`` times per request
(:func:`~dpwatch_sdk.mechanism.one_at_a_time`). None of the libraries is imported here: the
adapters only use the objects you pass.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

from .endpoint import Mechanism
from .mechanism import Claim, one_at_a_time
from .protocol import Output

__all__ = ["from_diffprivlib", "from_function", "from_opendp", "opendp_claim"]

OutputSpec = Output | str | tuple


def from_function(f: Callable[..., typing.Any], *, output: OutputSpec = "real", claim: Claim | None = None,
                  epsilon: float | None = None, delta: float | None = None, mu: float | None = None,
                  rho: float | None = None, name: str | None = None) -> Mechanism:
    """Any sampler ``f(database, n, rng)`` returning ``n`` outputs, with the claim you make for it
    (``claim=Claim(...)`` or ``epsilon=``/``delta=``/``mu=``/``rho=``)."""
    if claim is None and any(v is not None for v in (epsilon, mu, rho)):
        claim = Claim.of(epsilon, delta, mu, rho)
    return Mechanism(f, Output.of(output), claim, name)


# --------------------------------------------------------------------------- OpenDP


def opendp_claim(measurement: typing.Any, d_in: typing.Any, *, delta: float | None = None) -> Claim:
    """The claim an OpenDP measurement makes for neighbours at distance ``d_in``: its privacy map
    ``measurement.map(d_in)`` read in its output measure.

    - ``MaxDivergence``: ε-DP;
    - ``Approximate(MaxDivergence)``: (ε, δ)-DP;
    - ``ZeroConcentratedDivergence``: ρ-zCDP;
    - ``SmoothedMaxDivergence``: a privacy profile, read at ``delta`` (required) as (ε(δ), δ)-DP.

    Other measures (Rényi, approximate zCDP) raise ValueError: dpwatch has no claim of that form;
    convert the measurement first (e.g. ``opendp.combinators.make_fix_delta``).
    """
    measure = str(measurement.output_measure)
    d_out = measurement.map(d_in)
    if measure.startswith("MaxDivergence"):
        return Claim(epsilon=float(d_out))
    if measure.startswith("ZeroConcentratedDivergence"):
        return Claim(zcdp_rho=float(d_out))
    if measure.startswith("Approximate(MaxDivergence"):
        epsilon, found_delta = d_out
        return Claim(epsilon=float(epsilon), delta=float(found_delta) if found_delta else None)
    if measure.startswith("SmoothedMaxDivergence"):
        if delta is None:
            raise ValueError("the measurement's privacy map gives a privacy profile; pass delta= to read ε(δ) on it")
        return Claim(epsilon=float(d_out.epsilon(delta)), delta=delta)
    raise ValueError(f"dpwatch has no claim of the form {measure}; convert the measurement to pure, approximate "
                     "or zero-concentrated DP first")


def from_opendp(measurement: typing.Any, d_in: typing.Any = 1, *, output: OutputSpec = "real",
                prepare: Callable[[typing.Any], typing.Any] | None = None, delta: float | None = None,
                name: str | None = None) -> Mechanism:
    """An OpenDP ``Measurement`` (a ``make_*``/``then_*`` pipeline) as a mechanism.

    ``d_in``: the distance between the neighbouring databases the claim covers, in the pipeline's
    input metric (1 for add/remove-one under the symmetric distance; a record changed is 2 there).
    The claim comes from the privacy map at ``d_in`` (:func:`opendp_claim`). ``prepare`` turns the
    JSON database dpwatch sends into the measurement's input (default: as is, e.g. a list of
    floats). ``output``: what one release is (``"real"``, ``"integer"``, ``("vector", d)``, …).
    """
    if not callable(measurement) or not hasattr(measurement, "map"):
        raise TypeError("from_opendp takes an OpenDP Measurement (it needs a privacy map)")
    claim = opendp_claim(measurement, d_in, delta=delta)
    return Mechanism(one_at_a_time(measurement, prepare), Output.of(output), claim, name or "opendp",
                     {"library": "opendp", "d_in": d_in, "measure": str(measurement.output_measure)})


# --------------------------------------------------------------------------- diffprivlib


_INTEGER_MECHANISMS = ("Geometric", "GeometricTruncated", "GeometricFolded")
_LABEL_MECHANISMS = ("Binary",)
_CHOICE_MECHANISMS = ("Exponential", "ExponentialCategorical", "PermuteAndFlip")


def _diffprivlib_output(mechanism: typing.Any) -> Output:
    names = {cls.__name__ for cls in type(mechanism).__mro__}
    if names & set(_INTEGER_MECHANISMS):
        return Output("integer")
    if names & set(_LABEL_MECHANISMS):
        return Output("label")
    if names & set(_CHOICE_MECHANISMS):
        return Output("discrete")
    return Output("real")


def from_diffprivlib(mechanism: typing.Any, query: Callable[[typing.Any], typing.Any] | None = None, *,
                     output: OutputSpec | None = None, name: str | None = None) -> Mechanism:
    """A diffprivlib mechanism (``diffprivlib.mechanisms.Laplace(epsilon=…, sensitivity=…)``, …) and
    the query whose true answer it randomises: each output is ``mechanism.randomise(query(database))``
    (``query`` defaults to the database itself, e.g. a pre-computed count).

    The claim is the mechanism's ``epsilon`` with its ``delta`` when positive: what diffprivlib
    promises *if* ``sensitivity`` really bounds the query's change between neighbours. That "if" is
    what dpwatch tests. ``output`` is inferred from the class (Geometric: integer, Binary: label,
    Exponential: discrete, else real).
    """
    randomise = getattr(mechanism, "randomise", None)
    if not callable(randomise):
        raise TypeError("from_diffprivlib takes a diffprivlib mechanism (an object with randomise())")
    epsilon = float(mechanism.epsilon)
    delta = float(getattr(mechanism, "delta", 0.0) or 0.0)
    claim = Claim(epsilon=epsilon, delta=delta or None)
    spec = Output.of(output) if output is not None else _diffprivlib_output(mechanism)
    return Mechanism(one_at_a_time(randomise, query), spec, claim, name or type(mechanism).__name__.lower(),
                     {"library": "diffprivlib", "mechanism": repr(mechanism)})
