package pod

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Where a member's TLS material is mounted. The certificates come from the
// member's own Secret, which the operator updates in place when it renews
// them: etcd reads its certificate files at every handshake, and the whole
// Secret is mounted as a directory (never with subPath, whose files the
// kubelet does not update), so a renewal reaches etcd without a restart.
// The trust bundles come from ConfigMaps named by their content, which never
// change (etcd reads its CA files only at start).
const (
	tlsMountDir        = "/etc/etcd/tls"
	certsVolume        = "tls-certs"
	peerTrustVolume    = "tls-peer-trust"
	clientTrustVolume  = "tls-client-trust"
	certsDir           = tlsMountDir + "/certs"
	peerTrustDir       = tlsMountDir + "/peer-trust"
	clientTrustDir     = tlsMountDir + "/client-trust"
	TrustBundleKey     = "ca.crt"
	PeerCertKey        = "peer.crt"
	PeerKeyKey         = "peer.key"
	ClientCertKey      = "client.crt"
	ClientKeyKey       = "client.key"
	secretMode         = int32(0o440)
	trustMode          = int32(0o444)
	anyAddress         = "0.0.0.0"
	defaultPeerURLPort = v1alpha1.PeerPort
)

// listenClientURLs serves TLS on the client port when the member has client
// TLS, plaintext otherwise. Both at once only while a running cluster turns
// TLS on (docs/design/0023): a member given client TLS whose recorded client
// URL is still http serves both schemes on the one port (etcd splits them
// with cmux), so plaintext clients keep working until they have moved.
// Otherwise never both: a plaintext listener beside TLS would leave the
// data open to anyone who reaches the port.
func listenClientURLs(m *v1alpha1.EtcdMember) string {
	tlsURL := fmt.Sprintf("https://%s:%d", anyAddress, v1alpha1.ClientPort)
	plainURL := fmt.Sprintf("http://%s:%d", anyAddress, v1alpha1.ClientPort)
	if t := m.Spec.TLS; t != nil && t.Client != nil {
		if strings.HasPrefix(m.Spec.ClientURL, "http://") {
			return plainURL + "," + tlsURL
		}
		return tlsURL
	}
	return plainURL
}

// listenPeerURLs follows the scheme and port of the member's peer URL,
// which etcd's membership knows it by.
func listenPeerURLs(peerURL string) string {
	scheme, port := "http", defaultPeerURLPort
	if u, err := url.Parse(peerURL); err == nil {
		scheme = u.Scheme
		if p, err := strconv.Atoi(u.Port()); err == nil {
			port = p
		}
	}
	return fmt.Sprintf("%s://%s:%d", scheme, anyAddress, port)
}

// tlsFlags are etcd's TLS flags for the member's TLS shape.
func tlsFlags(m *v1alpha1.EtcdMember) []string {
	t := m.Spec.TLS
	if t == nil {
		return nil
	}
	var flags []string
	if t.Peer != nil {
		flags = append(flags,
			"--peer-cert-file="+certsDir+"/"+PeerCertKey,
			"--peer-key-file="+certsDir+"/"+PeerKeyKey,
			"--peer-trusted-ca-file="+peerTrustDir+"/"+TrustBundleKey,
			"--peer-client-cert-auth=true",
		)
	}
	if t.Client != nil {
		flags = append(flags,
			"--cert-file="+certsDir+"/"+ClientCertKey,
			"--key-file="+certsDir+"/"+ClientKeyKey,
		)
		// etcd checks client certificates whenever --trusted-ca-file is
		// set, whatever --client-cert-auth says: with it and mutual off,
		// every client without a certificate would be refused. So the
		// client CA goes in only with mutual TLS.
		if t.Client.ClientCertAuth {
			flags = append(flags,
				"--trusted-ca-file="+clientTrustDir+"/"+TrustBundleKey,
				"--client-cert-auth=true",
			)
		}
	}
	return flags
}

// tlsVolumes are the member's certificate Secret and its trust bundles.
func tlsVolumes(m *v1alpha1.EtcdMember) ([]corev1.Volume, []corev1.VolumeMount) {
	t := m.Spec.TLS
	if t == nil || (t.Peer == nil && t.Client == nil) {
		return nil, nil
	}
	vols := []corev1.Volume{{
		Name: certsVolume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  v1alpha1.MemberTLSSecretName(m.Name),
			DefaultMode: ptr.To(secretMode),
		}},
	}}
	mounts := []corev1.VolumeMount{{Name: certsVolume, MountPath: certsDir, ReadOnly: true}}
	trust := func(volume, dir string, e *v1alpha1.MemberTLSEndpoint) {
		if e == nil {
			return
		}
		vols = append(vols, corev1.Volume{
			Name: volume,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: e.TrustBundle},
				DefaultMode:          ptr.To(trustMode),
			}},
		})
		mounts = append(mounts, corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true})
	}
	trust(peerTrustVolume, peerTrustDir, t.Peer)
	trust(clientTrustVolume, clientTrustDir, clientTrust(t))
	return vols, mounts
}

// TLSMaterialNames are the Secret and ConfigMaps a member's Pod mounts, so
// the member controller can wait for them before creating the Pod.
func TLSMaterialNames(m *v1alpha1.EtcdMember) (secret string, configMaps []string) {
	t := m.Spec.TLS
	if t == nil || (t.Peer == nil && t.Client == nil) {
		return "", nil
	}
	for _, e := range []*v1alpha1.MemberTLSEndpoint{t.Peer, clientTrust(t)} {
		if e != nil {
			configMaps = append(configMaps, e.TrustBundle)
		}
	}
	return v1alpha1.MemberTLSSecretName(m.Name), configMaps
}

// MountedTrustBundle is the trust bundle ConfigMap a Pod mounts for the
// section ("peer" or "client"), "" for none: what the etcd in it trusts,
// whatever its member's spec says now.
func MountedTrustBundle(p *corev1.Pod, section string) string {
	want := peerTrustVolume
	if section == v1alpha1.TLSSectionClient {
		want = clientTrustVolume
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == want && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}

func tlsVolumeList(m *v1alpha1.EtcdMember) []corev1.Volume {
	v, _ := tlsVolumes(m)
	return v
}

func tlsMountList(m *v1alpha1.EtcdMember) []corev1.VolumeMount {
	_, mounts := tlsVolumes(m)
	return mounts
}

// clientTrust is the client side when the member checks client certificates
// against its trust bundle, nil otherwise (see tlsFlags).
func clientTrust(t *v1alpha1.MemberTLS) *v1alpha1.MemberTLSEndpoint {
	if t.Client == nil || !t.Client.ClientCertAuth {
		return nil
	}
	return t.Client
}

// PeerTLSOf reads from a Pod's etcd flags what its peer side was started
// with: peer certificates (it dials https peers with TLS), and an https
// peer listener. What the etcd in it runs, whatever its member's spec says
// now; turning TLS on (docs/design/0023) tells its passes apart by it.
func PeerTLSOf(p *corev1.Pod) (certificates, httpsListener bool) {
	for _, c := range p.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, a := range c.Args {
			switch {
			case strings.HasPrefix(a, "--peer-cert-file="):
				certificates = true
			case strings.HasPrefix(a, "--listen-peer-urls=https://"):
				httpsListener = true
			}
		}
	}
	return certificates, httpsListener
}
