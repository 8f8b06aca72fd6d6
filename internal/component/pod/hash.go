package pod

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// TemplateHashAnnotation records, on a member's Pod, the hash of the member
// spec the Pod was built from. The member controller re-creates a Pod whose
// hash is not the member's: that is how a rollout's change of the member's
// template reaches its Pod. It hashes the member's own spec, not the built
// Pod, so a new operator version that builds Pods differently restarts
// nothing by itself.
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

// TemplateHash is the hash of what in a member's spec shapes its Pod.
func TemplateHash(m *v1alpha1.EtcdMember) string {
	shape := struct {
		Template  v1alpha1.MemberTemplate `json:"template"`
		PeerURL   string                  `json:"peerURL,omitempty"`
		ClientURL string                  `json:"clientURL,omitempty"`
	}{m.Spec.MemberTemplate, m.Spec.PeerURL, m.Spec.ClientURL}
	data, err := json.Marshal(shape)
	if err != nil {
		// The spec is plain data and always marshals.
		panic(fmt.Sprintf("failed to marshal the spec of EtcdMember %s: %v", m.Name, err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// Outdated reports whether a Pod was built from another spec than the
// member's. A Pod without the annotation predates it and is taken as
// current: its member's template could not have changed.
func Outdated(m *v1alpha1.EtcdMember, podAnnotations map[string]string) bool {
	h, ok := podAnnotations[TemplateHashAnnotation]
	return ok && h != TemplateHash(m)
}
