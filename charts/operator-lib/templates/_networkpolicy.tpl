{{/*
NetworkPolicy: scrapes reach the metrics port from the namespaces that
networkPolicy.metricsFrom selects (default: every namespace, as the Service is ClusterIP);
egress only to DNS and to the TCP ports of the API server and the cloud APIs
(networkPolicy.egressPorts). Egress destinations are not narrowed to addresses: the API server
and AWS endpoints have none the chart can know.
*/}}

{{- define "operator-lib.networkPolicy" -}}
{{- if .Values.networkPolicy.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  {{- include "operator-lib.metadata" . | nindent 2 }}
spec:
  podSelector:
    matchLabels:
      {{- include "operator-lib.selectorLabels" . | nindent 6 }}
  policyTypes: ["Ingress", "Egress"]
  ingress:
    - from:
        - namespaceSelector:
            {{- toYaml .Values.networkPolicy.metricsFrom | nindent 12 }}
      ports:
        - port: metrics
          protocol: TCP
  egress:
    - ports:
        - port: 53
          protocol: UDP
        - port: 53
          protocol: TCP
    - ports:
        {{- range .Values.networkPolicy.egressPorts }}
        - port: {{ . }}
          protocol: TCP
        {{- end }}
{{- end }}
{{- end -}}
