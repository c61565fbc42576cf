"""Test helpers shared across test packages (servers, fake API server clients, waiting on conditions)."""
