"""Upstream constants (pkg/apis/scheduling/types.go, pkg/kubelet/types/pod_update.go)."""

DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS = 0
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_NEVER, PREEMPT_LOWER_PRIORITY)

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

CRITICAL_POD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"
LEGACY_CRITICAL_NAMESPACE = "kube-system"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"

POD_RESOURCE = "pods"
PRIORITY_CLASS_RESOURCE = "priorityclasses.scheduling.k8s.io"
