"""Shared pieces of the REST API: authentication, problem+json errors, pagination."""
