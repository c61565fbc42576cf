{{/* Shared pieces of the two webhook configurations. */}}

{{/* Metadata annotations of one configuration: the operator's, cert-manager's CA injection, and with the
install gate the hook annotations that make Helm create them only after the readiness Job passed. Call with
(list $ WEIGHT): the mutating one comes first (10), the validating one after it (11), so that no moment has
validation without mutation.

Helm 4 creates hooks by server-side apply, so a hook that Helm does not delete first is updated in place:
the configurations' only delete policy is `hook-failed` (Helm never deletes them on upgrade or rollback; the
pre-delete Job removes them on uninstall). Helm 3 creates hooks with a plain create, which fails on an object
that exists: there the policy stays `before-hook-creation`, and an upgrade deletes and re-creates each one
(docs/operations.md says what that costs). */}}
{{- define "priority-webhook.webhookAnnotations" -}}
{{- $root := index . 0 -}}
{{- $annotations := deepCopy ($root.Values.admission.annotations | default dict) -}}
{{- if eq $root.Values.certificates.mode "certManager" -}}
{{- $_ := set $annotations "cert-manager.io/inject-ca-from" (printf "%s/%s" $root.Release.Namespace (include "priority-webhook.tlsSecretName" $root)) -}}
{{- end -}}
{{- if $root.Values.admission.installGate.enabled -}}
{{- $_ := set $annotations "helm.sh/hook" "post-install,post-upgrade,post-rollback" -}}
{{- $_ := set $annotations "helm.sh/hook-weight" (index . 1) -}}
{{- $_ := set $annotations "helm.sh/hook-delete-policy" (ternary "hook-failed" "before-hook-creation" (include "priority-webhook.hooksApplyInPlace" $root | eq "true")) -}}
{{- end -}}
{{- with $annotations -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/* "true" where Helm applies hooks in place (Helm 4: server-side apply), so the gated configurations are
never deleted by an upgrade or a rollback. */}}
{{- define "priority-webhook.hooksApplyInPlace" -}}
{{- semverCompare ">=4.0.0-0" .Capabilities.HelmVersion.Version -}}
{{- end -}}

{{/* Whether the mutating pod entries carry matchConditions: the value, else by Kubernetes version. */}}
{{- define "priority-webhook.matchConditions" -}}
{{- $set := .Values.admission.matchConditions -}}
{{- if kindIs "invalid" $set -}}
{{- include "priority-webhook.atLeast" (list . "1.28") -}}
{{- else if $set -}}
true
{{- end -}}
{{- end -}}

{{/*
On UPDATE the webhook only restores spec.priority / spec.preemptionPolicy that the new object dropped and
the old one had (webhook/policy/pod_rules.py, _carry_over); every other UPDATE it allows unchanged. So a pod
UPDATE is sent only when one of those fields is absent from the new object and present in the old.
CREATE is always sent. has() on an absent or null field is false, as the Python side's `is None`.
*/}}
{{- define "priority-webhook.podUpdateCondition" -}}
- name: update-drops-priority-fields
  expression: >-
    request.operation != 'UPDATE' ||
    (!has(object.spec.priority) && has(oldObject.spec.priority)) ||
    (!has(object.spec.preemptionPolicy) && has(oldObject.spec.preemptionPolicy))
{{- end -}}

{{/* clientConfig; call with (dict "root" $ "path" "/mutate"). */}}
{{- define "priority-webhook.clientConfig" -}}
service:
  name: {{ include "priority-webhook.fullname" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- with include "priority-webhook.caBundle" .root }}
caBundle: {{ . }}
{{- end }}
{{- end -}}

{{/* Namespaces the fail-closed entries never see: the system ones (served apart), the release's own
(its pods must start while the webhook is down), and the operator's exclusions. */}}
{{- define "priority-webhook.generalNamespaceSelector" -}}
{{- $extra := .Values.admission.namespaceSelector | default dict -}}
{{- with $extra.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- $names := concat .Values.admission.systemNamespaces (list .Release.Namespace) .Values.admission.excludedNamespaces | uniq }}
      {{- toYaml $names | nindent 6 }}
  {{- with $extra.matchExpressions }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The operator's objectSelector of the pod and workload entries ({} selects everything). */}}
{{- define "priority-webhook.objectSelector" -}}
{{- toYaml (.Values.admission.objectSelector | default dict) -}}
{{- end -}}

{{/* The operator's extra matchConditions of the pod entries (1.28+, where matchConditions exist). */}}
{{- define "priority-webhook.extraMatchConditions" -}}
{{- if and .Values.admission.extraMatchConditions (include "priority-webhook.atLeast" (list . "1.28")) -}}
{{- toYaml .Values.admission.extraMatchConditions -}}
{{- end -}}
{{- end -}}

{{- define "priority-webhook.systemNamespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: In
    values:
      {{- toYaml .Values.admission.systemNamespaces | nindent 6 }}
{{- end -}}

{{/* Settings every entry shares; call with (dict "root" $ "path" P "failurePolicy" F). */}}
{{- define "priority-webhook.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
matchPolicy: Equivalent
timeoutSeconds: {{ .root.Values.admission.timeoutSeconds }}
failurePolicy: {{ .failurePolicy }}
clientConfig:
  {{- include "priority-webhook.clientConfig" . | nindent 2 }}
{{- end -}}

{{- define "priority-webhook.podRule" -}}
- apiGroups: [""]
  apiVersions: ["v1"]
  resources: ["pods"]
  operations: {{ toJson . }}
  scope: Namespaced
{{- end -}}

{{/* PodGroups (scheduling.k8s.io): v1alpha2 in Kubernetes 1.36, v1beta1 in 1.37 (the versions of the
PodGroup row of webhook/review/routes.py). A version the cluster does not serve is never matched, so one
rule serves both; matchPolicy Equivalent also sends a request made in the other version. */}}
{{- define "priority-webhook.podGroupRule" -}}
- apiGroups: ["scheduling.k8s.io"]
  apiVersions: ["v1alpha2", "v1beta1"]
  resources: ["podgroups"]
  operations: ["CREATE"]
  scope: Namespaced
{{- end -}}

{{/* The user of the sidecar's ServiceAccount, as the API server names it in requests. */}}
{{- define "priority-webhook.sidecarUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "priority-webhook.sidecarServiceAccountName" .) -}}
{{- end -}}

{{/* Whether the sidecar's NodeRestriction is on (its policy and the eviction entry): tokens name their
node from Kubernetes 1.30; a dry-run sidecar changes no pod. */}}
{{- define "priority-webhook.evictionCheck" -}}
{{- if and .Values.sidecar.enabled .Values.sidecar.nodeRestriction (not .Values.sidecar.dryRun) (include "priority-webhook.atLeast" (list . "1.30")) -}}
true
{{- end -}}
{{- end -}}
