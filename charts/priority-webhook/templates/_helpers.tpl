{{/* Names. */}}
{{- define "priority-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "priority-webhook.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "priority-webhook.sidecarName" -}}
{{- printf "%s-sidecar" (include "priority-webhook.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "priority-webhook.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "provided" -}}
{{- .Values.certificates.provided.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "priority-webhook.fullname" . | trunc 59 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{/* Webhook mode: the Secret in which the webhook keeps its CA (it makes it; the chart renders none). */}}
{{- define "priority-webhook.caSecretName" -}}
{{- printf "%s-webhook-ca" (include "priority-webhook.fullname" . | trunc 52 | trimSuffix "-") -}}
{{- end -}}

{{/* Webhook mode: the webhook keeps the caBundle of its own two configurations current (only theirs). It
watches them (list and watch by name, a fieldSelector on metadata.name) to patch one re-created by a hook at
once. Rules of the webhook's ClusterRole; nothing in the other modes. */}}
{{- define "priority-webhook.certificateRules" -}}
{{- if eq .Values.certificates.mode "webhook" -}}
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
  resourceNames: [{{ include "priority-webhook.fullname" . | quote }}]
  verbs: ["get", "list", "watch", "patch"]
{{- end -}}
{{- end -}}

{{/* The DNS name the API server dials (and checks the serving certificate against). */}}
{{- define "priority-webhook.serviceHost" -}}
{{- printf "%s.%s.svc" (include "priority-webhook.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "priority-webhook.dnsNames" -}}
{{- $svc := include "priority-webhook.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- toJson (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain)) -}}
{{- end -}}

{{/* Labels. */}}
{{- define "priority-webhook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "priority-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: priority-webhook
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels; call with (dict "root" $ "component" "webhook"). */}}
{{- define "priority-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "priority-webhook.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "priority-webhook.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Refuse setups that would defeat the lockout-safe split. */}}
{{- define "priority-webhook.checks" -}}
{{- if has .Release.Namespace .Values.admission.systemNamespaces -}}
{{- fail (printf "install priority-webhook into its own namespace, not %q: its pods must be excluded from the webhooks while the system namespaces are always served (with failurePolicy Ignore)" .Release.Namespace) -}}
{{- end -}}
{{- range .Values.admission.excludedNamespaces -}}
{{- if has . $.Values.admission.systemNamespaces -}}
{{- fail (printf "admission.excludedNamespaces: %q is a system namespace; it is already served with failurePolicy Ignore" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Serving certificate material as YAML: {crt, key, ca, bundle, notAfter, dnsNames}.
  mode generated:   from the chart (see priority-webhook.generatedTLS), computed once per render.
  mode certManager: nothing here (cert-manager writes the Secret and injects the CA).
  mode provided:    only the caBundle from values.
  mode webhook:     the bundle the webhook keeps in its CA Secret, when Helm can look it up (an install or
                    upgrade on a cluster where the webhook already runs, or ran: uninstall leaves the Secret);
                    else none: the webhook writes it. So a configuration Helm creates or applies always trusts
                    the webhook's CA but on a first install (the webhook patches it within moments), and an
                    offline render (helm template, GitOps tools) stays the same on every sync.
*/}}
{{- define "priority-webhook.caBundle" -}}
{{- if eq .Values.certificates.mode "webhook" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "priority-webhook.caSecretName" .) | default dict -}}
{{- dig "data" "ca-bundle.crt" "" $secret -}}
{{- else if eq .Values.certificates.mode "generated" -}}
{{- (include "priority-webhook.tlsMaterial" . | fromYaml).bundle | b64enc -}}
{{- else if eq .Values.certificates.mode "provided" -}}
{{- .Values.certificates.provided.caBundle | nospace -}}
{{- end -}}
{{- end -}}

{{/*
Generated mode, computed once per render (every template must see the same certificate): reuse the
Secret already in the cluster unless it is missing, malformed, issued for other DNS names, or within
renewBeforeDays of expiry.
*/}}
{{- define "priority-webhook.tlsMaterial" -}}
{{- if not (hasKey .Values "__priorityWebhookTLS") -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "priority-webhook.tlsSecretName" .) | default dict -}}
{{- $material := include "priority-webhook.generatedTLS" (dict "root" . "existing" $existing "now" now) | fromYaml -}}
{{- $_ := set .Values "__priorityWebhookTLS" $material -}}
{{- end -}}
{{- toYaml (get .Values "__priorityWebhookTLS") -}}
{{- end -}}

{{/*
The renewal decision, pure in its inputs: (dict "root" $ "existing" SECRET-OR-EMPTY "now" TIME).
A renewal issues a new CA and certificate, and the caBundle keeps the previous CA next to the new one:
replicas still serving the old certificate (mounted Secrets update with a delay) stay trusted.
The CA's private key is never stored: a new CA is made at each renewal.
*/}}
{{- define "priority-webhook.generatedTLS" -}}
{{- $root := .root -}}
{{- $cfg := $root.Values.certificates.generated -}}
{{- $dnsNames := include "priority-webhook.dnsNames" $root | fromJsonArray -}}
{{- $dnsKey := join "," $dnsNames -}}
{{- $data := dig "data" dict .existing -}}
{{- $annotations := dig "metadata" "annotations" dict .existing -}}
{{- $notAfter := get $annotations "priority-webhook.io/not-after" -}}
{{- $notAfterUnix := (toDate "2006-01-02T15:04:05Z07:00" $notAfter).Unix -}}
{{- $renewAt := sub $notAfterUnix (mul (int64 $cfg.renewBeforeDays) 86400) -}}
{{- $complete := and (get $data "tls.crt") (get $data "tls.key") (get $data "ca.crt") (get $data "ca-bundle.crt") -}}
{{- $sameNames := eq (get $annotations "priority-webhook.io/dns-names") $dnsKey -}}
{{- if and $complete $sameNames (lt (.now).Unix $renewAt) -}}
crt: {{ get $data "tls.crt" | b64dec | quote }}
key: {{ get $data "tls.key" | b64dec | quote }}
ca: {{ get $data "ca.crt" | b64dec | quote }}
bundle: {{ get $data "ca-bundle.crt" | b64dec | quote }}
notAfter: {{ $notAfter | quote }}
dnsNames: {{ $dnsKey | quote }}
renewed: false
{{- else -}}
{{- $days := int $cfg.validityDays -}}
{{- $caKey := genPrivateKey "ecdsa" -}}
{{- $ca := genCAWithKey (printf "%s-ca" (include "priority-webhook.fullname" $root)) $days $caKey -}}
{{- $key := genPrivateKey "ecdsa" -}}
{{- $cert := genSignedCertWithKey (include "priority-webhook.serviceHost" $root) nil $dnsNames $days $ca $key -}}
{{- $previous := "" -}}
{{- if get $data "ca.crt" -}}
{{- $previous = regexFind "(?s)-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----" (get $data "ca.crt" | b64dec) -}}
{{- end -}}
crt: {{ $cert.Cert | quote }}
key: {{ $cert.Key | quote }}
ca: {{ $ca.Cert | quote }}
bundle: {{ (ternary (printf "%s\n%s\n" (trim $ca.Cert) $previous) $ca.Cert (ne $previous "")) | quote }}
notAfter: {{ dateInZone "2006-01-02T15:04:05Z" (dateModify (printf "+%dh" (mul $days 24)) .now) "UTC" | quote }}
dnsNames: {{ $dnsKey | quote }}
renewed: true
{{- end -}}
{{- end -}}

{{/* Egress to the API server; call with .Values.networkPolicy.apiServer. */}}
{{- define "priority-webhook.apiServerEgress" -}}
- ports:
    {{- range .ports }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
  {{- with .cidrs }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
{{- end }}

{{/* Pod template labels: common + selector + extra, as one map (no key twice); call with
(dict "root" $ "component" "webhook" "extra" .Values.webhook.podLabels). */}}
{{- define "priority-webhook.podLabels" -}}
{{- $selector := include "priority-webhook.selectorLabels" . | fromYaml -}}
{{- $common := include "priority-webhook.labels" .root | fromYaml -}}
{{- toYaml (merge $selector (.extra | default dict) $common) -}}
{{- end -}}

{{/* The Kubernetes version the render targets: kubeVersionOverride, else the cluster's. */}}
{{- define "priority-webhook.kubeVersion" -}}
{{- default .Capabilities.KubeVersion.Version .Values.kubeVersionOverride -}}
{{- end -}}

{{/* "true" when the targeted Kubernetes is at least the given minor; call with (list $ "1.28"). */}}
{{- define "priority-webhook.atLeast" -}}
{{- if semverCompare (printf ">=%s.0-0" (index . 1)) (include "priority-webhook.kubeVersion" (index . 0)) -}}
true
{{- end -}}
{{- end -}}

{{/* nodeSelector: kubernetes.io/os=linux under the user's (which win; an empty value drops a key). */}}
{{- define "priority-webhook.nodeSelector" -}}
{{- $merged := dict "kubernetes.io/os" "linux" -}}
{{- range $key, $value := (. | default dict) -}}
{{- $_ := set $merged $key $value -}}
{{- end -}}
{{- $kept := dict -}}
{{- range $key, $value := $merged -}}
{{- if $value -}}
{{- $_ := set $kept $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $kept -}}
{{- end -}}

{{- define "priority-webhook.hooksName" -}}
{{- printf "%s-hooks" (include "priority-webhook.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{- define "priority-webhook.testName" -}}
{{- printf "%s-test" (include "priority-webhook.fullname" . | trunc 58 | trimSuffix "-") -}}
{{- end -}}

{{/* A container securityContext and resources for the chart's short-lived hook and test pods. */}}
{{- define "priority-webhook.hookContainer" -}}
image: {{ include "priority-webhook.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
command: ["python", "-I"]
resources:
  requests:
    cpu: 10m
    memory: 64Mi
  limits:
    memory: 128Mi
securityContext:
  {{- toYaml .Values.containerSecurityContext | nindent 2 }}
{{- end -}}

{{/* Every webhook name the configurations use, as a regular expression for the API server's metrics. */}}
{{- define "priority-webhook.webhookNamesRegex" -}}
(pods|system-pods|priorityclasses|workloads|evictions)\.priority-webhook\.io
{{- end -}}

{{/* ServiceAccounts: the chart's, or the operator's own (serviceAccount.create false, name required). */}}
{{- define "priority-webhook.serviceAccountName" -}}
{{- $sa := .Values.webhook.serviceAccount -}}
{{- if and (not $sa.create) (not $sa.name) -}}
{{- fail "webhook.serviceAccount.name is required when webhook.serviceAccount.create is false" -}}
{{- end -}}
{{- default (include "priority-webhook.fullname" .) $sa.name -}}
{{- end -}}

{{- define "priority-webhook.sidecarServiceAccountName" -}}
{{- $sa := .Values.sidecar.serviceAccount -}}
{{- if and (not $sa.create) (not $sa.name) -}}
{{- fail "sidecar.serviceAccount.name is required when sidecar.serviceAccount.create is false" -}}
{{- end -}}
{{- default (include "priority-webhook.sidecarName" .) $sa.name -}}
{{- end -}}

{{/*
The spec.priority of a pod of the chart that names the PriorityClass NAME: (list $ NAME). The release's
namespace is never sent to the webhook, so with the in-tree Priority plugin off nothing else would set it,
and a pod without it is anyone's preemption victim (the kubelet's, and the sidecar's). The plugin accepts a
spec.priority equal to its class's value. The built-in classes have fixed values; another class's value is
read from the cluster at install (`lookup`), and left out where it cannot be read (`helm template`).
*/}}
{{- define "priority-webhook.classPriority" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if eq $name "system-node-critical" -}}
2000001000
{{- else if eq $name "system-cluster-critical" -}}
2000000000
{{- else -}}
{{- $class := lookup "scheduling.k8s.io/v1" "PriorityClass" "" $name | default dict -}}
{{- if hasKey $class "value" -}}
{{- int64 $class.value -}}
{{- end -}}
{{- end -}}
{{- end -}}
