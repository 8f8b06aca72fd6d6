//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// newMember is a member as the operator creates one: every identity field
// set, a restored seed's snapshot and TLS included.
func newMember(name string, mutate func(*v1alpha1.EtcdMember)) *v1alpha1.EtcdMember {
	m := &v1alpha1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.EtcdMemberSpec{
			ClusterName:  "c",
			Bootstrap:    true,
			ClusterToken: "c-token",
			PeerURL:      "https://" + name + ".c.default.svc:2380",
			ClientURL:    "https://" + name + ".c.default.svc:2379",
			Replaces:     "c-old",
			TLS: &v1alpha1.MemberTLS{
				Peer:   &v1alpha1.MemberTLSEndpoint{TrustBundle: "c-peer-ca-1"},
				Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c-client-ca-1", ClientCertAuth: true},
			},
			Restore: &v1alpha1.MemberRestore{
				Source: v1alpha1.SnapshotDestination{S3: httpsDest()},
				Key:    "default/c/snap.db", SHA256: "ab", SizeBytes: 1, BumpRevision: 1000,
			},
		},
	}
	if mutate != nil {
		mutate(m)
	}
	return m
}

// TestMemberIdentityIsImmutable: whoever writes the member, the fields the
// operator dials and etcd trusts cannot change after creation, and the
// volume size a rollout asked for cannot shrink.
func TestMemberIdentityIsImmutable(t *testing.T) {
	cases := []struct {
		name    string
		create  func(*v1alpha1.EtcdMember)
		update  func(*v1alpha1.EtcdMember)
		message string
	}{
		{"move to another cluster", nil, func(m *v1alpha1.EtcdMember) { m.Spec.ClusterName = "other" },
			"spec.clusterName cannot be changed: a member belongs to the cluster that created it"},
		{"another token", nil, func(m *v1alpha1.EtcdMember) { m.Spec.ClusterToken = "forged" },
			"spec.clusterToken cannot be changed: it is the etcd cluster's token, fixed when the cluster formed"},
		{"unmark the seed", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Bootstrap = false },
			"spec.bootstrap cannot be changed: it records which member formed the cluster"},
		{"mark a seed", func(m *v1alpha1.EtcdMember) { m.Spec.Bootstrap = false }, func(m *v1alpha1.EtcdMember) { m.Spec.Bootstrap = true },
			"spec.bootstrap cannot be changed: it records which member formed the cluster"},
		{"redirect the peer URL", nil, func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL = "https://attacker.example:2380" },
			"spec.peerURL cannot be changed once set"},
		{"drop the peer URL", nil, func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL = "" },
			"spec.peerURL cannot be changed once set"},
		{"redirect the client URL", nil, func(m *v1alpha1.EtcdMember) { m.Spec.ClientURL = "http://attacker.example:2379" },
			"spec.clientURL cannot be changed once set"},
		{"drop the client URL", nil, func(m *v1alpha1.EtcdMember) { m.Spec.ClientURL = "" },
			"spec.clientURL cannot be changed once set"},
		{"replace another member", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Replaces = "c-healthy" },
			"spec.replaces cannot be changed: it names the member this one was created to replace"},
		{"name a member to replace later", func(m *v1alpha1.EtcdMember) { m.Spec.Replaces = "" }, func(m *v1alpha1.EtcdMember) { m.Spec.Replaces = "c-healthy" },
			"spec.replaces cannot be changed: it names the member this one was created to replace"},
		{"turn TLS off", nil, func(m *v1alpha1.EtcdMember) { m.Spec.TLS = nil },
			"spec.tls can only gain sides or change its trust bundles"},
		{"drop a side", nil, func(m *v1alpha1.EtcdMember) { m.Spec.TLS.Client = nil },
			"spec.tls can only gain sides or change its trust bundles"},
		{"drop client certificate checks", nil, func(m *v1alpha1.EtcdMember) { m.Spec.TLS.Client.ClientCertAuth = false },
			"spec.tls can only gain sides or change its trust bundles"},
		{"move the peer URL to https elsewhere", func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL = "http://" + m.Name + ".c.default.svc:2380" },
			func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL = "https://attacker.example:2380" },
			"spec.peerURL cannot be changed once set"},
		{"move the peer URL back to http", func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL = "https://" + m.Name + ".c.default.svc:2380" },
			func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL = "http://" + m.Name + ".c.default.svc:2380" },
			"spec.peerURL cannot be changed once set"},
		{"move the client URL to https on another port", func(m *v1alpha1.EtcdMember) { m.Spec.ClientURL = "http://" + m.Name + ".c.default.svc:2379" },
			func(m *v1alpha1.EtcdMember) { m.Spec.ClientURL = "https://" + m.Name + ".c.default.svc:2479" },
			"spec.clientURL cannot be changed once set"},
		{"restore another key", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Restore.Key = "other-tenant/c/snap.db" },
			"spec.restore cannot be changed: the seed restores the snapshot it was created with"},
		{"restore from another endpoint", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Restore.Source.S3.Endpoint = "https://attacker.example" },
			"spec.restore cannot be changed: the seed restores the snapshot it was created with"},
		{"add a restore", func(m *v1alpha1.EtcdMember) { m.Spec.Restore = nil },
			func(m *v1alpha1.EtcdMember) {
				m.Spec.Restore = &v1alpha1.MemberRestore{Source: v1alpha1.SnapshotDestination{S3: httpsDest()}, Key: "k"}
			},
			"spec.restore cannot be changed: the seed restores the snapshot it was created with"},
		{"drop the restore", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Restore = nil },
			"spec.restore cannot be changed: the seed restores the snapshot it was created with"},
		{"shrink the volume size", func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("2Gi")) },
			func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("1Gi")) },
			"spec.volumeSize cannot shrink or be removed"},
		{"drop the volume size", func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("2Gi")) },
			func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = nil },
			"spec.volumeSize cannot shrink or be removed"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			m := newMember(fmt.Sprintf("member-immutable-%d", i), tc.create)
			g.Expect(k8s.Create(ctx, m)).To(Succeed())
			tc.update(m)
			err := k8s.Update(ctx, m)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

// TestOperatorMemberUpdatesAdmitted: every spec write the operator makes
// after creating a member stays admitted by the immutability rules.
func TestOperatorMemberUpdatesAdmitted(t *testing.T) {
	cases := []struct {
		name   string
		create func(*v1alpha1.EtcdMember)
		update func(*v1alpha1.EtcdMember)
	}{
		// setInitialCluster: set at the add, again while a joiner has not started.
		{"hand a joiner its list", nil, func(m *v1alpha1.EtcdMember) { m.Spec.InitialCluster = m.Name + "=" + m.Spec.PeerURL }},
		// setForceNewCluster: set on a recovery's survivor, cleared once it leads.
		{"force a new cluster", nil, func(m *v1alpha1.EtcdMember) { m.Spec.ForceNewCluster = true }},
		{"clear the force", func(m *v1alpha1.EtcdMember) { m.Spec.ForceNewCluster = true }, func(m *v1alpha1.EtcdMember) { m.Spec.ForceNewCluster = false }},
		// pause: park and wake.
		{"park", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Dormant = true }},
		{"wake", func(m *v1alpha1.EtcdMember) { m.Spec.Dormant = true }, func(m *v1alpha1.EtcdMember) { m.Spec.Dormant = false }},
		// restartMember: a rollout gives the member the target template.
		{"roll the template", nil, func(m *v1alpha1.EtcdMember) { m.Spec.Version = "3.6.0"; m.Spec.PriorityClassName = "high" }},
		// A CA rotation rolls each side's trust bundle through the rollout.
		{"roll the trust bundles", nil, func(m *v1alpha1.EtcdMember) {
			m.Spec.TLS.Peer.TrustBundle, m.Spec.TLS.Client.TrustBundle = "peer-bundle-next", "client-bundle-next"
		}},
		// recordURLs: a member created before its URLs were recorded gets them.
		{"record the URLs of an old member", func(m *v1alpha1.EtcdMember) { m.Spec.PeerURL, m.Spec.ClientURL = "", "" },
			func(m *v1alpha1.EtcdMember) {
				m.Spec.PeerURL, m.Spec.ClientURL = "http://"+m.Name+".c.default.svc:2380", "http://"+m.Name+".c.default.svc:2379"
			}},
		// Turning TLS on (docs/design/0023): a plaintext member gains TLS
		// with its http URLs, then its URLs move to https at the same
		// address.
		{"turn TLS on beside plaintext", func(m *v1alpha1.EtcdMember) {
			m.Spec.TLS = nil
			m.Spec.PeerURL, m.Spec.ClientURL = "http://"+m.Name+".c.default.svc:2380", "http://"+m.Name+".c.default.svc:2379"
		}, func(m *v1alpha1.EtcdMember) {
			m.Spec.TLS = &v1alpha1.MemberTLS{Peer: &v1alpha1.MemberTLSEndpoint{TrustBundle: "p"},
				Client: &v1alpha1.MemberTLSEndpoint{TrustBundle: "c", ClientCertAuth: true}}
		}},
		{"move the URLs to https", func(m *v1alpha1.EtcdMember) {
			m.Spec.PeerURL, m.Spec.ClientURL = "http://"+m.Name+".c.default.svc:2380", "http://"+m.Name+".c.default.svc:2379"
		}, func(m *v1alpha1.EtcdMember) {
			m.Spec.PeerURL, m.Spec.ClientURL = "https://"+m.Name+".c.default.svc:2380", "https://"+m.Name+".c.default.svc:2379"
		}},
		// expandVolume: a rollout asks the member's volume to grow, and
		// again on a later rollout; the same size in another unit is no
		// shrink.
		{"ask the volume to grow", nil, func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("2Gi")) }},
		{"ask it to grow again", func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("2Gi")) },
			func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("4Gi")) }},
		{"restate the size in another unit", func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("2Gi")) },
			func(m *v1alpha1.EtcdMember) { m.Spec.VolumeSize = ptr.To(resource.MustParse("2048Mi")) }},
		// Finalizers and labels are metadata: a stuck member stays deletable.
		{"drop a finalizer", func(m *v1alpha1.EtcdMember) { m.Finalizers = []string{v1alpha1.MemberFinalizer} },
			func(m *v1alpha1.EtcdMember) { m.Finalizers = nil }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			m := newMember(fmt.Sprintf("member-mutable-%d", i), tc.create)
			g.Expect(k8s.Create(ctx, m)).To(Succeed())
			tc.update(m)
			g.Expect(k8s.Update(ctx, m)).To(Succeed())
		})
	}
}
