{{/*
Monitoring: the metrics Service always; a ServiceMonitor and a PrometheusRule only when the
cluster serves their CRDs (Prometheus Operator), so the chart installs on clusters without it.
The including chart lists its alerting rules in "operator.alertRules"; the scrape job is the
Service's name, so the rules of one version never see another's series.
*/}}

{{- define "operator-lib.metricsService" -}}
apiVersion: v1
kind: Service
metadata:
  {{- include "operator-lib.metadata" . | nindent 2 }}
spec:
  type: ClusterIP
  selector:
    {{- include "operator-lib.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .Values.metrics.port }}
      targetPort: metrics
      protocol: TCP
{{- end -}}

{{- define "operator-lib.serviceMonitor" -}}
{{- if and .Values.metrics.serviceMonitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  {{- include "operator-lib.metadata" . | nindent 2 }}
spec:
  jobLabel: app.kubernetes.io/name
  selector:
    matchLabels:
      {{- include "operator-lib.selectorLabels" . | nindent 6 }}
  namespaceSelector:
    matchNames: [{{ .Release.Namespace | quote }}]
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ .Values.metrics.serviceMonitor.interval }}
      scrapeTimeout: {{ .Values.metrics.serviceMonitor.scrapeTimeout }}
{{- end }}
{{- end -}}

{{- define "operator-lib.prometheusRule" -}}
{{- if and .Values.metrics.prometheusRule.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule") }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  {{- include "operator-lib.metadata" . | nindent 2 }}
spec:
  groups:
    - name: {{ include "operator-lib.fullname" . }}
      rules:
        {{- include "operator.alertRules" . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The PromQL selector of this version's series. */}}
{{- define "operator-lib.jobSelector" -}}
namespace="{{ .Release.Namespace }}",service="{{ include "operator-lib.fullname" . }}"
{{- end -}}

{{/*
Alerts every operator built on operatorkit shares: reconciles failing, drains of workload-cluster
nodes ending in Timeout (both operators run node-lifecycle's drain executor), and no replica
serving (so no leader either).
*/}}
{{- define "operator-lib.commonAlertRules" -}}
- alert: {{ .Values.metrics.prometheusRule.alertPrefix }}ReconcileErrors
  expr: sum by (controller) (rate(operatorkit_controller_errors_total{ {{- include "operator-lib.jobSelector" . -}} }[10m])) > 0
  for: 30m
  labels:
    severity: {{ .Values.metrics.prometheusRule.severity }}
  annotations:
    summary: "{{ .Chart.Name }} {{ .Chart.AppVersion }}: reconciles of controller {{ "{{" }} $labels.controller {{ "}}" }} keep failing"
    description: "See the Warning events and the Ready condition of the objects this controller handles."
- alert: {{ .Values.metrics.prometheusRule.alertPrefix }}DrainTimeouts
  expr: sum(increase(node_lifecycle_drain_duration_seconds_count{ {{- include "operator-lib.jobSelector" . -}} ,result="timeout"}[1h])) > 0
  labels:
    severity: {{ .Values.metrics.prometheusRule.severity }}
  annotations:
    summary: "{{ .Chart.Name }} {{ .Chart.AppVersion }}: node drains ended with Timeout in the last hour"
    description: "The nodes were deleted undrained. See the DrainerConfigs' Timeout condition and the DrainTimeout events: pods a PodDisruptionBudget protects, or an unreachable workload cluster."
- alert: {{ .Values.metrics.prometheusRule.alertPrefix }}NoLeader
  expr: absent(up{ {{- include "operator-lib.jobSelector" . -}} } == 1)
  for: 10m
  labels:
    severity: {{ .Values.metrics.prometheusRule.severity }}
  annotations:
    summary: "{{ .Chart.Name }} {{ .Chart.AppVersion }}: no replica is up, so none leads and nothing is reconciled"
    description: "Check the Deployment {{ include "operator-lib.fullname" . }} in {{ .Release.Namespace }}."
{{- end -}}

{{/*
The chart's Grafana dashboard (dashboards/<chart>.json) as a ConfigMap with the label the Grafana
sidecar looks for, when metrics.dashboard.enabled. A test keeps every query on a metric the
operator exports.
*/}}
{{- define "operator-lib.dashboard" -}}
{{- if .Values.metrics.dashboard.enabled }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "operator-lib.fullname" . }}-dashboard
  namespace: {{ .Values.metrics.dashboard.namespace | default .Release.Namespace }}
  labels:
    {{- include "operator-lib.labels" . | nindent 4 }}
    {{ .Values.metrics.dashboard.label }}: {{ .Values.metrics.dashboard.labelValue | quote }}
data:
  {{ .Chart.Name }}.json: |-
    {{- .Files.Get (printf "dashboards/%s.json" .Chart.Name) | nindent 4 }}
{{- end }}
{{- end -}}
