"""Cluster-side preemption: the scheduler's DefaultPreemption on a snapshot (`plan`)."""
