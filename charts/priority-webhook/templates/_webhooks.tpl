{{/* Shared pieces of the two webhook configurations. */}}

{{- define "priority-webhook.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "priority-webhook.tlsSecretName" .) }}
{{- end -}}
{{- end -}}

{{/* clientConfig; call with (dict "root" $ "path" "/mutate"). */}}
{{- define "priority-webhook.clientConfig" -}}
service:
  name: {{ include "priority-webhook.fullname" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- if ne .root.Values.certificates.mode "certManager" }}
caBundle: {{ include "priority-webhook.caBundle" .root }}
{{- end }}
{{- end -}}

{{/* Namespaces the fail-closed entries never see: the system ones (served apart), the release's own
(its pods must start while the webhook is down), and the operator's exclusions. */}}
{{- define "priority-webhook.generalNamespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- $names := concat .Values.admission.systemNamespaces (list .Release.Namespace) .Values.admission.excludedNamespaces | uniq }}
      {{- toYaml $names | nindent 6 }}
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
