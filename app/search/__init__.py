"""The search for inputs that break a claim (docs/search.md): the input domain (domain.py),
candidate pairs at no sample cost (generators.py), screening by successive halving
(screening.py), refinement by Optuna (refine.py), certification on fresh samples with the audit
engine (certify.py), the whole run (run.py), over HTTP (service.py), the report (report.py) and
the command's body (cli.py). Nothing heavy is imported here."""
