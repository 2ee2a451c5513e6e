"""Test helpers shared by several test modules (fake brokers and the like)."""
