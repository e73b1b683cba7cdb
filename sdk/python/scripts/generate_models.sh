#!/usr/bin/env bash
# Regenerate dpwatch_sdk/models.py (TypedDicts of every API resource) from the service's live
# OpenAPI. Run from the repository root after changing an API schema:
#
#   bash sdk/python/scripts/generate_models.sh
#
# It needs the server's venv (.venv, for the OpenAPI) and datamodel-code-generator
# (DATAMODEL_CODEGEN, default: `datamodel-codegen` on PATH; e.g. `pipx install
# datamodel-code-generator==0.89.0`). tests/test_sdk_client.py fails when the file and the API
# disagree.
set -euo pipefail
cd "$(dirname "$0")/../../.."
CODEGEN="${DATAMODEL_CODEGEN:-datamodel-codegen}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
.venv/bin/python -c "import json; from app.main import app; print(json.dumps(app.openapi()))" > "$TMP/openapi.json"
$CODEGEN --input "$TMP/openapi.json" --input-file-type openapi --output "$TMP/models.py" \
  --output-model-type typing.TypedDict --target-python-version 3.11 --enum-field-as-literal all \
  --use-standard-collections --use-union-operator --disable-timestamp --use-schema-description \
  --no-use-closed-typed-dict --collapse-root-models --formatters builtin \
  --custom-file-header '"""The API'"'"'s resources as TypedDicts, generated from the OpenAPI of dpwatch by
datamodel-code-generator: do not edit; run sdk/python/scripts/generate_models.sh."""'
# Python 3.11 cannot see NotRequired[...] in postponed (string) annotations: keep them evaluated.
grep -v '^from __future__ import annotations' "$TMP/models.py" > sdk/python/dpwatch_sdk/models.py
echo "wrote sdk/python/dpwatch_sdk/models.py ($(grep -c '^class ' sdk/python/dpwatch_sdk/models.py) models)"
