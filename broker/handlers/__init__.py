"""The broker's request handlers (placeholder map)."""
