"""`/v1/keys`: the REST routes of the calling tenant's API keys (the keys themselves live in app/auth)."""
