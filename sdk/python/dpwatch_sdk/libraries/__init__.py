"""Adapters for the DP libraries people deploy, each serving a configured group-by query as an
endpoint that takes a table (a JSON list of row objects) and returns keyed outputs, with the claim
read from the library's own budget or accountant and the tabular input domain the query implies
(``mechanism.details["domain"]``, the form ``dpwatch search`` takes).

One module per library, imported only when used (each is an extra of its own, and some cannot be
installed beside each other)::

    from dpwatch_sdk.libraries import GroupBy
    from dpwatch_sdk.libraries import pipelinedp      # pip install 'dpwatch-sdk[pipelinedp]'
    m = pipelinedp.mechanism(GroupBy(by="city", privacy_unit="user", epsilon=1, delta=1e-5))
    m.endpoint(secret=...).serve(port=8080)

- :mod:`.pipelinedp`: PipelineDP (``pipeline-dp``), its ``DPEngine`` on the local backend;
- :mod:`.pydp`: Google's ``python-dp``;
- :mod:`.opendp_context`: OpenDP's ``Context`` over a polars LazyFrame;
- :mod:`.smartnoise`: SmartNoise SQL (``smartnoise-sql``) over a pandas DataFrame;
- :mod:`.tumult`: Tumult Analytics (``tmlt.analytics``) on Spark.
"""

from ._query import GroupBy, bound_contributions, keyed_output, rows_of, table_domain

__all__ = ["GroupBy", "bound_contributions", "keyed_output", "rows_of", "table_domain"]
