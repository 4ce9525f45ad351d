#!/usr/bin/env bash
# The manual way, for comparison in hack/bench-create.sh: the PKI and kubeconfigs of the example lab
# made one openssl call at a time, as the tutorial's stages 5 and 6 do by hand (genrsa, req, x509 -req
# with an extension file per certificate; kubeconfigs from heredocs). The same 35 entries as
# hardshift's plan (27 keys), at KEY_BITS (default 2048).
#   hack/openssl-pipeline.sh OUT_DIR
set -euo pipefail
out=${1:?usage: openssl-pipeline.sh OUT_DIR}
bits=${KEY_BITS:-2048}
domain=ocp4.example.com
bootstrap=192.168.126.100
masters=(192.168.126.101 192.168.126.102 192.168.126.103)
api_vip=192.168.126.10
mkdir -p "$out/pki" "$out/kubeconfigs" "$out/auth"
cd "$out/pki"

key() { openssl genrsa -out "$1.key" "$bits" 2>/dev/null; chmod 600 "$1.key"; }

# self_ca NAME: a self-signed CA.
self_ca() {
  key "$1"
  openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "/CN=$1" -out "$1.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# sub_ca NAME PARENT: a CA signed by PARENT.
sub_ca() {
  key "$1"
  openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
  printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n' >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 3650 -sha256 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

# leaf NAME SUBJECT CA EKU [SAN...]: a certificate for serverAuth, clientAuth or both.
leaf() {
  local name=$1 subj=$2 ca=$3 eku=$4; shift 4
  key "$name"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    if [ $# -gt 0 ]; then
      local sans=() s
      for s in "$@"; do
        if [[ $s =~ ^[0-9.]+$ ]]; then sans+=("IP:$s"); else sans+=("DNS:$s"); fi
      done
      (IFS=,; echo "subjectAltName=${sans[*]}")
    fi
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 365 -sha256 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

self_ca root-ca
sub_ca etcd-ca root-ca
sub_ca kubernetes-ca root-ca
sub_ca front-proxy-ca root-ca
sub_ca kubelet-ca kubernetes-ca
for s in etcd-metric-ca kube-apiserver-lb-signer kube-apiserver-localhost-signer \
  kube-apiserver-service-network-signer kube-apiserver-to-kubelet-signer kube-control-plane-signer kubelet-signer; do
  self_ca "$s"
done

key service-account
openssl rsa -in service-account.key -pubout -out service-account.pub 2>/dev/null

leaf etcd-peer-bootstrap /CN=etcd-peer-bootstrap etcd-ca serverAuth,clientAuth \
  "bootstrap.$domain" localhost "$bootstrap" 127.0.0.1
for i in 0 1 2; do
  leaf "etcd-peer-master-$i" "/CN=etcd-peer-master-$i" etcd-ca serverAuth,clientAuth \
    "master-$i.$domain" "etcd-$i.$domain" localhost "${masters[$i]}" 127.0.0.1
done
leaf etcd-server /CN=etcd-server etcd-ca serverAuth,clientAuth localhost "etcd.$domain" \
  "$bootstrap" "${masters[@]}" 127.0.0.1
leaf etcd-client /CN=system:etcd-client etcd-ca clientAuth
leaf etcd-metric-client /CN=etcd-metric etcd-metric-ca clientAuth
leaf kube-apiserver /CN=kube-apiserver kubernetes-ca serverAuth \
  kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local \
  openshift openshift.default openshift.default.svc openshift.default.svc.cluster.local \
  "api.$domain" "api-int.$domain" localhost 172.30.0.1 "$api_vip" "$bootstrap" "${masters[@]}" 127.0.0.1
leaf kube-apiserver-kubelet-client /CN=system:kube-apiserver kubernetes-ca clientAuth
leaf admin "/O=system:masters/CN=system:admin" kubernetes-ca clientAuth
leaf kube-controller-manager /CN=system:kube-controller-manager kubernetes-ca clientAuth
leaf kube-scheduler /CN=system:kube-scheduler kubernetes-ca clientAuth
leaf kubelet-bootstrap "/O=system:bootstrappers/CN=system:bootstrapper" kubernetes-ca clientAuth
leaf front-proxy-client /CN=front-proxy-client front-proxy-ca clientAuth
rm -f ./*.srl

# Kubeconfigs: the CA bundle and a client certificate inlined, one heredoc each.
b64() { base64 -w0 "$1"; }
cat root-ca.crt kubernetes-ca.crt >ca-bundle.crt
kubeconfig() { # FILE SERVER CLIENT
  cat >"$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: $domain
  cluster:
    server: $2
    certificate-authority-data: $(b64 ca-bundle.crt)
users:
- name: user
  user:
    client-certificate-data: $(b64 "$3.crt")
    client-key-data: $(b64 "$3.key")
contexts:
- name: ctx
  context: {cluster: $domain, user: user}
current-context: ctx
KUBECONFIG
  chmod 600 "$1"
}
k=../kubeconfigs
kubeconfig $k/admin.kubeconfig "https://api.$domain:6443" admin
kubeconfig $k/kube-controller-manager.kubeconfig https://localhost:6443 kube-controller-manager
kubeconfig $k/kube-scheduler.kubeconfig https://localhost:6443 kube-scheduler
kubeconfig $k/kubelet-bootstrap.kubeconfig "https://api-int.$domain:6443" kubelet-bootstrap
kubeconfig $k/localhost.kubeconfig https://localhost:6443 admin
kubeconfig $k/localhost-recovery.kubeconfig https://localhost:6443 admin
kubeconfig $k/lb-int.kubeconfig "https://api-int.$domain:6443" admin
kubeconfig $k/lb-ext.kubeconfig "https://api.$domain:6443" admin
kubeconfig ../auth/kubeconfig "https://api.$domain:6443" admin
rm -f ca-bundle.crt
