"""Exporters, one per sink: each translates record spans or metric points to its wire format and talks
through the platform client. They stand on ``prime_otel.records`` and never import the processors."""
