"""Node-side preemption: the kubelet's critical-pod admission and its victim search."""
