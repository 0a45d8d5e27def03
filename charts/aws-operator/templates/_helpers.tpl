{{/*
What the shared templates (charts/operator-lib) ask of this chart: the daemon's arguments,
environment, volumes, pod annotations, RBAC rules and alerts.
*/}}

{{- define "aws-operator.credentialsSecret" -}}
{{- if .Values.aws.credentials.existingSecret -}}
{{- .Values.aws.credentials.existingSecret -}}
{{- else if .Values.aws.credentials.create -}}
{{- printf "%s-aws-credentials" (include "operator-lib.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "operator.args" -}}
- daemon
- --listen=0.0.0.0:{{ .Values.metrics.port }}
- --installation={{ required "operator.installation is required: the management cluster's name (its VPC's Name tag)" .Values.operator.installation }}
- --region={{ .Values.operator.region }}
- --ami-file=/etc/aws-operator/ami.json
- --ipam-range={{ .Values.operator.ipamRange }}
- --subnet-mask-bits={{ .Values.operator.subnetMaskBits }}
- --route53-enabled={{ .Values.operator.route53Enabled }}
- --registry={{ .Values.operator.registry }}
- --service-cidr={{ .Values.operator.serviceCIDR }}
{{- with .Values.operator.sshUsers }}
- {{ printf "--ssh-users=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.operator.ssoPublicKey }}
- {{ printf "--sso-public-key=%s" . | quote }}
{{- end }}
{{- with .Values.operator.pauseImage }}
- --pause-image={{ . }}
{{- end }}
{{- with .Values.operator.registryMirrors }}
- --registry-mirrors={{ join "," . }}
{{- end }}
{{- with .Values.operator.apiAllowlist }}
- --public-api-allowlist-enabled={{ .public.enabled }}
{{- with .public.cidrs }}
- --public-api-allowlist-cidrs={{ join "," . }}
{{- end }}
- --private-api-allowlist-enabled={{ .private.enabled }}
{{- with .private.cidrs }}
- --private-api-allowlist-cidrs={{ join "," . }}
{{- end }}
{{- end }}
- --s3-bucket-tagging={{ .Values.operator.s3.bucketTagging }}
- --access-log-expiration-days={{ .Values.operator.s3.accessLogExpirationDays }}
- --concurrency={{ .Values.operator.concurrency }}
- --resync-seconds={{ .Values.operator.resyncSeconds }}
- --poll-seconds={{ .Values.operator.pollSeconds }}
- --terminate-unhealthy-nodes={{ .Values.operator.unhealthyNodes.terminate }}
- --unhealthy-node-threshold-seconds={{ .Values.operator.unhealthyNodes.thresholdSeconds }}
- --unhealthy-node-cooldown-seconds={{ .Values.operator.unhealthyNodes.cooldownSeconds }}
- --unhealthy-node-resync-seconds={{ .Values.operator.unhealthyNodes.resyncSeconds }}
- --max-rolling-clusters={{ .Values.operator.maxRollingClusters }}
- --drift-detection-interval-seconds={{ .Values.operator.driftDetection.intervalSeconds }}
- --drift-detections-per-account-per-minute={{ .Values.operator.driftDetection.perAccountPerMinute }}
- --aws-read-requests-per-second={{ .Values.operator.requestBudget.readsPerSecond }}
- --aws-write-requests-per-second={{ .Values.operator.requestBudget.writesPerSecond }}
- --aws-request-burst-seconds={{ .Values.operator.requestBudget.burstSeconds }}
- --aws-request-budget-lease-seconds={{ .Values.operator.requestBudget.leaseSeconds }}
{{- with .Values.operator.routeTables }}
- --route-tables={{ join "," . }}
{{- end }}
{{- with .Values.operator.controlPlaneRoleArn }}
- --control-plane-role-arn={{ . }}
{{- end }}
- --credential-namespaces={{ join "," .Values.operator.credentialNamespaces }}
{{- with .Values.operator.tenantRoleExternalId }}
- --tenant-role-external-id={{ . }}
{{- end }}
{{- with .Values.operator.awsEndpointUrl }}
- --aws-endpoint-url={{ . }}
{{- end }}
{{- with .Values.operator.alikeInstances }}
- --alike-instances={{ toJson . }}
{{- end }}
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
# Leader election among the replicas (the Lease "aws-operator-<version>" in POD_NAMESPACE).
- name: AWS_OPERATOR_LEADER_ELECTION
  value: {{ .Values.leaderElection.enabled | quote }}
# Sharding: each replica's shard Lease is named after its pod (POD_NAME).
- name: AWS_OPERATOR_SHARDING
  value: {{ .Values.sharding.enabled | quote }}
{{- with .Values.operator.dockerhubToken.secretName }}
# The Docker Hub credential of the nodes, from its Secret.
- name: AWS_OPERATOR_DOCKERHUB_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.operator.dockerhubToken.key }}
{{- end }}
{{- with (include "aws-operator.credentialsSecret" .) }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_ACCESS_KEY_ID
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_SECRET_ACCESS_KEY
{{- end }}
{{- end -}}

{{- define "operator.volumes" -}}
- name: amis
  configMap:
    name: {{ include "operator-lib.fullname" . }}
{{- end -}}

{{- define "operator.volumeMounts" -}}
- name: amis
  mountPath: /etc/aws-operator
  readOnly: true
{{- end -}}

{{- define "operator.podAnnotations" -}}
checksum/amis: {{ toJson .Values.amis | sha256sum }}
{{- end -}}

{{/*
What aws-operator calls, and nothing more. The end-to-end test
(operators/aws-operator/tests/e2e.rs) runs the operator as this ServiceAccount with these rules:
a refused request fails it, and so does a grant it never used, unless the test's
UNUSED_BY_DESIGN names it with the reason. The image test runs the daemon with them too.
- its three kinds and legacy AWSConfigs: watched by the controllers, finalizers by JSON patch, status by merge patch;
  node pools also get their subnet annotation by merge patch; a cluster's deletion deletes its
  control planes and node pools;
- NetworkPools and Releases: read (Releases are watched by the router);
- per cluster, a namespace (created, locked by annotation with get/update, applied, deleted)
  with the master Service and Endpoints (server-side apply: create and patch, as an apply that
  creates is authorized as both);
- Secrets: the credential Secret an AWSCluster names, and the certificate Secrets of a cluster,
  listed by label in the cluster's namespace (the node configs carry them); both held by the
  finalizer aws-operator.giantswarm.io/secret-in-use until the cluster is gone (JSON patch);
- Events about the objects, in their namespaces;
- the Cluster API objects of a fleet, when their CRDs are installed: a cluster's Cluster (read,
  and its spec.controlPlaneEndpoint written by merge patch), the G8sControlPlanes and
  MachineDeployments listed by label.
*/}}
{{- define "operator.clusterRules" -}}
- apiGroups: ["infrastructure.giantswarm.io"]
  resources: ["awsclusters", "awsmachinedeployments"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["infrastructure.giantswarm.io"]
  resources: ["awscontrolplanes"]
  verbs: ["list", "watch", "patch"]
# A cluster's deletion deletes its control planes and node pools.
- apiGroups: ["infrastructure.giantswarm.io"]
  resources: ["awscontrolplanes", "awsmachinedeployments"]
  verbs: ["delete"]
- apiGroups: ["infrastructure.giantswarm.io"]
  resources: ["awsclusters/status", "awscontrolplanes/status", "awsmachinedeployments/status"]
  verbs: ["patch"]
# Legacy clusters: AWSConfigs, reconciled like the node-pools kinds.
- apiGroups: ["provider.giantswarm.io"]
  resources: ["awsconfigs"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["provider.giantswarm.io"]
  resources: ["awsconfigs/status"]
  verbs: ["patch"]
- apiGroups: ["infrastructure.giantswarm.io"]
  resources: ["networkpools"]
  verbs: ["get", "list"]
- apiGroups: ["release.giantswarm.io"]
  resources: ["releases"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "create", "update", "patch", "delete"]
# Services and Endpoints `master`: read first, applied only when they differ.
- apiGroups: [""]
  resources: ["services", "endpoints"]
  verbs: ["get", "create", "patch"]
# Secrets: the credential and certificate Secrets are read and held by a finalizer; a cluster's
# CAs, certificates and encryption-provider config are created where absent and renewed by patch.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch"]
# The drain executor: DrainerConfigs of this version, their status and finalizer. The drainers:
# a DrainerConfig per instance a terminating lifecycle hook holds, deleted once it went.
# IAM roles for service accounts: the ConfigMap <id>-irsa-cloudfront naming a cluster's
# service-account issuer is read, created where absent, and deleted with the cluster when the
# operator wrote it.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
- apiGroups: ["core.giantswarm.io"]
  resources: ["drainerconfigs"]
  verbs: ["list", "watch", "patch", "create", "delete"]
- apiGroups: ["core.giantswarm.io"]
  resources: ["drainerconfigs/status"]
  verbs: ["patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# A fleet's Cluster API objects beside the cluster's own, read when their CRDs are installed.
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["clusters"]
  verbs: ["get", "patch"]
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["machinedeployments"]
  verbs: ["list"]
- apiGroups: ["infrastructure.giantswarm.io"]
  resources: ["g8scontrolplanes"]
  verbs: ["list"]
{{- end -}}

{{/*
The Role's rules besides leader election: rollout slots, the Leases
"aws-operator-rolling-clusters-<i>" (--max-rolling-clusters) and
"aws-operator-rolling-pools-<namespace>-<cluster>-<i>" (a cluster's maxRollingNodePools), listed by
label, created, replaced under their resourceVersion and deleted when freed; their names depend on
the clusters, so no rule is limited by name.
*/}}
{{- define "operator.roleRules" -}}
{{ include "operator-lib.rolloutSlotRule" . }}
# The AWS request budget: each replica holds a member Lease named after its pod
# ("aws-operator-budget-<pod>", not nameable here), lists the others by label to count its
# share, and deletes those unrenewed for an hour.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "create", "update", "delete"]
{{- end -}}

{{- define "operator.alertRules" -}}
{{ include "operator-lib.commonAlertRules" . }}
- alert: {{ .Values.metrics.prometheusRule.alertPrefix }}StackFailed
  expr: sum by (stack, operation) (increase(aws_operator_stack_transitions_total{ {{- include "operator-lib.jobSelector" . -}} ,operation=~".*_FAILED|.*ROLLBACK_COMPLETE"}[15m])) > 0
  labels:
    severity: {{ .Values.metrics.prometheusRule.severity }}
  annotations:
    summary: "aws-operator {{ .Chart.AppVersion }}: a {{ "{{" }} $labels.stack {{ "}}" }} stack went to {{ "{{" }} $labels.operation {{ "}}" }}"
    description: "Read the stack's events in CloudFormation and the Warning events of the cluster object."
- alert: {{ .Values.metrics.prometheusRule.alertPrefix }}StackCallsFailing
  expr: sum by (stack, operation) (rate(aws_operator_stack_operations_total{ {{- include "operator-lib.jobSelector" . -}} ,result="error"}[10m])) > 0
  for: 30m
  labels:
    severity: {{ .Values.metrics.prometheusRule.severity }}
  annotations:
    summary: "aws-operator {{ .Chart.AppVersion }}: CloudFormation {{ "{{" }} $labels.operation {{ "}}" }} calls on {{ "{{" }} $labels.stack {{ "}}" }} stacks keep failing"
- alert: {{ .Values.metrics.prometheusRule.alertPrefix }}StacksDrifted
  expr: sum by (stack_kind) (aws_operator_drifted_resources{ {{- include "operator-lib.jobSelector" . -}} }) > 0
  for: 1h
  labels:
    severity: {{ .Values.metrics.prometheusRule.severity }}
  annotations:
    summary: "aws-operator {{ .Chart.AppVersion }}: resources of {{ "{{" }} $labels.stack_kind {{ "}}" }} stacks were changed outside CloudFormation"
    description: "kubectl get awsclusters -A shows the Drifted condition; status.drift lists the differences. Annotate the cluster with aws-operator.giantswarm.io/remediate-drift=true to put them back."
{{- end -}}

{{- define "operator.serviceAccountAnnotations" -}}
{{- with .Values.aws.irsaRoleArn }}
eks.amazonaws.com/role-arn: {{ . }}
{{- end }}
{{- end -}}
