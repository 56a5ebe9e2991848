{{/*
Names and labels shared by every template, and the checks that refuse a
values combination the server would reject or that cannot work on a cluster.
Failing at render time names the value to change; a pod crash-looping on a
flag error would only say it in its logs.
*/}}

{{- define "weightpath.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "weightpath.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "weightpath.selectorLabels" -}}
app.kubernetes.io/name: {{ include "weightpath.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "weightpath.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "weightpath.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The policy document: the user's, or the bundled default policy. */}}
{{- define "weightpath.policyDocument" -}}
{{- if .Values.policy }}
{{- .Values.policy }}
{{- else }}
{{- .Files.Get "files/default_policy.yaml" }}
{{- end }}
{{- end }}

{{- define "weightpath.sqliteClaimName" -}}
{{- default (printf "%s-data" (include "weightpath.fullname" .)) .Values.store.sqlite.existingClaim }}
{{- end }}

{{/* Rendered (as nothing) at the top of deployment.yaml. */}}
{{- define "weightpath.validate" -}}
{{- if and (not .Values.tls.secretName) (not .Values.insecure) }}
{{- fail "gRPC would listen on 0.0.0.0 without TLS: set tls.secretName to a kubernetes.io/tls Secret, or insecure=true to serve plaintext on purpose" }}
{{- end }}
{{- if and .Values.tls.clientCASecretName (not .Values.tls.secretName) }}
{{- fail "tls.clientCASecretName (mutual TLS) needs tls.secretName: the server's own certificate comes first" }}
{{- end }}
{{- if not (has .Values.store.type (list "sqlite" "postgres" "none")) }}
{{- fail (printf "store.type=%q must be sqlite, postgres or none" .Values.store.type) }}
{{- end }}
{{- if and (eq .Values.store.type "sqlite") (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "replicaCount=%d with store.type=sqlite: an SQLite file cannot be shared between pods; use store.type=postgres for several replicas" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (eq .Values.store.type "postgres") (not .Values.store.postgres.secretName) }}
{{- fail "store.type=postgres needs store.postgres.secretName: the Secret holding the postgres:// URI" }}
{{- end }}
{{- if not (has .Values.logFormat (list "text" "json")) }}
{{- fail (printf "logFormat=%q must be text or json" .Values.logFormat) }}
{{- end }}
{{- if not (has .Values.logLevel (list "trace" "debug" "info" "warn" "error")) }}
{{- fail (printf "logLevel=%q must be trace, debug, info, warn or error" .Values.logLevel) }}
{{- end }}
{{- if and .Values.operators.token.secretName .Values.tls.clientCASecretName }}
{{- fail "operators.token.secretName with tls.clientCASecretName: under mutual TLS the server accepts operator certificates only, never a bearer token; set operators.certificateIdentity instead" }}
{{- end }}
{{- if and .Values.operators.certificateIdentity (not .Values.tls.clientCASecretName) }}
{{- fail "operators.certificateIdentity needs mutual TLS (tls.clientCASecretName): without client certificates there is no operator certificate to recognise; use operators.token.secretName" }}
{{- end }}
{{- if and .Values.operators.certificateIdentity (not (regexMatch "^(ou|uri_prefix)=.+" .Values.operators.certificateIdentity)) }}
{{- fail (printf "operators.certificateIdentity=%q must be ou=NAME or uri_prefix=PREFIX" .Values.operators.certificateIdentity) }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) }}
{{- fail "serviceMonitor.enabled needs the Prometheus Operator's monitoring.coreos.com/v1 API in the cluster (with helm template: --api-versions monitoring.coreos.com/v1)" }}
{{- end }}
{{- if and .Values.prometheusRule.enabled (not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) }}
{{- fail "prometheusRule.enabled needs the Prometheus Operator's monitoring.coreos.com/v1 API in the cluster (with helm template: --api-versions monitoring.coreos.com/v1)" }}
{{- end }}
{{- if and .Values.signedCatalog.metadataConfigMap .Values.catalog }}
{{- fail "catalog and signedCatalog.metadataConfigMap are two catalogs: set one (a plain YAML catalog, or a TUF repository)" }}
{{- end }}
{{- if and .Values.signedCatalog.metadataConfigMap (not .Values.signedCatalog.root) }}
{{- fail "signedCatalog.metadataConfigMap needs signedCatalog.root, the trusted root.json to verify it from (--set-file signedCatalog.root=REPO/metadata/1.root.json)" }}
{{- end }}
{{- if and .Values.signedCatalog.metadataConfigMap (not .Values.signedCatalog.artifactUrl) }}
{{- fail "signedCatalog.metadataConfigMap needs signedCatalog.artifactUrl: where the artifacts are served (URL/TARGET_PATH)" }}
{{- end }}
{{- if and .Values.signedCatalog.timestampKey.secretName (not .Values.signedCatalog.metadataConfigMap) }}
{{- fail "signedCatalog.timestampKey.secretName needs signedCatalog.metadataConfigMap: a timestamp key signs a TUF repository's timestamp.json" }}
{{- end }}
{{- if lt (int .Values.shutdownGraceSeconds) 0 }}
{{- fail "shutdownGraceSeconds must not be negative" }}
{{- end }}
{{- if le (int .Values.terminationGraceMarginSeconds) 0 }}
{{- fail "terminationGraceMarginSeconds must be positive: the pod must outlive the server's own drain" }}
{{- end }}
{{- end }}
