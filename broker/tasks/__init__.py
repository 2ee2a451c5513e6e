"""The broker's Trio tasks that run beside the request handlers (placeholder map)."""
