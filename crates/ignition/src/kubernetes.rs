//! The Kubernetes components of a node, the same on AWS and on KVM: kubelet (its configuration,
//! kubeconfig and unit), kube-proxy (configuration, kubeconfig and static pod) and, on masters,
//! etcd's unit and the control-plane static pods (API server, controller manager, scheduler).
//!
//! What differs between the providers comes in as data, so that neither operator writes these
//! files a second time:
//! - where the TLS files are ([`TlsPaths`]): AWS decrypts KMS-sealed files to its own paths, KVM
//!   writes cert-operator's certificates directly;
//! - which units kubelet and etcd wait for ([`KubeletUnit`], [`EtcdMember`]): AWS decrypts its
//!   secrets and sets the hostname first, and attaches etcd's interface and volume;
//! - the cloud provider flag ([`Components::cloud_provider`]): `external` on AWS, none on KVM;
//! - the addresses etcd listens on and advertises ([`EtcdMember`]);
//! - a public service-account issuer ([`ServiceAccountIssuer`]: AWS's IAM roles for service
//!   accounts);
//! - extra API server flags ([`Components::extra_apiserver_args`]), such as KVM's
//!   `--enable-priority-and-fairness=false`.
//!
//! Every function is pure and returns text; the provider's renderer places it into its
//! [`Config`](crate::Config).

use std::collections::BTreeMap;

use crate::File;

/// The cluster domain of the workload cluster's DNS.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// kube-proxy's configuration file, read by its static pod.
pub const KUBE_PROXY_CONFIG: &str = "/etc/kubernetes/config/kube-proxy.yaml";
/// kubelet's configuration file.
pub const KUBELET_CONFIG: &str = "/etc/kubernetes/config/kubelet.yaml";
/// kubelet's kubeconfig.
pub const KUBELET_KUBECONFIG: &str = "/etc/kubernetes/kubeconfig/kubelet.yaml";
/// kube-proxy's kubeconfig.
pub const KUBE_PROXY_KUBECONFIG: &str = "/etc/kubernetes/kubeconfig/kube-proxy.yaml";
/// kube-proxy's static pod manifest.
pub const KUBE_PROXY_MANIFEST: &str = "/etc/kubernetes/manifests/kube-proxy.yaml";
/// The unit name of etcd on masters.
pub const ETCD_UNIT: &str = "etcd3.service";
/// The unit name of kubelet.
pub const KUBELET_UNIT: &str = "kubelet.service";
/// etcd's data directory on a master.
pub const ETCD_DATA_DIR: &str = "/var/lib/etcd";

/// Where the components find their TLS files and the API server's encryption config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    /// Kubelet and kube-proxy client certificate (all nodes).
    pub worker_crt: String,
    /// Kubelet and kube-proxy client key (all nodes).
    pub worker_key: String,
    /// The cluster CA, as shipped with the worker certificate (all nodes).
    pub worker_ca: String,
    /// API server serving certificate, also the control plane's client certificate (masters).
    pub api_crt: String,
    /// API server serving key (masters).
    pub api_key: String,
    /// The cluster CA, as shipped with the API certificate (masters).
    pub api_ca: String,
    /// etcd server and peer certificate (masters).
    pub etcd_crt: String,
    /// etcd server and peer key (masters).
    pub etcd_key: String,
    /// etcd CA (masters).
    pub etcd_ca: String,
    /// Service-account signing key (masters).
    pub service_account_key: String,
    /// The API server's encryption-provider config (masters).
    pub encryption_config: String,
}

/// The API server's OpenID Connect flags (`--oidc-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oidc {
    /// `--oidc-issuer-url`.
    pub issuer_url: String,
    /// `--oidc-client-id`.
    pub client_id: String,
    /// `--oidc-username-claim`; omitted when empty (the API server's default, `sub`).
    pub username_claim: String,
    /// `--oidc-groups-claim`; omitted when empty (no groups).
    pub groups_claim: String,
}

/// A public service-account issuer (IAM roles for service accounts on AWS): tokens signed with
/// its own key pair under issuer URLs a cloud can reach, while the API server keeps accepting
/// what it issued before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountIssuer {
    /// The issuer URLs, ahead of the API server's own (`https://<api domain>`, which stays
    /// accepted): the first signs new tokens, every one is accepted.
    pub issuers: Vec<String>,
    /// Audiences accepted besides the API server's own (`sts.amazonaws.com` for STS).
    pub audiences: Vec<String>,
    /// The issuer's public key (PEM): verifies its tokens, beside the cluster's service-account
    /// key.
    pub public_key: String,
    /// The issuer's private key (PEM): signs new tokens.
    pub signing_key: String,
}

/// What every component of one cluster's nodes is rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Components {
    /// The workload cluster id.
    pub cluster_id: String,
    /// The Kubernetes API host, `api.<base>`: kubelet's and kube-proxy's server, the
    /// service-account issuer and audience.
    pub api_domain: String,
    /// The API server's `--etcd-servers` (for example `https://etcd.<base>:2379`).
    pub etcd_servers: String,
    /// The registry images are pulled from, e.g. `quay.io`.
    pub registry: String,
    /// Kubernetes version, with or without a leading `v`.
    pub kubernetes_version: String,
    /// etcd version, with or without a leading `v`.
    pub etcd_version: String,
    /// The Service CIDR.
    pub service_cidr: String,
    /// The cluster DNS address inside the Service CIDR.
    pub cluster_dns_ip: String,
    /// The pod CIDR.
    pub pod_cidr: String,
    /// OpenID Connect for the API server.
    pub oidc: Option<Oidc>,
    /// kube-proxy's `conntrack.maxPerCore`; kube-proxy's default (32768) when `None`, and `0`
    /// leaves the kernel's limit as it is.
    pub conntrack_max_per_core: Option<u32>,
    /// `--cloud-provider` of kubelet and the controller manager; omitted when `None`. Never the
    /// API server's: it needs none since Kubernetes 1.29, where the flag was deprecated, and 1.33
    /// removed it (the API server would not start).
    pub cloud_provider: Option<String>,
    /// A public service-account issuer; `None` signs with the cluster's service-account key as
    /// `https://<api domain>`.
    pub service_account_issuer: Option<ServiceAccountIssuer>,
    /// Flags appended to the API server's.
    pub extra_apiserver_args: Vec<String>,
    /// etcd's `--quota-backend-bytes`; etcd's default (2 GiB) when `None`.
    pub etcd_quota_backend_bytes: Option<u64>,
    /// The controller manager's `--terminated-pod-gc-threshold`; its default (12500) when `None`.
    pub terminated_pod_gc_threshold: Option<u32>,
    /// Whether the controller manager allocates each node's pod CIDR from the pod CIDR
    /// (`--allocate-node-cidrs`, `--cluster-cidr`); not when the pod network assigns pod
    /// addresses itself (Cilium's ENI mode).
    pub allocate_node_cidrs: bool,
    /// The TLS files.
    pub tls: TlsPaths,
}

/// `v1.2.3` whether or not the input carries the `v`.
fn v(version: &str) -> String {
    format!("v{}", version.trim_start_matches('v'))
}

impl Components {
    /// `<registry>/giantswarm/<name>:v<version>`.
    pub fn image(&self, name: &str, version: &str) -> String {
        format!("{}/giantswarm/{name}:{}", self.registry, v(version))
    }

    /// The files of every node, in this order: kubelet's configuration and kubeconfig,
    /// kube-proxy's kubeconfig, configuration and static pod.
    pub fn node_files(&self) -> Vec<File> {
        let api = format!("https://{}", self.api_domain);
        vec![
            File::text(KUBELET_CONFIG, &self.kubelet_config()),
            File::text(KUBELET_KUBECONFIG, &self.kubeconfig("kubelet", &api)),
            File::text(KUBE_PROXY_KUBECONFIG, &self.kubeconfig("kube-proxy", &api)),
            File::text(KUBE_PROXY_CONFIG, &self.kube_proxy_config()),
            File::text(KUBE_PROXY_MANIFEST, &self.kube_proxy_manifest()),
        ]
    }

    /// The files only masters get, in this order: the controller manager's and the scheduler's
    /// kubeconfigs (to the API server on the same host) and the three control-plane static pods.
    pub fn master_files(&self) -> Vec<File> {
        let local_api = "https://127.0.0.1:443";
        vec![
            File::text(
                "/etc/kubernetes/kubeconfig/controller-manager.yaml",
                &self.kubeconfig("controller-manager", local_api),
            ),
            File::text("/etc/kubernetes/kubeconfig/scheduler.yaml", &self.kubeconfig("scheduler", local_api)),
            File::text("/etc/kubernetes/manifests/k8s-api-server.yaml", &self.apiserver_manifest()),
            File::text("/etc/kubernetes/manifests/k8s-controller-manager.yaml", &self.controller_manager_manifest()),
            File::text("/etc/kubernetes/manifests/k8s-scheduler.yaml", &self.scheduler_manifest()),
        ]
    }

    /// kubelet's `KubeletConfiguration`: webhook authentication and authorization, the worker
    /// certificate for serving, the cluster DNS.
    pub fn kubelet_config(&self) -> String {
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
clusterDomain: {CLUSTER_DOMAIN}
clusterDNS:
  - {dns}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
tlsCertFile: {crt}
tlsPrivateKeyFile: {key}
serverTLSBootstrap: false
rotateCertificates: false
evictionHard:
  memory.available: 200Mi
  nodefs.available: 10%
",
            dns = self.cluster_dns_ip,
            ca = self.tls.worker_ca,
            crt = self.tls.worker_crt,
            key = self.tls.worker_key,
        )
    }

    /// A kubeconfig for `user` against `server`: kubelet and kube-proxy use the worker
    /// certificate, the control-plane components the API certificate.
    pub fn kubeconfig(&self, user: &str, server: &str) -> String {
        let tls = &self.tls;
        let (crt, key, ca) = if user == "kubelet" || user == "kube-proxy" {
            (&tls.worker_crt, &tls.worker_key, &tls.worker_ca)
        } else {
            (&tls.api_crt, &tls.api_key, &tls.api_ca)
        };
        format!(
            "apiVersion: v1
kind: Config
clusters:
  - name: local
    cluster:
      certificate-authority: {ca}
      server: {server}
users:
  - name: {user}
    user:
      client-certificate: {crt}
      client-key: {key}
contexts:
  - name: default
    context:
      cluster: local
      user: {user}
current-context: default
"
        )
    }

    /// kubelet's systemd unit: kubelet in the hyperkube image, registering with `unit`'s labels
    /// (and the control-plane taint on masters), after the units `unit` names.
    pub fn kubelet_unit(&self, unit: &KubeletUnit<'_>) -> String {
        let labels = unit.node_labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        let taints = if unit.master {
            " \\\n  --register-with-taints=node-role.kubernetes.io/control-plane=:NoSchedule"
        } else {
            ""
        };
        let cloud_provider = match &self.cloud_provider {
            Some(provider) => format!("  --cloud-provider={provider} \\\n"),
            None => String::new(),
        };
        let hyperkube = self.image("hyperkube", &self.kubernetes_version);
        format!(
            "[Unit]
Description=Kubernetes kubelet
Requires={requires}
After={after}

[Service]
Restart=always
RestartSec=10
ExecStartPre=-/usr/bin/docker rm -f kubelet
ExecStart=/usr/bin/docker run --rm --name kubelet --privileged --pid=host --net=host \\
  -v /:/rootfs:ro,rslave -v /sys:/sys:ro -v /dev:/dev -v /var/lib/docker:/var/lib/docker:rw \\
  -v /var/lib/kubelet:/var/lib/kubelet:rw,rshared -v /var/log:/var/log:rw -v /etc/kubernetes:/etc/kubernetes:ro \\
  -v /run:/run:rw \\
  {hyperkube} /kubelet \\
  --config={KUBELET_CONFIG} \\
  --kubeconfig={KUBELET_KUBECONFIG} \\
{cloud_provider}  --node-labels={labels}{taints}
ExecStop=-/usr/bin/docker stop kubelet

[Install]
WantedBy=multi-user.target
",
            requires = unit.requires.join(" "),
            after = unit.after.join(" "),
        )
    }

    /// kube-proxy's `KubeProxyConfiguration` (iptables mode, the cluster's pod CIDR and
    /// conntrack limit).
    pub fn kube_proxy_config(&self) -> String {
        let conntrack = match self.conntrack_max_per_core {
            Some(n) => format!("conntrack:\n  maxPerCore: {n}\n"),
            None => String::new(),
        };
        format!(
            "apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {KUBE_PROXY_KUBECONFIG}
clusterCIDR: {cidr}
mode: iptables
{conntrack}",
            cidr = self.pod_cidr,
        )
    }

    /// kube-proxy as a static pod on every node, reading [`KUBE_PROXY_CONFIG`].
    pub fn kube_proxy_manifest(&self) -> String {
        let image = self.image("kube-proxy", &self.kubernetes_version);
        format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: kube-proxy
  namespace: kube-system
  labels:
    k8s-app: kube-proxy
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
    - name: kube-proxy
      image: {image}
      command:
        - kube-proxy
        - --config={KUBE_PROXY_CONFIG}
      securityContext:
        privileged: true
      volumeMounts:
        - name: k8s
          mountPath: /etc/kubernetes
          readOnly: true
        - name: modules
          mountPath: /lib/modules
          readOnly: true
        - name: xtables-lock
          mountPath: /run/xtables.lock
  volumes:
    - name: k8s
      hostPath:
        path: /etc/kubernetes
    - name: modules
      hostPath:
        path: /lib/modules
    - name: xtables-lock
      hostPath:
        path: /run/xtables.lock
        type: FileOrCreate
"
        )
    }

    /// etcd's systemd unit for `member`, in the etcd image, with peer and client TLS.
    pub fn etcd_unit(&self, member: &EtcdMember<'_>) -> String {
        let etcd = self.image("etcd", &self.etcd_version);
        let tls = &self.tls;
        let (crt, key, ca) = (&tls.etcd_crt, &tls.etcd_key, &tls.etcd_ca);
        let certs = tls.etcd_crt.rsplit_once('/').map_or("/etc/kubernetes/ssl", |(dir, _)| dir);
        let environment = match member.environment_file {
            Some(path) => format!("EnvironmentFile={path}\n"),
            None => String::new(),
        };
        format!(
            "[Unit]
Description=etcd member {name}
Requires={requires}
After={requires}

[Service]
Restart=always
RestartSec=10
{environment}ExecStartPre=-/usr/bin/docker rm -f etcd
ExecStart=/usr/bin/docker run --rm --name etcd --net=host \\
  -v {ETCD_DATA_DIR}:{ETCD_DATA_DIR} -v {certs}:{certs}:ro \\
  {etcd} etcd \\
  --name={name} \\
  --data-dir={ETCD_DATA_DIR} \\
  --initial-cluster={initial_cluster} \\
  --initial-cluster-state={state} \\
  --initial-cluster-token=k8s-etcd-cluster \\
  --initial-advertise-peer-urls={peer_url} \\
  --advertise-client-urls={client_url} \\
  --listen-peer-urls={listen_peer} \\
  --listen-client-urls={listen_clients} \\
  --cert-file={crt} --key-file={key} --trusted-ca-file={ca} --client-cert-auth=true \\
  --peer-cert-file={crt} --peer-key-file={key} --peer-trusted-ca-file={ca} --peer-client-cert-auth=true{quota}
ExecStop=-/usr/bin/docker stop etcd

[Install]
WantedBy=multi-user.target
",
            name = member.name,
            requires = member.requires.join(" "),
            initial_cluster = member.initial_cluster,
            state = member.state.as_str(),
            peer_url = member.peer_url,
            client_url = member.client_url,
            listen_peer = member.listen_peer_urls,
            listen_clients = member.listen_client_urls,
            quota = match self.etcd_quota_backend_bytes {
                Some(bytes) => format!(" \\\n  --quota-backend-bytes={bytes}"),
                None => String::new(),
            },
        )
    }

    /// A static pod on the host network running `component` with `args`.
    fn static_pod(&self, component: &str, args: &[String]) -> String {
        let image = self.image(component, &self.kubernetes_version);
        let args: String = args.iter().map(|a| format!("        - {}\n", yaml_scalar(a))).collect();
        format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {component}
  namespace: kube-system
  labels:
    k8s-app: {component}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
    - name: {component}
      image: {image}
      command:
        - {component}
{args}      volumeMounts:
        - name: k8s
          mountPath: /etc/kubernetes
          readOnly: true
  volumes:
    - name: k8s
      hostPath:
        path: /etc/kubernetes
"
        )
    }

    /// The API server's flags, in order; OIDC and the extra flags last.
    pub fn apiserver_args(&self) -> Vec<String> {
        let tls = &self.tls;
        let mut args = vec![
            "--secure-port=443".to_owned(),
            format!("--etcd-servers={}", self.etcd_servers),
            format!("--etcd-cafile={}", tls.etcd_ca),
            format!("--etcd-certfile={}", tls.etcd_crt),
            format!("--etcd-keyfile={}", tls.etcd_key),
            format!("--service-cluster-ip-range={}", self.service_cidr),
            format!("--tls-cert-file={}", tls.api_crt),
            format!("--tls-private-key-file={}", tls.api_key),
            format!("--client-ca-file={}", tls.api_ca),
            format!("--kubelet-client-certificate={}", tls.api_crt),
            format!("--kubelet-client-key={}", tls.api_key),
            format!("--service-account-key-file={}", tls.service_account_key),
        ];
        let api = format!("https://{}", self.api_domain);
        match &self.service_account_issuer {
            None => args.extend([
                format!("--service-account-signing-key-file={}", tls.service_account_key),
                format!("--service-account-issuer={api}"),
                format!("--api-audiences={api}"),
            ]),
            // Tokens issued before stay valid: the cluster's key still verifies and its issuer
            // is still accepted; new tokens are the public issuer's.
            Some(issuer) => {
                args.push(format!("--service-account-key-file={}", issuer.public_key));
                args.push(format!("--service-account-signing-key-file={}", issuer.signing_key));
                args.extend(issuer.issuers.iter().chain([&api]).map(|i| format!("--service-account-issuer={i}")));
                let audiences: Vec<&str> = issuer.audiences.iter().map(String::as_str).chain([api.as_str()]).collect();
                args.push(format!("--api-audiences={}", audiences.join(",")));
            }
        }
        args.extend([
            format!("--encryption-provider-config={}", tls.encryption_config),
            "--authorization-mode=Node,RBAC".to_owned(),
            "--enable-admission-plugins=NodeRestriction".to_owned(),
            "--allow-privileged=true".to_owned(),
        ]);
        if let Some(oidc) = &self.oidc {
            args.push(format!("--oidc-issuer-url={}", oidc.issuer_url));
            args.push(format!("--oidc-client-id={}", oidc.client_id));
            if !oidc.username_claim.is_empty() {
                args.push(format!("--oidc-username-claim={}", oidc.username_claim));
            }
            if !oidc.groups_claim.is_empty() {
                args.push(format!("--oidc-groups-claim={}", oidc.groups_claim));
            }
        }
        args.extend(self.extra_apiserver_args.iter().cloned());
        args
    }

    fn apiserver_manifest(&self) -> String {
        self.static_pod("kube-apiserver", &self.apiserver_args())
    }

    fn controller_manager_manifest(&self) -> String {
        let mut args = vec![
            "--kubeconfig=/etc/kubernetes/kubeconfig/controller-manager.yaml".to_owned(),
            format!("--cluster-name={}", self.cluster_id),
        ];
        if self.allocate_node_cidrs {
            args.push("--allocate-node-cidrs=true".to_owned());
            args.push(format!("--cluster-cidr={}", self.pod_cidr));
        }
        args.extend([
            format!("--service-cluster-ip-range={}", self.service_cidr),
            format!("--root-ca-file={}", self.tls.api_ca),
            format!("--service-account-private-key-file={}", self.tls.service_account_key),
            "--use-service-account-credentials=true".to_owned(),
            "--leader-elect=true".to_owned(),
        ]);
        if let Some(threshold) = self.terminated_pod_gc_threshold {
            args.push(format!("--terminated-pod-gc-threshold={threshold}"));
        }
        if let Some(provider) = &self.cloud_provider {
            args.push(format!("--cloud-provider={provider}"));
        }
        self.static_pod("kube-controller-manager", &args)
    }

    fn scheduler_manifest(&self) -> String {
        let args = [
            "--kubeconfig=/etc/kubernetes/kubeconfig/scheduler.yaml".to_owned(),
            "--authentication-kubeconfig=/etc/kubernetes/kubeconfig/scheduler.yaml".to_owned(),
            "--authorization-kubeconfig=/etc/kubernetes/kubeconfig/scheduler.yaml".to_owned(),
            "--leader-elect=true".to_owned(),
        ];
        self.static_pod("kube-scheduler", &args)
    }
}

/// `text` as one YAML scalar: as it is when it is plainly safe (`--flag=value` of letters,
/// digits and `-_./:=,+@`), else double-quoted. A value from a custom resource (an OIDC claim,
/// say) with a newline, a `: ` or a `#` stays one argument and cannot add a flag.
fn yaml_scalar(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@".contains(c);
    if !text.is_empty() && text.starts_with("--") && text.chars().all(plain) {
        text.to_owned()
    } else {
        serde_json::Value::from(text).to_string()
    }
}

/// What differs in kubelet's unit from node to node.
#[derive(Debug, Clone, Copy)]
pub struct KubeletUnit<'a> {
    /// The labels kubelet registers the node with.
    pub node_labels: &'a BTreeMap<String, String>,
    /// A master registers with the control-plane `NoSchedule` taint.
    pub master: bool,
    /// `Requires=`: the units kubelet cannot run without.
    pub requires: &'a [&'a str],
    /// `After=`: the units kubelet starts after.
    pub after: &'a [&'a str],
}

/// Whether an etcd member founds a cluster or joins one (`--initial-cluster-state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialClusterState {
    /// The cluster is being created: `new`.
    New,
    /// The cluster exists: `existing`.
    Existing,
}

impl InitialClusterState {
    /// The etcd flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            InitialClusterState::New => "new",
            InitialClusterState::Existing => "existing",
        }
    }
}

/// One etcd member on a master.
#[derive(Debug, Clone, Copy)]
pub struct EtcdMember<'a> {
    /// The member name (`--name`).
    pub name: &'a str,
    /// Every member as `name=peer-url`, comma-separated (`--initial-cluster`).
    pub initial_cluster: &'a str,
    /// `new` while the cluster is being created, then `existing`.
    pub state: InitialClusterState,
    /// `--initial-advertise-peer-urls`.
    pub peer_url: &'a str,
    /// `--advertise-client-urls`.
    pub client_url: &'a str,
    /// `--listen-peer-urls`.
    pub listen_peer_urls: &'a str,
    /// `--listen-client-urls`.
    pub listen_client_urls: &'a str,
    /// An `EnvironmentFile=` for variables the URLs use; none when `None`.
    pub environment_file: Option<&'a str>,
    /// `Requires=` and `After=`: the units etcd cannot run without.
    pub requires: &'a [&'a str],
}

#[cfg(test)]
mod tests {
    use super::*;

    fn components() -> Components {
        let dir = "/etc/kubernetes/ssl";
        Components {
            cluster_id: "x1a2b".into(),
            api_domain: "api.x1a2b.k8s.example.com".into(),
            etcd_servers: "https://127.0.0.1:2379".into(),
            registry: "quay.io".into(),
            kubernetes_version: "1.33.4".into(),
            etcd_version: "v3.5.21".into(),
            service_cidr: "172.31.0.0/16".into(),
            cluster_dns_ip: "172.31.0.10".into(),
            pod_cidr: "10.2.0.0/16".into(),
            oidc: None,
            conntrack_max_per_core: None,
            cloud_provider: None,
            service_account_issuer: None,
            extra_apiserver_args: vec!["--enable-priority-and-fairness=false".into()],
            etcd_quota_backend_bytes: None,
            terminated_pod_gc_threshold: None,
            allocate_node_cidrs: true,
            tls: TlsPaths {
                worker_crt: format!("{dir}/worker-crt.pem"),
                worker_key: format!("{dir}/worker-key.pem"),
                worker_ca: format!("{dir}/worker-ca.pem"),
                api_crt: format!("{dir}/api-crt.pem"),
                api_key: format!("{dir}/api-key.pem"),
                api_ca: format!("{dir}/api-ca.pem"),
                etcd_crt: format!("{dir}/etcd-crt.pem"),
                etcd_key: format!("{dir}/etcd-key.pem"),
                etcd_ca: format!("{dir}/etcd-ca.pem"),
                service_account_key: format!("{dir}/service-account-key.pem"),
                encryption_config: "/etc/kubernetes/encryption/k8s-encryption-config.yaml".into(),
            },
        }
    }

    #[test]
    fn a_public_issuer_signs_new_tokens_and_the_api_servers_issuer_and_key_stay_accepted() {
        let mut c = components();
        let own = c.apiserver_args();
        assert!(own.contains(&"--service-account-issuer=https://api.x1a2b.k8s.example.com".into()), "{own:?}");
        assert!(own.contains(&"--api-audiences=https://api.x1a2b.k8s.example.com".into()), "{own:?}");
        c.service_account_issuer = Some(ServiceAccountIssuer {
            issuers: vec!["https://irsa.x1a2b.example.com".into(), "https://d1a2b3.cloudfront.net".into()],
            audiences: vec!["sts.amazonaws.com".into()],
            public_key: "/etc/kubernetes/ssl/service-account-v2-pub.pem".into(),
            signing_key: "/etc/kubernetes/ssl/service-account-v2-priv.pem".into(),
        });
        let args = c.apiserver_args();
        let with = |prefix: &str| args.iter().filter(|a| a.starts_with(prefix)).cloned().collect::<Vec<_>>();
        assert_eq!(
            with("--service-account-issuer="),
            [
                "--service-account-issuer=https://irsa.x1a2b.example.com",
                "--service-account-issuer=https://d1a2b3.cloudfront.net",
                "--service-account-issuer=https://api.x1a2b.k8s.example.com",
            ],
            "the first signs, all are accepted"
        );
        assert_eq!(with("--api-audiences="), ["--api-audiences=sts.amazonaws.com,https://api.x1a2b.k8s.example.com"]);
        assert_eq!(
            with("--service-account-key-file="),
            [
                "--service-account-key-file=/etc/kubernetes/ssl/service-account-key.pem",
                "--service-account-key-file=/etc/kubernetes/ssl/service-account-v2-pub.pem",
            ]
        );
        assert_eq!(
            with("--service-account-signing-key-file="),
            ["--service-account-signing-key-file=/etc/kubernetes/ssl/service-account-v2-priv.pem"]
        );
    }

    #[test]
    fn a_value_with_a_newline_stays_one_argument() {
        let mut c = components();
        c.oidc = Some(Oidc {
            issuer_url: "https://dex.example.com".into(),
            client_id: "dex".into(),
            username_claim: "email\n        - --authorization-mode=AlwaysAllow # x".into(),
            groups_claim: String::new(),
        });
        let manifest = c.apiserver_manifest();
        let pod: serde_json::Value = serde_saphyr::from_str(&manifest).unwrap_or_else(|e| panic!("{e}: {manifest}"));
        let command = pod["spec"]["containers"][0]["command"].as_array().cloned().unwrap_or_default();
        assert_eq!(command.len(), c.apiserver_args().len() + 1, "{manifest}");
        assert!(
            command.contains(&"--oidc-username-claim=email\n        - --authorization-mode=AlwaysAllow # x".into())
        );
        assert!(command.contains(&"--authorization-mode=Node,RBAC".into()), "{command:?}");
        // Plain flags are written as they were, so configs of unchanged clusters stay the same.
        assert!(manifest.contains("        - --authorization-mode=Node,RBAC\n"), "{manifest}");
        assert!(
            manifest.contains("        - --service-account-issuer=https://api.x1a2b.k8s.example.com\n"),
            "{manifest}"
        );
    }

    #[test]
    fn without_a_cloud_provider_no_component_gets_the_flag() {
        let c = components();
        let labels = BTreeMap::from([("role".to_owned(), "worker".to_owned())]);
        let unit = c.kubelet_unit(&KubeletUnit {
            node_labels: &labels,
            master: false,
            requires: &["docker.service"],
            after: &["docker.service"],
        });
        assert!(!unit.contains("--cloud-provider"), "{unit}");
        assert!(unit.contains("--node-labels=role=worker\n"), "{unit}");
        assert!(!unit.contains("register-with-taints"));
        assert!(c.master_files().iter().all(|f| !String::from_utf8_lossy(&f.contents).contains("--cloud-provider")));
        let mut aws = c.clone();
        aws.cloud_provider = Some("external".into());
        assert!(aws.controller_manager_manifest().contains("--cloud-provider=external"));
        // Kubernetes 1.33 removed the API server's flag.
        assert!(!aws.apiserver_args().iter().any(|a| a.starts_with("--cloud-provider")));
    }

    #[test]
    fn the_extra_flags_come_after_oidc_and_the_tls_files_are_the_providers() {
        let mut c = components();
        c.oidc = Some(Oidc {
            issuer_url: "https://dex.example.com".into(),
            client_id: "k8s".into(),
            username_claim: String::new(),
            groups_claim: "groups".into(),
        });
        let args = c.apiserver_args();
        let tail: Vec<&str> = args.iter().rev().take(4).rev().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "--oidc-issuer-url=https://dex.example.com",
                "--oidc-client-id=k8s",
                "--oidc-groups-claim=groups",
                "--enable-priority-and-fairness=false"
            ]
        );
        assert!(args.contains(&"--tls-cert-file=/etc/kubernetes/ssl/api-crt.pem".to_owned()));
        assert!(args.contains(&"--etcd-servers=https://127.0.0.1:2379".to_owned()));
    }

    #[test]
    fn etcd_mounts_the_directory_of_its_certificates_and_names_its_environment() {
        let c = components();
        let member = EtcdMember {
            name: "etcd0",
            initial_cluster: "etcd0=https://127.0.0.1:2380",
            state: InitialClusterState::New,
            peer_url: "https://127.0.0.1:2380",
            client_url: "https://etcd.x1a2b.k8s.example.com:443",
            listen_peer_urls: "https://127.0.0.1:2380",
            listen_client_urls: "https://0.0.0.0:2379",
            environment_file: None,
            requires: &["docker.service"],
        };
        let unit = c.etcd_unit(&member);
        assert!(unit.contains("-v /etc/kubernetes/ssl:/etc/kubernetes/ssl:ro"), "{unit}");
        assert!(!unit.contains("EnvironmentFile"));
        assert!(unit.contains("--initial-cluster-state=new"));
        let unit = c.etcd_unit(&EtcdMember { environment_file: Some("/run/etcd.env"), ..member });
        assert!(unit.contains("RestartSec=10\nEnvironmentFile=/run/etcd.env\nExecStartPre"), "{unit}");
    }

    #[test]
    fn every_node_gets_kubelet_and_kube_proxy_and_masters_the_control_plane() {
        let c = components();
        let node: Vec<String> = c.node_files().into_iter().map(|f| f.path).collect();
        assert_eq!(
            node,
            [KUBELET_CONFIG, KUBELET_KUBECONFIG, KUBE_PROXY_KUBECONFIG, KUBE_PROXY_CONFIG, KUBE_PROXY_MANIFEST]
        );
        let master: Vec<String> = c.master_files().into_iter().map(|f| f.path).collect();
        assert_eq!(master.len(), 5);
        assert!(master.iter().any(|p| p.ends_with("k8s-api-server.yaml")));
        let kubeconfig = c.kubeconfig("scheduler", "https://127.0.0.1:443");
        assert!(kubeconfig.contains("client-certificate: /etc/kubernetes/ssl/api-crt.pem"));
    }
}
