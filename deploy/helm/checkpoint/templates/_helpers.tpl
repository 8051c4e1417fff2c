{{/* The chart's name, or nameOverride. */}}
{{- define "checkpoint.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's objects' name: fullnameOverride, else RELEASE-checkpoint (RELEASE alone when it holds the name). */}}
{{- define "checkpoint.fullname" -}}
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

{{- define "checkpoint.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels every object carries. */}}
{{- define "checkpoint.labels" -}}
helm.sh/chart: {{ include "checkpoint.chart" . }}
{{ include "checkpoint.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select the gateway's pods. */}}
{{- define "checkpoint.selectorLabels" -}}
app.kubernetes.io/name: {{ include "checkpoint.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "checkpoint.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "checkpoint.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the journal URL and the tokens: existingSecret, else the chart's own. */}}
{{- define "checkpoint.secretName" -}}
{{- default (include "checkpoint.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* The key of the audit key in the Secret; empty: none. */}}
{{- define "checkpoint.auditKeyKey" -}}
{{- if .Values.existingSecret }}{{ .Values.secretKeys.auditKey }}{{ else if .Values.auditKey }}audit-key{{ end }}
{{- end }}

{{/* The key of the upstream's bearer token in the Secret; empty: none. */}}
{{- define "checkpoint.upstreamTokenKey" -}}
{{- if .Values.existingSecret }}{{ .Values.secretKeys.upstreamToken }}{{ else if .Values.upstream.token }}upstream-token{{ end }}
{{- end }}
