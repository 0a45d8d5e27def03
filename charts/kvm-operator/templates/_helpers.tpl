{{/*
What the shared templates (charts/operator-lib) ask of this chart: the daemon's arguments,
environment, volumes, pod annotations, RBAC rules and alerts.
*/}}

{{- define "operator.args" -}}
- daemon
- --listen=0.0.0.0:{{ .Values.metrics.port }}
- --dns-servers={{ required "operator.dnsServers is required: the DNS servers of the VMs (at least one)" (first .Values.operator.dnsServers) }}{{ range rest .Values.operator.dnsServers }},{{ . }}{{ end }}
{{- with .Values.operator.ntpServers }}
- --ntp-servers={{ join "," . }}
{{- end }}
- --cluster-role-general={{ .Values.operator.clusterRoles.general }}
- --cluster-role-psp={{ .Values.operator.clusterRoles.psp }}
- --workload-cluster-role={{ include "kvm-operator.workloadRole" . }}
- --service-account={{ .Release.Namespace }}/{{ include "operator-lib.fullname" . }}
{{- with .Values.operator.httpProxy }}
- {{ printf "--http-proxy=%s" . | quote }}
{{- end }}
{{- with .Values.operator.httpsProxy }}
- {{ printf "--https-proxy=%s" . | quote }}
{{- end }}
{{- with .Values.operator.noProxy }}
- --no-proxy={{ join "," . }}
{{- end }}
{{- with .Values.operator.registryMirrors }}
- --registry-mirrors={{ join "," . }}
{{- end }}
{{- with .Values.operator.ssoPublicKey }}
- {{ printf "--sso-public-key=%s" . | quote }}
{{- end }}
{{- with .Values.operator.pauseImage }}
- --pause-image={{ . }}
{{- end }}
{{- with .Values.operator.certificatesNamespace }}
- --certificates-namespace={{ . }}
{{- end }}
- --registry={{ .Values.operator.registry }}
- --k8s-kvm-image={{ .Values.operator.nodePodImages.k8sKVM }}
- --endpoint-updater-image={{ .Values.operator.nodePodImages.endpointUpdater }}
- --health-image={{ .Values.operator.nodePodImages.health }}
- --shutdown-deferrer-image={{ .Values.operator.nodePodImages.shutdownDeferrer }}
{{- with .Values.operator.oidc.issuerURL }}
- --oidc-issuer-url={{ . }}
- --oidc-client-id={{ required "operator.oidc.clientID is required with operator.oidc.issuerURL" $.Values.operator.oidc.clientID }}
{{- with $.Values.operator.oidc.usernameClaim }}
- --oidc-username-claim={{ . }}
{{- end }}
{{- with $.Values.operator.oidc.groupsClaim }}
- --oidc-groups-claim={{ . }}
{{- end }}
{{- end }}
- --terminate-unhealthy-nodes={{ .Values.operator.unhealthyNodes.terminate }}
- --unhealthy-node-threshold-seconds={{ .Values.operator.unhealthyNodes.thresholdSeconds }}
- --unhealthy-node-cooldown-seconds={{ .Values.operator.unhealthyNodes.cooldownSeconds }}
- --concurrency={{ .Values.operator.concurrency }}
- --resync-seconds={{ .Values.operator.resyncSeconds }}
- --poll-seconds={{ .Values.operator.pollSeconds }}
- --max-rolling-clusters={{ .Values.operator.maxRollingClusters }}
- --drain-timeout-seconds={{ .Values.operator.drainTimeoutSeconds }}
{{- if .Values.leaderElection.enabled }}
{{- range .Values.leaderElection.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- if .Values.sharding.enabled }}
- --sharding-mode={{ .Values.sharding.mode }}
{{- end }}
{{- end -}}

{{- define "operator.env" -}}
# Leader election among the replicas (the Lease "kvm-operator-<version>" in POD_NAMESPACE).
- name: KVM_OPERATOR_LEADER_ELECTION
  value: {{ .Values.leaderElection.enabled | quote }}
# Sharding: each replica's shard Lease is named after its pod (POD_NAME).
- name: KVM_OPERATOR_SHARDING
  value: {{ .Values.sharding.enabled | quote }}
{{- with .Values.operator.dockerhubToken.secretName }}
# The Docker Hub credential of the nodes, from its Secret.
- name: KVM_OPERATOR_DOCKERHUB_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.operator.dockerhubToken.key }}
{{- end }}
{{- end -}}

{{- define "operator.volumes" -}}
{{- end -}}

{{- define "operator.volumeMounts" -}}
{{- end -}}

{{- define "operator.podAnnotations" -}}
{{- end -}}

{{- define "operator.serviceAccountAnnotations" -}}
{{- end -}}

{{/*
What kvm-operator calls, and nothing more (operators/kvm-operator/src, node-lifecycle's drain
executor, operatorkit; the image test runs the daemon with these rules and fails on a refusal):
- KVMConfigs: watched by the cluster controller, its finalizer by JSON patch, status by merge
  patch; Releases read by the router (watched) and by the cluster controller (get);
- per cluster, every object by server-side apply (get to compare the applied digest, then an
  apply that may create: create and patch): here the namespace, the operator's own RoleBinding
  in it, the two ClusterRoleBindings and the node Secrets; what lives inside the namespace and
  runs or serves there (ServiceAccount, PVCs, Deployments, Services, Ingresses, pod writes,
  Endpoints) is written with operator.workloadRules, bound in that namespace only; here only
  read (get, and node Deployments and PVCs listed by label); at deletion the namespace and the
  bindings are deleted;
- PersistentVolumes, listed by their mount-tag label, to size and check the workers'
  host-volume PVCs;
- `bind` on the two ClusterRoles the bindings name (operator.clusterRoles), by name: the API
  server lets a binding be created only by who holds the role's permissions or may bind it;
- Secrets: the certificate Secrets of a cluster, listed by label; the drain executor reads a
  workload cluster's kubeconfig Secret (get, list) and watches Secrets' metadata;
- node pods: watched by the drainer controller, listed per cluster and read by the node
  watcher (their writes: operator.workloadRules);
- `rolebindings` get, create and patch, and `bind` on the workload role only: the operator's
  RoleBinding in each new cluster namespace (create cannot be limited to namespaces that do not
  exist yet);
- DrainerConfigs: the drainer creates, reads and deletes one per node pod it drains; the drain
  executor keeps its finalizer and status;
- Events about the objects, in their namespaces.
*/}}
{{- define "operator.clusterRules" -}}
- apiGroups: ["provider.giantswarm.io"]
  resources: ["kvmconfigs"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["provider.giantswarm.io"]
  resources: ["kvmconfigs/status"]
  verbs: ["patch"]
- apiGroups: ["release.giantswarm.io"]
  resources: ["releases"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterrolebindings"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  resourceNames:
    - {{ .Values.operator.clusterRoles.general | quote }}
    - {{ .Values.operator.clusterRoles.psp | quote }}
  verbs: ["bind"]
# The operator's own RoleBinding in each cluster's namespace, written right after the namespace;
# `create` cannot be limited to namespaces that do not exist yet, `bind` is limited to the
# workload role.
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["get", "create", "patch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  resourceNames: [{{ include "kvm-operator.workloadRole" . | quote }}]
  verbs: ["bind"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["endpoints"]
  verbs: ["get"]
# The drainer's requests and the drain executor: DrainerConfigs, their status and finalizer.
- apiGroups: ["core.giantswarm.io"]
  resources: ["drainerconfigs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["core.giantswarm.io"]
  resources: ["drainerconfigs/status"]
  verbs: ["patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/*
The Role's rules besides leader election: with a cluster limit, the rollout slots
"kvm-operator-rolling-clusters-<i>" (--max-rolling-clusters).
*/}}
{{- define "operator.roleRules" -}}
{{- if gt (int .Values.operator.maxRollingClusters) 0 }}
{{ include "operator-lib.rolloutSlotRule" . }}
{{- end }}
{{- end -}}

{{- define "operator.alertRules" -}}
{{ include "operator-lib.commonAlertRules" . }}
{{- end -}}


{{/* The ClusterRole of the operator's rights in its clusters' namespaces. */}}
{{- define "kvm-operator.workloadRole" -}}
{{- printf "%s-workloads-%s" .Chart.Name (include "operator-lib.versionSuffix" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
What the operator writes inside a cluster's namespace `<id>`, and nowhere else: bound there by
the RoleBinding the operator writes after the namespace (--workload-cluster-role), never
cluster-wide, so the operator's ServiceAccount cannot create a workload in any other namespace.
- the node pods' ServiceAccount, the etcd and host-volume PVCs, the node Deployments, the
  Services and Ingresses, by server-side apply (create and patch), deleted at teardown;
- node pods: the drainer's finalizer and drained mark (patch), the node watcher's node-ready
  condition (status), deleted by the unhealthy-node terminator and, once drained, the drainer;
  their Endpoints created, replaced or deleted.
*/}}
{{- define "operator.workloadRules" -}}
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["patch", "delete"]
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["endpoints"]
  verbs: ["create", "update", "delete"]
{{- end -}}
