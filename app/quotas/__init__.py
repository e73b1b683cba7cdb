"""Quotas per tenant (docs/hardening.md "Quotas and retention")."""
