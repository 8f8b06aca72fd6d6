// Package plugin implements kubectl-etcd, the kubectl plugin that inspects
// and maintains the etcd clusters run by the operator.
//
// The plugin reaches etcd members only through the API server's
// pods/portforward subresource (package portforward), so it works from any
// machine with a kubeconfig and needs no network path into the cluster.
// Each command looks up the EtcdCluster, lists its member Pods by the
// v1alpha1.ClusterLabel label, opens one tunnel per running Pod to the
// client port on 127.0.0.1, and dials etcd, through internal/etcd only,
// through the tunnels. etcd advertises client URLs with cluster DNS names
// that do not resolve outside the cluster, so no connection goes to them:
// a member is matched to its Pod by name (etcd's member name is the Pod
// name) and every per-member call goes to that Pod's tunnel. Over TLS a
// member is still named by its advertised host, which its certificate
// lists, and that name is connected to its tunnel (etcd.WithAddresses).
//
// The commands live behind the Env seam (a controller-runtime client.Reader,
// a Forwarder and an etcd.Dialer), so tests run them against fakes. Read-only
// commands show what they can and fail afterwards when part of the cluster
// could not be seen; commands that change the cluster refuse up front.
//
// The -o json and -o yaml output types are in types.go; they are part of
// the plugin's interface.
package plugin
