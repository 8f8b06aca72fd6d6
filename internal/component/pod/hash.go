package pod

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// TemplateHashAnnotation records, on a member's Pod, the hash of the member
// spec the Pod was built from. The member controller re-creates a Pod whose
// hash is not the member's, once the cluster controller has approved that
// restart (EtcdMember status.restartApproved): that is how a rollout's
// change of the member's template reaches its Pod. It hashes the member's
// own spec, not the built Pod, so a new operator version that builds Pods
// differently restarts nothing by itself.
const TemplateHashAnnotation = "etcd.quorumctl.io/template-hash"

// ForceNewClusterAnnotation marks a Pod built while its member's spec asked
// for --force-new-cluster, whose ConfigMap held the flag before the Pod's
// container first started. A survivor's Pod without it started before the
// flag was there, and is re-created so that etcd reads it.
const ForceNewClusterAnnotation = "etcd.quorumctl.io/force-new-cluster"

// StartedToForce reports whether the Pod was built to start its member with
// --force-new-cluster.
func StartedToForce(podAnnotations map[string]string) bool {
	return podAnnotations[ForceNewClusterAnnotation] == "true"
}

// TemplateHash is the hash of what in a member's spec shapes its Pod and
// may change under it: its template and its TLS, whose trust bundles a CA
// rotation changes. The member's identity (its peer and client URLs) is
// left out: it never changes for a running member, and the operator records
// it into members created before it did so, which must restart nothing. A
// member without TLS hashes as before TLS was hashed.
//
// The one exception is the scheme of a TLS member's URLs: a member turning
// TLS on (docs/design/0023) runs with TLS and its old http URLs first,
// serving both schemes, and restarts once its URLs move to https. That
// restart must be one the rollout approves, so a member with TLS and an
// http URL hashes its plaintext sides too. Members with TLS and https URLs
// (or none recorded), and members without TLS, are the only ones an older
// operator made, and hash as they did.
func TemplateHash(m *v1alpha1.EtcdMember) string {
	return hashOf(struct {
		Template  v1alpha1.MemberTemplate `json:"template"`
		TLS       *v1alpha1.MemberTLS     `json:"tls,omitempty"`
		Plaintext []string                `json:"plaintext,omitempty"`
	}{m.Spec.MemberTemplate, m.Spec.TLS, plaintextSides(m)})
}

// plaintextSides are the sides a member with TLS still records an http
// URL for; nil for a member without TLS.
func plaintextSides(m *v1alpha1.EtcdMember) []string {
	if m.Spec.TLS == nil {
		return nil
	}
	var out []string
	if strings.HasPrefix(m.Spec.PeerURL, "http://") {
		out = append(out, v1alpha1.TLSSectionPeer)
	}
	if strings.HasPrefix(m.Spec.ClientURL, "http://") {
		out = append(out, v1alpha1.TLSSectionClient)
	}
	return out
}

// legacyHashes are the hashes operators before this one gave a Pod of the
// same template: they hashed the recorded URLs with it, which were empty
// until the operator recorded them into the member, and they did not hash
// the member's TLS.
func legacyHashes(m *v1alpha1.EtcdMember) []string {
	type shape struct {
		Template  v1alpha1.MemberTemplate `json:"template"`
		PeerURL   string                  `json:"peerURL,omitempty"`
		ClientURL string                  `json:"clientURL,omitempty"`
	}
	return []string{
		hashOf(shape{m.Spec.MemberTemplate, m.Spec.PeerURL, m.Spec.ClientURL}),
		hashOf(shape{Template: m.Spec.MemberTemplate}),
	}
}

// LegacyHashOf reports whether h is a hash an older operator gave a Pod of
// the member's template: a restart such an operator approved with it, and
// whose Pod this operator has since hashed anew, went to this template.
func LegacyHashOf(m *v1alpha1.EtcdMember, h string) bool {
	return slices.Contains(legacyHashes(m), h)
}

func hashOf(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		// The spec is plain data and always marshals.
		panic(fmt.Sprintf("failed to marshal a member spec: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// Outdated reports whether a Pod was built from another template than the
// member's. A Pod without the annotation predates it and is taken as
// current: its member's template could not have changed. A Pod hashed the
// way an older operator hashed is current if its template is and it mounts
// the trust bundles the member names: those hashes left TLS out, so they
// say nothing of a trust bundle the member was given since.
func Outdated(m *v1alpha1.EtcdMember, p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	h, ok := p.Annotations[TemplateHashAnnotation]
	if !ok || h == TemplateHash(m) {
		return false
	}
	if !slices.Contains(legacyHashes(m), h) {
		return true
	}
	return !mountsTrustOf(m, p)
}

// mountsTrustOf: the Pod mounts the trust bundles the member's spec names,
// and no other.
func mountsTrustOf(m *v1alpha1.EtcdMember, p *corev1.Pod) bool {
	want := map[string]string{}
	for _, v := range tlsVolumeList(m) {
		if v.ConfigMap != nil {
			want[v.Name] = v.ConfigMap.Name
		}
	}
	have := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if (v.Name == peerTrustVolume || v.Name == clientTrustVolume) && v.ConfigMap != nil {
			have[v.Name] = v.ConfigMap.Name
		}
	}
	return maps.Equal(want, have)
}

// RestartApproved reports whether the cluster controller has approved
// re-creating the member's Pod from its current spec.
func RestartApproved(m *v1alpha1.EtcdMember) bool {
	return m.Status.RestartApproved == TemplateHash(m)
}

// Leaving reports whether a Pod is on its way out: built from another
// template than its member's, with the restart approved, so that the member
// controller deletes it (or has, and the cache has not seen it yet).
func Leaving(m *v1alpha1.EtcdMember, p *corev1.Pod) bool {
	return Outdated(m, p) && RestartApproved(m)
}
