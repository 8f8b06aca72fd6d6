package v1alpha1_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// TestMemberOfPeerURL covers the inputs of both callers: the cluster
// controller names a not yet started member in --initial-cluster by the
// first label alone, and the plugin also wants the domain to begin with the
// cluster's peer Service.
func TestMemberOfPeerURL(t *testing.T) {
	for _, tc := range []struct {
		url, member, domain string
	}{
		{v1alpha1.PeerURL("demo-y", "demo", "ns1", "cluster.local"), "demo-y", "demo.ns1.svc.cluster.local"},
		{"https://demo-y.demo.ns1.svc.cluster.local:2380", "demo-y", "demo.ns1.svc.cluster.local"},
		{"http://demo-y.other.ns1.svc:2380", "demo-y", "other.ns1.svc"},
		{"http://c.x.ns.svc:2380", "c", "x.ns.svc"},
		{"http://a.x:2380", "a", "x"},
		{"http://a:2380", "a", ""},
		{"http://10.0.0.1:2380", "10", "0.0.1"},
		{"http://[::1]:2380", "::1", ""},
		{"", "", ""},
		{"http://%zz", "", ""},
	} {
		member, domain := v1alpha1.MemberOfPeerURL(tc.url)
		NewWithT(t).Expect([]string{member, domain}).To(Equal([]string{tc.member, tc.domain}), tc.url)
	}
}
