{{/*
RBAC: one ClusterRole with the rules the including chart lists in "operator.clusterRules" (the
kinds the operator watches and writes across namespaces), bound to the operator's
ServiceAccount, and a Role in the release namespace for the leader-election Lease (and, when
sharded, the replicas' shard Leases) and the including chart's "operator.roleRules" (other
Leases of the operator's, such as rollout slots). No wildcard
verbs, resources or API groups: the charts' tests reject them.
*/}}

{{- define "operator-lib.rbac" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "operator-lib.fullname" . }}
  labels:
    {{- include "operator-lib.labels" . | nindent 4 }}
rules:
  {{- include "operator.clusterRules" . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "operator-lib.fullname" . }}
  labels:
    {{- include "operator-lib.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "operator-lib.fullname" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "operator-lib.fullname" . }}
    namespace: {{ .Release.Namespace }}
{{- $roleRules := include "operator.roleRules" . }}
{{- $leases := or .Values.leaderElection.enabled .Values.sharding.enabled }}
{{- if or $leases $roleRules }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  {{- include "operator-lib.metadata" . | nindent 2 }}
rules:
  {{- if $leases }}
  # Leader election: the replicas of one version compete for one Lease,
  # "<operator>-<version>" (the operators' default name). `create` cannot be limited by name;
  # the others are.
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["create"]
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: [{{ include "operator-lib.leaseName" . | quote }}]
    verbs: ["get", "update"]
  {{- end }}
  {{- if .Values.sharding.enabled }}
  # Sharding: each replica holds a shard Lease named after its pod, which cannot be named
  # here; the leader follows them all (list, watch) to place the shards on its ring.
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "list", "watch", "update"]
  {{- end }}
  {{- with $roleRules }}
  {{- . | nindent 2 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  {{- include "operator-lib.metadata" . | nindent 2 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "operator-lib.fullname" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "operator-lib.fullname" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{- end -}}


{{/*
The rule of rollout slots: Leases "<operator>-rolling-…-<i>", listed by label, created, replaced
under their resourceVersion and deleted when freed. Their names depend on the clusters, so the
rule is not limited by name.
*/}}
{{- define "operator-lib.rolloutSlotRule" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["list", "create", "update", "delete"]
{{- end -}}
