"""Interfaces: the library API (one function per user action) and the adapters over it."""
