"""The search's family interfaces (app/search/protocols.py): every pair generator and size family
implements its protocol, and the candidates are composed from the generators by name."""

import pytest

from app.search.domain import DOMAIN_EXAMPLES, InputDomain
from app.search.generators import (
    FAMILIES,
    GENERATORS,
    candidate_pairs,
    edge_pairs,
    halton_pairs,
    statdp_patterns,
)
from app.search.protocols import PairGenerator, SizeFamily
from app.search.sizes import ladder_pairs, size_families
from app.search.tables import unit_pairs

TABLE = {"table": {"columns": {"user": {"type": "id"}, "city": {"type": "category", "values": ["a", "b", "c"]},
                               "spend": {"type": "real", "low": 0, "high": 100}},
                   "privacy_unit": "user", "rows_per_unit": {"min": 1, "max": 3}},
         "size": {"min": 0, "max": 20}, "neighbours": ["add_remove_unit"]}


def _domains():
    return [InputDomain.model_validate(d) for d in DOMAIN_EXAMPLES[:3]] + [InputDomain.model_validate(TABLE)]


def test_every_generator_and_size_family_implements_its_protocol():
    assert set(GENERATORS) == {"statdp", "edge", "halton", "sizes", "units"}
    for name, gen in GENERATORS.items():
        assert isinstance(gen, PairGenerator) and gen.name == name
    assert {n for names in FAMILIES.values() for n in names} <= set(GENERATORS)
    for domain in _domains():
        for fam in size_families(domain):
            assert isinstance(fam, SizeFamily)
            pairs = fam.pairs(2)  # across sizes 2 and 3: every pair starts from the family's base at one of them
            assert pairs and all(p.x in (fam.base(2), fam.base(3)) for p in pairs)


def test_the_generators_give_their_functions_pairs_and_only_neighbours():
    for domain in _domains():
        if domain.is_table:
            assert GENERATORS["units"].pairs(domain, 1) == unit_pairs(domain, 1)
            assert GENERATORS["sizes"].pairs(domain) == ladder_pairs(domain)
        else:
            assert GENERATORS["statdp"].pairs(domain) == statdp_patterns(domain)
            assert GENERATORS["edge"].pairs(domain) == edge_pairs(domain)
            assert GENERATORS["halton"].pairs(domain, 2) == halton_pairs(domain, seed=2)
        pairs = candidate_pairs(domain, 150, 1)
        assert pairs and len({p.key for p in pairs}) == len(pairs)
        assert all(domain.relation(p.x, p.x_prime) == p.relation for p in pairs)


def test_families_choose_their_generators_and_unknown_ones_are_refused():
    domain = InputDomain.model_validate(DOMAIN_EXAMPLES[0])
    only_statdp = candidate_pairs(domain, 1000, 0, ("statdp",))
    assert {p.key for p in only_statdp} == {p.key for p in statdp_patterns(domain)}
    with pytest.raises(ValueError, match="families: unknown 'grid'"):
        candidate_pairs(domain, 10, 0, ("statdp", "grid"))


def _no_noise(database, n, rng):
    """A sum released without noise: its two databases never share an output."""
    import numpy as np

    return np.full(n, float(sum(database)))


def test_both_testers_run_through_the_pair_tester_interface():
    """The staged tests and the final certification are called the same way (PairTester.test): a
    stage with no choosing data tests nothing and spends no level; on a flagrant violation the next
    call is stage 1 at α/4 and refutes, and the engine certifies the same pair."""
    import asyncio

    from app.search.certify import EngineCertification, StagedTests, stage_alpha
    from app.search.draws import SearchDraws, function_sampler
    from app.search.pairs import CandidatePair
    from app.search.protocols import PairTester
    from app.stats.candidates import ProposalSettings
    from app.stats.claims import PureDP
    from app.stats.shapes import OutputShape

    pair = CandidatePair([0.0], [1.0], "replace", "test")
    draws = SearchDraws(function_sampler(_no_noise, OutputShape(), seed=1))
    staged = StagedTests(OutputShape(), PureDP(1.0), 0.05, ProposalSettings(n_test=1_000, level=0.05 / 40, seed=1),
                         max_pairs=2)
    testers: list[PairTester] = [staged, EngineCertification(OutputShape(), PureDP(1.0), 0.025, seed=1)]
    assert asyncio.run(testers[0].test(draws, [pair], max_outputs=20_000, after="nothing")) is None
    assert staged.stages == [] and draws.total == 0
    asyncio.run(draws.top_up([pair.x, pair.x_prime], 1_000, "screening", cap=10_000))
    first = asyncio.run(testers[0].test(draws, [pair], max_outputs=20_000, after="screening rung 0"))
    assert first is not None and first.refuted and first.tests
    assert staged.stages == [first] and first.stage == 1 and first.alpha == stage_alpha(0.05, 1)
    final = asyncio.run(testers[1].test(draws, [pair], max_outputs=20_000, after="refinement"))
    assert final is not None and final.refuted and final.tests
