"""Registered mechanism endpoints: models, schemas, service, router."""
