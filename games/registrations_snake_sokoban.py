"""Registrations of catalog games (filled in by the catalog work)."""
