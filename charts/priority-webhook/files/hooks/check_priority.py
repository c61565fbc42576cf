"""helm test: a server-side dry-run pod in a served namespace gets the priority its class resolves to.

Nothing is created (dryRun=All), yet the pod passes through every admission step, the webhooks included,
and the answer is the pod as it would be stored. Usage: check_priority.py NAMESPACE [CLASS] (from a pod:
in-cluster credentials; elsewhere: the kubeconfig).
"""

import json
import sys
from typing import Any

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"


def expected(classes: list[dict[str, Any]], name: str) -> tuple[int, str]:
    """(priority, preemptionPolicy) a pod naming `name` ("" for none) must get, as the Priority plugin."""
    if name:
        found = [c for c in classes if c["metadata"]["name"] == name]
        if not found:
            raise LookupError(f"PriorityClass {name} does not exist")
        chosen = found[0]
    else:
        defaults = sorted((c for c in classes if c.get("globalDefault")), key=lambda c: c["value"])
        if not defaults:
            return 0, PREEMPT_LOWER_PRIORITY
        chosen = defaults[0]
    return int(chosen["value"]), chosen.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY


def probe_pod(namespace: str, class_name: str) -> dict[str, Any]:
    """A pod that every Pod Security level admits; it is never created."""
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "probe",
            "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}, "limits": {"cpu": "1m", "memory": "8Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }],
    }
    if class_name:
        spec["priorityClassName"] = class_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "priority-webhook-test-", "namespace": namespace}, "spec": spec}


def check(api_client: Any, namespace: str, class_name: str) -> tuple[bool, str]:
    def call(method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None) -> Any:
        method_, url, headers, body_, post = api_client.param_serialize(
            method, path, query_params=query, body=body, auth_settings=["BearerToken"],
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
        )
        response = api_client.call_api(method_, url, headers, body_, post, _request_timeout=10)
        response.read()
        answer = json.loads(response.data or b"{}")
        if not 200 <= response.status <= 299:
            raise RuntimeError(f"{method} {path}: HTTP {response.status}: {answer.get('message', '')}")
        return answer

    classes = call("GET", "/apis/scheduling.k8s.io/v1/priorityclasses")["items"]
    want = expected(classes, class_name)
    pod = call("POST", f"/api/v1/namespaces/{namespace}/pods", probe_pod(namespace, class_name),
               [("dryRun", "All")])
    spec = pod.get("spec") or {}
    got = (spec.get("priority"), spec.get("preemptionPolicy"))
    what = f"class {class_name!r}" if class_name else "no class"
    if got != want:
        return False, f"a pod with {what} in {namespace} got priority {got[0]}/{got[1]}, expected {want[0]}/{want[1]}"
    return True, f"a pod with {what} in {namespace} gets priority {got[0]} ({got[1]})"


def main(argv: list[str]) -> int:
    from kubernetes import client, config

    namespace, class_name = argv[1], argv[2] if len(argv) > 2 else ""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    try:
        ok, message = check(client.ApiClient(), namespace, class_name)
    except Exception as err:
        ok, message = False, " ".join(str(err).split())[:500]
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
