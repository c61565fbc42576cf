"""Fixtures for the preemption planner tests: upstream's test conventions as object builders."""
