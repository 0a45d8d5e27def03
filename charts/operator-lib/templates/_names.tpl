{{/*
Names and labels. Every object name carries the operator version (dots as dashes), so two
versions of one operator install side by side in one namespace, as Giant Swarm runs them.
The including chart is the context: .Chart is the operator's chart.
*/}}

{{- define "operator-lib.versionSuffix" -}}
{{- .Chart.AppVersion | replace "." "-" | replace "+" "-" | lower -}}
{{- end -}}

{{- define "operator-lib.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Chart.Name (include "operator-lib.versionSuffix" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The leader-election Lease: the name the operator picks by default for its version. */}}
{{- define "operator-lib.leaseName" -}}
{{- printf "%s-%s" .Chart.Name (.Chart.AppVersion | lower | replace "+" "-") -}}
{{- end -}}

{{- define "operator-lib.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "operator-lib.labels" -}}
{{ include "operator-lib.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cluster-operators
{{- end -}}

{{- define "operator-lib.metadata" -}}
name: {{ include "operator-lib.fullname" . }}
namespace: {{ .Release.Namespace }}
labels:
  {{- include "operator-lib.labels" . | nindent 2 }}
{{- end -}}

{{- define "operator-lib.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{- printf "%s/%s@%s" $img.registry $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s/%s:%s" $img.registry $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}
