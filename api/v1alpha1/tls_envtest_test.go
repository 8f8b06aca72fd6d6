//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// TestTLSDefaults: tls: {} is operator-managed peer and mutual client TLS.
func TestTLSDefaults(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("tls-defaults", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
	g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	g.Expect(c.Spec.TLS.Peer.Source).To(Equal(v1alpha1.CertificateSourceOperatorManaged))
	g.Expect(c.Spec.TLS.Client.Source).To(Equal(v1alpha1.CertificateSourceOperatorManaged))
	g.Expect(c.Spec.TLS.Client.Mutual).To(Equal(ptr.To(true)))
}

func TestTLSCreateValidation(t *testing.T) {
	issuer := &v1alpha1.IssuerReference{Name: "ca"}
	cases := []struct {
		name    string
		tls     v1alpha1.TLSSpec
		message string
	}{
		{"peer Secret without a name", v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret}}},
			"tls.peer.secretName is required when tls.peer.source is Secret"},
		{"client Secret without a name", v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret}}},
			"tls.client.secretName is required when tls.client.source is Secret"},
		{"peer secret name with another source", v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{SecretName: "x"}}},
			"tls.peer.secretName is only used when tls.peer.source is Secret"},
		{"client secret name with another source", v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer, SecretName: "x"}}},
			"tls.client.secretName is only used when tls.client.source is Secret"},
		{"peer cert-manager without an issuer", v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager}}},
			"tls.peer.issuerRef is required when tls.peer.source is CertManager"},
		{"client cert-manager without an issuer", v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager}}},
			"tls.client.issuerRef is required when tls.client.source is CertManager"},
		{"peer issuer with another source", v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{IssuerRef: issuer}}},
			"tls.peer.issuerRef is only used when tls.peer.source is CertManager"},
		{"client issuer with another source", v1alpha1.TLSSpec{Client: v1alpha1.ClientTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: "s", IssuerRef: issuer}}},
			"tls.client.issuerRef is only used when tls.client.source is CertManager"},
		{"unknown source", v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: "Vault"}}},
			`Unsupported value: "Vault"`},
		{"unknown issuer kind", v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "x", Kind: "Vault"}}}},
			`Unsupported value: "Vault"`},
		{"certificate lifetime too short", v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{CertificateDuration: dur(time.Minute)}},
			"tls.operatorManaged.certificateDuration must be at least 5m"},
		{"CA lifetime too short", v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{CADuration: dur(30 * time.Minute)}},
			"tls.operatorManaged.caDuration must be at least 1h"},
		{"CA shorter than its certificates", v1alpha1.TLSSpec{OperatorManaged: &v1alpha1.OperatorManagedTLS{CADuration: dur(2 * time.Hour), CertificateDuration: dur(3 * time.Hour)}},
			"tls.operatorManaged.caDuration must be longer than tls.operatorManaged.certificateDuration"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newCluster(fmt.Sprintf("tls-create-%d", i), func(c *v1alpha1.EtcdCluster) {
				c.Spec.TLS = tc.tls.DeepCopy()
			}))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

// TestTLSIsFixedAtCreation: spec.tls can be set when a cluster is created
// or turned on later, never turned off; afterwards only a section's source
// may change, between any of OperatorManaged, a Secret and cert-manager,
// with messages that say what is refused and why.
func TestTLSIsFixedAtCreation(t *testing.T) {
	const (
		refused = "spec.tls cannot be removed: turning TLS off is refused"
		fixed   = "spec.tls.client.mutual and spec.tls.operatorManaged cannot be changed"
	)
	ctx := context.Background()
	issuer := &v1alpha1.IssuerReference{Name: "ca"}
	secretSource := func(name string) v1alpha1.CertificateSourceSpec {
		return v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceSecret, SecretName: name}
	}
	certManager := v1alpha1.CertificateSourceSpec{Source: v1alpha1.CertificateSourceCertManager, IssuerRef: issuer}
	withSecrets := func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Peer: v1alpha1.PeerTLS{CertificateSourceSpec: secretSource("p")}, Client: v1alpha1.ClientTLS{CertificateSourceSpec: secretSource("c")}}
	}
	t.Run("turning TLS on", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-on", nil)
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS = &v1alpha1.TLSSpec{}
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "a running cluster may turn TLS on")
	})
	t.Run("turning TLS off", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-off", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS = nil
		err := k8s.Update(ctx, c)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(refused))
	})
	t.Run("from operator-managed to cert-manager", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-source", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS.Peer = v1alpha1.PeerTLS{CertificateSourceSpec: certManager}
		c.Spec.TLS.Client.CertificateSourceSpec = certManager
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "an operator-managed side may switch to cert-manager")
		c.Spec.TLS.Client.CertificateSourceSpec = v1alpha1.CertificateSourceSpec{}
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "and back")
	})
	t.Run("from operator-managed to a Secret, one side", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-source-secret", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS.Client.CertificateSourceSpec = secretSource("c")
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "one operator-managed side may switch to a Secret")
	})
	t.Run("explicitly operator-managed to operator-managed", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-source-om", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS.Peer.Source = v1alpha1.CertificateSourceOperatorManaged
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "spelling out the default is no change")
	})
	t.Run("from a Secret to operator-managed", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-source-back", withSecrets)
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS.Client = v1alpha1.ClientTLS{Mutual: c.Spec.TLS.Client.Mutual}
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "a Secret side may switch to the operator's CA")
	})
	t.Run("from a Secret to cert-manager and back, and to another Secret", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-source-switch", withSecrets)
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS.Peer = v1alpha1.PeerTLS{CertificateSourceSpec: certManager}
		c.Spec.TLS.Client.CertificateSourceSpec = certManager
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "a Secret source may switch to cert-manager")
		c.Spec.TLS.Client.CertificateSourceSpec = *certManager.DeepCopy()
		c.Spec.TLS.Client.IssuerRef.Name = "other-ca"
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "to another issuer")
		c.Spec.TLS.Peer = v1alpha1.PeerTLS{CertificateSourceSpec: secretSource("p2")}
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "and back to a Secret")
		c.Spec.TLS.Peer = v1alpha1.PeerTLS{CertificateSourceSpec: secretSource("p3")}
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "or to another Secret")
	})
	t.Run("the rest of spec.tls stays fixed", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-fixed", withSecrets)
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.TLS.Client.Mutual = ptr.To(false)
		err := k8s.Update(ctx, c)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(fixed))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Spec.TLS.OperatorManaged = &v1alpha1.OperatorManagedTLS{CertificateDuration: dur(time.Hour)}
		err = k8s.Update(ctx, c)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(fixed))
	})
	t.Run("other edits of a TLS cluster", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("tls-other", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{} })
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.Replicas = ptr.To[int32](5)
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "the rule looks at spec.tls only")
	})
}
