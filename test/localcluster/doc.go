// Package localcluster brings up and tears down a real single-machine Kubernetes
// cluster built from upstream parts: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet on containerd and runc, kube-proxy, CoreDNS and a
// dynamic storage provisioner.
//
// It exists because the machines this project is developed and tested on have no
// Docker engine and no registry, so kind cannot run, yet the operator must be
// proven against a real API server, kubelet, DNS and storage. Every binary is
// built from the Go module proxy and cached by version outside the repository;
// every image is assembled without a daemon and imported into containerd.
//
// The package is test infrastructure: nothing in the product imports it.
package localcluster
