"""Benchmarks of prime-otel against the released prime-runs 0.1.4: ``python -m benchmarks`` (``make bench``)."""
