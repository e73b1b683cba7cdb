"""Real pipelines in the DP libraries people deploy (PipelineDP, python-dp, OpenDP's Context,
SmartNoise SQL, Tumult Analytics), correct and misconfigured, each with its true verdict
(``catalog.py``, importable without the libraries), built with the SDK's adapters
(``build.py``, run in the library's venv) and served over HTTP for ``dpwatch audit``
(``python -m app.reference.pipelines.serve NAME``)."""
