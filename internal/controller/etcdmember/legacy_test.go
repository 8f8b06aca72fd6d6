package etcdmember

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// legacyHashOf computes the template hash as the operator before URLs left
// it did, written out here so that the test does not depend on the code it
// checks.
func legacyHashOf(m *v1alpha1.EtcdMember) string {
	data, err := json.Marshal(struct {
		Template  v1alpha1.MemberTemplate `json:"template"`
		PeerURL   string                  `json:"peerURL,omitempty"`
		ClientURL string                  `json:"clientURL,omitempty"`
	}{m.Spec.MemberTemplate, m.Spec.PeerURL, m.Spec.ClientURL})
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}
