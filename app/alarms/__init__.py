"""Alarms, webhooks and the webhook outbox."""
