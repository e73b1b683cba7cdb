"""Jobs: long work (discovery, audits, re-discovery) run by workers under a lease, with progress."""
