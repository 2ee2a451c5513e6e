"""Tributary broker: the sans-IO core (`broker.core`) and its thin Trio shell."""
