"""Offline analytics over broker segment logs and metrics with PySpark."""
